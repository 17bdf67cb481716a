"""BUCC 2018 mining on the public "sample" pools with gold, as a registered task.

Protocol (Artetxe & Schwenk, 2019; LASER ``tasks/bucc``): mine candidates over the two
whole pools (``max-score`` retrieval, ratio margin, k=4), sort them by score, and report
precision, recall and F1 against the gold at the threshold that maximises F1 *on that
same gold*: the threshold is fitted on the data it is scored on, as in the papers that
report "F1 on BUCC train/sample gold". Published LASER F1 (train gold): de 95.4, fr 92.4,
zh 91.7. The pools are never subsampled (the gold would not survive it): ``max_items``
does not apply, and the pools are large (de 32.6k x 40.4k sentences).

Each part (meaning, language) is mined separately, its rows scaled to unit length.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from ..data.bucc import BUCC_PAIRS, bucc_texts, load_bucc
from ..exceptions import ConfigError
from ..retrieval.knn import normalize_rows
from ..retrieval.margin import MARGINS, MODES, candidates, check_choice
from ..retrieval.search import check_backend, search_both
from .base import MetricName, PairedSubset, Task, TaskMetadata, TaskOptions

logger = logging.getLogger(__name__)

LASER_F1 = {"de-en": 95.4, "fr-en": 92.4, "zh-en": 91.7}


@dataclass(frozen=True)
class BuccSubset(PairedSubset):
    """One pair's pools (``texts_a``: the xx pool, ``texts_b``: the English pool) and gold."""

    src_ids: tuple[str, ...] = ()
    tgt_ids: tuple[str, ...] = ()
    gold_pairs: frozenset = frozenset()


def best_threshold(score: np.ndarray, is_gold: np.ndarray, n_gold: int
                   ) -> tuple[float, float, float, float]:
    """``(precision, recall, f1, threshold)`` maximising F1 over thresholds on ``score``.

    ``score (p,)`` sorted best first; ``is_gold (p,)`` marks candidates in the gold.
    A threshold keeps every candidate scoring at least it, so cuts fall between
    distinct scores only.
    """
    if not len(score):
        return 0.0, 0.0, 0.0, float("nan")
    tp = np.cumsum(is_gold)
    kept = np.arange(1, len(score) + 1)
    last_of_value = np.append(score[1:] != score[:-1], True)  # cut after each distinct score
    precision, recall = tp / kept, tp / max(n_gold, 1)
    f1 = np.where(tp > 0, 2 * precision * recall / np.maximum(precision + recall, 1e-12), 0.0)
    f1 = np.where(last_of_value, f1, -1.0)
    i = int(np.argmax(f1))
    return float(precision[i]), float(recall[i]), float(max(f1[i], 0.0)), float(score[i])


@dataclass(frozen=True)
class BuccOptions(TaskOptions):
    """The pairs and the mining settings (LASER's by default; see :mod:`disembed.retrieval`)."""

    pairs: tuple[str, ...] = BUCC_PAIRS
    k: int = 4
    margin: str = "ratio"
    mode: str = "max-score"
    backend: str = "exact"
    recall: float = 0.98


class BuccTask(Task):
    """BUCC 2018 sample: F1 of margin-based mining; see the module docstring.

    Args:
        pairs: language pairs (default all three present in the data).
        k, margin, mode, backend: the mining settings (LASER's by default; see
            :mod:`disembed.retrieval`).
    """

    metadata = TaskMetadata(
        name="bucc",
        description="BUCC 2018 sample: F1 of margin-based parallel-sentence mining",
        reference="Zweigenbaum et al. 2018 (BUCC shared task); Artetxe & Schwenk 2019 "
        "(margin mining); data: jcyk/MSE-AMR bucc/downloaded",
        data_folder="bucc2018",
        subset_kind="pair",
        metrics=("precision", "recall", "f1"),
        main_metric="f1",
        main_subset="avg:bucc",
        eval_set="bucc2018",
        label="BUCC 2018 (sample split)",
        type="BitextMining",
        hub_task="sentence-similarity",
        dataset=None,  # the sample split with its gold is on no Hub data set we know of
        main_score="f1",
        metric_names={
            "precision": MetricName("precision", "precision", "mining precision"),
            "recall": MetricName("recall", "recall", "mining recall"),
            "f1": MetricName("f1", "f1", "mining F1 at the best threshold on the gold"),
        },
    )
    Options = BuccOptions

    @classmethod
    def texts(cls, data_dir: Path) -> list[str]:
        return bucc_texts(data_dir)

    def __init__(self, pairs: Sequence[str] = BUCC_PAIRS, *, k: int = 4, margin: str = "ratio",
                 mode: str = "max-score", backend: str = "exact", max_items: int | None = None,
                 seed: int = 0, data_dir: str | None = None, recall: float = 0.98) -> None:
        super().__init__(max_items=None, seed=seed, data_dir=data_dir)
        unknown = [p for p in pairs if p not in BUCC_PAIRS]
        if unknown:
            raise ConfigError(f"unknown BUCC pair(s) {unknown}; choose from {BUCC_PAIRS}")
        if k < 1:
            raise ConfigError(f"BUCC k must be >= 1; got {k}")
        check_choice("margin", margin, MARGINS)
        check_choice("mode", mode, MODES)
        check_backend(backend)
        if max_items is not None:
            logger.info("bucc: max_items=%s ignored; the pools are scored whole", max_items)
        if not 0.0 < recall <= 1.0:
            raise ConfigError(f"BUCC recall target must be in (0, 1] (approximate backends); "
                              f"got {recall}")
        self.pairs, self.k, self.margin, self.mode, self.backend = (
            list(pairs), int(k), margin, mode, backend)
        self.recall = float(recall)

    def options(self) -> dict:
        return {"pairs": self.pairs, "k": self.k, "margin": self.margin, "mode": self.mode,
                "backend": self.backend, "recall": self.recall}

    def subsample(self, subset: PairedSubset) -> PairedSubset:
        return subset  # the gold only holds on whole pools

    def load_subsets(self) -> list[PairedSubset]:
        out: list[PairedSubset] = []
        for pair in self.pairs:
            data = load_bucc(pair, self.data_dir)
            out.append(BuccSubset(pair, pair.split("-")[0], "en", data.src, data.tgt, None,
                                  tuple(data.src_ids), tuple(data.tgt_ids),
                                  frozenset(data.gold)))
        return out

    def mine(self, subset: BuccSubset, a: np.ndarray, b: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray]:
        """Candidates of one pair: ``score (p,)`` best first and ``is_gold (p,)``."""
        lists = search_both(normalize_rows(a), normalize_rows(b), self.k, self.backend,
                            recall=self.recall)
        score, src, tgt = candidates(*lists, mode=self.mode, kind=self.margin)
        is_gold = np.array([(subset.src_ids[s], subset.tgt_ids[t]) in subset.gold_pairs
                            for s, t in zip(src.tolist(), tgt.tolist(), strict=True)], dtype=bool)
        return score, is_gold

    def score_subset(self, subset: PairedSubset, a: np.ndarray, b: np.ndarray
                     ) -> tuple[dict[str, float], dict[str, np.ndarray]]:
        score, is_gold = self.mine(subset, a, b)  # type: ignore[arg-type] (a BuccSubset)
        p, r, f1, threshold = best_threshold(score, is_gold, len(subset.gold_pairs))
        logger.info("BUCC %s: P %.3f R %.3f F1 %.3f at threshold %.4f (%d candidates)",
                    subset.name, p, r, f1, threshold, len(score))
        return {"precision": p, "recall": r, "f1": f1}, {}

    def average_groups(self, subsets: list[str]) -> dict[str, list[str]]:
        return {"bucc": list(subsets)}
