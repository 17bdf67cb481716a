"""Small torch modules that split an embedding ``e (B, d)`` into ``(m, l)``."""

from __future__ import annotations

import torch
from torch import nn

from ..exceptions import ConfigError


class LinearResidualHead(nn.Module):
    """SEED's head: ``m = W e + b`` (one linear layer), ``l = e - m``."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.meaning = nn.Linear(dim, dim)

    def forward(self, e: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        m = self.meaning(e)  # (B, d)
        return m, e - m


def _layer(dim: int, hidden: int) -> nn.Module:
    """``Linear(d, d)`` when ``hidden == 0``, else ``Linear(d, h) -> ReLU -> Linear(h, d)``."""
    if hidden <= 0:
        return nn.Linear(dim, dim)
    return nn.Sequential(nn.Linear(dim, hidden), nn.ReLU(), nn.Linear(hidden, dim))


def start_near_identity(head: nn.Module, scale: float) -> nn.Module:
    """Start a linear head from the input itself: the meaning map at ``scale * I`` and, for
    two heads, the language map at ``(1 - scale) * I`` (biases 0), so ``m + l = e`` at the
    start. ``0 < scale < 1`` keeps the language part non-zero (its cosines need a norm).
    """
    if not 0 < scale < 1:
        raise ConfigError(f"init_scale must be in (0, 1), or None for a random start; got "
                          f"{scale!r}")
    starts = {"meaning": scale, "language": 1 - scale}
    for name, value in starts.items():
        layer = getattr(head, name, None)
        if layer is None:
            continue
        if not isinstance(layer, nn.Linear) or layer.in_features != layer.out_features:
            raise ConfigError("init_scale starts a linear head near the identity; this head's "
                              f"{name} map is {type(layer).__name__} (use hidden=0, or leave "
                              "init_scale at None)")
        with torch.no_grad():
            layer.weight.copy_(value * torch.eye(layer.in_features))
            layer.bias.zero_()
    return head


class TwoHeads(nn.Module):
    """DREAM's and MEAT's head: ``m = MLP_m(e)``, ``l = MLP_l(e)``, two independent maps.

    With ``n_languages > 0`` it also carries DREAM's language classifier
    ``lid(l) = W l + b`` ``(B, d) -> (B, K)``, used only by the loss.
    """

    def __init__(self, dim: int, hidden: int = 0, n_languages: int = 0) -> None:
        super().__init__()
        self.meaning = _layer(dim, hidden)
        self.language = _layer(dim, hidden)
        self.lid = nn.Linear(dim, n_languages) if n_languages > 0 else None

    def forward(self, e: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.meaning(e), self.language(e)  # (B, d), (B, d)
