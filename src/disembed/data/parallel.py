"""Parallel sentence pairs: the training input of every disentangler.

A :class:`ParallelPairs` holds ``n`` aligned pairs with a language code per side
and row, so one object can mix language pairs (de-en, zh-en, ...).
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

from ..exceptions import DataError
from ..util.text import text_list
from .io import ReadReport, read_aligned, read_tsv
from .languages import normalize_language

logger = logging.getLogger(__name__)


@dataclass
class ParallelPairs:
    """``src[i]`` (language ``src_lang[i]``) translates ``tgt[i]`` (language ``tgt_lang[i]``)."""

    src: list[str]
    tgt: list[str]
    src_lang: list[str]
    tgt_lang: list[str]
    reports: list[ReadReport] = field(default_factory=list)

    def __post_init__(self) -> None:
        # a string would pass as its characters, a set in its own order (util.text.text_list)
        self.src = text_list(self.src, "ParallelPairs: src")
        self.tgt = text_list(self.tgt, "ParallelPairs: tgt")
        self.src_lang = text_list(self.src_lang, "ParallelPairs: src_lang", "language codes")
        self.tgt_lang = text_list(self.tgt_lang, "ParallelPairs: tgt_lang", "language codes")
        lengths = {len(self.src), len(self.tgt), len(self.src_lang), len(self.tgt_lang)}
        if len(lengths) != 1:
            raise DataError(
                f"parallel pairs need equal lengths; got src={len(self.src)} tgt={len(self.tgt)} "
                f"src_lang={len(self.src_lang)} tgt_lang={len(self.tgt_lang)}"
            )

    def __len__(self) -> int:
        return len(self.src)

    @property
    def languages(self) -> list[str]:
        return sorted(set(self.src_lang) | set(self.tgt_lang))

    def subset(self, index: Sequence[int] | np.ndarray) -> "ParallelPairs":
        idx = [int(i) for i in index]
        pick = lambda xs: [xs[i] for i in idx]  # noqa: E731
        return ParallelPairs(pick(self.src), pick(self.tgt), pick(self.src_lang),
                             pick(self.tgt_lang), list(self.reports))

    @classmethod
    def concat(cls, parts: Sequence["ParallelPairs"]) -> "ParallelPairs":
        out = cls([], [], [], [])
        for p in parts:
            out.src += p.src
            out.tgt += p.tgt
            out.src_lang += p.src_lang
            out.tgt_lang += p.tgt_lang
            out.reports += p.reports
        return out

    def digest(self) -> str:
        """A content hash of every pair and its languages (16 hex characters)."""
        h = hashlib.blake2b(digest_size=8)
        for row in zip(self.src, self.tgt, self.src_lang, self.tgt_lang, strict=True):
            h.update("\t".join(row).encode("utf-8") + b"\n")
        return h.hexdigest()

    def counts(self) -> dict[str, int]:
        """Pairs per language pair, e.g. ``{"de-en": 1000}``."""
        out: dict[str, int] = {}
        for a, b in zip(self.src_lang, self.tgt_lang, strict=True):
            out[f"{a}-{b}"] = out.get(f"{a}-{b}", 0) + 1
        return out


def read_parallel_tsv(
    path: str | Path, src_column: str, tgt_column: str, src_lang: str | None = None,
    tgt_lang: str | None = None, *, skip_bad: bool = False,
) -> ParallelPairs:
    """Pairs from a TSV with a header; languages default to the column names (``de``, ``deu``)."""
    src_lang = normalize_language(src_lang or src_column)
    tgt_lang = normalize_language(tgt_lang or tgt_column)
    rows, report = read_tsv(path, [src_column, tgt_column], skip_bad=skip_bad)
    n = len(rows)
    return check_pairs(ParallelPairs([r[src_column] for r in rows], [r[tgt_column] for r in rows],
                                     [src_lang] * n, [tgt_lang] * n, [report]), path, report)


def check_pairs(pairs: ParallelPairs, path: str | Path, report: ReadReport) -> ParallelPairs:
    """Refuse a file that gave no pairs; warn about duplicated pairs and pairs whose two
    sides are the same text (they teach nothing about translation)."""
    if not len(pairs.src):
        why = (f"every row was skipped ({report.skipped}, e.g. {report.reasons[0]})"
               if report.skipped else "it holds no rows after the header")
        raise DataError(f"{path}: no translation pairs to use: {why}; give a file with at "
                        "least one pair per row")
    seen: set[tuple[str, str]] = set()
    duplicates = identical = 0
    for a, b in zip(pairs.src, pairs.tgt, strict=True):
        duplicates += (a, b) in seen
        seen.add((a, b))
        identical += a.strip() == b.strip()
    if duplicates:
        logger.warning("%s: %d of %d pairs repeat an earlier pair; each copy counts again in "
                       "training (remove them, e.g. sort -u, if they are not meant to)", path,
                       duplicates, len(pairs.src))
    if identical:
        logger.warning("%s: %d of %d pairs have the same text on both sides (untranslated?); "
                       "they teach nothing about translation", path, identical, len(pairs.src))
    return pairs


def read_parallel_files(
    src_path: str | Path, tgt_path: str | Path, src_lang: str, tgt_lang: str,
    *, skip_bad: bool = False,
) -> ParallelPairs:
    """Pairs from two line-aligned plain-text files."""
    src_lang, tgt_lang = normalize_language(src_lang), normalize_language(tgt_lang)
    src, tgt, report = read_aligned(src_path, tgt_path, skip_bad=skip_bad)
    return check_pairs(ParallelPairs(src, tgt, [src_lang] * len(src), [tgt_lang] * len(src),
                                     [report]), src_path, report)
