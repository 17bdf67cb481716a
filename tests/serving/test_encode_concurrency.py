"""A service's encoder calls: two encode workers encode side by side when the encoder says
it may be called from two threads at once, and one at a time otherwise; a small batch runs
on one torch thread fewer than the service's count, so that the event loop keeps a core.

Bugs feared: the service's own lock serialising every call, so that ``--encode-workers 2``
never encoded two batches at once (it did, until this test); an encoder that is not
thread-safe called from two threads; the thread count of a small batch left in force for
the large one after it.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

from disembed.encoders import HashEncoder
from disembed.encoders.write_behind import WriteBehindEncoder
from disembed.hardware import small_batch_threads
from disembed.hardware.threads import ThreadSettings
from disembed.methods import make_method
from disembed.serving import service as service_module
from disembed.serving.service import EmbeddingService


class MeetingEncoder(HashEncoder):
    """Each call waits (up to a timeout) until ``parties`` calls are inside at once."""

    def __init__(self, parties: int, thread_safe: bool):
        super().__init__(8)
        self.thread_safe = thread_safe
        self.barrier = threading.Barrier(parties, timeout=3)
        self.inside = self.most_inside = 0
        self.lock = threading.Lock()

    def encode(self, texts, *, batch_size=64):
        with self.lock:
            self.inside += 1
            self.most_inside = max(self.most_inside, self.inside)
        try:
            self.barrier.wait()
        except threading.BrokenBarrierError:
            pass
        finally:
            with self.lock:
                self.inside -= 1
        return super().encode(texts, batch_size=batch_size)


def _service(encoder) -> EmbeddingService:
    return EmbeddingService(encoder, make_method("baseline"), label="x")


@pytest.mark.parametrize("cached", [False, True])
def test_a_thread_safe_encoder_is_called_by_two_workers_at_once(tmp_path, cached):
    inner = MeetingEncoder(2, thread_safe=True)
    encoder = WriteBehindEncoder(inner, tmp_path) if cached else inner
    assert getattr(encoder, "thread_safe", False)
    svc = _service(encoder)
    with ThreadPoolExecutor(2) as pool:
        list(pool.map(svc.encode, [["a b"], ["c d"]]))
    assert inner.most_inside == 2
    if cached:
        encoder.close()


def test_an_encoder_that_is_not_thread_safe_is_called_one_at_a_time():
    inner = MeetingEncoder(2, thread_safe=False)
    svc = _service(inner)
    with ThreadPoolExecutor(2) as pool:
        list(pool.map(svc.encode, [["a b"], ["c d"]]))  # each waits out the barrier alone
    assert inner.most_inside == 1


def test_small_batch_threads():
    assert small_batch_threads(2, 8, 16) == 1
    assert small_batch_threads(2, 16, 16) == 1
    assert small_batch_threads(2, 17, 16) == 2
    assert small_batch_threads(8, 3, 16) == 7
    assert small_batch_threads(1, 3, 16) == 1  # never below one
    assert small_batch_threads(2, 3, 0) == 2  # turned off


class ThreadSpy(HashEncoder):
    def __init__(self):
        super().__init__(8)
        self.seen = []

    def encode(self, texts, *, batch_size=64):
        self.seen.append(torch.get_num_threads())
        return super().encode(texts, batch_size=batch_size)


def test_a_small_batch_runs_on_one_thread_fewer_and_a_large_one_on_all(monkeypatch):
    before = torch.get_num_threads()
    monkeypatch.setattr(service_module, "rechoose_threads", lambda: ThreadSettings(
        threads=2, source="cores", physical_cores=2, available_cpus=2, load_average=None))
    spy = ThreadSpy()
    svc = _service(spy)
    assert svc.small_batch == 0  # off by default (docs/ecosystem.md): set here to test it
    svc.small_batch = 16
    try:
        svc.encode(["a"] * 3)
        svc.encode([f"t{i}" for i in range(40)])
        svc.encode(["b"] * 16)
    finally:
        torch.set_num_threads(before)
    assert spy.seen == [1, 2, 1]
