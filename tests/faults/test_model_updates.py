"""A model updated in place (``calibrate``) and killed at every step of its save: the folder
always loads, as the old model or the new one (issue 33: a kill between the two renames
left weights that failed the config's checksum for good, "train the model again")."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from harness import kill_points, run_disembed, snapshot, temp_files

from disembed.methods import load_disentangler

FILES = ("config.json", "model.safetensors")


def _model(root: Path) -> Path:
    pairs = root / "pairs.tsv"
    pairs.write_text("de\ten\n" + "".join(f"Satz {i}\tSentence {i}\n" for i in range(30)),
                     encoding="utf-8")
    done = run_disembed(["train", "--method", "mean-centering", "--encoder", "hash:16",
                         "--pairs", str(pairs), "--src-col", "de", "--tgt-col", "en",
                         "--out", str(root / "model")], root / "p-train", env=_env(root))
    assert done.code == 0, done.stderr
    return root / "model"


def _env(root: Path) -> dict[str, str]:
    return {"DISEMBED_CACHE_DIR": str(root / "cache")}


def _calibrate(root: Path, model: Path, proc: str, **faults):
    text = root / "fr.txt"
    text.write_text("".join(f"Phrase numéro {i}\n" for i in range(12)), encoding="utf-8")
    return run_disembed(["calibrate", str(text), "--model", str(model), "--language", "fr"],
                        root / proc, env=_env(root), **faults)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("calibrate")
    old = _model(root)
    shutil.copytree(old, root / "warm")
    assert _calibrate(root, root / "warm", "p-warm").code == 0  # the cache: as in every kill run
    new = root / "new"
    shutil.copytree(old, new)
    done = _calibrate(root, new, "p-ref")
    assert done.code == 0, done.stderr
    return root, old, snapshot([old / f for f in FILES]), snapshot([new / f for f in FILES]), \
        done.events


def _check_kill(root: Path, old: Path, point: int, old_files, new_files) -> None:
    model = root / f"kill-{point}"
    shutil.copytree(old, model)
    hurt = _calibrate(root, model, f"p-{point}", kill_at=point)
    assert hurt.killed, (point, hurt.code, hurt.stderr)
    load_disentangler(model)  # completes a cut save first (as every reader does)
    assert snapshot([model / f for f in FILES]) in (old_files, new_files), point
    again = _calibrate(root, model, f"q-{point}")  # the rerun: the new model, no debris
    assert again.code == 0, again.stderr
    assert snapshot([model / f for f in FILES]) == new_files, point
    assert temp_files(model) == [], point


def test_calibrate_killed_at_seeded_steps_leaves_a_loadable_model(models):
    root, old, old_files, new_files, events = models
    assert old_files != new_files and events >= 6
    # the last renames (the weights, then the config) are the steps the issue found
    for point in sorted({*kill_points(events, 4, seed=3), events - 3, events - 2}):
        _check_kill(root, old, point, old_files, new_files)


@pytest.mark.slow
def test_calibrate_killed_at_every_step_leaves_a_loadable_model(models):
    root, old, old_files, new_files, events = models
    for point in range(1, events + 1):
        _check_kill(root, old, point, old_files, new_files)
