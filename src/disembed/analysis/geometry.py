"""Alignment and uniformity (Wang & Isola 2020) of meaning embeddings.

For unit-normalised embeddings ``f``, over positive pairs ``(x, y)`` (a sentence and its
translation) and over all pairs of distinct items::

    alignment  = E_(x,y) ||f(x) - f(y)||^alpha              (alpha = 2; lower is better)
    uniformity = log E_(x!=x') exp(-t ||f(x) - f(x')||^2)   (t = 2; lower is better)

A good meaning space puts translations close (low alignment) while spreading different
sentences over the sphere (low uniformity). Alignment alone is trivially 0 for a
collapsed space, whose uniformity is then 0, the worst possible value.
Reference: Wang & Isola (2020), "Understanding Contrastive Representation Learning
through Alignment and Uniformity on the Hypersphere", ICML.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from ..evaluation.metrics import l2_normalize
from ..exceptions import ShapeError

logger = logging.getLogger(__name__)


def alignment(x: np.ndarray, y: np.ndarray, alpha: float = 2.0) -> float:
    """Mean ``||x_i - y_i||^alpha`` of L2-normalised rows; ``x``, ``y``: (n, d). In [0, 2^alpha]."""
    x, y = np.asarray(x), np.asarray(y)
    if x.shape != y.shape or x.ndim != 2 or len(x) == 0:
        raise ShapeError(f"alignment needs two non-empty (n, d) arrays of equal shape; got "
                         f"{x.shape} and {y.shape}")
    diff = l2_normalize(x) - l2_normalize(y)  # (n, d)
    return float(np.mean(np.linalg.norm(diff, axis=1) ** alpha))


def uniformity(x: np.ndarray, t: float = 2.0) -> float:
    """``log`` of the mean of ``exp(-t ||x_i - x_j||^2)`` over pairs ``i < j``; ``x``: (n, d).

    In ``[-4t, 0]`` for unit vectors; computed in float64 with a log-sum-exp.
    """
    x = np.asarray(x)
    if x.ndim != 2 or len(x) < 2:
        raise ShapeError(f"uniformity needs an (n, d) array with n >= 2; got shape {x.shape}")
    u = l2_normalize(x)
    sq = np.clip(2.0 - 2.0 * (u @ u.T), 0.0, None)  # (n, n) squared distances of unit rows
    iu = np.triu_indices(len(u), k=1)
    logits = -t * sq[iu]  # (n(n-1)/2,)
    top = logits.max()
    return float(top + np.log(np.mean(np.exp(logits - top))))


def geometry(src: np.ndarray, tgt: np.ndarray) -> dict[str, float]:
    """Alignment of pairs ``src[i] ~ tgt[i]`` and uniformity of both sides pooled; (n, d) each."""
    return {"alignment": alignment(src, tgt),
            "uniformity": uniformity(np.concatenate([src, tgt]))}


@dataclass
class GeometryRecorder:
    """An ``on_epoch_end`` callback: geometry of a model's views on a fixed sample, per epoch.

    Pass it as ``model.fit(..., on_epoch_end=recorder)``; it reads ``model.head_`` (the
    head as it is at that epoch) through ``model.views``. ``src``/``tgt``: (n, d) embeddings
    of held-out pairs in languages ``src_lang``/``tgt_lang`` (one code each, or per row).

    ``records``: one dict per epoch, ``{"epoch", "meaning": {"alignment", "uniformity"},
    "language": {...}}`` (``language`` only for methods with a language part).
    """

    model: Any
    src: np.ndarray
    tgt: np.ndarray
    src_lang: Any
    tgt_lang: Any
    records: list[dict] = field(default_factory=list)

    def measure(self) -> dict[str, dict[str, float]]:
        """Geometry of each view the model returns now (eval mode, no gradients)."""
        head = getattr(self.model, "head_", None)
        was_training = bool(getattr(head, "training", False))
        if head is not None:
            head.eval()
        if not hasattr(self.model, "dim_"):  # fit sets dim_ at the end; views checks it
            self.model.dim_ = int(self.src.shape[1])
            unset = True
        else:
            unset = False
        try:
            with torch.no_grad():
                a, b = views_by_language(self.model, self.src, self.src_lang), views_by_language(
                    self.model, self.tgt, self.tgt_lang)
        finally:
            if unset:
                del self.model.dim_
            if head is not None and was_training:
                head.train()
        return {view: geometry(a[view], b[view]) for view in a if view in b}

    def __call__(self, record: dict) -> None:
        entry = {"epoch": int(record.get("epoch", len(self.records) + 1)), **self.measure()}
        self.records.append(entry)
        logger.debug("epoch %d geometry: %s", entry["epoch"], entry)


def pca_2d(X: np.ndarray) -> np.ndarray:
    """First two principal components of ``X (n, d)`` -> ``(n, 2)`` (deterministic signs)."""
    Xc = np.asarray(X, np.float64) - np.mean(X, axis=0)
    _, _, vt = np.linalg.svd(Xc, full_matrices=False)
    vt = vt[:2] * np.sign(vt[:2, :1] + 1e-300)  # fix the sign ambiguity of SVD
    return Xc @ vt.T


def projection_panels(views: dict[str, np.ndarray], digits: int = 4) -> list[dict]:
    """2-D PCA of each view, and of all views together when their dimensions agree.

    ``views``: name -> (n, d) for the same n rows. Returns one panel per projection:
    ``{"label", "points": {view: (n, 2) nested lists}}`` (rounded; JSON-ready for plots).
    """
    names = list(views)
    groups = [(n, [n]) for n in names]
    if len(names) > 1 and len({views[n].shape[1] for n in names}) == 1:
        groups.append(("joint PCA of " + " + ".join(names), names))
    panels = []
    for label, members in groups:
        points = pca_2d(np.concatenate([views[n] for n in members]))  # (k n, 2)
        n = len(views[members[0]])
        panels.append({"label": label, "points": {
            m: np.round(points[i * n : (i + 1) * n], digits).tolist()
            for i, m in enumerate(members)}})
    return panels


def views_by_language(model, X: np.ndarray, languages: Any) -> dict[str, np.ndarray]:
    """Every view of ``X (n, d)`` (one language code per row, or one for all), in input order."""
    langs = np.full(len(X), languages, dtype=object) if isinstance(languages, str) else (
        np.asarray(list(languages), dtype=object))
    out: dict[str, np.ndarray] = {}
    for lang in dict.fromkeys(langs.tolist()):
        rows = np.flatnonzero(langs == lang)
        for view, arr in model.views(np.asarray(X[rows], np.float32), lang).items():
            if view not in out:
                out[view] = np.zeros((len(X), arr.shape[1]), np.float32)
            out[view][rows] = arr
    return out

