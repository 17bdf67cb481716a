"""The embedding cache for a service: new vectors are written to disk behind the requests.

:class:`~.cached.CachedEncoder` stores each call's new sentences as one shard before it
returns: right for a long job (an interrupted one resumes where it stopped), but a service
calls it once per micro-batch of a few texts, so every batch waited for two fsyncs (the
shard and its folder: 6-12 ms on a 2-core machine, a third of encoding four short texts)
and left one more small shard file behind.

:class:`WriteBehindEncoder` answers a call's new sentences from memory at once (each row
rounded through the store's dtype, exactly as it will be read back) and one thread writes
the rows kept as one shard every ``flush_seconds``, or as soon as ``flush_rows`` are kept;
:meth:`~WriteBehindEncoder.close` writes what is left. So a vector is the same whether it
comes from memory, a shard, or a later process. The first write happens in the call itself,
so a cache that cannot be written fails that call (the service's 503 naming the folder)
rather than a background thread; a later write that fails is raised by the next call, and
its rows are kept to be written again. A crash loses at most the rows not yet written:
those sentences are encoded again next time.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Sequence

import numpy as np

from .base import Encoder, check_batch_size, check_embeddings, check_texts
from .cached import CachedEncoder

__all__ = ["WriteBehindEncoder"]


class WriteBehindEncoder(CachedEncoder):
    """A :class:`~.cached.CachedEncoder` that writes behind its callers (module docstring).

    Args:
        encoder, cache_dir, dtype: as for :class:`~.cached.CachedEncoder`.
        flush_rows: write as soon as this many new rows are kept.
        flush_seconds: otherwise write what is kept at least this often.
    """

    def __init__(self, encoder: Encoder, cache_dir: str | os.PathLike | None = None,
                 dtype: str = "float32", flush_rows: int = 2048,
                 flush_seconds: float = 2.0) -> None:
        super().__init__(encoder, cache_dir, dtype=dtype)
        self.flush_rows, self.flush_seconds = int(flush_rows), float(flush_seconds)
        self._kept: dict[str, np.ndarray] = {}  # normalised text -> its row as stored
        self._lock = threading.Lock()  # the kept rows and the store's index
        self._writing = threading.Lock()  # one writer at a time
        self._wake = threading.Event()
        self._error: OSError | None = None
        self._closing = False
        self._thread: threading.Thread | None = None
        self._written = False  # the first write happens in the call

    @property
    def thread_safe(self) -> bool:
        """Concurrent calls are safe where the wrapped encoder's are: the kept rows, the
        store's index and the counters are under this wrapper's lock."""
        return bool(getattr(self.encoder, "thread_safe", False))

    @property
    def pending(self) -> int:
        """Rows kept in memory, not written yet."""
        return len(self._kept)

    def encode(self, texts: Sequence[str], *, batch_size: int = 64) -> np.ndarray:
        """``(n, dim) float32`` embeddings of ``texts``, encoding only sentences neither
        stored nor kept; raises the error of a background write that failed since the
        last call (an ``OSError``: the cache folder cannot be written)."""
        t0 = time.perf_counter()
        batch_size = check_batch_size(batch_size, self.name)
        texts = check_texts(texts, self.name)
        if self._error is not None:
            error, self._error = self._error, None
            raise error
        with self._lock:
            self.stats.requested += len(texts)
            todo = [t for t in self.store.missing(texts) if t not in self._kept]
        spent = 0.0
        if todo:  # the service chose the threads for this call (EmbeddingService.encode)
            t1 = time.perf_counter()
            vectors = check_embeddings(self.encoder.encode(todo, batch_size=batch_size), todo,
                                       self.name, self.dim)
            spent = time.perf_counter() - t1
            with self._lock:
                self.stats.encode_seconds += spent
                self.stats.encoded += len(todo)
            self._keep(todo, vectors)
        out = self._rows(texts)
        with self._lock:
            self.stats.lookup_seconds += time.perf_counter() - t0 - spent
        return out

    def fill(self, texts: Sequence[str], *, batch_size: int = 64, desc: str | None = None
             ) -> int:
        """Encode and store every new text of ``texts`` now; returns how many were new."""
        texts = check_texts(texts, self.name)
        with self._lock:
            new = len([t for t in self.store.missing(texts) if t not in self._kept])
        self.encode(texts, batch_size=batch_size)
        self.flush()
        return new

    def _keep(self, texts: list[str], vectors: np.ndarray) -> None:
        rows = self.store.stored(vectors)
        with self._lock:
            self._kept.update(zip(texts, rows, strict=True))
            full = len(self._kept) >= self.flush_rows
        if not self._written:  # a cache that cannot be written fails this call
            self.flush()
            self._written = True
            return
        with self._lock:  # one writer, also when several workers call at once
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="disembed-cache-writer",
                                                daemon=True)
                self._thread.start()
        if full:
            self._wake.set()

    def _rows(self, texts: list[str]) -> np.ndarray:
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        with self._lock:
            stored = []
            for i, text in enumerate(texts):
                row = self._kept.get(text)
                if row is None:
                    stored.append(i)
                else:
                    out[i] = row
            if stored:
                out[stored] = self.store.get([texts[i] for i in stored])
        return out

    def flush(self) -> int:
        """Write the rows kept as one shard now; returns how many were written."""
        with self._writing:
            with self._lock:
                items = list(self._kept.items())
            if not items:
                return 0
            texts = [t for t, _ in items]
            written = self.store.write_shard(texts, np.stack([row for _, row in items]))
            with self._lock:
                if written is not None:
                    self.store.add_shard(*written)
                for text in texts:
                    self._kept.pop(text, None)
        return len(items)

    def _run(self) -> None:
        while not self._closing:
            self._wake.wait(self.flush_seconds)
            self._wake.clear()
            try:
                self.flush()
            except OSError as exc:  # raised by the next call; the rows stay kept
                self._error = exc

    def close(self) -> None:
        """Stop the writer and write what is left (a service calls this on shutdown)."""
        self._closing = True
        self._wake.set()
        if self._thread is not None:
            self._thread.join(30)
        self.flush()
