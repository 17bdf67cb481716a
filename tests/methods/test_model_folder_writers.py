"""Issue 48.7, "two writers of one model folder at once, each reading before the other
writes", and "a resource released on the success path but not on an error path": a load
that meets a save reads again; two calibrations take turns from read to write; the folder's
lock is released when the work under it fails. Fast and deterministic (no timing race)."""

from __future__ import annotations

import os
import threading
import time

import numpy as np
import pytest

from disembed import calibrate_saved
from disembed.exceptions import CheckpointError, ConfigError
from disembed.methods import load_disentangler, make_method
from disembed.methods import persistence as base
from disembed.util.locks import TIMEOUT_ENV_VAR, folder_lock


def _model(seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(40, 16)).astype(np.float32)
    Y = rng.normal(size=(40, 16)).astype(np.float32)
    return make_method("mean-centering").fit(X, Y, ["de"] * 20 + ["fr"] * 20, ["en"] * 40)


def test_a_load_that_meets_a_save_reads_again_and_gets_the_new_model(tmp_path, monkeypatch):
    """The reader has read the old config; the other process renames its new weights in
    (and then its config) before the reader checks the weights: they disagree, and the
    model was once called corrupt."""
    path = _model(0).save(tmp_path / "m")
    newer = _model(1)
    real = base._verify_checksum
    calls = []

    def save_meanwhile(weights_path, recorded):
        calls.append(recorded)
        if len(calls) == 1:
            newer.save(path)  # another writer, between the reader's two reads
        return real(weights_path, recorded)

    monkeypatch.setattr(base, "_verify_checksum", save_meanwhile)
    got = load_disentangler(path)
    assert len(calls) == 2  # read again once
    np.testing.assert_array_equal(got.means_, newer.means_)


def test_a_really_corrupt_model_is_reported_at_once_not_waited_for(tmp_path):
    path = _model(0).save(tmp_path / "m")
    blob = bytearray((path / "model.safetensors").read_bytes())
    blob[-3] ^= 0x40
    (path / "model.safetensors").write_bytes(bytes(blob))
    t0 = time.monotonic()
    with pytest.raises(CheckpointError, match="does not match the checksum"):
        load_disentangler(path)
    assert time.monotonic() - t0 < base.SAVE_WAIT_SECONDS / 3


def test_the_folder_lock_is_released_when_the_work_under_it_fails(tmp_path, monkeypatch):
    monkeypatch.setenv(TIMEOUT_ENV_VAR, "0")
    with pytest.raises(RuntimeError), folder_lock(tmp_path):
        raise RuntimeError("the work failed")
    with folder_lock(tmp_path):  # taken at once (timeout 0), not "still in use"
        pass


def test_a_held_folder_lock_is_refused_with_timeout_zero(tmp_path, monkeypatch):
    """The other side of the test above: the lock really excludes (so the test means it)."""
    monkeypatch.setenv(TIMEOUT_ENV_VAR, "0")
    with folder_lock(tmp_path):
        outcome = []
        t = threading.Thread(target=lambda: _try_lock(tmp_path, outcome))
        t.start()
        t.join(30)
    assert outcome == ["refused"]


def _try_lock(folder, outcome):
    try:
        with folder_lock(folder):
            outcome.append("taken")
    except ConfigError:
        outcome.append("refused")


def test_two_calibrations_at_once_keep_both_languages(tmp_path):
    """Calibrate reads the model under the folder's lock: one that read it before taking
    the lock saved what it had read, and the other's language was lost."""
    from disembed.encoders import HashEncoder

    path = tmp_path / "m"
    model = _model(0)
    model.metadata_ = {"encoder": HashEncoder(16).identity.to_dict(), "encoder_spec": "hash:16"}
    model.save(path)
    texts = [f"Satz Nummer {i}" for i in range(12)]
    errors = []

    def calibrate_ja():
        try:
            calibrate_saved(path, "ja", texts, cache_dir=tmp_path / "c", check_language=False)
        except Exception as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)

    with folder_lock(path, "model folder"):
        other = threading.Thread(target=calibrate_ja)
        other.start()
        time.sleep(1.0)  # it waits for the lock (with the bug: having read the model)
        mine = load_disentangler(path)
        rows = np.random.default_rng(3).normal(size=(12, 16)).astype(np.float32)
        mine.calibrate(rows, "ar", check_language=False)
        mine.save(path)
    other.join(60)
    assert errors == []
    assert {"ar", "ja"} <= set(load_disentangler(path).known_languages())
    assert os.path.isfile(path / "config.json")


def test_a_save_that_fails_leaves_no_temporary_file_and_the_old_model(tmp_path, monkeypatch):
    """Released on the error path too: the two temporary files of a save that fails (a
    full disk at the rename) are removed, and the model saved before is still there."""
    import errno

    path = _model(0).save(tmp_path / "m")
    before = sorted(p.name for p in path.iterdir())
    old = (path / "model.safetensors").read_bytes()

    def no_space(files):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(base, "commit_together", no_space)
    with pytest.raises(OSError, match="No space left"):
        _model(1).save(path)
    assert sorted(p.name for p in path.iterdir()) == before
    assert (path / "model.safetensors").read_bytes() == old
