"""Per-item scores on disk, so finished runs (``disembed bench``) can be tested later.

``TaskScores.per_item`` lives in memory only; :func:`save_items` writes it next to a
``result.json`` as ``items.npz`` (one array per ``task|view|subset|metric``) and
:func:`attach_items` puts it back on the ``TaskScores`` of a loaded ``RunResult``.
:func:`compare_bench` then runs the paired tests over every pair of methods of a bench
output folder.
"""

from __future__ import annotations

import logging
from pathlib import Path

from ..exceptions import ConfigError
from ..results import ITEMS_FILE, RESULT_FILE, RunResult, attach_items, save_items
from .significance import compare_all

logger = logging.getLogger(__name__)

def compare_bench(bench_dir: str | Path, *, n_resamples: int = 2000, seed: int = 0) -> list:
    """Paired tests between every two methods of each encoder in a bench output folder.

    Reads ``<bench_dir>/<encoder>/<method>/{result.json, items.npz}``; runs without
    ``items.npz`` are skipped with a warning.
    """
    bench_dir = Path(bench_dir)
    out = []
    for enc_dir in sorted(p for p in bench_dir.iterdir() if p.is_dir()):
        results = {}
        for run_dir in sorted(p for p in enc_dir.iterdir() if (p / RESULT_FILE).is_file()):
            if not (run_dir / ITEMS_FILE).is_file():
                logger.warning("%s has no %s; left out of the tests", run_dir, ITEMS_FILE)
                continue
            run = RunResult.load(run_dir)
            results[f"{enc_dir.name}/{run.method}"] = run.scores
        out += compare_all(results, n_resamples=n_resamples, seed=seed)
    if not out:
        raise ConfigError(f"{bench_dir}: no two runs of one encoder with {ITEMS_FILE} to compare")
    return out


__all__ = ["ITEMS_FILE", "attach_items", "compare_bench", "save_items"]
