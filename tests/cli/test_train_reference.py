"""``disembed train`` needs no benchmark data (WMT20 QE dev is optional and named in the
output) and says in one line what it kept against mean-centering (issue 46)."""

import json
import shutil

import pytest

from disembed.cli import main
from disembed.methods import load_disentangler

ARGS = ["--encoder", "hash:16", "--languages", "de,zh", "--pairs-per-language", "40",
        "--max-epochs", "2", "--train-batch-size", "16"]


@pytest.fixture
def env(full_data_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("DISEMBED_DATA_DIR", str(full_data_dir))
    monkeypatch.setenv("DISEMBED_CACHE_DIR", str(tmp_path / "cache"))
    return full_data_dir, tmp_path


def _run(capsys, *extra):
    code = main(["train", *ARGS, *extra])
    captured = capsys.readouterr()
    return code, json.loads(captured.out.strip().splitlines()[-1]), captured.err


def test_the_default_names_its_validation_and_says_what_it_kept(env, capsys):
    _, tmp = env
    code, out, err = _run(capsys, "--out", str(tmp / "m"))
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


def test_without_qe_dev_data_training_fits_once_and_says_so(env, capsys):
    data, tmp = env
    shutil.rmtree(data / "wmt20_mlqe" / "dev")
    code, out, _ = _run(capsys, "--out", str(tmp / "m"))
    assert code == 0
    assert out["validation"].startswith("benchmark validation: off")
    model = load_disentangler(tmp / "m")
    assert model.get_params()["mirror"] is False and model.orientation_ is None


def test_no_dev_validation_turns_the_second_fit_off(env, capsys):
    _, tmp = env
    code, out, _ = _run(capsys, "--no-dev-validation", "--out", str(tmp / "m"))
    assert code == 0
    assert "mirror=False" in out["validation"]
    assert load_disentangler(tmp / "m").orientation_ is None
