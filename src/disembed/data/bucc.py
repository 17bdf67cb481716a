"""BUCC 2018 "sample" pools and gold (``<data>/bucc2018/<xx>-en/``).

``<xx>-en.sample.{xx,en}`` hold ``id<TAB>sentence`` lines; ``<xx>-en.sample.gold`` holds
``xx_id<TAB>en_id`` true pairs.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..exceptions import DataError
from ..util.text import is_blank
from .io import read_lines
from .paths import resolve_data_dir

BUCC_PAIRS = ("de-en", "fr-en", "zh-en")


@dataclass
class BuccData:
    """The two pools of one pair and the gold as id pairs into them."""

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
        if not tab or is_blank(text):
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


def bucc_texts(data_dir: str | Path | None = None) -> list[str]:
    """Every pool sentence of every pair present (for keeping BUCC out of training)."""
    root = Path(resolve_data_dir(data_dir)) / "bucc2018"
    return [line.split("\t", 1)[-1] for path in sorted(root.glob("*/*.sample.??"))
            for line in read_lines(path)]
