"""Same-language negatives, sampled in vectorised form inside a batch.

For every row ``i`` pick a row ``j != i`` of the same batch with the same
language, uniformly at random from a seeded ``torch.Generator``, in O(B log B)
without Python loops: rows are grouped by language (stable sort); in a group of
size ``k`` the row at position ``p`` takes the row at ``(p + r) mod k`` with ``r``
uniform in ``1..k-1``, which is uniform over the other ``k - 1`` rows. Rows with no
partner get ``valid = False`` and point to themselves; the paper form leaves them
out of the negative terms, the official form (``fallback="self"``) keeps them.
"""

from __future__ import annotations

from typing import Literal

import torch


def same_language_negatives(
    lang_ids: torch.Tensor,
    generator: torch.Generator,
    fallback: Literal["mask", "self"] = "mask",
) -> tuple[torch.Tensor, torch.Tensor]:
    """Return ``(index (B,) int64, valid (B,) bool)`` for ``lang_ids (B,)``.

    ``fallback`` only documents intent: lonely rows point to themselves either way and
    ``valid`` tells the caller whether to mask them.
    """
    batch = lang_ids.shape[0]
    order = torch.argsort(lang_ids, stable=True)  # (B,) rows grouped by language
    grouped = lang_ids[order]
    _, counts = torch.unique_consecutive(grouped, return_counts=True)
    first = torch.ones(batch, dtype=torch.bool)
    first[1:] = grouped[1:] != grouped[:-1]
    group = torch.cumsum(first, 0) - 1  # (B,) group number at each sorted position
    sizes = counts[group]  # (not repeat_interleave: it costs milliseconds on CPU)
    starts = (torch.cumsum(counts, 0) - counts)[group]
    position = torch.arange(batch) - starts
    shift = (torch.rand(batch, generator=generator) * (sizes - 1)).long() + 1  # 1..k-1
    partner_sorted = order[starts + (position + shift) % sizes]
    index = torch.empty_like(order)
    index[order] = partner_sorted
    valid = torch.empty(batch, dtype=torch.bool)
    valid[order] = sizes > 1
    return index, valid
