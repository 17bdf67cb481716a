"""k-NN over distinct sentences, answered line by line.

A query repeated on the query side is searched once; a sentence repeated in the database
is one row of the search. The answer is what a search over every line ranks: the ``k``
best database lines of each query line by score, equal scores by lower line number. A
line ties with every copy of itself, so one distinct match may fill several places (its
lines in order); the ``k`` best lines all belong to the ``k`` best distinct sentences
ranked by score, then by first line (a sentence's first line ranks before its others),
which is the order the exact search returns distinct rows in (rows in order of first
appearance, equal scores: lower row).
"""

from __future__ import annotations

import numpy as np

from ..util.dedup import Distinct


def line_matches(D: np.ndarray, I: np.ndarray, rows: Distinct, k: int  # noqa: E741
                 ) -> tuple[np.ndarray, np.ndarray]:
    """``D, I (nq, k')``: matches among distinct database rows (score descending, then
    row), as ``(nq, k)`` matches among the database's lines (``rows`` maps lines to
    distinct rows); ``k`` at most the number of lines."""
    order = np.argsort(rows.inverse, kind="stable")  # lines grouped by distinct row, in order
    counts = np.bincount(rows.inverse, minlength=len(rows.texts))
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    take = np.arange(k)  # up to k lines of each distinct match
    valid = (I[:, :, None] >= 0) & (take < counts[np.maximum(I, 0)][:, :, None])
    at = np.minimum(starts[np.maximum(I, 0)][:, :, None] + take, len(order) - 1)
    lines = np.where(valid, order[at], -1).reshape(len(I), -1)  # (nq, k' * k)
    scores = np.where(valid, D[:, :, None], -np.inf).reshape(len(I), -1)
    pick = np.lexsort((np.where(lines < 0, np.iinfo(np.int64).max, lines), -scores),
                      axis=1)[:, :k]
    return np.take_along_axis(scores, pick, 1).astype(D.dtype), np.take_along_axis(lines, pick, 1)
