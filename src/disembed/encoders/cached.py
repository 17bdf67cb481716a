"""An encoder wrapped with the embedding store: encodes each distinct sentence once, ever."""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from ..exceptions import ConfigError
from ..hardware import rechoose_threads
from ..progress import progress_bar, reporting_to
from ..util.cache_dir import CACHE_ENV_VAR, default_cache_dir
from ..util.files import AtomicFile, commit_together
from .base import Encoder, check_batch_size, check_embeddings, check_texts, text_list
from .store import EmbeddingStore

logger = logging.getLogger(__name__)

__all__ = ["CACHE_ENV_VAR", "CachedEncoder", "EncodeStats", "cached", "default_cache_dir"]


@dataclass
class EncodeStats:
    """Counters over the lifetime of a :class:`CachedEncoder`."""

    requested: int = 0
    encoded: int = 0
    encode_seconds: float = 0.0  # time inside the wrapped encoder
    lookup_seconds: float = 0.0  # time spent finding and reading cached rows

    @property
    def sentences_per_second(self) -> float:
        return self.encoded / self.encode_seconds if self.encode_seconds else float("nan")


class CachedEncoder:
    """Implements the encoder protocol over ``encoder`` + an :class:`EmbeddingStore`.

    Missing sentences are encoded in chunks of ``chunk_size`` and each chunk is
    stored before the next starts, so an interrupted job resumes where it stopped.

    Args:
        encoder: any encoder.
        cache_dir: store root; ``None`` = :func:`default_cache_dir`.
        dtype: storage dtype, ``float32`` or ``float16``. Returned arrays are always
            float32 read back from the store, so a first and a repeated run agree exactly.
        chunk_size: sentences per stored shard.
    """

    def __init__(self, encoder: Encoder, cache_dir: str | os.PathLike | None = None,
                 dtype: str = "float32", chunk_size: int = 2048) -> None:
        self.encoder = encoder
        self.name, self.dim, self.identity = encoder.name, encoder.dim, encoder.identity
        self.store = EmbeddingStore(cache_dir or default_cache_dir(), encoder.identity, dtype)
        self.chunk_size = int(chunk_size)
        self.stats = EncodeStats()

    @property
    def max_input_tokens(self) -> int | None:
        return getattr(self.encoder, "max_input_tokens", None)

    def token_counts(self, texts: Sequence[str]) -> list[int] | None:
        """The wrapped encoder's token counts (``None`` when it has no tokenizer)."""
        count = getattr(self.encoder, "token_counts", None)
        texts = text_list(texts, self.name)
        return None if count is None else count(texts)

    def encode(self, texts: Sequence[str], *, batch_size: int = 64) -> np.ndarray:
        """``(n, dim) float32`` embeddings of ``texts``, encoding only uncached ones."""
        t0 = time.perf_counter()
        batch_size = check_batch_size(batch_size, self.name)
        texts = check_texts(texts, self.name)
        self.stats.requested += len(texts)
        spent = self.stats.encode_seconds
        self.fill(texts, batch_size=batch_size)
        out = self.store.get(texts)
        self.stats.lookup_seconds += time.perf_counter() - t0 - (self.stats.encode_seconds - spent)
        return out

    def fill(self, texts: Sequence[str], *, batch_size: int = 64, desc: str | None = None
             ) -> int:
        """Encode and store every distinct text of ``texts`` not cached yet, in chunks of
        ``chunk_size`` (each stored before the next starts, so an interrupted fill resumes);
        one progress bar with rate and ETA. Returns how many were encoded. The store is keyed
        by the normalised text (:func:`~disembed.encoders.base.check_texts`), never by the
        text as given."""
        todo = self.store.missing(check_texts(texts, self.name))
        if not todo:
            return 0
        logger.info("%s: encoding %d new sentences (%d cached)", self.name, len(todo),
                    len(self.store))
        bar = progress_bar(len(todo), desc or f"encode {self.name}", unit="sent")
        with bar, reporting_to(bar):  # the encoder moves the bar after each of its batches
            for start in range(0, len(todo), self.chunk_size):
                chunk = todo[start : start + self.chunk_size]
                rechoose_threads()  # a long fill follows the machine's load
                t0 = time.perf_counter()
                vectors = self.encoder.encode(chunk, batch_size=batch_size)
                vectors = check_embeddings(vectors, chunk, self.name, self.dim)
                self.stats.encode_seconds += time.perf_counter() - t0
                self.stats.encoded += len(chunk)
                self.store.put(chunk, vectors)
                _settle(bar, start + len(chunk))
        return len(todo)

    def encode_to_file(self, texts: Sequence[str], path: str | os.PathLike,
                       *, batch_size: int = 64, block: int = 65536,
                       texts_path: str | os.PathLike | None = None) -> np.memmap:
        """Write embeddings of ``texts`` into a ``.npy`` file block by block (bounded memory).

        The matrix (and with ``texts_path`` the sentences, one per line) are written to
        temporary files and renamed into place only when complete: an interrupted or failed
        run leaves the previous files as they were. Returns the matrix, memory-mapped.
        """
        path = Path(path)
        texts = check_texts(texts, self.name)
        if texts_path is not None and Path(texts_path).absolute() == path.absolute():
            raise ConfigError(f"the sentences file {texts_path} would overwrite the matrix "
                              f"{path}; give them different names")
        together = texts_path is not None  # then neither may be a stream: one step
        matrix = AtomicFile(path, stream=not together)
        try:
            sidecar = AtomicFile(texts_path, stream=False) if together else None
        except BaseException:
            matrix.discard()
            raise
        try:
            header = {"descr": np.lib.format.dtype_to_descr(np.dtype(np.float32)),
                      "fortran_order": False, "shape": (len(texts), self.dim)}
            np.lib.format.write_array_header_1_0(matrix, header)
            for start in range(0, len(texts), block):
                rows = self.encode(texts[start : start + block], batch_size=batch_size)
                matrix.write(np.ascontiguousarray(rows, dtype="<f4").tobytes())
            if sidecar is None:
                matrix.commit()
            else:  # never a new matrix beside old sentences: renamed as one step
                sidecar.write("".join(t + "\n" for t in texts).encode("utf-8"))
                commit_together([matrix, sidecar])
        except BaseException:
            matrix.discard()
            if sidecar is not None:
                sidecar.discard()
            raise
        return np.load(path, mmap_mode="r")


def _settle(bar, done: int) -> None:
    """Put ``bar`` at ``done``: an encoder that reports no batches (or reports windows of
    long texts rather than sentences) still ends each stored chunk at the right count."""
    if bar.n != done:
        bar.n = done
        bar.refresh()


def cached(encoder: Encoder, cache_dir: str | os.PathLike | None = None,
           dtype: str = "float32") -> CachedEncoder:
    """Wrap ``encoder`` with the on-disk embedding store (no-op if already wrapped)."""
    if isinstance(encoder, CachedEncoder):
        return encoder
    return CachedEncoder(encoder, cache_dir, dtype=dtype)

