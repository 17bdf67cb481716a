"""The one training loop every trained recipe uses.

Input: ``n`` translation pairs of precomputed embeddings ``src (n, d)``,
``tgt (n, d)`` with integer language ids. A seeded 10% split is held out for
validation; each epoch shuffles with a seeded generator, draws same-language
negatives inside each batch (vectorised), and steps Adam. Training stops when
the validation loss has not improved for ``patience`` epochs and the best
weights are restored. With a checkpoint directory, every epoch is saved
atomically and a rerun resumes from the last finished epoch.

A recipe may bring an :class:`Adversary` (MEAT's language discriminator): a second
module with its own Adam optimiser, stepped on each batch just before the main
step (alternating updates); its weights and optimiser state are checkpointed too.
"""

from __future__ import annotations

import hashlib
import logging
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Protocol

import numpy as np
import torch

from ..exceptions import DataError, NonFiniteError
from ..progress import progress_bar
from .checkpoint import load_checkpoint, save_checkpoint
from .config import TrainConfig
from .negatives import same_language_negatives

logger = logging.getLogger(__name__)


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
class TrainHistory:
    """Per-epoch losses and timings of one run."""

    epochs: list[dict] = field(default_factory=list)
    best_epoch: int = 0
    stopped_early: bool = False
    train_pairs: int = 0
    val_pairs: int = 0
    seconds: float = 0.0

    @property
    def pairs_per_second(self) -> float:
        done = sum(e["train_pairs"] for e in self.epochs)
        spent = sum(e["train_seconds"] for e in self.epochs)
        return done / spent if spent else float("nan")


def _fingerprint(config: TrainConfig, src: torch.Tensor, tgt: torch.Tensor, extra: dict) -> dict:
    digest = hashlib.sha256()
    for x in (src, tgt):
        digest.update(x.numpy().tobytes())
    return {"config": config.to_dict(), "shape": list(src.shape), "data": digest.hexdigest()[:16],
            **extra}


def _batches(index: torch.Tensor, size: int, drop_last: bool):
    stop = len(index) - (len(index) % size if drop_last else 0)
    for start in range(0, stop, size):
        chunk = index[start : start + size]
        if len(chunk) >= 2:
            yield chunk


def _make_batch(src, tgt, s_lang, t_lang, rows, gen, fallback) -> Batch:
    s_neg, s_valid = same_language_negatives(s_lang[rows], gen, fallback)
    t_neg, t_valid = same_language_negatives(t_lang[rows], gen, fallback)
    return Batch(src[rows], tgt[rows], s_lang[rows], t_lang[rows], s_neg, t_neg,
                 s_valid.float(), t_valid.float())


def train(
    module: torch.nn.Module,
    loss_fn: LossFn,
    src: np.ndarray,
    tgt: np.ndarray,
    src_lang: np.ndarray,
    tgt_lang: np.ndarray,
    config: TrainConfig,
    *,
    checkpoint_dir: str | Path | None = None,
    on_epoch_end: Callable[[dict], None] | None = None,
    fingerprint_extra: dict | None = None,
    adversary: Adversary | None = None,
) -> TrainHistory:
    """Fit ``module``'s parameters by minimising ``loss_fn``; see the module docstring.

    Args:
        module: holds every trainable parameter (its initial weights must already be seeded).
        loss_fn: ``Batch -> (scalar loss, {term: value})``.
        src, tgt: ``(n, d) float32`` embeddings; row ``i`` of each is a translation pair.
        src_lang, tgt_lang: ``(n,) int`` language ids.
        adversary: an optional second module stepped before each main step (see module doc).
    """
    src_t, tgt_t = torch.as_tensor(np.asarray(src, np.float32)), torch.as_tensor(
        np.asarray(tgt, np.float32))
    s_lang, t_lang = torch.as_tensor(np.asarray(src_lang)), torch.as_tensor(np.asarray(tgt_lang))
    n = len(src_t)
    n_val = max(2, int(round(n * config.val_fraction)))
    if n - n_val < 2:
        raise DataError(f"need at least {n_val + 2} training pairs for a validation split of "
                        f"{config.val_fraction}; got {n}")
    order = torch.randperm(n, generator=torch.Generator().manual_seed(config.seed))
    val_idx, train_idx = order[:n_val], order[n_val:]
    official = config.negatives == "official"
    fallback = "self" if official else "mask"
    optimizer = torch.optim.Adam(module.parameters(), lr=config.lr,
                                 weight_decay=config.weight_decay)
    adv_opt = None if adversary is None else torch.optim.Adam(
        adversary.module.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    gen = torch.Generator().manual_seed(config.seed + 1)
    history = TrainHistory(train_pairs=len(train_idx), val_pairs=n_val)
    best_val, best_state, bad = float("inf"), None, 0
    start_epoch = 0
    fingerprint = _fingerprint(config, src_t, tgt_t, fingerprint_extra or {})
    if checkpoint_dir is not None:
        state = load_checkpoint(Path(checkpoint_dir), fingerprint)
        if state is not None:
            module.load_state_dict(state["module"])
            optimizer.load_state_dict(state["optimizer"])
            gen.set_state(state["generator"])
            best_val, best_state, bad = state["best_val"], state["best_state"], state["bad"]
            history = state["history"]
            start_epoch = state["epoch"]
            if adversary is not None:
                adversary.module.load_state_dict(state["adversary"])
                adv_opt.load_state_dict(state["adversary_optimizer"])
    val_gen_seed = config.seed + 2
    for epoch in range(start_epoch, config.max_epochs):
        if bad >= config.patience:
            break
        t0 = time.perf_counter()
        module.train()
        perm = train_idx[torch.randperm(len(train_idx), generator=gen)]
        total, steps, pairs = 0.0, 0, 0
        with progress_bar(len(perm), f"epoch {epoch + 1}", unit="pair") as bar:
            for rows in _batches(perm, config.batch_size, drop_last=official):
                batch = _make_batch(src_t, tgt_t, s_lang, t_lang, rows, gen, fallback)
                if adversary is not None:
                    _adversary_step(adversary, adv_opt, batch)
                loss, _ = loss_fn(batch)
                value = _finite_loss(loss.item(), f"epoch {epoch + 1}, step {steps + 1}", config)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
                total += value
                steps += 1
                pairs += len(rows)
                bar.update(len(rows))
        train_seconds = time.perf_counter() - t0
        val_gen = gen if official else torch.Generator().manual_seed(val_gen_seed)
        val_loss, val_terms = _evaluate(module, loss_fn, src_t, tgt_t, s_lang, t_lang, val_idx,
                                        config.batch_size, val_gen, fallback)
        _finite_loss(val_loss, f"epoch {epoch + 1}, validation", config)
        record = {"epoch": epoch + 1, "train_loss": total / max(steps, 1), "val_loss": val_loss,
                  "val_terms": val_terms, "train_pairs": pairs, "train_seconds": train_seconds,
                  "pairs_per_second": pairs / train_seconds if train_seconds else float("nan")}
        history.epochs.append(record)
        if val_loss < best_val:
            best_val, bad, history.best_epoch = val_loss, 0, epoch + 1
            best_state = {k: v.detach().clone() for k, v in module.state_dict().items()}
        else:
            bad += 1
        logger.info("epoch %d: train %.4f  val %.4f  (%.0f pairs/s)%s", epoch + 1,
                    record["train_loss"], val_loss, record["pairs_per_second"],
                    "" if bad else "  *best*")
        if on_epoch_end is not None:
            on_epoch_end(record)
        if checkpoint_dir is not None:
            state = {
                "fingerprint": fingerprint, "epoch": epoch + 1, "module": module.state_dict(),
                "optimizer": optimizer.state_dict(), "generator": gen.get_state(),
                "best_val": best_val, "best_state": best_state, "bad": bad, "history": history}
            if adversary is not None:
                state["adversary"] = adversary.module.state_dict()
                state["adversary_optimizer"] = adv_opt.state_dict()
            save_checkpoint(Path(checkpoint_dir), state)
    history.stopped_early = bad >= config.patience
    if history.epochs and not history.stopped_early and history.best_epoch == len(history.epochs):
        logger.warning("training reached max_epochs=%d with the validation loss still falling "
                       "(best epoch = last): the model is probably under-trained; raise "
                       "max_epochs (--max-epochs) or lr (--lr), or give it more pairs",
                       config.max_epochs)
    history.seconds = sum(e["train_seconds"] for e in history.epochs)
    if best_state is not None:
        module.load_state_dict(best_state)
    module.eval()
    return history


def _finite_loss(value: float, where: str, config: TrainConfig) -> float:
    """``value``, or a NonFiniteError: a NaN/inf loss would only train NaN weights."""
    if not math.isfinite(value):
        raise NonFiniteError(f"the training loss is {value} at {where}: training diverged. "
                             f"Lower the learning rate (lr={config.lr}, --lr) or check the "
                             "embeddings for NaN/inf; nothing was saved from this run")
    return value


def _adversary_step(adversary: Adversary, optimizer: torch.optim.Optimizer, batch: Batch) -> None:
    adversary.module.train()
    loss = adversary.loss_fn(batch)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()


@torch.no_grad()
def _evaluate(module, loss_fn, src, tgt, s_lang, t_lang, idx, size, gen, fallback):
    module.eval()
    total, terms_sum, count = 0.0, {}, 0
    for rows in _batches(idx, size, drop_last=False):
        batch = _make_batch(src, tgt, s_lang, t_lang, rows, gen, fallback)
        loss, terms = loss_fn(batch)
        total += float(loss) * len(rows)
        for k, v in terms.items():
            terms_sum[k] = terms_sum.get(k, 0.0) + float(v) * len(rows)
        count += len(rows)
    return total / max(count, 1), {k: v / max(count, 1) for k, v in terms_sum.items()}
