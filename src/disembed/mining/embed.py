"""Streamed, resumable embedding of a :class:`Collection` into a memory-mapped matrix.

Memory model: sentences are read ``chunk`` rows at a time, encoded through the
(cached) encoder, optionally mapped to a disentangler's meaning view (the transform gets
the chunk's texts too: an untagged sentence is routed by its script),
L2-normalised and written into ``<run_dir>/<name>.npy`` (an ``(n, d) float32``
``numpy`` memmap). After each chunk is flushed, ``<name>.json`` records the rows
done (written atomically). A rerun with the same file, encoder and view resumes
after the last recorded chunk; anything else starts over (the file is keyed by a
hash of its bytes, not its size and modification time). Peak memory is one
chunk of sentences and vectors, whatever the collection size; the embedding cache
also keeps every chunk, so a rerun in another run directory encodes nothing.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Callable

import numpy as np
from numpy.lib.format import open_memmap

from ..encoders import Encoder
from ..progress import progress_bar
from ..retrieval.knn import normalize_rows
from ..util.dedup import Distinct, distinct
from ..util.files import atomic_write_bytes, preallocate
from .collection import Collection

logger = logging.getLogger(__name__)

#: ``(vectors (c, d_in), texts (c,)) -> (c, d_out)``: a chunk's embeddings and its texts
Transform = Callable[[np.ndarray, list[str]], np.ndarray]


def _meta(collection: Collection, encoder: Encoder, view: str) -> dict:
    return {"collection": collection.fingerprint(), "encoder": encoder.identity.key,
            "encoder_name": encoder.name, "view": view}


def embed_collection(collection: Collection, encoder: Encoder, path: str | Path, *,
                     transform: Transform | None = None, view: str = "raw",
                     chunk: int = 16384, batch_size: int = 64) -> np.memmap:
    """Embed every row of ``collection`` into ``path`` (``.npy``); returns it read-only.

    Args:
        transform: maps a chunk's embeddings ``(c, d_in)`` and its ``c`` texts to
            ``(c, d_out)`` (e.g. a meaning view, which tags an untagged text with its script).
        view: a name for ``transform`` (part of the resume key).
        chunk: rows per encoded and recorded chunk.
    """
    path = Path(path)
    meta_path = path.with_suffix(".json")
    meta = _meta(collection, encoder, view)
    done = _resume_point(meta_path, path, meta)
    if done == 0:
        meta_path.unlink(missing_ok=True)  # the matrix is rewritten: its old record goes first
    n = len(collection)
    with progress_bar(n, f"embed {collection.path.name}", unit="sent", initial=done) as bar:
        out = None
        for r0, texts in collection.chunks(chunk, start=done):
            vectors = encoder.encode(texts, batch_size=batch_size)
            vectors = normalize_rows(transform(vectors, texts) if transform else vectors)
            if out is None:
                out = _open(path, n, vectors.shape[1], fresh=done == 0)
            out[r0 : r0 + len(texts)] = vectors
            out.flush()
            _record(meta_path, meta, r0 + len(texts), vectors.shape[1])
            bar.update(len(texts))
    if done == n and not path.exists():  # empty collection
        _open(path, 0, encoder.dim, fresh=True)
    return np.load(path, mmap_mode="r")


class _DistinctRows:
    """The distinct sentences of a collection, read as a collection of their own (what
    :func:`embed_collection` reads: length, path, fingerprint and chunks)."""

    def __init__(self, collection: Collection, rows: Distinct) -> None:
        self.path = collection.path
        self._collection, self._texts = collection, rows.texts

    def __len__(self) -> int:
        return len(self._texts)

    def fingerprint(self) -> dict:
        # rows: the distinct count (a run folder of every line is embedded again, not resumed)
        return {**self._collection.fingerprint(), "rows": len(self._texts), "distinct": True}

    def chunks(self, size: int, start: int = 0):
        for r0 in range(start, len(self._texts), size):
            yield r0, self._texts[r0 : r0 + size]


def collection_distinct(collection: Collection, chunk: int = 16384) -> Distinct:
    """The distinct sentences of ``collection`` (:func:`~disembed.util.dedup.distinct`: one
    dict entry per distinct sentence, read ``chunk`` rows at a time)."""
    return distinct(text for _, texts in collection.chunks(chunk) for text in texts)


def embed_distinct(collection: Collection, encoder: Encoder, path: str | Path, *,
                   transform: Transform | None = None, view: str = "raw", chunk: int = 16384,
                   batch_size: int = 64) -> tuple[np.memmap, Distinct]:
    """:func:`embed_collection` of each distinct sentence once: ``(u, d)`` rows in order of
    first appearance, and the :class:`~disembed.util.dedup.Distinct` that maps them back to
    the collection's rows (``rows.inverse``) and to each text's first row (``rows.first``).
    Crawl-shaped input (boilerplate repeated thousands of times) is encoded, stored and
    searched once per distinct line."""
    rows = collection_distinct(collection, chunk)
    if rows.duplicates:
        logger.info("%s: %d of %d lines repeat an earlier one; embedding %d distinct lines",
                    collection.path, rows.duplicates, len(collection), len(rows.texts))
    mat = embed_collection(_DistinctRows(collection, rows), encoder, path, transform=transform,
                           view=view, chunk=chunk, batch_size=batch_size)
    return mat, rows


def _open(path: Path, n: int, d: int, fresh: bool) -> np.memmap:
    if fresh:
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            out = open_memmap(path, mode="w+", dtype=np.float32, shape=(n, d))
        except OSError as exc:
            exc.filename = exc.filename or str(path)
            raise
        preallocate(path)  # a full disk is an OSError now, not a SIGBUS mid-write
        return out
    return open_memmap(path, mode="r+")


def _resume_point(meta_path: Path, path: Path, meta: dict) -> int:
    """Rows already embedded by an earlier run with the same inputs, else 0."""
    if not (meta_path.is_file() and path.is_file()):
        return 0
    try:
        stored = json.loads(meta_path.read_text())
    except (OSError, ValueError):
        return 0
    if {k: stored.get(k) for k in meta} != meta:
        logger.info("%s: inputs changed since the last run; embedding from the start", path)
        return 0
    done = int(stored.get("done", 0))
    if done:
        logger.info("%s: resuming after %d of %d rows", path, done, meta["collection"]["rows"])
    return done


def _record(meta_path: Path, meta: dict, done: int, dim: int) -> None:
    body = json.dumps({**meta, "done": done, "dim": dim}, indent=1).encode()
    atomic_write_bytes(meta_path, [body])
