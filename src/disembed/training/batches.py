"""The data side of training: the seeded validation split, batches and their negatives."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Callable, Iterator, Literal, Protocol

import numpy as np
import torch

from ..exceptions import DataError
from .config import TrainConfig
from .negatives import same_language_negatives


@dataclass
class Batch:
    """One batch: embeddings (B, d), language ids (B,), negative indices (B,) and masks (B,)."""

    s: torch.Tensor
    t: torch.Tensor
    s_lang: torch.Tensor
    t_lang: torch.Tensor
    s_neg: torch.Tensor
    t_neg: torch.Tensor
    s_valid: torch.Tensor
    t_valid: torch.Tensor


@dataclass
class Adversary:
    """A module trained against the main one: ``loss_fn(batch)`` is minimised over
    ``module``'s parameters only (the caller detaches what must not move), once per
    training batch, before the main step."""

    module: torch.nn.Module
    loss_fn: Callable[[Batch], torch.Tensor]


class LossFn(Protocol):
    def __call__(self, batch: Batch) -> tuple[torch.Tensor, dict[str, torch.Tensor]]: ...


@dataclass
class PairData:
    """Training pairs as tensors and their seeded split: ``src``/``tgt`` (n, d) float32,
    ``s_lang``/``t_lang`` (n,) int64, ``train_idx``/``val_idx`` row indices."""

    src: torch.Tensor
    tgt: torch.Tensor
    s_lang: torch.Tensor
    t_lang: torch.Tensor
    train_idx: torch.Tensor
    val_idx: torch.Tensor

    @classmethod
    def split(cls, src: np.ndarray, tgt: np.ndarray, src_lang: np.ndarray,
              tgt_lang: np.ndarray, config: TrainConfig) -> "PairData":
        """Hold out ``config.val_fraction`` of the pairs (at least 2), by a seeded permutation."""
        src_t = torch.as_tensor(np.asarray(src, np.float32))
        tgt_t = torch.as_tensor(np.asarray(tgt, np.float32))
        n = len(src_t)
        n_val = max(2, int(round(n * config.val_fraction)))
        if n - n_val < 2:
            raise DataError(f"need at least {n_val + 2} training pairs for a validation split "
                            f"of {config.val_fraction}; got {n}")
        order = torch.randperm(n, generator=torch.Generator().manual_seed(config.seed))
        return cls(src_t, tgt_t, torch.as_tensor(np.asarray(src_lang)),
                   torch.as_tensor(np.asarray(tgt_lang)), order[n_val:], order[:n_val])

    def digest(self) -> str:
        """A short sha256 of the embeddings (part of a checkpoint's fingerprint)."""
        h = hashlib.sha256()
        for x in (self.src, self.tgt):
            h.update(x.numpy().tobytes())
        return h.hexdigest()[:16]

    def batches(self, index: torch.Tensor, size: int, generator: torch.Generator,
                fallback: Literal["mask", "self"], drop_last: bool) -> Iterator[Batch]:
        """Batches of rows ``index`` in order, each with freshly drawn negatives."""
        for rows in row_chunks(index, size, drop_last):
            yield make_batch(self.src, self.tgt, self.s_lang, self.t_lang, rows, generator,
                             fallback)


def row_chunks(index: torch.Tensor, size: int, drop_last: bool) -> Iterator[torch.Tensor]:
    """Consecutive chunks of ``index`` of ``size`` rows; a last chunk of 1 row is skipped
    (it has no negative), a partial one too with ``drop_last``."""
    stop = len(index) - (len(index) % size if drop_last else 0)
    for start in range(0, stop, size):
        chunk = index[start : start + size]
        if len(chunk) >= 2:
            yield chunk


def make_batch(src, tgt, s_lang, t_lang, rows, gen, fallback) -> Batch:
    """Rows ``rows`` of the pairs with same-language negatives drawn from ``gen``."""
    s_ids, t_ids = s_lang.index_select(0, rows), t_lang.index_select(0, rows)
    s_neg, s_valid = same_language_negatives(s_ids, gen, fallback)
    t_neg, t_valid = same_language_negatives(t_ids, gen, fallback)
    # index_select, not src[rows]: the same rows, copied ~2x faster (no advanced indexing)
    return Batch(src.index_select(0, rows), tgt.index_select(0, rows), s_ids, t_ids, s_neg,
                 t_neg, s_valid.float(), t_valid.float())
