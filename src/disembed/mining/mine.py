"""Mine translation pairs from two sentence files, end to end.

``mine_files`` indexes both files (:mod:`.collection`), embeds them chunk by chunk
into memory-mapped matrices in ``run_dir`` (:mod:`.embed`, resumable), optionally
through a disentangler's meaning view, searches k-NN in both directions
(:mod:`.search`), scores candidates with a margin (:mod:`.margin`), keeps those
above a threshold and/or the top N, and writes a TSV
``score  src  tgt  src_id  tgt_id``, best first, one line per distinct sentence
pair, atomically. Each distinct sentence of a side is embedded and searched once
(:func:`.embed.embed_distinct`): a line repeated a thousand times is one candidate, and a
mined pair names the first line of each of its texts. Memory: the two ``(n, d)``
matrices stay on disk; in memory are one search block, the k-NN lists ``(n + m, k)``,
the candidate arrays and one dict entry per distinct sentence.
"""

from __future__ import annotations

import hashlib
import logging
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Literal, Sequence

import numpy as np

from ..data.languages import normalize_tag
from ..encoders import Encoder
from ..exceptions import ConfigError, DataError
from ..methods.text_path import meaning_of_texts
from ..retrieval.margin import MARGINS, MODES, Margin, Mode, candidates, check_choice, select
from ..retrieval.search import check_backend, search, search_both_using
from ..util.dedup import Distinct
from ..util.files import atomic_write_bytes
from ..util.locks import folder_lock
from .collection import Collection, Format
from .distinct_search import line_matches
from .embed import embed_distinct
from .inputs import gather_inputs

logger = logging.getLogger(__name__)


@dataclass
class MineConfig:
    """How candidates are found, scored and kept.

    Args:
        k: neighbours per sentence for the margin and the candidates.
        margin: ``ratio``, ``distance`` or ``absolute``.
        mode: ``forward``, ``backward``, ``max-score`` or ``intersection``.
        threshold: keep pairs scoring at least this (``None``: no threshold).
        top: keep at most this many pairs (``None``: all).
        backend: ``auto`` (exact up to :data:`~disembed.retrieval.search.EXACT_UP_TO`
            products; above, whichever of exact and ``approx`` is measured cheaper,
            :mod:`~disembed.retrieval.auto`), ``exact`` (bfloat16 where faster, exact either way),
            ``exact-fp32``, ``exact-bf16``, ``approx`` / ``approx-pq`` (faiss IVF / IVF-PQ,
            nprobe chosen for ``backend_options["recall"]``, default 0.98), ``faiss-flat``,
            ``faiss-ivf`` or ``faiss-hnsw`` (hand-set parameters).
        backend_options: keyword options of the backend (block sizes, nprobe, ...).
        chunk: sentences per embedded (and resumable) chunk.
    """

    k: int = 4
    margin: Margin = "ratio"
    mode: Mode = "max-score"
    threshold: float | None = None
    top: int | None = None
    backend: str = "auto"
    backend_options: dict[str, Any] = field(default_factory=dict)
    chunk: int = 16384

    def __post_init__(self) -> None:
        check_choice("margin", self.margin, MARGINS)
        check_choice("mode", self.mode, MODES)
        check_backend(self.backend)
        if self.k < 1:
            raise ConfigError(f"k must be >= 1, got {self.k}")
        if self.threshold is not None and not math.isfinite(self.threshold):
            raise ConfigError(f"threshold must be a finite number (or None for no threshold), "
                              f"got {self.threshold}")
        if self.top is not None and self.top < 0:
            raise ConfigError(f"top must be >= 0, got {self.top}")
        if self.chunk < 1:
            raise ConfigError(f"chunk must be >= 1, got {self.chunk}")


@dataclass
class Mined:
    """Mined pairs (best first): ``score (p,)``, ``src (p,)``, ``tgt (p,)`` row indices
    (from :func:`mine_files`: the first row holding each text).
    ``k``: the neighbours used (the asked ``k`` clamped to the smaller side); ``written``:
    the lines :func:`mine_files` wrote (repeated sentence pairs dropped), ``None`` before."""

    score: np.ndarray
    src: np.ndarray
    tgt: np.ndarray
    seconds: dict[str, float] = field(default_factory=dict)
    k: int = 0
    written: int | None = None
    backend: str = ""

    def __len__(self) -> int:
        return len(self.score)


@dataclass(frozen=True)
class Searched:
    """What :func:`search_files` wrote: ``queries`` x ``neighbours`` = ``rows`` lines."""

    queries: int
    neighbours: int
    rows: int


def mine_embeddings(x: np.ndarray, y: np.ndarray, config: MineConfig | None = None) -> Mined:
    """Mine pairs between unit-row matrices ``x (n, d)`` and ``y (m, d)`` (arrays or memmaps)."""
    cfg = config or MineConfig()
    x, y = (side if isinstance(side, np.ndarray) else np.asarray(side, np.float32)
            for side in (x, y))
    for name, side in (("x", x), ("y", y)):
        if len(side) == 0:
            raise DataError(f"{name} has no rows: there is nothing to mine (give at least one "
                            "embedding on each side)")
    k = min(cfg.k, len(x), len(y))
    if k < cfg.k:
        logger.warning("k=%d but the smaller side has %d sentences: k=%d neighbours are used",
                       cfg.k, min(len(x), len(y)), k)
    t0 = time.perf_counter()
    lists, backend = search_both_using(x, y, k, cfg.backend, **cfg.backend_options)
    t1 = time.perf_counter()
    score, src, tgt = candidates(*lists, mode=cfg.mode, kind=cfg.margin)
    defined = np.isfinite(score)  # 0/0: zero rows have no direction, so no margin
    if not defined.all():
        logger.warning("%d candidate pairs have no margin (all-zero embeddings): not mined",
                       int((~defined).sum()))
        score, src, tgt = score[defined], src[defined], tgt[defined]
    keep = select(score, threshold=cfg.threshold, top=cfg.top)
    return Mined(score[keep], src[keep], tgt[keep],
                 {"knn": t1 - t0, "margin": time.perf_counter() - t1}, k=k, backend=backend)


def meaning_transform(model, language: str | None
                      ) -> Callable[[np.ndarray, list[str]], np.ndarray]:
    """``(X (c, d), texts) -> meaning (c, d')`` of a fitted disentangler for one language
    (``None``: each text without a tag is routed by its script and the model's identifier,
    :func:`~disembed.methods.routing.tags_with_scripts`, as
    :meth:`~disembed.saved_model.SavedModel.meaning` does)."""
    return lambda X, texts: meaning_of_texts(model, X, texts, language)


def mine_files(src: str | Path | Sequence[str | Path], tgt: str | Path | Sequence[str | Path],
               encoder: Encoder, out: str | Path, *,
               run_dir: str | Path, config: MineConfig | None = None, model=None,
               src_lang: str | None = None, tgt_lang: str | None = None,
               format: Format = "auto", skip_bad: bool = False, batch_size: int = 64,
               center: Literal["none", "corpus"] = "none") -> Mined:
    """Mine ``src`` x ``tgt`` and write the TSV ``out``; ``model`` switches to its meaning view
    (``src_lang``/``tgt_lang`` ``None``, ``und`` or ``mul``: the model identifies each
    sentence's language).
    Each side is a file, or several (a sequence, a comma-separated list or globs), plain or
    ``.gz`` (:func:`~.inputs.gather_inputs`).

    ``center="corpus"`` subtracts each file's own mean from its vectors before the search:
    transductive (a sentence's vector then depends on the rest of its file), asked for by
    name for a whole corpus; every other path is row by row."""
    cfg = config or MineConfig()
    if center not in ("none", "corpus"):
        raise ConfigError(f"center must be 'none' or 'corpus'; got {center!r}")
    # checked before anything is written (None: identified by the model, row by row)
    src_lang, tgt_lang = normalize_tag(src_lang), normalize_tag(tgt_lang)
    t0 = time.perf_counter()
    # checked before the run folder is made (a single file is read in place; several, or
    # gzip, are gathered into the run folder first)
    cols = [open_collection(*gather_inputs(side, run_dir, name, format, skip_bad), skip_bad,
                            role) for side, name, role in ((src, "src", "source"),
                                                           (tgt, "tgt", "target"))]
    with folder_lock(run_dir):  # one writer per run folder (a second run waits)
        mats, rows = _embed_both(cols, ("src", "tgt"), (src_lang, tgt_lang), encoder,
                                 Path(run_dir), model, chunk=cfg.chunk, batch_size=batch_size)
        if center == "corpus":
            mats = [_centred(m, r) for m, r in zip(mats, rows, strict=True)]
            logger.info("centred each file by its own mean (transductive, --center corpus)")
        embed_s = time.perf_counter() - t0
        mined = mine_embeddings(mats[0], mats[1], cfg)  # over distinct sentences
        mined.src, mined.tgt = rows[0].first[mined.src], rows[1].first[mined.tgt]
        mined.seconds["embed"] = embed_s
        kept = mined.written = write_pairs(out, mined, cols[0], cols[1])
    logger.info("mined %d pairs (%d after text dedup) from %d x %d sentences -> %s", len(mined),
                kept, len(cols[0]), len(cols[1]), out)
    return mined


def open_collection(path: str | Path, format: Format, skip_bad: bool, role: str
                    ) -> Collection:
    """:meth:`Collection.open` that refuses a file with no sentences to use."""
    col = Collection.open(path, format, skip_bad)
    if not len(col):
        skipped = f" ({col.report.skipped} bad lines skipped)" if col.report.skipped else ""
        raise DataError(f"{path}: no sentences{skipped}; the {role} file needs at least one "
                        "non-empty line")
    return col


def _centred(mat: np.ndarray, rows: Distinct) -> np.ndarray:
    """Distinct rows minus the mean of every line (a repeated line counts as often as it
    occurs, as it did before the rows were de-duplicated)."""
    mat = np.asarray(mat, np.float32)
    counts = np.bincount(rows.inverse, minlength=len(mat)).astype(np.float64)
    return (mat - (counts @ mat) / counts.sum()).astype(np.float32)


def _embed_both(cols: list[Collection], names: tuple[str, str], langs: tuple, encoder: Encoder,
                run_dir: Path, model, *, chunk: int, batch_size: int
                ) -> tuple[list[np.ndarray], list[Distinct]]:
    """Each collection's distinct sentences embedded once into ``run_dir/<name>.npy`` (raw,
    or ``model``'s meaning), and the :class:`~disembed.util.dedup.Distinct` mapping them
    back to the collection's rows."""
    mats, rows = [], []
    for col, name, lang in zip(cols, names, langs, strict=True):
        # untagged: "script" (routed by each text's script since the script prior; a run
        # folder from before it is embedded again, not resumed)
        view = f"meaning:{_model_key(model)}:{lang or 'script'}" if model is not None \
            else "raw"
        transform = meaning_transform(model, lang) if model is not None else None
        mat, distinct_rows = embed_distinct(col, encoder, run_dir / f"{name}.npy",
                                            transform=transform, view=view, chunk=chunk,
                                            batch_size=batch_size)
        mats.append(mat)
        rows.append(distinct_rows)
    return mats, rows


def _model_key(model) -> str:
    """A stable digest of a fitted model's class, parameters and learned state."""
    h = hashlib.blake2b(digest_size=8)
    h.update(f"{type(model).__name__}:{sorted(model.get_params().items())!r}".encode())
    for name, value in sorted(model.saved_state()[0].items()):
        h.update(name.encode())
        h.update(np.ascontiguousarray(value).tobytes())
    return h.hexdigest()


def write_pairs(out: str | Path, mined: Mined, src: Collection, tgt: Collection) -> int:
    """Write ``score src tgt src_id tgt_id`` lines, dropping repeated sentence pairs.

    Returns the number of lines written (without the header).
    """
    seen: set[tuple[str, str]] = set()
    lines = ["score\tsrc\ttgt\tsrc_id\ttgt_id\n"]
    block = 65536
    for b0 in range(0, len(mined), block):
        s_rows = src.rows(mined.src[b0 : b0 + block])
        t_rows = tgt.rows(mined.tgt[b0 : b0 + block])
        scores = mined.score[b0 : b0 + block]
        for score, (sid, s), (tid, t) in zip(scores, s_rows, t_rows, strict=True):
            if (s, t) in seen:
                continue
            seen.add((s, t))
            lines.append(f"{score:.6f}\t{s}\t{t}\t{sid}\t{tid}\n")
    atomic_write_bytes(Path(out), [line.encode("utf-8") for line in lines])
    return len(lines) - 1


def search_files(queries: str | Path, database: str | Path, encoder: Encoder, out: str | Path,
                 *, run_dir: str | Path, k: int = 10, backend: str = "exact", model=None,
                 query_lang: str | None = None, db_lang: str | None = None,
                 format: Format = "auto", skip_bad: bool = False, chunk: int = 16384,
                 batch_size: int = 64, backend_options: dict | None = None) -> Searched:
    """Write the ``k`` nearest ``database`` sentences of every query as a TSV.

    Columns ``query_id rank score match_id query match``. A database smaller than ``k``
    gives every query all of its sentences (a warning says so); the returned
    :class:`Searched` holds the numbers actually written. ``model`` switches to its meaning
    view (``query_lang``/``db_lang`` ``None``: the model identifies each sentence's
    language, as ``mine_files`` does).
    """
    if k < 1:
        raise ConfigError(f"k must be >= 1 (neighbours per query), got {k}")
    # checked before anything is read (None, und, mul: identified by the model, row by row)
    query_lang, db_lang = normalize_tag(query_lang), normalize_tag(db_lang)
    cols = [open_collection(queries, format, skip_bad, "queries"),
            open_collection(database, format, skip_bad, "database")]
    with folder_lock(run_dir):  # one writer per run folder (a second run waits)
        return _search_cols(cols, encoder, out, run_dir=Path(run_dir), k=k, backend=backend,
                            model=model, langs=(query_lang, db_lang), chunk=chunk,
                            batch_size=batch_size, names=(queries, database),
                            backend_options=backend_options or {})


def _search_cols(cols: list[Collection], encoder: Encoder, out: str | Path, *, run_dir: Path,
                 k: int, backend: str, model, langs: tuple, chunk: int, batch_size: int,
                 names: tuple, backend_options: dict) -> Searched:
    database = names[1]
    mats, rows = _embed_both(cols, ("queries", "database"), langs, encoder, run_dir, model,
                             chunk=chunk, batch_size=batch_size)
    if k > len(cols[1]):
        logger.warning("k=%d but the database %s has %d sentences: every query gets all %d",
                       k, database, len(cols[1]), len(cols[1]))
    k = min(k, len(cols[1]))
    # each distinct query against each distinct database sentence, once; then line by line
    D, I = search(mats[0], mats[1], min(k, len(mats[1])), backend,  # noqa: E741
                  **backend_options)
    D, I = line_matches(D, I, rows[1], k)  # noqa: E741
    D, I = rows[0].expand(D), rows[0].expand(I)  # noqa: E741
    lines = ["query_id\trank\tscore\tmatch_id\tquery\tmatch\n"]
    for q0 in range(0, len(D), 4096):
        q_rows = cols[0].rows(range(q0, min(q0 + 4096, len(D))))
        block = zip(q_rows, D[q0 : q0 + 4096], I[q0 : q0 + 4096], strict=True)
        for (qid, qtext), d_row, i_row in block:
            matches = zip(cols[1].rows(i_row), d_row, strict=True)
            for rank, ((mid, mtext), score) in enumerate(matches, 1):
                lines.append(f"{qid}\t{rank}\t{score:.6f}\t{mid}\t{qtext}\t{mtext}\n")
    atomic_write_bytes(Path(out), [line.encode("utf-8") for line in lines])
    return Searched(queries=len(D), neighbours=D.shape[1], rows=len(lines) - 1)
