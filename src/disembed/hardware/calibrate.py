"""The capability probe: CPU flags plus a short measured calibration, cached per machine.

Flags say what the CPU *has*; the calibration says what torch *gets* from it. A few
``(256 x 384) @ (384 x 1536)`` products (the shapes of e5-small's feed-forward layer
and of a mining block: inner dimension 384) are timed in float32 and bfloat16, and a
dynamically quantised int8 linear layer of the same shape where torch has a quantised
engine. On AVX512-BF16 / AMX cores bfloat16 runs 3-5x float32; on AVX2-only cores
torch emulates it at ~1/5 of float32. Fast paths ask :attr:`Capabilities.bf16_faster`.

The result is cached as JSON in ``<cache dir>/hardware/<key>.json``, the key hashing
the CPU model, its flags, the torch version and the thread count; a corrupt or
incomplete file is measured again. Measuring takes ~0.1-0.3 s.
"""

from __future__ import annotations

import datetime as _dt
import functools
import hashlib
import json
import logging
import os
import platform
import time
import warnings
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import torch

from ..util.cache_dir import default_cache_dir
from ..util.files import atomic_write_text
from ..util.jsonsafe import dumps_json
from .cpu import BF16_FLAGS, INT8_FLAGS, cpu_flags, cpu_model, physical_cores
from .threads import configure_threads

logger = logging.getLogger(__name__)

#: bfloat16 is used where it measures at least this much faster than float32
BF16_MIN_SPEEDUP = 1.25
SHAPE = (256, 384, 1536)  # (m, k, n) of the calibration products
_SCHEMA = 1


@dataclass(frozen=True)
class Capabilities:
    """What this machine offers and how fast torch multiplies on it (GFLOP/s, same threads)."""

    cpu_model: str
    machine: str
    flags: tuple[str, ...]
    torch_isa: str  # torch's own dispatch level: "AVX2", "AVX512", "DEFAULT", ...
    physical_cores: int
    threads: int
    fp32_gflops: float
    bf16_gflops: float
    int8_gops: float | None
    calibration_seconds: float
    load_average: float | None
    measured_utc: str
    torch_version: str
    schema: int = _SCHEMA

    @property
    def bf16_native(self) -> bool:
        """The CPU reports bfloat16 instructions (AVX512-BF16, AMX-BF16 or ARM BF16)."""
        return any(f in self.flags for f in BF16_FLAGS)

    @property
    def int8_native(self) -> bool:
        """The CPU reports int8 dot-product instructions (VNNI, AMX-INT8, ARM dotprod/i8mm)."""
        return any(f in self.flags for f in INT8_FLAGS)

    @property
    def bf16_speedup(self) -> float:
        return self.bf16_gflops / self.fp32_gflops if self.fp32_gflops > 0 else 0.0

    @property
    def bf16_faster(self) -> bool:
        """bfloat16 products measured at least :data:`BF16_MIN_SPEEDUP` x float32."""
        return self.bf16_speedup >= BF16_MIN_SPEEDUP

    def to_dict(self) -> dict:
        d = asdict(self)
        d.update(bf16_native=self.bf16_native, int8_native=self.int8_native,
                 bf16_speedup=round(self.bf16_speedup, 3), bf16_faster=self.bf16_faster)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "Capabilities":
        """Inverse of :meth:`to_dict`; raises ``KeyError``/``TypeError``/``ValueError`` if bad."""
        names = {f.name for f in fields(cls)}
        kwargs = {k: v for k, v in d.items() if k in names}
        kwargs["flags"] = tuple(str(f) for f in kwargs["flags"])
        caps = cls(**kwargs)
        if caps.schema != _SCHEMA or not (caps.fp32_gflops > 0 and caps.bf16_gflops > 0):
            raise ValueError(f"stale or invalid probe record: {d}")
        return caps


def _time_best(fn, budget_s: float, min_reps: int = 1, max_reps: int = 20) -> float:
    """Best wall time of ``fn()`` after one warm-up: ``min_reps`` runs, more while in budget."""
    start = time.perf_counter()
    fn()
    best, reps = float("inf"), 0
    while reps < min_reps or (reps < max_reps and time.perf_counter() - start < budget_s):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
        reps += 1
    return best


def matmul_gflops(dtype: torch.dtype, shape: tuple[int, int, int] = SHAPE,
                  budget_s: float = 0.05) -> float:
    """GFLOP/s of ``(m, k) @ (n, k).T`` products in ``dtype`` (best of a few).

    The right operand is transposed as in ``nn.Linear`` and in a mining block
    (``x @ y.T``); torch's bfloat16 fallback on AVX2 is ~7x slower still without it.
    """
    m, k, n = shape
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(m, k, generator=gen).to(dtype)
    b = torch.randn(n, k, generator=gen).to(dtype)
    out = torch.empty(m, n, dtype=dtype)
    seconds = _time_best(lambda: torch.mm(a, b.T, out=out), budget_s)
    return 2 * m * k * n / seconds / 1e9


def int8_gops(shape: tuple[int, int, int] = SHAPE, budget_s: float = 0.03) -> float | None:
    """GOP/s of a dynamically quantised int8 ``Linear`` (activations quantised per call),
    or ``None`` where torch has no quantised CPU engine."""
    m, k, n = shape
    try:
        from torch.ao.quantization import quantize_dynamic

        with warnings.catch_warnings():  # torch 2.13 deprecates quantised tensors
            warnings.simplefilter("ignore")
            layer = quantize_dynamic(torch.nn.Sequential(torch.nn.Linear(k, n)),
                                     {torch.nn.Linear}, dtype=torch.qint8)
            x = torch.randn(m, k)
            with torch.inference_mode():
                seconds = _time_best(lambda: layer(x), budget_s)
    except Exception as exc:  # noqa: BLE001 - optional: no quantised engine, or the API moved
        logger.debug("int8 calibration unavailable: %s", exc)
        return None
    return 2 * m * k * n / seconds / 1e9


def measure() -> Capabilities:
    """Run the calibration now (threads as :func:`configure_threads` chose)."""
    threads = configure_threads().threads
    t0 = time.perf_counter()
    fp32 = matmul_gflops(torch.float32)
    bf16 = matmul_gflops(torch.bfloat16)
    int8 = int8_gops()
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):
        load = None
    return Capabilities(
        cpu_model=cpu_model(), machine=platform.machine(), flags=cpu_flags(),
        torch_isa=torch.backends.cpu.get_cpu_capability(), physical_cores=physical_cores(),
        threads=threads, fp32_gflops=round(fp32, 2), bf16_gflops=round(bf16, 2),
        int8_gops=None if int8 is None else round(int8, 2),
        calibration_seconds=round(time.perf_counter() - t0, 3), load_average=load,
        measured_utc=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        torch_version=torch.__version__)


def cache_path(cache_dir: str | os.PathLike | None = None) -> Path:
    """``<cache dir>/hardware/<key>.json`` for this CPU, torch version and thread count."""
    key = json.dumps([cpu_model(), cpu_flags(), platform.machine(), torch.__version__,
                      configure_threads().threads])
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return Path(cache_dir or default_cache_dir()) / "hardware" / f"{digest}.json"


def _read(path: Path) -> Capabilities | None:
    if not path.exists():
        return None
    try:
        return Capabilities.from_dict(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        logger.warning("hardware probe cache %s is unreadable (%s); measuring again", path, exc)
        return None


def probe(cache_dir: str | os.PathLike | None = None, refresh: bool = False) -> Capabilities:
    """This machine's :class:`Capabilities`: from the cache, else measured and cached.

    Args:
        cache_dir: cache root; ``None`` = ``$DISEMBED_CACHE_DIR`` or ``~/.cache/disembed``.
        refresh: measure again even when a cached record exists (and overwrite it).
    """
    path = cache_path(cache_dir)
    if refresh:
        _cached_probe.cache_clear()
    return _cached_probe(str(path), refresh)


@functools.lru_cache(maxsize=8)
def _cached_probe(path_str: str, refresh: bool) -> Capabilities:
    path = Path(path_str)
    caps = None if refresh else _read(path)
    if caps is None:
        caps = measure()
        logger.info("hardware probe: fp32 %.1f GFLOP/s, bf16 %.1f GFLOP/s (%s) in %.2fs",
                    caps.fp32_gflops, caps.bf16_gflops,
                    "bf16 faster" if caps.bf16_faster else "fp32 faster",
                    caps.calibration_seconds)
        try:
            atomic_write_text(path, dumps_json(caps.to_dict()))
        except OSError as exc:  # a read-only cache still gets a measured answer
            logger.warning("could not write the hardware probe cache %s: %s", path, exc)
    return caps
