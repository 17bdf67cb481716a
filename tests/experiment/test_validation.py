"""Choosing between fits on validation data, never on a test set (issue 37): ``run`` gives a
recipe with ``mirror=True`` WMT20 QE **dev** to choose its arm with, and nothing of the
evaluation data but that split is read while it chooses."""

import builtins
import io
from pathlib import Path

import pytest

from disembed.experiment import (
    RunSpec,
    TrainingData,
    Workspace,
    fit_method,
    load_pairs,
    open_encoder,
    qe_dev_validator,
    run,
)
from disembed.experiment import validation as validation_module
from disembed.methods import make_method

SMALL = TrainingData(("de", "zh"), 20)
MIRROR = {"init_scale": 0.9, "lr": 3e-3, "max_epochs": 2, "mirror": True}


@pytest.fixture
def env(full_data_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("DISEMBED_DATA_DIR", str(full_data_dir))
    monkeypatch.setenv("DISEMBED_CACHE_DIR", str(tmp_path / "cache"))
    return full_data_dir


@pytest.fixture
def reads(monkeypatch):
    """Every file opened while the fixture is active (``builtins.open``, ``io.open``)."""
    opened: list[Path] = []
    real = io.open

    def recording(file, *args, **kwargs):
        if isinstance(file, (str, Path)):
            opened.append(Path(file).resolve())
        return real(file, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", recording)
    monkeypatch.setattr(io, "open", recording)
    return opened


def _evaluation_files(opened, data_dir):
    data = Path(data_dir).resolve()
    folders = ("tatoeba", "sts17", "wmt20_mlqe", "bucc2018")
    return sorted({p.relative_to(data).as_posix() for p in opened
                   if p.is_relative_to(data) and p.relative_to(data).parts[0] in folders})


def test_choosing_the_arm_reads_wmt20_qe_dev_and_no_test_split(env, reads):
    encoder = open_encoder(RunSpec(encoder="hash:16"))
    pairs, _ = load_pairs(SMALL, ("tatoeba", "sts17", "wmt20-qe"))
    reads.clear()  # building the pool reads the test sets to keep them out; choosing must not
    model = fit_method(make_method("seed-centered", **MIRROR), encoder, pairs,
                       validate=qe_dev_validator(encoder, env))
    assert model.orientation_["kept"] in ("trained", "mirrored")
    read = _evaluation_files(reads, env)
    assert read and all(f.startswith("wmt20_mlqe/dev/") for f in read), read


def test_a_validator_on_a_test_split_is_caught(env, reads, monkeypatch):
    """The bug the test above guards against: validation pointed at the test split."""
    import dataclasses

    from disembed.evaluation.qe import WMT20QETask
    monkeypatch.setattr(WMT20QETask, "metadata",
                        dataclasses.replace(WMT20QETask.metadata, validation_split="test"))
    encoder = open_encoder(RunSpec(encoder="hash:16"))
    pairs, _ = load_pairs(SMALL, ("tatoeba", "sts17", "wmt20-qe"))
    reads.clear()
    fit_method(make_method("seed-centered", **MIRROR), encoder, pairs,
               validate=qe_dev_validator(encoder, env))
    assert any(f.startswith("wmt20_mlqe/test/") for f in _evaluation_files(reads, env))


def test_run_passes_qe_dev_to_a_mirrored_recipe_and_records_the_choice(env, tmp_path):
    result = run(RunSpec(method="seed-centered", params=MIRROR, encoder="hash:16", data=SMALL,
                         tasks=("sts17",)), Workspace(data_dir=str(env)))
    orientation = result.training["orientation"]
    assert set(orientation["scores"]) == {"trained", "mirrored"}
    assert orientation["kept"] == max(orientation["scores"], key=orientation["scores"].get)
    expected = validation_module.qe_dev_score(result.model, open_encoder(
        RunSpec(encoder="hash:16")), env)
    assert orientation["scores"][orientation["kept"]] == pytest.approx(expected)


def test_a_recipe_without_mirror_gets_no_validator(env, monkeypatch):
    monkeypatch.setattr(validation_module, "qe_dev_validator",  # what validation_options calls
                        lambda *a, **k: pytest.fail("validation data read without mirror"))
    result = run(RunSpec(method="seed-centered", params={"max_epochs": 1}, encoder="hash:16",
                         data=SMALL, tasks=("sts17",)), Workspace(data_dir=str(env)))
    assert "orientation" not in result.training
