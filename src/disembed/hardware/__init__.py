"""What this machine can do, measured: CPU flags, a short calibration, thread settings.

A leaf module (stdlib, numpy, torch, threadpoolctl, :mod:`disembed.util`): every fast
path asks it instead of guessing from names.

>>> from disembed.hardware import probe, configure_threads
>>> caps = probe()                  # cached per machine; ~0.2 s the first time  # doctest: +SKIP
>>> caps.bf16_faster                # True on AVX512-BF16 / AMX cores            # doctest: +SKIP
>>> configure_threads().threads     # one count for torch, OpenMP, BLAS, faiss   # doctest: +SKIP
"""

from .calibrate import BF16_MIN_SPEEDUP, Capabilities, cache_path, matmul_gflops, measure, probe
from .cpu import BF16_FLAGS, INT8_FLAGS, KNOWN_FLAGS, cpu_flags, cpu_model, physical_cores
from .threads import (
    BUSY_LOAD_PER_CORE,
    THREADS_ENV_VAR,
    ThreadSettings,
    choose_threads,
    configure_threads,
    current_settings,
    leave_torch_to_workers,
    rechoose_threads,
    set_torch_threads,
    small_batch_threads,
    thread_pools,
)

__all__ = ["BF16_FLAGS", "BF16_MIN_SPEEDUP", "BUSY_LOAD_PER_CORE", "INT8_FLAGS", "KNOWN_FLAGS",
           "THREADS_ENV_VAR", "Capabilities", "ThreadSettings", "cache_path", "choose_threads",
           "configure_threads", "cpu_flags", "cpu_model", "current_settings",
           "leave_torch_to_workers", "matmul_gflops", "measure", "physical_cores", "probe",
           "rechoose_threads", "set_torch_threads",
           "small_batch_threads", "thread_pools"]
