"""Where an exact k-NN search spends its time: wall seconds per stage, off unless asked for.

>>> from disembed.retrieval.profile import knn_profile
>>> with knn_profile() as prof:                          # doctest: +SKIP
...     knn_both(x, y, 4)
>>> prof.seconds                                          # doctest: +SKIP
{'copies': 0.4, 'products': 2.6, 'selection': 0.5, 'certification': 0.2}

Stages (each a span of wall time, none inside another):

* ``copies``: database chunks and query blocks read and converted to the product's dtype,
  the padding rows of a block, the rounding statistics of the certificate;
* ``products``: the blocked matrix products (``torch.mm`` into the block buffer);
* ``selection``: the screen and merges of every block into the running lists
  (:mod:`.topk`);
* ``certification``: (bfloat16 only) the float32 re-scoring of the candidates, the
  certificate and the final ordering of the lists;
* ``fallback``: (bfloat16 only) lists without a certificate searched again in float32.

Torch runs synchronously on the CPU, so a span's wall time is the work done in it. With
no profile active a stage costs one context-variable read.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field

STAGES = ("copies", "products", "selection", "certification", "fallback")


@dataclass
class KnnProfile:
    """Seconds and span counts per stage, accumulated while the profile is active."""

    seconds: dict[str, float] = field(default_factory=lambda: dict.fromkeys(STAGES, 0.0))
    calls: dict[str, int] = field(default_factory=lambda: dict.fromkeys(STAGES, 0))

    @property
    def total(self) -> float:
        return sum(self.seconds.values())

    def to_dict(self) -> dict:
        return {"seconds": {k: round(v, 4) for k, v in self.seconds.items()},
                "calls": dict(self.calls), "total": round(self.total, 4)}


_active: ContextVar[KnnProfile | None] = ContextVar("disembed_knn_profile", default=None)


@contextlib.contextmanager
def knn_profile() -> Iterator[KnnProfile]:
    """Collect the stage times of every exact search run inside the ``with`` block."""
    prof = KnnProfile()
    token = _active.set(prof)
    try:
        yield prof
    finally:
        _active.reset(token)


@contextlib.contextmanager
def stage(name: str) -> Iterator[None]:
    """Time the enclosed work as ``name`` (a no-op without an active profile)."""
    prof = _active.get()
    if prof is None:
        yield
        return
    t0 = time.perf_counter()
    try:
        yield
    finally:
        prof.seconds[name] += time.perf_counter() - t0
        prof.calls[name] += 1


@contextlib.contextmanager
def paused() -> Iterator[None]:
    """No stage recorded inside (a nested search timed as one span of its caller)."""
    token = _active.set(None)
    try:
        yield
    finally:
        _active.reset(token)
