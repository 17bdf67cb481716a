"""Score given sentence pairs (filter an existing bitext).

``score_embeddings`` scores aligned pairs ``src (p, d)``, ``tgt (p, d)`` (unit rows) by
plain cosine, or by a margin whose neighbour means come from reference pools: each
source against ``tgt_pool``, each target against ``src_pool`` (by default the pairs'
own sides, i.e. margin within the bitext).

``score_tsv`` reads a bitext as :func:`~disembed.data.bitext.read_bitext` does (a TSV with or
without a header, two line-aligned files, ``.gz``, ``-``) and writes ``score`` + the input
columns. ``--score cosine`` streams: chunk, embed, write, next, in constant memory. The
margins need every pair's neighbours among the pools, so they hold the pairs (as the old
reader did) but embed and search each distinct sentence once.
"""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Callable, Iterable, Iterator, Sequence

import numpy as np

from ..data.bitext import BitextChunk, read_bitext
from ..data.languages import normalize_tag
from ..encoders import Encoder
from ..exceptions import ConfigError, DataError, ShapeError
from ..methods.text_path import meaning_of_texts
from ..retrieval.knn import normalize_rows
from ..retrieval.margin import margin
from ..retrieval.search import check_finite, search
from ..util.dedup import Distinct, distinct
from ..util.files import atomic_write_bytes
from ..util.text import is_blank, text_list

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


Embed = Callable[[list[str], "str | None"], np.ndarray]


def _check_options(threshold: float | None, src_col: str, tgt_col: str) -> None:
    if threshold is not None and not math.isfinite(threshold):
        raise ConfigError(f"threshold must be a finite number (or None), got {threshold}")
    if str(src_col) == str(tgt_col):
        raise ConfigError(f"src_col and tgt_col are both {src_col!r}: every sentence would be "
                          "scored against itself; name the two columns of the pair")


def _where(inputs: Sequence[str | Path], i: int = 0) -> str:
    return "standard input" if str(inputs[i]) == "-" else str(inputs[i])


def _drop_blank(chunk: BitextChunk, inputs: Sequence[str | Path], skip_bad: bool
                ) -> BitextChunk:
    """``chunk`` without its pairs with an empty side (an error unless ``skip_bad``)."""
    blank = [is_blank(s) or is_blank(t) for s, t in zip(chunk.src, chunk.tgt, strict=True)]
    if not any(blank):
        return chunk
    keep = [i for i, b in enumerate(blank) if not b]
    bad = blank.index(True)
    side = "source" if is_blank(chunk.src[bad]) else "target"
    msg = (f"{_where(inputs, int(side == 'target' and len(inputs) == 2))}:{chunk.lines[bad]}: "
           f"the {side} sentence is empty; every pair needs two sentences: fix the row or "
           "skip such lines (skip_bad / --skip-bad-lines)")
    if not skip_bad:
        raise DataError(msg)
    logger.warning("skipped %d pair(s) with an empty side, e.g. %s", len(chunk) - len(keep), msg)
    return BitextChunk(chunk.index, chunk.start, [chunk.lines[i] for i in keep],
                       [chunk.src[i] for i in keep], [chunk.tgt[i] for i in keep],
                       [chunk.rows[i] for i in keep], chunk.header)


def _columns(chunk: BitextChunk, src_col: str, tgt_col: str, aligned: bool
             ) -> tuple[list[str], list[int]]:
    """The output's column names (after ``score``) and the row indices they come from: a
    header's columns but an old ``score``; without a header ``src``/``tgt`` for the sentence
    columns (two files: the two files) and ``colN`` for the others."""
    if chunk.header is not None:
        keep = [i for i, c in enumerate(chunk.header) if c != "score"]
        return [chunk.header[i] for i in keep], keep
    if aligned:
        return ["src", "tgt"], [0, 1]
    # as the reader resolves them: numbers are 1-based, the default names the first two
    s = int(src_col) - 1 if src_col.isdigit() else 0
    t = int(tgt_col) - 1 if tgt_col.isdigit() else 1
    width = len(chunk.rows[0])
    names = ["src" if i == s else "tgt" if i == t else f"col{i + 1}" for i in range(width)]
    return names, list(range(width))


def _row(score: float, cols: list[str], keep: list[int]) -> bytes:
    return ("\t".join([f"{score:.6f}", *(cols[i] if i < len(cols) else "" for i in keep)])
            + "\n").encode("utf-8")


def _embed_distinct(texts: list[str], embed: Embed, language: str | None
                    ) -> tuple[np.ndarray, Distinct]:
    """Each distinct text of ``texts`` embedded once: ``(u, d)`` rows and the map back."""
    d = distinct(texts)
    return embed(d.texts, language), d


def _cosine_lines(chunks: Iterable[BitextChunk], embed: Embed, langs: tuple, threshold,
                  columns: Callable[[BitextChunk], tuple], counts: dict) -> Iterator[bytes]:
    """Stream: the output rows of each chunk, as it comes (header first)."""
    keep: list[int] | None = None
    for chunk in chunks:
        if keep is None:
            names, keep = columns(chunk)
            yield ("\t".join(["score", *names]) + "\n").encode("utf-8")
        S, ds = _embed_distinct(chunk.src, embed, langs[0])
        T, dt = _embed_distinct(chunk.tgt, embed, langs[1])
        scores = score_embeddings(ds.expand(S), dt.expand(T), "cosine")
        counts["pairs"] += len(chunk)
        for score, cols in zip(scores, chunk.rows, strict=True):
            if threshold is None or score >= threshold:
                counts["written"] += 1
                yield _row(score, cols, keep)


def _margin_scores(src: list[str], tgt: list[str], embed: Embed, langs: tuple, pools: tuple,
                   kind: str, k: int) -> np.ndarray:
    """Every pair's margin; each distinct sentence (of the pairs and the pools) embedded and
    searched once. A default pool is the pairs' distinct sentences of that side."""
    S, ds = _embed_distinct(src, embed, langs[0])
    T, dt = _embed_distinct(tgt, embed, langs[1])
    src_pool = S if pools[0] is None else _embed_distinct(pools[0], embed, langs[0])[0]
    tgt_pool = T if pools[1] is None else _embed_distinct(pools[1], embed, langs[1])[0]
    check_finite(src=S, tgt=T, src_pool=src_pool, tgt_pool=tgt_pool)
    cos = score_embeddings(ds.expand(S), dt.expand(T), "cosine")
    D_src, _ = search(S, tgt_pool, min(k, len(tgt_pool)), "exact")  # one row per distinct
    D_tgt, _ = search(T, src_pool, min(k, len(src_pool)), "exact")
    return margin(cos, ds.expand(D_src.mean(axis=1)), dt.expand(D_tgt.mean(axis=1)), kind)


def _margin_lines(chunks: Iterable[BitextChunk], embed: Embed, langs: tuple, threshold,
                  columns: Callable[[BitextChunk], tuple], counts: dict, pools: tuple,
                  kind: str, k: int) -> Iterator[bytes]:
    src, tgt, rows, first = [], [], [], None
    for chunk in chunks:
        first = chunk if first is None else first
        src += chunk.src
        tgt += chunk.tgt
        rows += chunk.rows
    if first is None:
        return
    scores = _margin_scores(src, tgt, embed, langs, pools, kind, k)
    names, keep = columns(first)
    yield ("\t".join(["score", *names]) + "\n").encode("utf-8")
    counts["pairs"] = len(rows)
    for score, cols in zip(scores, rows, strict=True):
        if threshold is None or score >= threshold:
            counts["written"] += 1
            yield _row(score, cols, keep)


def _check_pools(kind: str, src_pool, tgt_pool) -> tuple:
    src_pool, tgt_pool = (None if pool is None else text_list(pool, f"score_tsv: {name}")
                          for pool, name in ((src_pool, "src_pool"), (tgt_pool, "tgt_pool")))
    for name, pool in (("source", src_pool), ("target", tgt_pool)):
        if pool is not None and not pool:
            raise DataError(f"the {name} pool has no sentences; give a file with at least one "
                            "non-empty line, or leave the pool out to use the pairs' own "
                            f"{name} sentences")
    if kind == "cosine" and (src_pool is not None or tgt_pool is not None):
        logger.warning("the reference pools are used only by the margins (--score ratio or "
                       "distance); --score cosine ignores them")
    return src_pool, tgt_pool


def _no_pairs(inputs: Sequence[str | Path], skip_bad: bool, empty: bool = False
              ) -> DataError:
    names = " and ".join(_where(inputs, i) for i in range(len(inputs)))
    why = ("the file is empty" if empty else
           "no pairs to score: every row was skipped (see the warnings logged)" if skip_bad
           else "no pairs to score: it holds only the header row, or no line at all")
    return DataError(f"{names}: {why}; expected one pair per line: a TSV (with or without a "
                     "header row naming the columns) or two line-aligned files")


def score_tsv(path: str | Path | Sequence[str | Path], encoder: Encoder, out: str | Path, *,
              src_col: str = "src", tgt_col: str = "tgt", kind: str = "cosine", k: int = 4,
              src_pool: list[str] | None = None, tgt_pool: list[str] | None = None,
              threshold: float | None = None, skip_bad: bool = False,
              batch_size: int = 64, model=None, src_lang: str | None = None,
              tgt_lang: str | None = None, header: str = "auto",
              chunk_size: int = 10000) -> int:
    """Score the pairs of a bitext and write ``score`` + its columns, in input order.

    ``path``: a TSV (``header``: ``"auto"`` finds a header row by ``src_col``/``tgt_col``;
    columns may be 1-based numbers), or two line-aligned files; ``.gz`` and ``-`` (stdin)
    too (:func:`~disembed.data.bitext.read_bitext`). ``kind="cosine"`` streams
    ``chunk_size`` pairs at a time; each distinct sentence of a chunk (of the whole input for
    the margins) is embedded once. ``model`` (a fitted disentangler) scores the meaning
    parts instead of the raw embeddings; ``src_lang``/``tgt_lang`` name each side's language
    (``None``: the model identifies it sentence by sentence, among the languages that write
    the sentence's script, :func:`~disembed.methods.routing.tags_with_scripts`), for the
    pools too. Returns the number of rows written (those at or above ``threshold`` when
    given); on an error ``out`` is left untouched.
    """
    src_lang, tgt_lang = normalize_tag(src_lang), normalize_tag(tgt_lang)  # und/mul: none
    inputs = [path] if isinstance(path, (str, Path)) else list(path)
    _check_options(threshold, src_col, tgt_col)
    if kind not in SCORE_KINDS:
        raise ConfigError(f"score kind must be one of {SCORE_KINDS}, got {kind!r}")
    pools = _check_pools(kind, src_pool, tgt_pool)
    src_col, tgt_col = str(src_col), str(tgt_col)
    if len(inputs) == 1 and str(inputs[0]) != "-" and Path(inputs[0]).is_file() \
            and Path(inputs[0]).stat().st_size == 0:
        raise _no_pairs(inputs, skip_bad, empty=True)

    def embed(texts: list[str], language: str | None) -> np.ndarray:
        vectors = encoder.encode(texts, batch_size=batch_size)
        if model is None:
            return normalize_rows(vectors)
        # an untagged text is routed by its script, as SavedModel.meaning does
        return normalize_rows(meaning_of_texts(model, vectors, texts, language))

    chunks = (_drop_blank(c, inputs, skip_bad)
              for c in read_bitext(inputs, header=header, src_col=src_col, tgt_col=tgt_col,
                                   chunk_size=chunk_size, skip_bad=skip_bad, keep_rows=True))
    chunks = (c for c in chunks if len(c))
    counts = {"pairs": 0, "written": 0}
    columns = lambda chunk: _columns(chunk, src_col, tgt_col, len(inputs) == 2)  # noqa: E731
    langs = (src_lang, tgt_lang)
    lines = (_cosine_lines(chunks, embed, langs, threshold, columns, counts)
             if kind == "cosine" else
             _margin_lines(chunks, embed, langs, threshold, columns, counts, pools, kind, k))
    atomic_write_bytes(Path(out), _checked(lines, counts, inputs, skip_bad))
    return counts["written"]


def _checked(lines: Iterator[bytes], counts: dict, inputs, skip_bad: bool
             ) -> Iterator[bytes]:
    """``lines``, then an error (the output left untouched) when no pair was read."""
    yield from lines
    if not counts["pairs"]:
        raise _no_pairs(inputs, skip_bad)
