"""Per-item scores on disk, so finished runs (``disembed bench``) can be tested later.

``TaskScores.per_item`` lives in memory only; :func:`save_items` writes it next to a
``result.json`` as ``items.npz`` (one array per ``task|view|subset|metric``) and
:func:`attach_items` puts it back on the ``TaskScores`` of a loaded ``RunResult``.
:func:`compare_bench` then runs the paired tests over every pair of methods of a bench
output folder.
"""

from __future__ import annotations

import io
import logging
from pathlib import Path

import numpy as np

from ..exceptions import ConfigError
from ..results import RunResult
from ..util.files import atomic_write_bytes
from .significance import compare_all

logger = logging.getLogger(__name__)

ITEMS_FILE = "items.npz"
_SEP = "|"


def save_items(scores: list, path: str | Path) -> Path:
    """Write the per-item arrays of every ``TaskScores`` in ``scores`` to one ``.npz``."""
    arrays = {_SEP.join((s.task, *key)): np.asarray(arr) for s in scores
              for key, arr in s.per_item.items()}
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)
    atomic_write_bytes(Path(path), [buffer.getvalue()])
    return Path(path)


def attach_items(scores: list, path: str | Path) -> list:
    """Fill ``per_item`` of each ``TaskScores`` from an ``.npz`` written by :func:`save_items`."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"no per-item scores at {path}; re-run the evaluation with a "
                          "disembed that writes items.npz (or run 'disembed analyse')")
    with np.load(path) as data:
        for s in scores:
            s.per_item = {tuple(k.split(_SEP)[1:]): data[k] for k in data.files
                          if k.split(_SEP, 1)[0] == s.task}
    return scores


def compare_bench(bench_dir: str | Path, *, n_resamples: int = 2000, seed: int = 0) -> list:
    """Paired tests between every two methods of each encoder in a bench output folder.

    Reads ``<bench_dir>/<encoder>/<method>/{result.json, items.npz}``; runs without
    ``items.npz`` are skipped with a warning.
    """
    bench_dir = Path(bench_dir)
    out = []
    for enc_dir in sorted(p for p in bench_dir.iterdir() if p.is_dir()):
        results = {}
        for run_dir in sorted(p for p in enc_dir.iterdir() if (p / "result.json").is_file()):
            if not (run_dir / ITEMS_FILE).is_file():
                logger.warning("%s has no %s; left out of the tests", run_dir, ITEMS_FILE)
                continue
            run = RunResult.from_json(run_dir / "result.json")
            label = f"{enc_dir.name}/{run.method}"
            results[label] = attach_items(run.scores, run_dir / ITEMS_FILE)
        out += compare_all(results, n_resamples=n_resamples, seed=seed)
    if not out:
        raise ConfigError(f"{bench_dir}: no two runs of one encoder with {ITEMS_FILE} to compare")
    return out
