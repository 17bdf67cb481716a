"""What a training run carries from one epoch to the next, and its checkpoint form.

:class:`TrainState` holds the live objects (module, optimiser(s), generator) and the
run's :class:`TrainHistory`; the epoch count, the best validation loss and the number
of epochs since it are read off the history, so they can never disagree with it.
:meth:`TrainState.to_checkpoint` / :meth:`TrainState.restore` convert to and from
:class:`~.checkpoint.Checkpoint` (tensors + JSON) exactly: Adam's moments and step
counts, the generator's state and every float of the history round-trip bit for bit.
"""

from __future__ import annotations

import base64
import math
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

from ..exceptions import CheckpointError
from .batches import Adversary
from .checkpoint import Checkpoint, optimizer_from_checkpoint, optimizer_to_checkpoint
from .speed import StepRunner


@dataclass
class TrainHistory:
    """Per-epoch records and how the run ended.

    Attributes:
        epochs: one record per epoch: ``epoch``, ``train_loss``, ``val_loss``,
            ``val_terms`` (unweighted term values), ``steps``, ``train_pairs``,
            ``train_seconds``, ``val_seconds``, ``pairs_per_second``, ``path`` (how its
            full-size steps ran at its end: ``"eager/float32"``, ``"compiled/bfloat16"``...).
        best_epoch: the epoch (1-based) whose weights were kept; 0 before any.
        stop_reason: why training ended: ``"early_stopping"`` (the normal end),
            ``"max_epochs"``, ``"max_steps"``, ``"time_budget"`` or ``"safety_ceiling"``.
        budget_bound: a budget ended the run while the validation loss was still
            improving (the last epoch was the best): the model is probably under-trained.
        epochs_since_best: epochs after the best one when training ended.
        stopped_early: ``stop_reason == "early_stopping"``.
        steps: optimiser steps taken in all.
        seconds: training time (without validation) over all epochs.
        step_path: how the training steps ran and why (:meth:`.speed.StepRunner.to_dict`):
            ``speed``, ``precision``, ``reason`` and the step times "auto" measured.
    """

    epochs: list[dict] = field(default_factory=list)
    best_epoch: int = 0
    stopped_early: bool = False
    stop_reason: str | None = None
    budget_bound: bool = False
    epochs_since_best: int = 0
    steps: int = 0
    train_pairs: int = 0
    val_pairs: int = 0
    seconds: float = 0.0
    step_path: dict[str, Any] = field(default_factory=dict)

    @property
    def pairs_per_second(self) -> float:
        done = sum(e["train_pairs"] for e in self.epochs)
        spent = sum(e["train_seconds"] for e in self.epochs)
        return done / spent if spent else float("nan")

    @property
    def spent_seconds(self) -> float:
        """Training plus validation time over all epochs (what a time budget counts)."""
        return sum(e["train_seconds"] + e["val_seconds"] for e in self.epochs)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "TrainHistory":
        """Inverse of :meth:`to_dict` after a JSON round trip (``null`` floats back to nan)."""
        data = dict(data)
        data["epochs"] = [_nan_for_null(record) for record in data.get("epochs", [])]
        return cls(**data)


def _nan_for_null(value: Any) -> Any:
    """JSON writes nan as null; an epoch record has no other null, so null means nan."""
    if value is None:
        return math.nan
    if isinstance(value, dict):
        return {k: _nan_for_null(v) for k, v in value.items()}
    return value


@dataclass
class TrainState:
    """The live objects of one run plus its history (see the module docstring)."""

    module: torch.nn.Module
    optimizer: torch.optim.Optimizer
    generator: torch.Generator
    history: TrainHistory
    adversary: Adversary | None = None
    adversary_optimizer: torch.optim.Optimizer | None = None
    best_state: dict[str, torch.Tensor] | None = None
    runner: StepRunner | None = None  # made by the trainer at the run's first epoch

    @property
    def epoch(self) -> int:
        """Epochs finished."""
        return len(self.history.epochs)

    @property
    def best_val(self) -> float:
        """The best validation loss so far (``inf`` before the first epoch)."""
        best = self.history.best_epoch
        return self.history.epochs[best - 1]["val_loss"] if best else math.inf

    @property
    def bad(self) -> int:
        """Epochs since the best one (what patience counts)."""
        return self.epoch - self.history.best_epoch

    def to_checkpoint(self, fingerprint: dict[str, Any]) -> Checkpoint:
        """Every tensor to the safetensors side, the rest to JSON."""
        tensors = _prefixed("module", self.module.state_dict())
        tensors |= _prefixed("best", self.best_state or {})
        opt_tensors, opt_meta = optimizer_to_checkpoint("optimizer", self.optimizer)
        meta = {"fingerprint": fingerprint, "epoch": self.epoch,
                "history": self.history.to_dict(), "optimizer": opt_meta,
                "has_best": self.best_state is not None,
                "generator": base64.b64encode(self.generator.get_state().numpy().tobytes())
                .decode("ascii")}
        tensors |= opt_tensors
        if self.adversary is not None:
            tensors |= _prefixed("adversary", self.adversary.module.state_dict())
            adv_tensors, meta["adversary_optimizer"] = optimizer_to_checkpoint(
                "adversary_optimizer", self.adversary_optimizer)
            tensors |= adv_tensors
        return Checkpoint(tensors, meta)

    def restore(self, checkpoint: Checkpoint) -> None:
        """Continue from ``checkpoint``. Everything is parsed and the module weights are
        checked against the live modules before anything is changed; a bad checkpoint
        raises ``CheckpointError`` (or the optimiser's ``ValueError``) with the modules
        untouched."""
        t, meta = checkpoint.tensors, checkpoint.meta
        try:
            module_sd = _strip(t, "module")
            best = _strip(t, "best") if meta["has_best"] else None
            history = TrainHistory.from_dict(meta["history"])
            gen_state = torch.frombuffer(bytearray(base64.b64decode(meta["generator"])),
                                         dtype=torch.uint8)
            opt_sd = optimizer_from_checkpoint("optimizer", t, meta["optimizer"])
            adv_sd = adv_opt_sd = None
            if self.adversary is not None:
                adv_sd = _strip(t, "adversary")
                adv_opt_sd = optimizer_from_checkpoint("adversary_optimizer", t,
                                                       meta["adversary_optimizer"])
        except (KeyError, TypeError, ValueError) as exc:
            raise CheckpointError(f"checkpoint lacks or garbles an entry: {exc!r}") from None
        _check_fits(self.module, module_sd, "module")
        if best is not None:
            _check_fits(self.module, best, "best weights")
        if self.adversary is not None:
            _check_fits(self.adversary.module, adv_sd, "adversary")
        if len(history.epochs) != meta.get("epoch"):
            raise CheckpointError(f"history has {len(history.epochs)} epochs, the checkpoint "
                                  f"says {meta.get('epoch')}")
        # optimisers first: their loads validate before changing anything, and a failure
        # there leaves the modules untouched (the caller then builds fresh optimisers)
        self.optimizer.load_state_dict(opt_sd)
        if self.adversary is not None:
            self.adversary_optimizer.load_state_dict(adv_opt_sd)
        self.generator.set_state(gen_state)
        self.module.load_state_dict(module_sd, strict=True)
        if self.adversary is not None:
            self.adversary.module.load_state_dict(adv_sd, strict=True)
        self.best_state, self.history = best, history


def _prefixed(prefix: str, state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {f"{prefix}.{k}": v for k, v in state.items()}


def _strip(tensors: dict[str, torch.Tensor], prefix: str) -> dict[str, torch.Tensor]:
    return {k[len(prefix) + 1:]: v for k, v in tensors.items() if k.startswith(prefix + ".")}


def _check_fits(module: torch.nn.Module, state: dict[str, torch.Tensor], what: str) -> None:
    """Same keys and shapes as ``module``'s own state (before any copy into it)."""
    own = {k: tuple(v.shape) for k, v in module.state_dict().items()}
    got = {k: tuple(v.shape) for k, v in state.items()}
    if own != got:
        raise CheckpointError(f"checkpoint {what} do not fit the module: expected {own}, "
                              f"got {got}")
