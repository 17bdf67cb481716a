"""Typed, validated training settings (saved beside every trained model)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Literal

from ..exceptions import ConfigError

#: Without ``max_epochs``, a run that never stops early ends here (reported as
#: ``stop_reason="safety_ceiling"``): far beyond any run seen to converge.
SAFETY_MAX_EPOCHS = 2000

StopReason = Literal["early_stopping", "max_epochs", "max_steps", "time_budget",
                     "safety_ceiling"]
STOP_REASONS: tuple[str, ...] = ("early_stopping", "max_epochs", "max_steps", "time_budget",
                                 "safety_ceiling")
SPEEDS: tuple[str, ...] = ("auto", "eager", "compiled")
PRECISIONS: tuple[str, ...] = ("auto", "float32", "bfloat16")


@dataclass
class TrainConfig:
    """Settings of the one training loop.

    Defaults follow the SEED paper: Adam, lr 1e-4, batch 512, early stopping on
    the validation loss with patience 5 and a 10% validation split, and no epoch cap.

    A run normally ends by early stopping: the validation loss has not improved for
    ``patience`` epochs, and the best epoch's weights are kept. The budgets below are
    off by default and set by the user; the first one reached ends the run, and the
    history records which (``stop_reason``) and whether the validation loss was still
    improving then (``budget_bound``), so a result can say it was cut short.

    Attributes:
        max_epochs: at most this many epochs; ``None``: until early stopping (with a
            safety ceiling of :data:`SAFETY_MAX_EPOCHS`, reported when reached).
        max_steps: at most this many optimiser steps (checked before each batch; the
            epoch in progress is then validated and recorded).
        time_budget_seconds: at most this much training + validation time (checked
            before each batch; the final validation runs after it).
        negatives: ``"paper"``: seeded in-batch same-language negatives; rows without one
            are left out of the negative terms; validation negatives are drawn once
            and reused every epoch, so validation losses are comparable.
            ``"official"``: as the official SEED code: rows without a same-language partner
            use themselves, training drops the last partial batch, and validation negatives
            are drawn afresh every epoch.
        deterministic: ``True`` (default): every step runs the reference path, eager
            float32, so a seeded run gives the same bits every time and a resumed run the
            same bits as an uninterrupted one. ``False`` lets ``speed`` and ``precision``
            choose faster paths whose rounding differs (see :mod:`.speed`).
        speed: ``"auto"`` (compile the loss where the run is long enough and compiled
            steps measure faster; eager when ``deterministic``), ``"eager"`` or
            ``"compiled"`` (``torch.compile``; needs ``deterministic=False``).
        precision: ``"auto"`` (bfloat16 head products where the hardware probe measured
            them faster than float32; float32 when ``deterministic``), ``"float32"`` or
            ``"bfloat16"`` (needs ``deterministic=False``).
    """

    lr: float = 1e-4
    batch_size: int = 512
    max_epochs: int | None = None
    patience: int = 5
    val_fraction: float = 0.1
    seed: int = 0
    negatives: Literal["paper", "official"] = "paper"
    weight_decay: float = 0.0
    max_steps: int | None = None
    time_budget_seconds: float | None = None
    deterministic: bool = True
    speed: Literal["auto", "eager", "compiled"] = "auto"
    precision: Literal["auto", "float32", "bfloat16"] = "auto"

    def __post_init__(self) -> None:
        checks = [
            (math.isfinite(self.lr) and self.lr > 0, "lr must be a finite number > 0"),
            (self.batch_size >= 2, "batch_size must be >= 2 (negatives come from the batch)"),
            (self.max_epochs is None or self.max_epochs >= 1,
             "max_epochs must be >= 1, or None to train until early stopping"),
            (self.max_steps is None or self.max_steps >= 1,
             "max_steps must be >= 1, or None for no step budget"),
            (self.time_budget_seconds is None or self.time_budget_seconds > 0,
             "time_budget_seconds must be > 0, or None for no time budget"),
            (self.patience >= 1, "patience must be >= 1"),
            (0 < self.val_fraction < 0.5, "val_fraction must be in (0, 0.5)"),
            (self.negatives in ("paper", "official"), "negatives must be 'paper' or 'official'"),
            (math.isfinite(self.weight_decay) and self.weight_decay >= 0,
             "weight_decay must be a finite number >= 0"),
            (self.speed in SPEEDS, f"speed must be one of {SPEEDS}"),
            (self.precision in PRECISIONS, f"precision must be one of {PRECISIONS}"),
            (isinstance(self.deterministic, bool), "deterministic must be True or False"),
            (not (self.deterministic is True and self.speed == "compiled"),
             "speed='compiled' changes the rounding of every step: set deterministic=False "
             "to use it (or speed='auto'/'eager')"),
            (not (self.deterministic is True and self.precision == "bfloat16"),
             "precision='bfloat16' changes the numerics of every step: set "
             "deterministic=False to use it (or precision='auto'/'float32')"),
        ]
        for ok, message in checks:
            if not ok:
                raise ConfigError(f"TrainConfig: {message}; got {asdict(self)}")

    @property
    def epoch_limit(self) -> int:
        """The epoch count that ends a run: ``max_epochs`` or the safety ceiling."""
        return self.max_epochs if self.max_epochs is not None else SAFETY_MAX_EPOCHS

    def to_dict(self) -> dict:
        return asdict(self)
