"""BUCC 2018 mining evaluation on the public "sample" pools with gold.

Data: ``<data>/bucc2018/<xx>-en/<xx>-en.sample.{xx,en}`` (``id<TAB>sentence``) and
``<xx>-en.sample.gold`` (``xx_id<TAB>en_id``). Protocol (Artetxe & Schwenk, 2019;
LASER ``tasks/bucc``): mine candidates over the two whole pools (``max-score``
retrieval, ratio margin, k=4), sort them by score, and report precision, recall
and F1 against the gold at the threshold that maximises F1 *on that same gold*:
the threshold is fitted on the data it is scored on, as in the papers that report
"F1 on BUCC train/sample gold". Published LASER F1 (train gold): de 95.4, fr 92.4,
zh 91.7.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from ..data.io import read_lines
from ..data.paths import resolve_data_dir
from ..exceptions import DataError
from ..retrieval.margin import candidates
from ..retrieval.search import search_both
from .mine import MineConfig

logger = logging.getLogger(__name__)

BUCC_PAIRS = ("de-en", "fr-en", "zh-en")
LASER_F1 = {"de-en": 95.4, "fr-en": 92.4, "zh-en": 91.7}


@dataclass
class BuccData:
    """The two pools of one pair and the gold as index pairs into them."""

    pair: str
    src_ids: list[str]
    src: list[str]
    tgt_ids: list[str]
    tgt: list[str]
    gold: set[tuple[str, str]]


def _pool(path: Path) -> tuple[list[str], list[str]]:
    ids, texts = [], []
    for lineno, line in enumerate(read_lines(path), start=1):
        ident, tab, text = line.partition("\t")
        if not tab or not text.strip():
            raise DataError(f"{path}:{lineno}: expected 'id<TAB>sentence', got {line[:60]!r}")
        ids.append(ident)
        texts.append(text)
    return ids, texts


def load_bucc(pair: str, data_dir: str | Path | None = None) -> BuccData:
    """Read the sample pools and gold of ``pair`` (``de-en``, ``fr-en`` or ``zh-en``)."""
    if pair not in BUCC_PAIRS:
        raise DataError(f"BUCC pair must be one of {BUCC_PAIRS}, got {pair!r}")
    folder = Path(resolve_data_dir(data_dir)) / "bucc2018" / pair
    xx = pair.split("-")[0]
    src_ids, src = _pool(folder / f"{pair}.sample.{xx}")
    tgt_ids, tgt = _pool(folder / f"{pair}.sample.en")
    gold = {tuple(line.split("\t")[:2]) for line in read_lines(folder / f"{pair}.sample.gold")}
    return BuccData(pair, src_ids, src, tgt_ids, tgt, gold)  # type: ignore[arg-type]


@dataclass
class BuccResult:
    """Scores at the F1-optimal threshold, plus the candidates for plotting."""

    pair: str
    precision: float
    recall: float
    f1: float
    threshold: float
    candidates: int
    gold: int

    def to_dict(self) -> dict:
        return asdict(self)


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


def evaluate_bucc(data: BuccData, embed: Callable[[list[str], str], np.ndarray],
                  config: MineConfig | None = None
                  ) -> tuple[BuccResult, np.ndarray, np.ndarray]:
    """Mine ``data`` with ``embed(texts, language) -> (n, d) unit rows`` and score it.

    Returns the result, and the candidates' ``score (p,)`` and ``is_gold (p,)`` (for plots).
    """
    cfg = config or MineConfig()
    xx = data.pair.split("-")[0]
    x, y = embed(data.src, xx), embed(data.tgt, "en")
    lists = search_both(x, y, cfg.k, cfg.backend, **cfg.backend_options)
    score, src, tgt = candidates(*lists, mode=cfg.mode, kind=cfg.margin)
    is_gold = np.array([(data.src_ids[s], data.tgt_ids[t]) in data.gold
                        for s, t in zip(src.tolist(), tgt.tolist(), strict=True)], dtype=bool)
    p, r, f1, thr = best_threshold(score, is_gold, len(data.gold))
    result = BuccResult(data.pair, p, r, f1, thr, len(score), len(data.gold))
    logger.info("BUCC %s: P %.3f R %.3f F1 %.3f at threshold %.4f (%d candidates)", data.pair,
                p, r, f1, thr, len(score))
    return result, score, is_gold
