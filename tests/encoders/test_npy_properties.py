"""Property test of the ``npy:`` encoder: any matrix and text bytes -> an encoder or a
DataError, never another exception; a loaded one encodes its own sentences."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
from hypothesis import given
from strategies import bounded, npy_file, text_file

from disembed.encoders.npy_encoder import NpyEncoder
from disembed.exceptions import DataError

_DIR = Path(tempfile.mkdtemp(prefix="disembed-npy-"))


@bounded(200)
@given(npy_file(), text_file())
def test_any_npy_bytes_load_or_fail_clearly(matrix, texts):
    (_DIR / "m.npy").write_bytes(matrix)
    (_DIR / "m.txt").write_bytes(texts)
    try:
        encoder = NpyEncoder(str(_DIR / "m.npy"))
    except DataError:
        return
    assert encoder.dim >= 1
    sentences = [t for t in encoder._row if t.strip()]
    if sentences:
        out = encoder.encode(sentences[:3])
        assert out.dtype == np.float32 and out.shape == (min(3, len(sentences)), encoder.dim)
