"""Exact top-k from bfloat16 products: widened candidates, float32 re-scoring, a certificate.

A bfloat16 product ``s~ = bf16(fl(x~ . y~))`` (inputs rounded to bfloat16, sums in
float32, output rounded to bfloat16) differs from the float32 score ``s = x . y`` by

    |x~.y~ - x.y| <= ||x~ - x|| ||y|| + ||x~|| ||y~ - y||        (x~y~ - xy = (x~-x)y + x~(y~-y))
    |fl(x~.y~) - x~.y~| <= gamma_d ||x~|| ||y~||,  gamma_d = d 2^-24 / (1 - d 2^-24)
    fl <= s~ + 2^-7 |s~|                                    (one bf16 ulp: rounding or truncation)

Each list keeps the ``k' > k`` largest bfloat16 scores; every database row left out has
``s~ <= m``, the ``k'``-th kept score, so its float32 score is at most ``m + delta`` with

    delta = 2^-7 |m| + e_x ||y||max + ||x~|| e_y,max + gamma_d (||x~|| ||y~||max + ||x|| ||y||max)

(``e = ||x~ - x||`` per row, measured; the last term also covers the float32 re-scoring
itself). The candidates are re-scored exactly in float32;
if the k-th best re-scored value is ``>= m + delta``, no row left out can enter the
top-k, and the list equals float32 brute force (ties allowed). Rows without that
certificate are searched again in float32 against the whole database.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import torch

logger = logging.getLogger(__name__)

ULP_BF16 = 2.0**-7  # relative size of one bfloat16 ulp (8 significant bits)
U_FP32 = 2.0**-24


@dataclass
class RoundingStats:
    """Per-row rounding of a matrix to bfloat16: ``err`` = ||x~ - x||, ``norm`` = ||x||,
    ``norm_bf`` = ||x~||, all ``(n,) float64``."""

    err: np.ndarray
    norm: np.ndarray
    norm_bf: np.ndarray

    @classmethod
    def of(cls, a: np.ndarray, block: int = 16384) -> "RoundingStats":
        err, norm, norm_bf = (np.empty(len(a)) for _ in range(3))
        for s in range(0, len(a), block):
            x = torch.from_numpy(np.array(a[s : s + block], dtype=np.float32))
            xb = x.to(torch.bfloat16).double()
            x = x.double()
            err[s : s + len(x)] = (xb - x).norm(dim=1).numpy()
            norm[s : s + len(x)] = x.norm(dim=1).numpy()
            norm_bf[s : s + len(x)] = xb.norm(dim=1).numpy()
        return cls(err, norm, norm_bf)


def gamma(d: int) -> float:
    """Bound on the relative error of a float32 sum of ``d`` products."""
    return d * U_FP32 / (1 - d * U_FP32)


def certified(kth_exact: np.ndarray, m: np.ndarray, q: RoundingStats, db: RoundingStats,
              d: int) -> np.ndarray:
    """``(nq,) bool``: rows whose k-th re-scored value ``kth_exact`` provably beats every
    database row outside their candidates (``m``: their ``k'``-th bfloat16 score)."""
    m = m.astype(np.float64)
    delta = (ULP_BF16 * np.abs(m) + q.err * db.norm.max() + q.norm_bf * db.err.max()
             + gamma(d) * (q.norm_bf * db.norm_bf.max() + q.norm * db.norm.max()) + 1e-30)
    return kth_exact.astype(np.float64) >= m + delta
