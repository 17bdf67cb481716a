"""``disembed train`` needs no benchmark data (WMT20 QE dev is optional and named in the
output) and says in one line what it kept against mean-centering (issue 46)."""

import json
import shutil

from disembed.cli import main
from disembed.methods import load_disentangler


def _run(capsys, args, *extra):
    code = main(["train", *args, *extra])
    captured = capsys.readouterr()
    return code, json.loads(captured.out.strip().splitlines()[-1]), captured.err


def test_the_default_names_its_validation_and_says_what_it_kept(train_env, train_args, capsys):
    tmp = train_env
    code, out, err = _run(capsys, train_args, "--out", str(tmp / "m"))
    assert code == 0
    assert "WMT20 QE dev chooses between the two fits" in out["validation"]
    assert out["kept"].startswith(("kept mean-centering", "kept the learned head",
                                   "kept a blend"))
    assert "held-out translation retrieval" in out["kept"] and "leakage" in out["kept"]
    assert f"disembed train: {out['kept']}" in err
    if "kept mean-centering" in out["kept"]:
        assert "warning: the learned recipe did not beat mean-centering" in err
    saved = load_disentangler(tmp / "m")
    assert saved.reference_check_["summary"] == out["kept"]


def test_without_qe_dev_data_training_fits_once_and_says_so(train_env, train_args, full_data_dir,
                                                            capsys):
    data, tmp = full_data_dir, train_env
    shutil.rmtree(data / "wmt20_mlqe" / "dev")
    code, out, _ = _run(capsys, train_args, "--out", str(tmp / "m"))
    assert code == 0
    assert out["validation"].startswith("benchmark validation: off")
    model = load_disentangler(tmp / "m")
    assert model.get_params()["mirror"] is False and model.orientation_ is None


def test_no_dev_validation_turns_the_second_fit_off(train_env, train_args, capsys):
    tmp = train_env
    code, out, _ = _run(capsys, train_args, "--no-dev-validation", "--out", str(tmp / "m"))
    assert code == 0
    assert "mirror=False" in out["validation"]
    assert load_disentangler(tmp / "m").orientation_ is None
