"""The products a certified search ranks by, float32 or bfloat16, and the candidate window
they are cut by: a row's products ``p`` are within ``|p - s| <= ulp |p| + A`` of its float32
score ``s``.

bfloat16 products' bound is :mod:`.bf16`'s. Float32 products' only error is the
summation's, ``gamma_d ||x|| ||y||max``, so their window holds just the near-ties below
float32 resolution, which blocked products order by rounding noise (it differs between
kernels and block shapes); re-scored and certified (:func:`.bf16.exact_lists`), both
precisions return the same lists.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .bf16 import ULP_BF16, RoundingStats, gamma
from .bf16 import slack as bf16_slack
from .topk import Window

WINDOW = 1.5  # the candidate window in units of delta (:mod:`.bf16`'s docstring)


@dataclass(frozen=True)
class Products:
    """The products a search ranks by, and how far they can be from the float32 score
    ``s``: ``|p - s| <= ulp |p| + A`` (``A``: :meth:`slack`)."""

    name: str
    dtype: torch.dtype
    ulp: float

    def slack(self, q: RoundingStats, db: RoundingStats, d: int) -> np.ndarray:
        if self.dtype == torch.bfloat16:
            return bf16_slack(q, db, d)
        # float32 products of float32 rows: only the summation, inflated for the float32
        # rounding of the float64 re-scoring (the ulp term covers it at larger scores)
        return gamma(d) * q.norm * db.norm.max() * (1 + 2.0**-20) + 1e-30


BFLOAT16 = Products("bfloat16", torch.bfloat16, ULP_BF16)
FLOAT32 = Products("float32", torch.float32, 2.0**-23)  # 2x the re-scoring's rounding


def window(q: RoundingStats, db: RoundingStats, d: int, k: int,
           products: Products = BFLOAT16) -> Window:
    """The candidate window of lists of ``q`` against ``db`` (``WINDOW`` times delta)."""
    a = torch.from_numpy(WINDOW * products.slack(q, db, d)).float()
    return Window(keep=k, rel=WINDOW * products.ulp,
                  slack=torch.nextafter(a, torch.tensor(np.inf)))
