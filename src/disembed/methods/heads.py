"""Small torch modules that split an embedding ``e (B, d)`` into ``(m, l)``."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from ..exceptions import ConfigError
from .export_map import Affine


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


def torch_layers(module: torch.nn.Module) -> list[Affine]:
    """``nn.Linear`` / ``nn.Sequential(Linear, ReLU, Linear, ...)`` as :class:`Affine` layers."""
    parts = list(module) if isinstance(module, torch.nn.Sequential) else [module]
    out: list[Affine] = []
    for part in parts:
        if isinstance(part, torch.nn.Linear):
            bias = part.bias.detach().numpy() if part.bias is not None else \
                np.zeros(part.out_features, np.float32)
            out.append(Affine(part.weight.detach().numpy().astype(np.float32).copy(),
                              bias.astype(np.float32).copy()))
        elif isinstance(part, torch.nn.ReLU) and out and out[-1].activation == "identity":
            out[-1] = Affine(out[-1].weight, out[-1].bias, "relu")
        else:
            raise ConfigError(f"the meaning head holds a {type(part).__name__}, which has no "
                              "exported form (only Linear and ReLU layers do)")
    return out
