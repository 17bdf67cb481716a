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

def compare_to_reference(runs: list, reference: str, *, views: tuple[str, ...] = ("meaning",),
                         n_resamples: int = 2000, seed: int = 0) -> list:
    """Each run against the run of the same encoder whose method is ``reference`` (as ``b``):
    the paired bootstrap interval of the difference of every task's main score, for each of
    ``views``. ``runs``: ``RunResult`` objects whose scores carry ``per_item`` (a fresh run,
    or one read back with :func:`attach_items`); a run without them is left out (logged)."""
    by_encoder: dict[str, dict[str, list]] = {}
    for r in runs:
        if not all(s.per_item for s in r.scores):
            logger.warning("%s has no per-item scores; left out of the comparison", r.label)
            continue
        by_encoder.setdefault(r.spec.get("encoder", ""), {})[r.method] = r
    out = []
    for methods in by_encoder.values():
        ref = methods.get(reference)
        if ref is None:
            continue
        for method, r in methods.items():
            if method == reference:
                continue
            pair = compare_all({r.label: r.scores, ref.label: ref.scores}, views=views,
                               n_resamples=n_resamples, seed=seed)
            out += pair
    return out


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


__all__ = ["ITEMS_FILE", "attach_items", "compare_bench", "compare_to_reference", "save_items"]
