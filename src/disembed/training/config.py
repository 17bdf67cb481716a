"""Typed, validated training settings (saved beside every trained model)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Literal

from ..exceptions import ConfigError


@dataclass
class TrainConfig:
    """Settings of the one training loop.

    Defaults follow the SEED paper: Adam, lr 1e-4, batch 512, early stopping on
    the validation loss with patience 5 and a 10% validation split.

    Attributes:
        negatives: ``"paper"``: seeded in-batch same-language negatives; rows without one
            are left out of the negative terms; validation negatives are drawn once
            and reused every epoch, so validation losses are comparable.
            ``"official"``: as the official SEED code: rows without a same-language partner
            use themselves, training drops the last partial batch, and validation negatives
            are drawn afresh every epoch.
    """

    lr: float = 1e-4
    batch_size: int = 512
    max_epochs: int = 100
    patience: int = 5
    val_fraction: float = 0.1
    seed: int = 0
    negatives: Literal["paper", "official"] = "paper"
    weight_decay: float = 0.0

    def __post_init__(self) -> None:
        checks = [
            (math.isfinite(self.lr) and self.lr > 0, "lr must be a finite number > 0"),
            (self.batch_size >= 2, "batch_size must be >= 2 (negatives come from the batch)"),
            (self.max_epochs >= 1, "max_epochs must be >= 1"),
            (self.patience >= 1, "patience must be >= 1"),
            (0 < self.val_fraction < 0.5, "val_fraction must be in (0, 0.5)"),
            (self.negatives in ("paper", "official"), "negatives must be 'paper' or 'official'"),
            (math.isfinite(self.weight_decay) and self.weight_decay >= 0,
             "weight_decay must be a finite number >= 0"),
        ]
        for ok, message in checks:
            if not ok:
                raise ConfigError(f"TrainConfig: {message}; got {asdict(self)}")

    def to_dict(self) -> dict:
        return asdict(self)
