"""Same-language negatives, sampled in vectorised form inside a batch.

For every row ``i`` pick a row ``j != i`` of the same batch with the same
language, uniformly at random from a seeded ``torch.Generator``: draw a
``(B, B)`` uniform matrix, mask the pairs that are not allowed with -1 and take
the row-wise argmax. Rows with no allowed partner get ``valid = False`` (the
paper form then leaves them out of the negative terms), or point to themselves
(``fallback="self"``, what the official SEED code does).
"""

from __future__ import annotations

from typing import Literal

import torch


def same_language_negatives(
    lang_ids: torch.Tensor,
    generator: torch.Generator,
    fallback: Literal["mask", "self"] = "mask",
) -> tuple[torch.Tensor, torch.Tensor]:
    """Return ``(index (B,) int64, valid (B,) bool)`` for ``lang_ids (B,)``."""
    batch = lang_ids.shape[0]
    allowed = lang_ids[:, None] == lang_ids[None, :]  # (B, B)
    allowed.fill_diagonal_(False)
    scores = torch.rand((batch, batch), generator=generator)
    scores = torch.where(allowed, scores, torch.full_like(scores, -1.0))
    index = scores.argmax(dim=1)  # (B,)
    valid = allowed.any(dim=1)
    if fallback == "self":
        index = torch.where(valid, index, torch.arange(batch))
    return index, valid
