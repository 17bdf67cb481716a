"""The meaning cutoff: a calibrated score, a threshold chosen on labelled pairs, a default.

**The score.** A pair's ``score`` is the ratio margin of its meaning cosine (Artetxe &
Schwenk 2019, as LASER filtering uses it):

    margin(s, t) = cos(s, t) / (mean_{y in NN_k(s)} cos(s, y) / 2
                                + mean_{x in NN_k(t)} cos(x, t) / 2)

with the neighbours taken among the distinct sentences of the pair's chunk, less the
length-coverage penalty of :mod:`.coverage` (``0.1 * max(0, |z| - 0.5)``, ``z`` the
pair's log length ratio in robust deviations from its chunk's language pair), which
the margin needs because it gives a partial translation back most of what its cosine
loses. Dividing by how close each side is to its nearest other sentences cancels what
shifts all cosines of a language pair or a view together (one language pair's cosines run
higher than another's). How far one threshold serves several pairs is measured in
docs/filtering.md ("Calibration").

**A threshold from labelled pairs** (:func:`choose_threshold`): the one of highest F1 for
the "keep" label among the candidates (every distinct score of a pair the rules keep), with
precision and recall at each; a pair the rules drop counts as dropped at every threshold.

**The default** (:data:`DEFAULT_THRESHOLD`) was chosen that way on the benchmark's
validation pairs; :data:`DEFAULT_EXPECTED` records the precision and recall it gave there.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..exceptions import DataError

#: chosen on validation data: the F1-best threshold of benchmarks/bench_filter.py's
#: validation split (e5-small, mean-centering, de/ru/zh/ar-en, docs/filtering.md), with
#: the length-coverage term of :mod:`.coverage` (the margin alone: 0.947)
DEFAULT_THRESHOLD = 0.852
#: precision and recall of "keep" at :data:`DEFAULT_THRESHOLD` on that validation split
#: (its test split gave 0.933 and 0.965)
DEFAULT_EXPECTED = {"precision": 0.94, "recall": 0.96,
                    "measured_on": "e5-small + mean-centering, Tatoeba de/ru/zh/ar-en with "
                                   "planted noise, docs/filtering.md"}


@dataclass(frozen=True)
class Candidate:
    threshold: float
    precision: float
    recall: float
    f1: float
    kept: int


@dataclass(frozen=True)
class ThresholdChoice:
    """The chosen ``threshold`` and the table of every candidate tried (``candidates``)."""

    threshold: float
    chosen: Candidate
    candidates: list[Candidate] = field(default_factory=list)

    def table(self, rows: int = 15) -> list[Candidate]:
        """At most ``rows`` candidates spread over the table, the chosen one included."""
        if len(self.candidates) <= rows:
            return list(self.candidates)
        picks = np.unique(np.linspace(0, len(self.candidates) - 1, rows).round().astype(int))
        out = [self.candidates[i] for i in picks]
        if self.chosen not in out:
            out.append(self.chosen)
        return sorted(out, key=lambda c: c.threshold)


def _at(threshold: float, scores: np.ndarray, labels: np.ndarray, ok: np.ndarray) -> Candidate:
    kept = ok & (scores >= threshold)
    tp = int((kept & labels).sum())
    precision = tp / max(int(kept.sum()), 1)
    recall = tp / max(int(labels.sum()), 1)
    f1 = 2 * precision * recall / (precision + recall) if tp else 0.0
    return Candidate(float(threshold), precision, recall, f1, int(kept.sum()))


def choose_threshold(scores: np.ndarray, labels: np.ndarray, rules_ok: np.ndarray
                     ) -> ThresholdChoice:
    """The threshold of highest F1 for ``labels`` (1: keep) among every distinct score of a
    pair the rules keep (``rules_ok``), ties to the higher threshold (module docstring)."""
    scores = np.asarray(scores, np.float64)
    labels = np.asarray(labels).astype(bool)
    ok = np.asarray(rules_ok, bool)
    if not labels.any() or labels.all():
        raise DataError(f"the labelled pairs hold {int(labels.sum())} to keep and "
                        f"{int((~labels).sum())} to drop; a threshold needs some of each")
    values = np.unique(scores[ok & np.isfinite(scores)])
    if not len(values):
        raise DataError("the rules drop every labelled pair, so no meaning threshold can be "
                        "chosen on them; check the pairs' languages (--src-lang/--tgt-lang)")
    candidates = [_at(t, scores, labels, ok) for t in values]
    best = max(candidates, key=lambda c: (c.f1, c.threshold))
    return ThresholdChoice(best.threshold, best, candidates)
