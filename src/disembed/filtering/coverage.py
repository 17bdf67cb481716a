"""Length coverage: does the target say as much as the source, for this language pair?

The ratio margin of :mod:`.thresholds` cannot see a partial translation well. A target
that renders half of its source has a lower meaning cosine (0.40 against 0.69 for true
pairs on the benchmark of docs/filtering.md), but it is also less close to every other
sentence of the chunk, and the margin divides by that closeness (each side's nearest
neighbours include its own partner): the denominator falls with the numerator (0.41
against 0.50) and the margin gives back most of what the cosine took.

Length is the classic independent signal (Gale & Church 1993): the lengths of a sentence
and its translation are proportional, with a ratio and a spread that depend on the
language pair. Here a pair's log length ratio ``r = log(units(tgt) / units(src))``
(:func:`~.rules.length_units`: characters, a Han/kana/Hangul one counting 3) is compared
with what the chunk's own confident pairs show for this language pair:

* anchors: the pairs no rule drops whose margin is at least :data:`ANCHOR_MARGIN` (1.0:
  the pair is closer than the mean of its nearest neighbours, as a true translation is);
* ``mu``: the anchors' median of ``r``; ``sigma``: 1.4826 times their median absolute
  deviation (the normal's standard deviation, robust to the noise among them), at least
  :data:`MIN_SIGMA`;
* ``z = (r - mu) / sigma`` and the penalty ``weight * max(0, |z| - slack)``, subtracted
  from the margin: a pair within ``slack`` deviations of its language pair's usual ratio
  is untouched.

With fewer than :data:`MIN_ANCHORS` anchors the chunk says too little about its language
pair and no pair is penalised. Everything is a function of the chunk alone, so a chunk's
scores (and a resumed run's bytes) do not depend on the rest of the input.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .rules import length_units

#: a pair is an anchor when its margin is at least this (module docstring)
ANCHOR_MARGIN = 1.0
#: fewer anchors than this: no coverage penalty in the chunk
MIN_ANCHORS = 30
#: the smallest spread of the log length ratio used (a chunk of near-identical ratios would
#: otherwise make every small difference many deviations)
MIN_SIGMA = 0.1
#: 1.4826 x MAD estimates a normal's standard deviation
MAD_TO_SD = 1.4826


@dataclass(frozen=True)
class LengthModel:
    """The expected log length ratio ``mu`` of a chunk's language pair and its spread
    ``sigma``, from ``anchors`` pairs (``mu``/``sigma`` ``None``: too few anchors)."""

    mu: float | None
    sigma: float | None
    anchors: int

    def z(self, log_ratio: np.ndarray) -> np.ndarray:
        """``(p,)`` deviations of ``log_ratio`` from ``mu`` in ``sigma``s (zeros without a
        model)."""
        if self.mu is None or self.sigma is None:
            return np.zeros(len(log_ratio))
        return (np.asarray(log_ratio, np.float64) - self.mu) / self.sigma


def log_length_ratios(src: list[str], tgt: list[str]) -> np.ndarray:
    """``(p,) float64``: ``log(units(tgt) / units(src))`` of each pair (a side of no units
    counts one)."""
    return np.array([np.log(max(length_units(t), 1) / max(length_units(s), 1))
                     for s, t in zip(src, tgt, strict=True)], np.float64)


def fit_length_model(log_ratio: np.ndarray, anchors: np.ndarray) -> LengthModel:
    """The :class:`LengthModel` of the ``anchors`` (``(p,) bool``) among ``log_ratio``."""
    r = np.asarray(log_ratio, np.float64)[np.asarray(anchors, bool)]
    if len(r) < MIN_ANCHORS:
        return LengthModel(None, None, int(len(r)))
    mu = float(np.median(r))
    sigma = max(MAD_TO_SD * float(np.median(np.abs(r - mu))), MIN_SIGMA)
    return LengthModel(mu, sigma, int(len(r)))


def coverage_penalty(z: np.ndarray, weight: float, slack: float) -> np.ndarray:
    """``(p,)``: ``weight * max(0, |z| - slack)``."""
    return weight * np.maximum(np.abs(np.asarray(z, np.float64)) - slack, 0.0)
