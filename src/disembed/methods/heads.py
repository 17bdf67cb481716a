"""Small torch modules that split an embedding ``e (B, d)`` into ``(m, l)``."""

from __future__ import annotations

import torch
from torch import nn


class LinearResidualHead(nn.Module):
    """SEED's head: ``m = W e + b`` (one linear layer), ``l = e - m``."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.meaning = nn.Linear(dim, dim)

    def forward(self, e: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        m = self.meaning(e)  # (B, d)
        return m, e - m
