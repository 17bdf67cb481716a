"""What the CPU says about itself: model name, instruction-set flags, cores.

Read from ``/proc/cpuinfo`` on Linux (x86 ``flags``, ARM ``Features``); elsewhere the
answers degrade to ``platform`` and ``os.cpu_count()`` with no flags, and nothing fails.
"""

from __future__ import annotations

import functools
import os
import platform

#: the flags that decide which kernels are fast (x86 names as in /proc/cpuinfo, then ARM)
KNOWN_FLAGS = ("avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512_vnni",
               "avx_vnni", "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16", "amx_int8",
               "asimd", "asimddp", "sve", "sve2", "bf16", "i8mm")
#: flags meaning the CPU multiplies bfloat16 natively (x86 AVX512-BF16 / AMX, ARM BF16)
BF16_FLAGS = ("avx512_bf16", "amx_bf16", "bf16")
#: flags meaning int8 dot products in hardware (VNNI, AMX-INT8, ARM dot product / i8mm)
INT8_FLAGS = ("avx512_vnni", "avx_vnni", "amx_int8", "asimddp", "i8mm")

CPUINFO = "/proc/cpuinfo"


def _read_cpuinfo(path: str = CPUINFO) -> list[dict[str, str]]:
    """One ``{key: value}`` per processor block of ``/proc/cpuinfo``; ``[]`` if unreadable."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError:
        return []
    blocks = []
    for chunk in text.split("\n\n"):
        entry = {}
        for line in chunk.splitlines():
            key, sep, value = line.partition(":")
            if sep:
                entry[key.strip()] = value.strip()
        if entry:
            blocks.append(entry)
    return blocks


@functools.lru_cache(maxsize=4)
def cpu_model(path: str = CPUINFO) -> str:
    """``model name`` of the first processor (``"AMD EPYC ..."``), else what platform knows."""
    for block in _read_cpuinfo(path):
        for key in ("model name", "Model Name", "Hardware", "cpu model"):
            if block.get(key):
                return block[key]
    return platform.processor() or platform.machine() or "unknown"


@functools.lru_cache(maxsize=4)
def cpu_flags(path: str = CPUINFO) -> tuple[str, ...]:
    """The :data:`KNOWN_FLAGS` this CPU reports, sorted; ``()`` where there is no cpuinfo."""
    blocks = _read_cpuinfo(path)
    if not blocks:
        return ()
    words = set((blocks[0].get("flags") or blocks[0].get("Features") or "").split())
    return tuple(sorted(f for f in KNOWN_FLAGS if f in words))


def available_cpus() -> set[int]:
    """Logical CPUs this process may run on (its affinity mask where the OS has one)."""
    try:
        return set(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # macOS, Windows
        return set(range(os.cpu_count() or 1))


def physical_cores(path: str = CPUINFO) -> int:
    """Physical cores among :func:`available_cpus` (hyper-threads counted once).

    From the ``physical id`` / ``core id`` pairs of ``/proc/cpuinfo``; where those are
    missing (ARM, some VMs) every available logical CPU counts as a core.
    """
    cpus = available_cpus()
    cores = set()
    for block in _read_cpuinfo(path):
        if "processor" not in block or "core id" not in block:
            return max(1, len(cpus))
        if int(block["processor"]) in cpus:
            cores.add((block.get("physical id", "0"), block["core id"]))
    return max(1, len(cores) or len(cpus))
