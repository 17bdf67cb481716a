"""Choose the meaning threshold on a small labelled dev set.

The dev file is a TSV with a header row naming the two sentence columns and a ``label``
column: ``1`` (or ``keep``, ``true``, ``yes``) for a pair to keep, ``0`` (``drop``,
``false``, ``no``) for one to drop. Its pairs are scored as the filter scores a chunk
(:class:`~.scoring.PairScorer`: same rules, same language checks, same calibrated score),
and :func:`~.thresholds.choose_threshold` picks the threshold of highest F1.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..data.io import read_tsv
from ..exceptions import DataError
from .scoring import PairScorer, majority_language
from .thresholds import ThresholdChoice, choose_threshold

_TRUE, _FALSE = {"1", "keep", "true", "yes"}, {"0", "drop", "false", "no"}


def read_labels(path: str | Path, src_col: str = "src", tgt_col: str = "tgt",
                label_col: str = "label") -> tuple[list[str], list[str], np.ndarray]:
    """``(sources, targets, labels (n,) bool)`` of a labelled dev TSV (module docstring)."""
    rows, _ = read_tsv(path, [src_col, tgt_col, label_col], required_nonempty=[label_col])
    labels = []
    for i, row in enumerate(rows, start=2):
        value = row[label_col].strip().lower()
        if value not in _TRUE | _FALSE:
            raise DataError(f"{path}:{i}: label {row[label_col]!r}; expected 1/keep/true/yes "
                            "for a pair to keep or 0/drop/false/no for one to drop")
        labels.append(value in _TRUE)
    return [r[src_col] for r in rows], [r[tgt_col] for r in rows], np.asarray(labels, bool)


def threshold_from_dev(path: str | Path, scorer: PairScorer, *, src_lang: str | None = None,
                       tgt_lang: str | None = None, src_col: str = "src",
                       tgt_col: str = "tgt") -> ThresholdChoice:
    """The threshold chosen on the labelled pairs of ``path`` (module docstring); the
    expected languages default to those most of the pairs to keep are identified as."""
    src, tgt, labels = read_labels(path, src_col, tgt_col)
    scores = scorer.score(src, tgt)
    if scorer.check is not None:
        keep = np.flatnonzero(labels)
        src_lang = src_lang or majority_language(scores.src_code[keep].tolist())
        tgt_lang = tgt_lang or majority_language(scores.tgt_code[keep].tolist())
        scores = scorer.judge(scores, src, tgt, src_lang, tgt_lang)
    return choose_threshold(scores.score, labels, scores.reason == "")
