"""``disembed train`` trains bench's default recipe with bench's settings, and ``--params``
reaches every hyperparameter (inline JSON or a file, flat or ``{METHOD: {...}}``)."""

import json

import pytest

from disembed.cli import main
from disembed.experiment import DEFAULT_RECIPE, DEFAULT_RECIPE_PARAMS
from disembed.methods import load_disentangler


def summary(capsys) -> dict:
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_train_without_method_is_benchs_default_recipe_with_its_settings(train_env, train_args,
                                                                        capsys):
    assert main(["train", *train_args, "--out", str(train_env / "m")]) == 0
    out = summary(capsys)
    assert out["method"] == DEFAULT_RECIPE
    model = load_disentangler(train_env / "m")
    assert model.name == DEFAULT_RECIPE  # the recipe's exact name (seed-centered, not seed)
    for key, value in DEFAULT_RECIPE_PARAMS.items():
        assert model.get_params()[key] == value, key
    assert model.get_params()["max_epochs"] == 2  # explicit options still apply


def test_params_inline_file_and_tuned_form_reach_the_recipe(train_env, train_args, capsys):
    assert main(["train", *train_args, "--method", "seed", "--params",
                 '{"init_scale": 0.5, "lr": 0.002, "patience": 3}',
                 "--out", str(train_env / "a")]) == 0
    params = load_disentangler(train_env / "a").get_params()
    assert (params["init_scale"], params["lr"], params["patience"]) == (0.5, 0.002, 3)
    tuned = train_env / "tuned.json"
    tuned.write_text(json.dumps({"seed": {"lr": 0.004}, "dream": {"lr": 0.1}}))
    assert main(["train", *train_args, "--method", "seed", "--params", str(tuned),
                 "--lr", "0.005", "--out", str(train_env / "b")]) == 0
    assert load_disentangler(train_env / "b").get_params()["lr"] == 0.005  # --lr wins over the file
    assert main(["train", *train_args, "--method", "seed", "--params", str(tuned),
                 "--out", str(train_env / "c")]) == 0
    assert load_disentangler(train_env / "c").get_params()["lr"] == 0.004


@pytest.mark.parametrize("params, message", [
    ('{"sed": {"lr": 0.1}}', "not for --method seed"),
    ('{"lr": 0.1, "seed": {"lr": 0.2}}', "mixes"),
    ('{"learning_rate": 0.1}', "seed takes no 'learning_rate'"),
    ("[1, 2]", "cannot read"),
    ("{not json", "not valid JSON"),
])
def test_bad_params_exit_2_with_a_message(train_env, train_args, capsys, params, message):
    try:
        code = main(["train", *train_args, "--method", "seed", "--params", params,
                     "--out", str(train_env / "x")])
    except SystemExit as exc:  # argparse refuses it while parsing
        code = exc.code
    assert code == 2
    assert message in capsys.readouterr().err
    assert not (train_env / "x" / "config.json").exists()
