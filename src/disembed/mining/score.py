"""Score given sentence pairs (filter an existing bitext) and search neighbours for queries.

``score_embeddings`` scores aligned pairs ``src (p, d)``, ``tgt (p, d)`` (unit rows) by
plain cosine, or by a margin whose neighbour means come from reference pools: each
source against ``tgt_pool``, each target against ``src_pool`` (by default the pairs'
own sides, i.e. margin within the bitext).
"""

from __future__ import annotations

import logging
import math
from pathlib import Path

import numpy as np

from ..data.io import read_tsv
from ..data.languages import normalize_tag
from ..encoders import Encoder
from ..exceptions import ConfigError, DataError, ShapeError
from ..methods.text_path import meaning_of_texts
from ..retrieval.knn import normalize_rows
from ..retrieval.margin import margin
from ..retrieval.search import check_finite, search
from ..util.files import atomic_write_bytes
from ..util.text import text_list

logger = logging.getLogger(__name__)

SCORE_KINDS = ("cosine", "ratio", "distance")


def score_embeddings(src: np.ndarray, tgt: np.ndarray, kind: str = "cosine", *, k: int = 4,
                     src_pool: np.ndarray | None = None, tgt_pool: np.ndarray | None = None,
                     backend: str = "exact") -> np.ndarray:
    """``(p,) float64`` scores of aligned pairs ``src (p, d)``, ``tgt (p, d)`` (unit rows)."""
    if kind not in SCORE_KINDS:
        raise ConfigError(f"score kind must be one of {SCORE_KINDS}, got {kind!r}")
    if src.shape != tgt.shape:
        raise ShapeError(f"src and tgt must be aligned (p, d) matrices, got {src.shape} and "
                         f"{tgt.shape}")
    check_finite(src=src, tgt=tgt, src_pool=src_pool, tgt_pool=tgt_pool)
    cos = np.einsum("pd,pd->p", src.astype(np.float64), tgt.astype(np.float64))
    if kind == "cosine":
        return cos
    src_pool = src if src_pool is None else src_pool
    tgt_pool = tgt if tgt_pool is None else tgt_pool
    k_t, k_s = min(k, len(tgt_pool)), min(k, len(src_pool))
    D_src, _ = search(src, tgt_pool, k_t, backend)  # (p, k) neighbours of each source
    D_tgt, _ = search(tgt, src_pool, k_s, backend)
    return margin(cos, D_src.mean(axis=1), D_tgt.mean(axis=1), kind)


def _header(path: Path) -> list[str]:
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.readline().rstrip("\r\n").split("\t")


def _check_options(threshold: float | None, src_col: str, tgt_col: str) -> None:
    if threshold is not None and not math.isfinite(threshold):
        raise ConfigError(f"threshold must be a finite number (or None), got {threshold}")
    if src_col == tgt_col:
        raise ConfigError(f"src_col and tgt_col are both {src_col!r}: every sentence would be "
                          "scored against itself; name the two columns of the pair")


def score_tsv(path: str | Path, encoder: Encoder, out: str | Path, *, src_col: str = "src",
              tgt_col: str = "tgt", kind: str = "cosine", k: int = 4,
              src_pool: list[str] | None = None, tgt_pool: list[str] | None = None,
              threshold: float | None = None, skip_bad: bool = False,
              batch_size: int = 64, model=None, src_lang: str | None = None,
              tgt_lang: str | None = None) -> int:
    """Score the pairs of a TSV (header row) and write ``score`` + its columns, file order.

    ``model`` (a fitted disentangler) scores the meaning parts instead of the raw
    embeddings; ``src_lang``/``tgt_lang`` name each side's language (``None``: the model
    identifies it sentence by sentence, among the languages that write the sentence's
    script, :func:`~disembed.methods.routing.tags_with_scripts`), for the pools too.
    Returns the number of rows written (those at or above ``threshold`` when given).
    """
    src_lang, tgt_lang = normalize_tag(src_lang), normalize_tag(tgt_lang)  # und/mul: none
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: no such file")
    _check_options(threshold, src_col, tgt_col)
    src_pool, tgt_pool = (None if pool is None else text_list(pool, f"score_tsv: {name}")
                          for pool, name in ((src_pool, "src_pool"), (tgt_pool, "tgt_pool")))
    if path.stat().st_size == 0:
        raise DataError(f"{path}: the file is empty; expected a header row naming the columns "
                        f"{src_col!r} and {tgt_col!r}, then one pair per line")
    header = [c for c in _header(path) if c != "score"]
    columns = header + [c for c in (src_col, tgt_col) if c not in header]  # missing: an error
    rows, report = read_tsv(path, columns, skip_bad=skip_bad,
                            required_nonempty=[src_col, tgt_col])
    if not rows:
        why = (f"every row was skipped ({report.skipped}, e.g. {report.reasons[0]})"
               if report.skipped else "it holds only the header row")
        raise DataError(f"{path}: no pairs to score: {why}; give one pair per line after the "
                        "header")
    for name, pool in (("source", src_pool), ("target", tgt_pool)):
        if pool is not None and not pool:
            raise DataError(f"the {name} pool has no sentences; give a file with at least one "
                            "non-empty line, or leave the pool out to use the pairs' own "
                            f"{name} sentences")
    if kind == "cosine" and (src_pool is not None or tgt_pool is not None):
        logger.warning("the reference pools are used only by the margins (--score ratio or "
                       "distance); --score cosine ignores them")

    def embed(texts: list[str], language: str | None) -> np.ndarray:
        vectors = encoder.encode(texts, batch_size=batch_size)
        if model is None:
            return normalize_rows(vectors)
        # an untagged text is routed by its script, as SavedModel.meaning does
        return normalize_rows(meaning_of_texts(model, vectors, texts, language))

    src = embed([r[src_col] for r in rows], src_lang)
    tgt = embed([r[tgt_col] for r in rows], tgt_lang)
    pools = {name: embed(p, lang) if p else None
             for name, p, lang in (("s", src_pool, src_lang), ("t", tgt_pool, tgt_lang))}
    scores = score_embeddings(src, tgt, kind, k=k, src_pool=pools["s"], tgt_pool=pools["t"])
    lines = ["\t".join(["score", *columns]) + "\n"]
    for score, row in zip(scores, rows, strict=True):
        if threshold is None or score >= threshold:
            lines.append("\t".join([f"{score:.6f}", *(row[c] for c in columns)]) + "\n")
    atomic_write_bytes(Path(out), [line.encode("utf-8") for line in lines])
    return len(lines) - 1
