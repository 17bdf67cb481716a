"""One thread count for the process: explicit settings win, else physical cores or 1 if busy."""

import json
import os
import subprocess
import sys

import pytest
import torch

from disembed.exceptions import ConfigError
from disembed.hardware import choose_threads, configure_threads
from disembed.hardware import threads as threads_module


@pytest.fixture(autouse=True)
def _restore(monkeypatch):
    before, chosen = torch.get_num_threads(), threads_module._chosen
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.delenv("DISEMBED_NUM_THREADS", raising=False)
    monkeypatch.setattr(threads_module, "physical_cores", lambda: 2)
    monkeypatch.setattr(threads_module, "available_cpus", lambda: {0, 1})
    monkeypatch.setattr(threads_module, "_load_average", lambda: 0.5)
    yield
    threads_module._chosen = chosen
    torch.set_num_threads(before)


def test_order_of_precedence(monkeypatch):
    threads_module._chosen = None
    torch.set_num_threads(2)  # torch's own default here: one per logical CPU
    assert (choose_threads().threads, choose_threads().source) == (2, "cores")
    monkeypatch.setattr(threads_module, "_load_average", lambda: 4.5)
    assert (choose_threads().threads, choose_threads().source) == (1, "busy")
    torch.set_num_threads(3)  # set by the user before disembed: kept
    assert (choose_threads().threads, choose_threads().source) == (3, "torch")
    monkeypatch.setenv("OMP_NUM_THREADS", "5")
    assert (choose_threads().threads, choose_threads().source) == (5, "OMP_NUM_THREADS")
    monkeypatch.setenv("DISEMBED_NUM_THREADS", "4")
    assert (choose_threads().threads, choose_threads().source) == (4, "DISEMBED_NUM_THREADS")
    assert (choose_threads(6).threads, choose_threads(6).source) == (6, "argument")


def test_bad_settings_are_rejected(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "many")
    with pytest.raises(ConfigError, match="OMP_NUM_THREADS must be a positive integer"):
        choose_threads()
    with pytest.raises(ConfigError, match="num_threads"):
        choose_threads(0)


def test_configure_applies_once_and_keeps_the_first_choice(monkeypatch):
    threads_module._chosen = None
    torch.set_num_threads(2)
    monkeypatch.setenv("DISEMBED_NUM_THREADS", "1")
    assert configure_threads().threads == 1 and torch.get_num_threads() == 1
    monkeypatch.setenv("DISEMBED_NUM_THREADS", "2")
    assert configure_threads().threads == 1  # the first choice stays
    assert configure_threads(2).threads == 2 and torch.get_num_threads() == 2  # explicit wins


def test_a_fresh_process_honours_omp_num_threads():
    env = {"OMP_NUM_THREADS": "1"}
    code = ("import json, torch; from disembed.hardware import configure_threads, thread_pools; "
            "s = configure_threads(); "
            "print(json.dumps([s.threads, s.source, torch.get_num_threads(), "
            "[p['threads'] for p in thread_pools()]]))")
    clean = {k: v for k, v in os.environ.items()
             if k not in ("OMP_NUM_THREADS", "DISEMBED_NUM_THREADS")}
    out = subprocess.run([sys.executable, "-c", code], env={**clean, **env}, check=True,
                         capture_output=True, text=True).stdout
    threads, source, torch_threads, pools = json.loads(out.strip().splitlines()[-1])
    assert (threads, source, torch_threads) == (1, next(iter(env)), 1)
    assert pools and set(pools) == {1}  # every OpenMP / BLAS runtime loaded got it


def _follow(monkeypatch, loads):
    """Run rechoose_threads once per load average in ``loads`` (no waiting between looks)."""
    from disembed.hardware import rechoose_threads

    seen = []
    for load in loads:
        monkeypatch.setattr(threads_module, "_load_average", lambda load=load: load)
        s = rechoose_threads(interval=0)
        seen.append((s.threads, s.source, torch.get_num_threads()))
    return seen


def test_threads_follow_the_load_with_hysteresis(monkeypatch):
    """2 cores: busy at a load >= 4, free again below 3 (not at 3.5: no flapping)."""
    threads_module._chosen = None
    torch.set_num_threads(2)
    assert configure_threads().source == "cores"
    assert _follow(monkeypatch, [1.0, 4.5, 3.5, 3.9, 2.9, 3.5]) == [
        (2, "cores", 2), (1, "busy", 1), (1, "busy", 1), (1, "busy", 1), (2, "cores", 2),
        (2, "cores", 2)]


def test_a_busy_start_gets_its_cores_back_when_the_load_falls(monkeypatch):
    threads_module._chosen = None
    torch.set_num_threads(2)
    monkeypatch.setattr(threads_module, "_load_average", lambda: 6.0)
    assert configure_threads().threads == 1
    assert _follow(monkeypatch, [0.5]) == [(2, "cores", 2)]


def test_an_explicit_count_never_follows_the_load(monkeypatch):
    threads_module._chosen = None
    torch.set_num_threads(2)
    monkeypatch.setenv("DISEMBED_NUM_THREADS", "2")
    configure_threads()
    assert _follow(monkeypatch, [9.0, 0.1]) == [(2, "DISEMBED_NUM_THREADS", 2)] * 2


def _fake_clock(monkeypatch, now):
    """``time.monotonic()`` as threads.py sees it, fixed at ``now[0]`` (a list: tests move it)."""
    import types

    monkeypatch.setattr(threads_module, "time", types.SimpleNamespace(monotonic=lambda: now[0]))


@pytest.mark.parametrize("boot", [0.3, 60.0, 1e6], ids=["just-booted", "one-minute", "days"])
def test_the_load_is_read_at_most_once_per_interval(monkeypatch, boot):
    """Once per interval whatever the clock reads: time.monotonic() counts from boot on
    Linux, so in the first hour after boot it is below a 3600 s interval."""
    from disembed.hardware import rechoose_threads

    threads_module._chosen = None
    torch.set_num_threads(2)
    configure_threads()
    now = [boot]
    _fake_clock(monkeypatch, now)
    reads = []
    monkeypatch.setattr(threads_module, "_last_look", None)
    monkeypatch.setattr(threads_module, "_load_average", lambda: reads.append(1) or 0.5)
    for _ in range(100):
        rechoose_threads(interval=3600)
    assert len(reads) == 1
    now[0] += 3599.0
    rechoose_threads(interval=3600)
    assert len(reads) == 1
    now[0] += 1.0
    rechoose_threads(interval=3600)
    assert len(reads) == 2


def test_a_service_started_at_boot_sees_the_load_at_its_first_look(monkeypatch):
    """The first look reads the load even when the clock is below the interval: a busy
    machine a minute after boot moves the count to one thread at once."""
    from disembed.hardware import rechoose_threads

    threads_module._chosen = None
    torch.set_num_threads(2)
    monkeypatch.setattr(threads_module, "_load_average", lambda: 0.5)
    assert configure_threads().source == "cores"
    _fake_clock(monkeypatch, [2.0])
    monkeypatch.setattr(threads_module, "_last_look", None)
    monkeypatch.setattr(threads_module, "_load_average", lambda: 9.0)
    assert rechoose_threads().source == "busy"


@pytest.mark.slow
def test_the_thread_count_does_not_change_an_e5_vector():
    """Re-choosing threads mid-service must not change a vector: e5-small, 1 vs 2 threads."""
    import numpy as np

    from disembed.encoders import load_encoder

    encoder = load_encoder("e5-small")
    texts = [f"sentence {i} about {'a long subject ' * (i % 7)}" for i in range(64)]
    torch.set_num_threads(1)
    one = encoder.encode(texts, batch_size=32)
    torch.set_num_threads(2)
    two = encoder.encode(texts, batch_size=32)
    np.testing.assert_array_equal(one, two)
