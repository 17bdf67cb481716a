"""The service's embedding cache writes behind its callers (issue 35: a micro-batch no longer
waits for a shard's fsync) and still gives every text one vector, stored and never lost on a
clean shutdown; a write that fails reaches a caller."""

from __future__ import annotations

import time

import numpy as np
import pytest

from disembed.encoders import HashEncoder
from disembed.encoders.cached import CachedEncoder
from disembed.encoders.write_behind import WriteBehindEncoder

TEXTS = [f"sentence number {i} of the write-behind test" for i in range(40)]


def until(condition, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.01)
    return condition()


def shards(path) -> int:
    return len(list(path.rglob("shard-*.emb")))


class Counting(HashEncoder):
    def __init__(self) -> None:
        super().__init__(16)
        self.seen: list[str] = []

    def encode(self, texts, *, batch_size=64):
        self.seen += list(texts)
        return super().encode(texts, batch_size=batch_size)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_a_vector_is_the_same_from_memory_from_disk_and_in_a_later_process(tmp_path, dtype):
    """Kept rows are rounded through the store's dtype, as the stored ones are read back
    (a float16 cache that answered from memory in float32 would change a vector later)."""
    enc = WriteBehindEncoder(HashEncoder(16), tmp_path, dtype=dtype, flush_seconds=3600)
    first = enc.encode(TEXTS[:3])
    kept = enc.encode(TEXTS[3:8])  # answered from memory: the first write was the only one
    assert enc.pending == 5
    enc.close()
    assert enc.pending == 0
    again = CachedEncoder(HashEncoder(16), tmp_path, dtype=dtype).encode(TEXTS[:8])
    np.testing.assert_array_equal(again, np.vstack([first, kept]))
    plain = CachedEncoder(HashEncoder(16), tmp_path / "plain", dtype=dtype).encode(TEXTS[:8])
    np.testing.assert_array_equal(again, plain)


def test_calls_write_no_shard_each_and_close_stores_every_text(tmp_path):
    enc = WriteBehindEncoder(HashEncoder(16), tmp_path, flush_seconds=3600)
    for i in range(0, 40, 4):
        enc.encode(TEXTS[i : i + 4] + TEXTS[:2])  # repeats are not encoded again
    assert shards(tmp_path) == 1  # the first call's write only (one shard a call before)
    assert enc.stats.encoded == 40
    enc.close()
    assert shards(tmp_path) == 2
    later = Counting()
    CachedEncoder(later, tmp_path).encode(TEXTS)
    assert later.seen == []  # every text was stored


def test_the_writer_thread_writes_when_enough_rows_are_kept(tmp_path):
    enc = WriteBehindEncoder(HashEncoder(16), tmp_path, flush_rows=8, flush_seconds=3600)
    enc.encode(TEXTS[:1])
    enc.encode(TEXTS[1:10])  # 9 kept >= 8: the writer is woken
    assert until(lambda: enc.pending == 0) and shards(tmp_path) == 2
    enc.close()


def test_a_cache_that_cannot_be_written_fails_the_first_call(tmp_path, monkeypatch):
    enc = WriteBehindEncoder(HashEncoder(16), tmp_path)

    def refuse(texts, embeddings):
        raise PermissionError(13, "Permission denied", str(tmp_path / "shard-x.emb"))

    monkeypatch.setattr(enc.store, "write_shard", refuse)
    with pytest.raises(PermissionError):
        enc.encode(TEXTS[:2])


def test_a_failed_background_write_reaches_the_next_call_and_keeps_its_rows(tmp_path,
                                                                             monkeypatch):
    enc = WriteBehindEncoder(HashEncoder(16), tmp_path, flush_seconds=3600)
    enc.encode(TEXTS[:2])
    enc.encode(TEXTS[2:6])
    real = enc.store.write_shard

    def full(texts, embeddings):
        raise OSError(28, "No space left on device", str(tmp_path))

    monkeypatch.setattr(enc.store, "write_shard", full)
    enc._wake.set()  # the writer tries now, and fails
    assert until(lambda: enc._error is not None)
    with pytest.raises(OSError, match="No space"):
        enc.encode(TEXTS[6:7])
    assert enc.pending == 4  # kept, to be written again
    monkeypatch.setattr(enc.store, "write_shard", real)
    enc.close()
    later = Counting()
    CachedEncoder(later, tmp_path).encode(TEXTS[:6])
    assert later.seen == []


def test_the_service_writes_what_it_kept_when_it_stops(tmp_path):
    httpx = pytest.importorskip("httpx")
    pytest.importorskip("fastapi")
    from disembed.serving.app import BackgroundServer, create_app
    from disembed.serving.loading import load_service

    service = load_service(encoder_spec="hash:16", cache_dir=str(tmp_path))
    assert isinstance(service.encoder, WriteBehindEncoder)
    service.encoder.flush_seconds = 3600
    with BackgroundServer(create_app(service)) as url:
        for text in TEXTS[:5]:
            assert httpx.post(url + "/v1/embeddings", json={"input": text}).status_code == 200
        assert service.encoder.pending == 4
    assert service.encoder.pending == 0
    later = Counting()
    CachedEncoder(later, tmp_path).encode(TEXTS[:5])
    assert later.seen == []
