"""Precomputed embeddings: a ``.npy`` matrix plus its line-aligned text file.

``npy:vectors.npy`` reads ``vectors.npy`` (n, d) and ``vectors.txt`` (n lines); an
explicit text file can be given as ``npy:vectors.npy,texts.txt``. Encoding a
sentence that is not in the text file is an error that names it.
"""

from __future__ import annotations

import os
from typing import Sequence

import numpy as np

from ..data.io import read_lines
from ..exceptions import DataError
from ..util.files import finish_pending, sha256_file
from ..util.text import normalize_text
from .base import EncoderIdentity, check_batch_size, check_texts
from .plugin import EncoderPlugin


def load_matrix(path: str) -> np.ndarray:
    """A ``.npy`` file as a read-only ``(n, d)`` numeric memmap, or a DataError saying why not."""
    with open(path, "rb") as f:
        magic = f.read(6)
    if magic != b"\x93NUMPY":
        raise DataError(f"npy encoder: {path} is not a .npy file (it does not start with the "
                        "NPY magic bytes); write it with numpy.save or 'disembed encode'")
    try:
        matrix = np.load(path, mmap_mode="r", allow_pickle=False)
    except Exception as exc:  # noqa: BLE001 - a damaged header raises ValueError, SyntaxError,
        # tokenize.TokenError, OverflowError, ... (found by tests/encoders/test_npy_properties)
        first = (str(exc).splitlines() or [""])[0][:200]
        raise DataError(f"npy encoder: {path} is not a readable .npy matrix ({first}); write "
                        "it with numpy.save or 'disembed encode'") from None
    if not isinstance(matrix, np.ndarray) or matrix.ndim != 2 or matrix.shape[1] < 1:
        raise DataError(f"npy encoder: {path}: expected a 2-D (n, d) matrix with d >= 1, got "
                        f"shape {getattr(matrix, 'shape', None)}")
    if matrix.dtype.kind not in "fiu":
        raise DataError(f"npy encoder: {path}: expected numbers (float32), got dtype "
                        f"{matrix.dtype}")
    return matrix


class NpyEncoder(EncoderPlugin):
    backend = "npy"

    @classmethod
    def spec_of(cls, identity: EncoderIdentity) -> tuple[str, dict]:
        return f"npy:{identity.model}", {}

    def __init__(self, matrix_path: str, texts_path: str | None = None) -> None:
        if texts_path is None:
            texts_path = os.path.splitext(matrix_path)[0] + ".txt"
        finish_pending(os.path.dirname(os.path.abspath(matrix_path)))  # an encode cut short
        for path, what in ((matrix_path, "embedding matrix"), (texts_path, "text file")):
            if not os.path.isfile(path):
                raise DataError(
                    f"npy encoder: {what} {path!r} does not exist; expected a .npy matrix "
                    "and a line-aligned .txt file (npy:vectors.npy or npy:vectors.npy,texts.txt)"
                )
        matrix = load_matrix(matrix_path)
        texts = read_lines(texts_path)
        if len(texts) != matrix.shape[0]:
            raise DataError(
                f"npy encoder: {texts_path} has {len(texts)} lines but {matrix_path} has "
                f"{matrix.shape[0]} rows; they must be line-aligned"
            )
        self._matrix = matrix
        # keyed as the encoder is asked: by the normalised text (check_texts)
        self._row = {normalize_text(t): i for i, t in enumerate(texts)}
        self.dim = int(matrix.shape[1])
        self.name = f"npy:{matrix_path}"
        self.identity = EncoderIdentity(
            backend="npy",
            model=os.path.abspath(matrix_path),
            revision=sha256_file(matrix_path) + "-" + sha256_file(texts_path),
            dim=self.dim,
            pooling="precomputed",
            normalize=False,
        )

    def encode(self, texts: Sequence[str], *, batch_size: int = 64) -> np.ndarray:
        check_batch_size(batch_size, self.name)
        texts = check_texts(texts, self.name)
        missing = [t for t in texts if t not in self._row]
        if missing:
            raise DataError(
                f"{self.name}: {len(missing)} sentence(s) have no precomputed embedding, "
                f"e.g. {missing[0][:80]!r}; add them to the matrix or use a live encoder"
            )
        idx = np.fromiter((self._row[t] for t in texts), dtype=np.int64, count=len(texts))
        return np.asarray(self._matrix[idx], dtype=np.float32)
