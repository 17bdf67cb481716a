"""Content-addressed, memory-mapped embedding store.

Layout: ``<root>/<identity.key>/identity.json`` plus immutable shard files
``shard-*.emb``. A shard holds ``n`` rows: a 16-byte key per row (blake2b of the
sentence) and the ``(n, d)`` matrix in float16 or float32. Each shard is written
to a temporary file, flushed and renamed, so a killed job leaves only whole
shards behind; the next run finds them and encodes only what is missing.

Every shard carries its row count, dtype, dimension and a CRC32 of its bytes. A
truncated or corrupted shard, or one holding NaN or inf, is detected when the store
opens, moved aside as ``*.corrupt`` (nothing is deleted) and its sentences are encoded
again. Reads go through ``numpy.memmap``: only the rows asked for are paged in.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import struct
import uuid
import zlib
from pathlib import Path
from typing import Sequence

import numpy as np

from ..exceptions import CheckpointError, ConfigError
from ..util.files import atomic_write_bytes, remove_stale_temps
from .base import EncoderIdentity

logger = logging.getLogger(__name__)

_MAGIC = b"DISEMB01"
_HEADER = struct.Struct("<8sI")  # magic, json length
_ALIGN = 64
KEY_BYTES = 16
DTYPES = ("float16", "float32")


def text_key(text: str) -> bytes:
    """The 16-byte content address of one sentence."""
    return hashlib.blake2b(text.encode("utf-8"), digest_size=KEY_BYTES).digest()


class _Shard:
    def __init__(self, path: Path, n: int, dim: int, dtype: str, offset: int) -> None:
        self.path, self.n, self.dim, self.dtype, self.offset = path, n, dim, dtype, offset
        self._matrix: np.memmap | None = None

    @property
    def matrix(self) -> np.memmap:
        if self._matrix is None:
            self._matrix = np.memmap(
                self.path, dtype=self.dtype, mode="r",
                offset=self.offset + self.n * KEY_BYTES, shape=(self.n, self.dim),
            )
        return self._matrix


def _read_shard(path: Path, dim: int) -> tuple[_Shard, np.ndarray]:
    """Parse and verify one shard; raise CheckpointError on any inconsistency."""
    size = path.stat().st_size
    with open(path, "rb") as f:
        magic, json_len = _HEADER.unpack(f.read(_HEADER.size))
        if magic != _MAGIC:
            raise CheckpointError(f"{path}: not a disembed cache shard (bad magic {magic!r})")
        header = json.loads(f.read(json_len))
        offset = _aligned(_HEADER.size + json_len)
        n, dtype = int(header["n"]), header["dtype"]
        if header["dim"] != dim or dtype not in DTYPES:
            raise CheckpointError(f"{path}: dim/dtype {header['dim']}/{dtype}, expected {dim}")
        expected = offset + n * KEY_BYTES + n * dim * np.dtype(dtype).itemsize
        if size != expected:
            raise CheckpointError(f"{path}: {size} bytes, expected {expected} (truncated?)")
        f.seek(offset)
        body = f.read()
    if zlib.crc32(body) != header["crc32"]:
        raise CheckpointError(f"{path}: checksum mismatch (corrupted)")
    if not np.isfinite(np.frombuffer(body, dtype=dtype, offset=n * KEY_BYTES)).all():
        raise CheckpointError(f"{path}: holds NaN or infinite embeddings (written by an "
                              "older disembed that did not check encoder outputs)")
    keys = np.frombuffer(body[: n * KEY_BYTES], dtype=f"V{KEY_BYTES}")
    return _Shard(path, n, dim, dtype, offset), keys


def _aligned(n: int) -> int:
    return (n + _ALIGN - 1) // _ALIGN * _ALIGN


class EmbeddingStore:
    """All cached embeddings of one encoder identity.

    Args:
        root: cache root directory (shared by all encoders).
        identity: the encoder identity; its key names the sub-directory.
        dtype: storage dtype for new shards, ``float32`` (exact) or ``float16`` (half the size).
    """

    def __init__(self, root: str | os.PathLike, identity: EncoderIdentity, dtype: str = "float32"):
        if dtype not in DTYPES:
            raise ConfigError(f"cache dtype must be one of {DTYPES}, got {dtype!r}")
        self.identity, self.dtype = identity, dtype
        self.dir = Path(root) / identity.key
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
        except (FileExistsError, NotADirectoryError):
            raise ConfigError(f"embedding cache {root} is not a directory (a file is in the "
                              "way); pass --cache-dir DIR or set DISEMBED_CACHE_DIR to a "
                              "folder") from None
        self._check_identity()
        remove_stale_temps(self.dir)  # left by killed jobs (a live job's are kept)
        self._shards: list[_Shard] = []
        self._index: dict[bytes, tuple[int, int]] = {}
        self._load_shards()

    def _check_identity(self) -> None:
        path = self.dir / "identity.json"
        wanted = self.identity.to_dict()
        if path.exists():
            try:
                stored = json.loads(path.read_text())
            except (OSError, ValueError):
                stored = None
            if stored == wanted:
                return
            logger.warning("cache identity file %s was unreadable or different; rewriting", path)
        atomic_write_bytes(path, [json.dumps(wanted, indent=2, sort_keys=True).encode()])

    def _load_shards(self) -> None:
        for path in sorted(self.dir.glob("shard-*.emb")):
            try:
                shard, keys = _read_shard(path, self.identity.dim)
            except (CheckpointError, OSError, ValueError, KeyError, struct.error) as exc:
                aside = path.with_suffix(".corrupt")
                os.replace(path, aside)
                logger.warning("cache shard rejected and moved to %s: %s; its rows will be "
                               "encoded again", aside, exc)
                continue
            self._add(shard, keys)

    def _add(self, shard: _Shard, keys: np.ndarray) -> None:
        sid = len(self._shards)
        self._shards.append(shard)
        exact = shard.dtype == "float32"
        for row, key in enumerate(keys.tolist()):
            key = bytes(key)
            old = self._index.get(key)
            if old is None or exact or self._shards[old[0]].dtype != "float32":
                self._index[key] = (sid, row)  # a float16 copy never hides a float32 one

    def _usable(self, key: bytes) -> bool:
        """Cached in a precision this store may return: a float32 store never returns
        float16-rounded vectors (``--cache-dtype float16`` then ``float32``)."""
        loc = self._index.get(key)
        return loc is not None and (self.dtype != "float32"
                                    or self._shards[loc[0]].dtype == "float32")

    def __len__(self) -> int:
        return len(self._index)

    def __contains__(self, text: str) -> bool:
        return self._usable(text_key(text))

    def missing(self, texts: Sequence[str]) -> list[str]:
        """The distinct texts (first-seen order) that have no cached embedding."""
        seen: set[str] = set()
        out = []
        for t in texts:
            if t not in seen:
                seen.add(t)
                if not self._usable(text_key(t)):
                    out.append(t)
        return out

    def put(self, texts: Sequence[str], embeddings: np.ndarray) -> None:
        """Store one batch as a new shard (atomic). ``embeddings`` is ``(len(texts), dim)``."""
        written = self.write_shard(texts, embeddings)
        if written is not None:
            self.add_shard(*written)

    def add_shard(self, shard: _Shard, keys: np.ndarray) -> None:
        """Make a shard from :meth:`write_shard` readable (the only step that changes the
        index: a writer that does the file work on another thread takes its lock here)."""
        self._add(shard, keys)

    def write_shard(self, texts: Sequence[str], embeddings: np.ndarray
                    ) -> tuple[_Shard, np.ndarray] | None:
        """Write one batch as a new shard file (atomic, fsynced) without touching the index:
        ``(shard, keys)`` for :meth:`add_shard`, or ``None`` for no texts."""
        embeddings = np.asarray(embeddings)
        if embeddings.shape != (len(texts), self.identity.dim):
            raise ConfigError(f"put: embeddings have shape {embeddings.shape}, expected "
                              f"({len(texts)}, {self.identity.dim})")
        if not len(texts):
            return None
        keys = np.array([text_key(t) for t in texts], dtype=f"V{KEY_BYTES}")
        body = keys.tobytes() + np.ascontiguousarray(embeddings, dtype=self.dtype).tobytes()
        header = json.dumps({"n": len(texts), "dim": self.identity.dim, "dtype": self.dtype,
                             "crc32": zlib.crc32(body)}).encode()
        pad = b"\0" * (_aligned(_HEADER.size + len(header)) - _HEADER.size - len(header))
        path = self.dir / f"shard-{uuid.uuid4().hex}.emb"
        atomic_write_bytes(path, [_HEADER.pack(_MAGIC, len(header)), header, pad, body])
        offset = _aligned(_HEADER.size + len(header))
        return _Shard(path, len(texts), self.identity.dim, self.dtype, offset), keys

    def stored(self, embeddings: np.ndarray) -> np.ndarray:
        """``embeddings`` as :meth:`get` will return them once stored (float32 through the
        store's dtype: float16 rounds)."""
        return np.asarray(embeddings, dtype=self.dtype).astype(np.float32)

    def get(self, texts: Sequence[str], out: np.ndarray | None = None) -> np.ndarray:
        """Embeddings of ``texts`` as ``(n, dim) float32`` (or written into ``out``).

        Raises KeyError naming the first text that is not cached.
        """
        n = len(texts)
        if out is None:
            out = np.empty((n, self.identity.dim), dtype=np.float32)
        locs = np.empty((n, 2), dtype=np.int64)
        for i, t in enumerate(texts):
            try:
                locs[i] = self._index[text_key(t)]
            except KeyError:
                raise KeyError(f"not cached: {t[:80]!r}") from None
        for sid in np.unique(locs[:, 0]):
            rows = np.nonzero(locs[:, 0] == sid)[0]
            out[rows] = self._shards[sid].matrix[locs[rows, 1]]
        return out
