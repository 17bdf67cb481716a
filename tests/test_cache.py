import numpy as np
import pytest

from disembed.encoders import HashEncoder
from disembed.encoders.cached import CachedEncoder
from disembed.encoders.store import EmbeddingStore


class CountingEncoder(HashEncoder):
    def __init__(self, fail_after=None):
        super().__init__(dim=8)
        self.calls, self.seen, self.fail_after = 0, 0, fail_after

    def encode(self, texts, *, batch_size=64):
        if self.fail_after is not None and self.seen >= self.fail_after:
            raise KeyboardInterrupt("simulated kill")
        self.calls += 1
        self.seen += len(texts)
        return super().encode(texts)


TEXTS = [f"sentence number {i}" for i in range(50)]


def test_second_run_encodes_nothing(tmp_path):
    first = CachedEncoder(CountingEncoder(), tmp_path)
    a = first.encode(TEXTS + TEXTS[:5])
    assert first.encoder.seen == 50  # duplicates encoded once
    second = CachedEncoder(CountingEncoder(), tmp_path)
    b = second.encode(TEXTS)
    assert second.encoder.seen == 0
    np.testing.assert_array_equal(a[:50], b)
    np.testing.assert_allclose(b, HashEncoder(8).encode(TEXTS), atol=1e-7)


def test_killed_job_resumes_where_it_stopped(tmp_path):
    killed = CachedEncoder(CountingEncoder(fail_after=20), tmp_path, chunk_size=10)
    with pytest.raises(KeyboardInterrupt):
        killed.encode(TEXTS)
    resumed = CachedEncoder(CountingEncoder(), tmp_path, chunk_size=10)
    resumed.encode(TEXTS)
    assert resumed.encoder.seen == 30
    assert not list(resumed.store.dir.glob(".tmp-*"))


@pytest.mark.parametrize("damage", ["truncate", "flip", "garbage"])
def test_corrupted_shard_is_detected_and_recomputed(tmp_path, damage, caplog):
    CachedEncoder(CountingEncoder(), tmp_path, chunk_size=25).encode(TEXTS)
    store_dir = next(p for p in tmp_path.iterdir() if p.is_dir())
    shard = sorted(store_dir.glob("shard-*.emb"))[0]
    data = bytearray(shard.read_bytes())
    if damage == "truncate":
        data = data[: len(data) - 7]
    elif damage == "flip":
        data[-3] ^= 0xFF
    else:
        data = bytearray(b"not a shard at all")
    shard.write_bytes(bytes(data))
    again = CachedEncoder(CountingEncoder(), tmp_path, chunk_size=25)
    out = again.encode(TEXTS)
    assert again.encoder.seen == 25
    np.testing.assert_allclose(out, HashEncoder(8).encode(TEXTS), atol=1e-7)
    assert shard.with_suffix(".corrupt").exists()
    assert "rejected" in caplog.text


def test_float16_storage_returns_float32_consistently(tmp_path):
    enc = CachedEncoder(HashEncoder(8), tmp_path, dtype="float16")
    first = enc.encode(TEXTS)
    again = CachedEncoder(HashEncoder(8), tmp_path, dtype="float16").encode(TEXTS)
    assert first.dtype == np.float32
    np.testing.assert_array_equal(first, again)
    np.testing.assert_allclose(first, HashEncoder(8).encode(TEXTS), atol=2e-3)


def test_identities_do_not_share_entries(tmp_path):
    CachedEncoder(HashEncoder(8), tmp_path).encode(TEXTS)
    other = CachedEncoder(HashEncoder(8, salt="x"), tmp_path)
    assert len(other.store) == 0


def test_encode_to_file_is_blockwise(tmp_path):
    enc = CachedEncoder(HashEncoder(8), tmp_path / "c")
    mm = enc.encode_to_file(TEXTS, tmp_path / "out.npy", block=7)
    np.testing.assert_allclose(np.load(tmp_path / "out.npy"), HashEncoder(8).encode(TEXTS),
                               atol=1e-7)
    assert mm.shape == (50, 8)


def test_put_checks_shape(tmp_path):
    store = EmbeddingStore(tmp_path, HashEncoder(8).identity)
    with pytest.raises(ValueError, match="expected"):
        store.put(["a"], np.zeros((1, 4)))


def test_a_float32_cache_never_returns_float16_rounded_vectors(tmp_path):
    """Issue 22: --cache-dtype float16, then float32, returned the float16-rounded rows."""
    texts = [f"sentence {i}" for i in range(20)]
    exact = HashEncoder(dim=32).encode(texts)
    half = CachedEncoder(HashEncoder(dim=32), tmp_path, dtype="float16")
    assert not np.array_equal(half.encode(texts), exact)  # rounded, as asked
    folder = half.store.dir
    half_shards = set(folder.glob("shard-*.emb"))
    full = CachedEncoder(HashEncoder(dim=32), tmp_path, dtype="float32")
    np.testing.assert_array_equal(full.encode(texts), exact)
    for path in half_shards:  # the float16 shards now load after the float32 ones
        path.rename(folder / f"shard-zz-{path.name[6:]}")
    again = CachedEncoder(HashEncoder(dim=32), tmp_path, dtype="float32")  # shards reloaded
    np.testing.assert_array_equal(again.encode(texts), exact)
    assert again.stats.encoded == 0  # the float32 rows, not the float16 ones, were found
