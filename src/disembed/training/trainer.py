"""The one training loop every trained recipe uses.

Input: ``n`` translation pairs of precomputed embeddings ``src (n, d)``,
``tgt (n, d)`` with integer language ids. A seeded 10% split is held out for
validation; each epoch shuffles with a seeded generator, draws same-language
negatives inside each batch (vectorised), and steps Adam. Training normally ends
by early stopping (the validation loss has not improved for ``patience`` epochs);
a user-set budget (``max_epochs``, ``max_steps``, ``time_budget_seconds``) may end it
sooner, and the history says which ended it (``stop_reason``) and whether the
validation loss was still improving then (``budget_bound``). The best epoch's weights
are restored at the end. With a checkpoint directory, every epoch is saved
(safetensors + JSON, atomically) and a rerun resumes from the last finished epoch,
bit for bit as if never interrupted.

Each step runs on the path :class:`~.speed.StepRunner` chooses from ``config.speed``,
``precision`` and ``deterministic`` (eager float32 by default; a compiled loss or
bfloat16 head products where asked or measured faster); each epoch's record names it
(``path``) and the history says why (``step_path``).

A recipe may bring an :class:`Adversary` (MEAT's language discriminator): a second
module with its own Adam optimiser, stepped on each batch just before the main
step (alternating updates); its weights and optimiser state are checkpointed too.

The loop is :func:`train` over small steps on a :class:`~.state.TrainState`:
:func:`init_state`, :func:`resume`, :func:`should_stop`, :func:`run_epoch`,
:func:`validate`, :func:`end_epoch`, :func:`save` and :func:`finish`.
"""

from __future__ import annotations

import logging
import math
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

from ..exceptions import CheckpointError, NonFiniteError
from ..hardware import configure_threads
from ..progress import progress_bar
from .batches import Adversary, Batch, LossFn, PairData, make_batch, row_chunks
from .checkpoint import load_checkpoint, move_aside, save_checkpoint
from .config import SAFETY_MAX_EPOCHS, StopReason, TrainConfig
from .speed import StepRunner, fused_adam, planned_steps
from .state import TrainHistory, TrainState

logger = logging.getLogger(__name__)

__all__ = ["Adversary", "Batch", "LossFn", "TrainHistory", "TrainState", "end_epoch",
           "finish", "init_state", "resume", "run_epoch", "save", "should_stop", "train",
           "validate"]


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
        checkpoint_dir: where to save every epoch and resume from (a directory of its own).
        on_epoch_end: called with each epoch's record.
        fingerprint_extra: what else identifies the run (method, hyperparameters); a
            checkpoint with another fingerprint is moved aside, not resumed.
        adversary: an optional second module stepped before each main step (see module doc).
    """
    configure_threads()  # one thread count per process (disembed.hardware), set once
    data = PairData.split(src, tgt, src_lang, tgt_lang, config)
    fingerprint = {"config": config.to_dict(), "shape": list(data.src.shape),
                   "data": data.digest(), **(fingerprint_extra or {})}
    state = init_state(module, config, train_pairs=len(data.train_idx),
                       val_pairs=len(data.val_idx), adversary=adversary)
    if checkpoint_dir is not None:
        state = resume(state, config, Path(checkpoint_dir), fingerprint)
    with progress_bar(config.max_epochs, "training", unit="epoch", initial=state.epoch) as bar:
        while (reason := should_stop(state, config)) is None:
            stats = run_epoch(state, data, config, loss_fn)
            record = end_epoch(state, stats, *validate(state, data, config, loss_fn))
            _report(bar, state, record)
            if on_epoch_end is not None:
                on_epoch_end(record)
            if checkpoint_dir is not None:
                save(state, Path(checkpoint_dir), fingerprint)
    return finish(state, reason, config)


def init_state(module: torch.nn.Module, config: TrainConfig, *, train_pairs: int,
               val_pairs: int, adversary: Adversary | None = None) -> TrainState:
    """A fresh run: Adam on ``module`` (and on the adversary), the seeded generator.
    Without ``deterministic``, Adam's fused kernel (one pass, ~2x faster, rounds apart)."""
    adam = {"lr": config.lr, "weight_decay": config.weight_decay,
            "fused": fused_adam(config)}
    optimizer = torch.optim.Adam(module.parameters(), **adam)
    adv_opt = None if adversary is None else torch.optim.Adam(
        adversary.module.parameters(), **adam)
    return TrainState(module, optimizer, torch.Generator().manual_seed(config.seed + 1),
                      TrainHistory(train_pairs=train_pairs, val_pairs=val_pairs),
                      adversary=adversary, adversary_optimizer=adv_opt)


def resume(state: TrainState, config: TrainConfig, directory: Path,
           fingerprint: dict[str, Any]) -> TrainState:
    """``state`` continued from the checkpoint in ``directory`` if there is a usable one;
    else (none, another run's, corrupt) a fresh state, the bad checkpoint moved aside."""
    checkpoint = load_checkpoint(directory, fingerprint)
    if checkpoint is None:
        return state
    try:
        state.restore(checkpoint)
    except (CheckpointError, ValueError, RuntimeError) as exc:
        aside = move_aside(directory, ".corrupt")
        logger.warning("checkpoint in %s does not fit this run (%s); moved to %s, starting "
                       "afresh", directory, exc, aside)
        return init_state(state.module, config, train_pairs=state.history.train_pairs,
                          val_pairs=state.history.val_pairs, adversary=state.adversary)
    logger.info("resuming from %s (epoch %d done)", directory, state.epoch)
    return state


def should_stop(state: TrainState, config: TrainConfig) -> StopReason | None:
    """Why the run must end before another epoch, or ``None`` to go on."""
    if state.bad >= config.patience:
        return "early_stopping"
    budget = _budget_spent(state, config, state.history.spent_seconds)
    if budget is not None:
        return budget
    if config.max_epochs is not None and state.epoch >= config.max_epochs:
        return "max_epochs"
    if state.epoch >= SAFETY_MAX_EPOCHS:
        return "safety_ceiling"
    return None


def _budget_spent(state: TrainState, config: TrainConfig, seconds: float) -> StopReason | None:
    if config.max_steps is not None and state.history.steps >= config.max_steps:
        return "max_steps"
    if config.time_budget_seconds is not None and seconds >= config.time_budget_seconds:
        return "time_budget"
    return None


def run_epoch(state: TrainState, data: PairData, config: TrainConfig,
              loss_fn: LossFn) -> dict[str, Any]:
    """One shuffled pass over the training rows, one Adam step per batch (after the
    adversary's); it ends early when the step or time budget is spent."""
    t0 = time.perf_counter()
    spent_before = state.history.spent_seconds
    official = config.negatives == "official"
    state.module.train()
    perm = data.train_idx[torch.randperm(len(data.train_idx), generator=state.generator)]
    runner = _runner(state, config, loss_fn, len(perm))
    total, steps, pairs = 0.0, 0, 0
    for rows in row_chunks(perm, config.batch_size, drop_last=official):
        if _budget_spent(state, config, spent_before + time.perf_counter() - t0) is not None:
            break
        batch = make_batch(data.src, data.tgt, data.s_lang, data.t_lang, rows,
                           state.generator, "self" if official else "mask")
        with runner.step(len(rows)) as step_loss:  # eager or compiled, float32 or bfloat16
            if state.adversary is not None:
                _adversary_step(state, batch)
            loss, _ = step_loss(batch)
            value = finite_loss(loss.item(), f"epoch {state.epoch + 1}, step {steps + 1}",
                                config)
            state.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            state.optimizer.step()
        total += value
        steps += 1
        pairs += len(rows)
        state.history.steps += 1
    seconds = time.perf_counter() - t0
    state.history.step_path = runner.to_dict()
    return {"train_loss": total / steps if steps else float("nan"), "steps": steps,
            "train_pairs": pairs, "train_seconds": seconds,
            "pairs_per_second": pairs / seconds if seconds else float("nan"),
            "path": runner.label}


def _runner(state: TrainState, config: TrainConfig, loss_fn: LossFn,
            train_rows: int) -> StepRunner:
    """The run's :class:`StepRunner`, made at its first epoch (fresh or resumed)."""
    if state.runner is None:
        per_epoch = (train_rows // config.batch_size if config.negatives == "official"
                     else -(-train_rows // config.batch_size))
        state.runner = StepRunner(loss_fn, config, planned_steps=planned_steps(
            config, per_epoch, state.history.steps))
    return state.runner


def _adversary_step(state: TrainState, batch: Batch) -> None:
    state.adversary.module.train()
    loss = state.adversary.loss_fn(batch)
    state.adversary_optimizer.zero_grad(set_to_none=True)
    loss.backward()
    state.adversary_optimizer.step()


@torch.no_grad()
def validate(state: TrainState, data: PairData, config: TrainConfig,
             loss_fn: LossFn) -> tuple[float, dict[str, float], float]:
    """``(mean loss, mean unweighted terms, seconds)`` on the validation rows. The paper
    form draws the same negatives every epoch; the official form draws them afresh."""
    t0 = time.perf_counter()
    state.module.eval()
    official = config.negatives == "official"
    gen = state.generator if official else torch.Generator().manual_seed(config.seed + 2)
    total, terms_sum, count = 0.0, {}, 0
    for batch in data.batches(data.val_idx, config.batch_size, gen,
                              "self" if official else "mask", drop_last=False):
        loss, terms = loss_fn(batch)
        rows = len(batch.s)
        total += float(loss) * rows
        for k, v in terms.items():
            terms_sum[k] = terms_sum.get(k, 0.0) + float(v) * rows
        count += rows
    terms = {k: v / max(count, 1) for k, v in terms_sum.items()}
    mean = finite_loss(total / max(count, 1), f"epoch {state.epoch + 1}, validation", config)
    return mean, terms, time.perf_counter() - t0


def finite_loss(value: float, where: str, config: TrainConfig) -> float:
    """``value``, or a NonFiniteError: a NaN/inf loss would only train NaN weights."""
    if not math.isfinite(value):
        raise NonFiniteError(f"the training loss is {value} at {where}: training diverged. "
                             f"Lower the learning rate (lr={config.lr}, --lr) or check the "
                             "embeddings for NaN/inf; nothing was saved from this run")
    return value


def end_epoch(state: TrainState, stats: dict[str, Any], val_loss: float,
              val_terms: dict[str, float], val_seconds: float) -> dict[str, Any]:
    """Append the epoch's record to the history; keep the weights if they are the best."""
    record = {"epoch": state.epoch + 1, **stats, "val_loss": val_loss, "val_terms": val_terms,
              "val_seconds": val_seconds}
    improved = val_loss < state.best_val
    state.history.epochs.append(record)
    if improved:
        state.history.best_epoch = record["epoch"]
        state.best_state = {k: v.detach().clone() for k, v in state.module.state_dict().items()}
    return record


def save(state: TrainState, directory: Path, fingerprint: dict[str, Any]) -> None:
    """Checkpoint ``state`` (see :mod:`.checkpoint`)."""
    save_checkpoint(directory, state.to_checkpoint(fingerprint))


def _report(bar: Any, state: TrainState, record: dict[str, Any]) -> None:
    best = state.history.best_epoch
    bar.set_postfix(train=f"{record['train_loss']:.4f}", val=f"{record['val_loss']:.4f}",
                    best=best, refresh=False)
    bar.update(1)
    logger.debug("epoch %d: train %.4f  val %.4f  (%.0f pairs/s)%s", record["epoch"],
                 record["train_loss"], record["val_loss"], record["pairs_per_second"],
                 "  *best*" if best == record["epoch"] else "")


def finish(state: TrainState, reason: StopReason, config: TrainConfig) -> TrainHistory:
    """Record why the run ended, restore the best weights, log the summary."""
    history = state.history
    history.stop_reason = reason
    history.stopped_early = reason == "early_stopping"
    history.epochs_since_best = state.bad
    history.budget_bound = (not history.stopped_early and bool(history.epochs)
                            and history.best_epoch == len(history.epochs))
    history.seconds = sum(e["train_seconds"] for e in history.epochs)
    if state.best_state is not None:
        state.module.load_state_dict(state.best_state)
    state.module.eval()
    _log_end(history, config)
    return history


def _log_end(history: TrainHistory, config: TrainConfig) -> None:
    budget = {"max_epochs": f"max_epochs={config.max_epochs}",
              "max_steps": f"max_steps={config.max_steps}",
              "time_budget": f"time_budget_seconds={config.time_budget_seconds}",
              "safety_ceiling": f"the safety ceiling of {SAFETY_MAX_EPOCHS} epochs"}
    best = history.epochs[history.best_epoch - 1]["val_loss"] if history.best_epoch else None
    logger.info("trained %d epochs (%d steps, %.1fs): best epoch %d (val %s); ended by %s",
                len(history.epochs), history.steps, history.seconds, history.best_epoch,
                "n/a" if best is None else f"{best:.4f}",
                "early stopping" if history.stopped_early else budget[history.stop_reason])
    if history.budget_bound:
        logger.warning("training ended at %s with the validation loss still falling (best "
                       "epoch = last): the model is probably under-trained; raise the budget "
                       "(or leave max_epochs unset to train until early stopping), raise lr, "
                       "or give it more pairs", budget[history.stop_reason])
    elif history.stop_reason == "safety_ceiling":
        logger.warning("training hit %s without early stopping; set max_epochs to choose "
                       "the budget yourself", budget["safety_ceiling"])
