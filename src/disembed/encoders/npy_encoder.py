"""Precomputed embeddings: a ``.npy`` matrix plus its line-aligned text file.

``npy:vectors.npy`` reads ``vectors.npy`` (n, d) and ``vectors.txt`` (n lines); an
explicit text file can be given as ``npy:vectors.npy,texts.txt``. Encoding a
sentence that is not in the text file is an error that names it.
"""

from __future__ import annotations

import os
from typing import Sequence

import numpy as np

from ..exceptions import DataError
from ..util.files import sha256_file
from .base import EncoderIdentity, check_texts


class NpyEncoder:
    def __init__(self, matrix_path: str, texts_path: str | None = None) -> None:
        if texts_path is None:
            texts_path = os.path.splitext(matrix_path)[0] + ".txt"
        for path, what in ((matrix_path, "embedding matrix"), (texts_path, "text file")):
            if not os.path.isfile(path):
                raise DataError(
                    f"npy encoder: {what} {path!r} does not exist; expected a .npy matrix "
                    "and a line-aligned .txt file (npy:vectors.npy or npy:vectors.npy,texts.txt)"
                )
        matrix = np.load(matrix_path, mmap_mode="r")
        if matrix.ndim != 2:
            raise DataError(f"{matrix_path}: expected a 2-D (n, d) matrix, got shape "
                            f"{matrix.shape}")
        with open(texts_path, encoding="utf-8") as f:
            texts = f.read().split("\n")
        if texts and texts[-1] == "":
            texts.pop()
        if len(texts) != matrix.shape[0]:
            raise DataError(
                f"npy encoder: {texts_path} has {len(texts)} lines but {matrix_path} has "
                f"{matrix.shape[0]} rows; they must be line-aligned"
            )
        self._matrix = matrix
        self._row = {t: i for i, t in enumerate(texts)}
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
        texts = check_texts(texts, self.name)
        missing = [t for t in texts if t not in self._row]
        if missing:
            raise DataError(
                f"{self.name}: {len(missing)} sentence(s) have no precomputed embedding, "
                f"e.g. {missing[0][:80]!r}; add them to the matrix or use a live encoder"
            )
        idx = np.fromiter((self._row[t] for t in texts), dtype=np.int64, count=len(texts))
        return np.asarray(self._matrix[idx], dtype=np.float32)
