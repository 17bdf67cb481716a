"""Semantic leakage: how much language identity is left in the meaning part.

A multinomial logistic-regression probe learns to name the language of a sentence from
its embedding (seeded, stratified held-out split). Its held-out accuracy on *meaning*
embeddings is the leakage (chance = the majority-class share; lower is better); on
*language* embeddings it should be high. Retrieval accuracy and STS correlation on the
language part (the other half of leakage: meaning found in the language part) come from
the evaluation tasks' ``language`` view.

The probe is full-batch L-BFGS on standardised features with an L2 penalty, in torch;
no scikit-learn.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field

import numpy as np
import torch

from ..exceptions import ConfigError, ShapeError

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ProbeResult:
    """Held-out accuracy of a language-identification probe."""

    accuracy: float
    chance: float  # majority-class share of the test split
    n_train: int
    n_test: int
    per_language: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)


def stratified_split(labels: np.ndarray, test_fraction: float, seed: int
                     ) -> tuple[np.ndarray, np.ndarray]:
    """Seeded (train, test) row indices with ``test_fraction`` of every class in test."""
    if not 0 < test_fraction < 1:
        raise ConfigError(f"test_fraction must be in (0, 1); got {test_fraction}")
    rng = np.random.default_rng(seed)
    train, test = [], []
    for label in sorted(set(labels.tolist())):
        rows = rng.permutation(np.flatnonzero(labels == label))
        k = max(1, int(round(len(rows) * test_fraction))) if len(rows) > 1 else 0
        test.append(rows[:k])
        train.append(rows[k:])
    return np.sort(np.concatenate(train)), np.sort(np.concatenate(test))


def fit_logistic(X: np.ndarray, y: np.ndarray, n_classes: int, *, l2: float = 1e-3,
                 max_iter: int = 200, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Multinomial logistic regression; X: (n, d), y: (n,) ints -> W (d, c), b (c,)."""
    gen = torch.Generator().manual_seed(seed)
    Xt = torch.as_tensor(np.asarray(X, np.float32))
    yt = torch.as_tensor(np.asarray(y, np.int64))
    W = (0.01 * torch.randn(Xt.shape[1], n_classes, generator=gen)).requires_grad_()
    b = torch.zeros(n_classes, requires_grad=True)
    opt = torch.optim.LBFGS([W, b], lr=1.0, max_iter=max_iter, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(Xt @ W + b, yt) + l2 * (W * W).sum()
        loss.backward()
        return loss

    opt.step(closure)
    return W.detach().numpy(), b.detach().numpy()


def language_id_probe(X: np.ndarray, languages, *, test_fraction: float = 0.3, seed: int = 0,
                      l2: float = 1e-3) -> ProbeResult:
    """Train the probe on a seeded split of ``X (n, d)`` and score it on the rest.

    ``languages``: (n,) language code per row; needs at least two languages.
    """
    X = np.asarray(X, np.float64)
    labels = np.asarray(list(languages), dtype=object)
    if X.ndim != 2 or labels.shape != (len(X),):
        raise ShapeError(f"probe needs X (n, d) and n language labels; got X {X.shape} and "
                         f"{labels.shape[0]} labels")
    classes = sorted(set(labels.tolist()))
    if len(classes) < 2:
        raise ConfigError(f"a language-identification probe needs >= 2 languages; got {classes}")
    y = np.array([classes.index(x) for x in labels], np.int64)
    train, test = stratified_split(labels, test_fraction, seed)
    mean, std = X[train].mean(0), X[train].std(0)
    std = np.where(std > 1e-12, std, 1.0)
    Z = (X - mean) / std  # standardised with training statistics only
    W, b = fit_logistic(Z[train], y[train], len(classes), l2=l2, seed=seed)
    pred = np.argmax(Z[test] @ W + b, axis=1)
    correct = pred == y[test]
    per_lang = {c: float(correct[y[test] == i].mean()) for i, c in enumerate(classes)
                if np.any(y[test] == i)}
    chance = float(np.bincount(y[test], minlength=len(classes)).max() / len(test))
    return ProbeResult(float(correct.mean()), chance, len(train), len(test), per_lang)


def probe_views(views: dict[str, np.ndarray], languages, *, test_fraction: float = 0.3,
                seed: int = 0) -> dict[str, ProbeResult]:
    """The probe on each view (``{"raw": ..., "meaning": ..., "language": ...}``)."""
    out = {}
    for name, X in views.items():
        out[name] = language_id_probe(X, languages, test_fraction=test_fraction, seed=seed)
        logger.info("language-ID probe on %s: %.3f (chance %.3f)", name, out[name].accuracy,
                    out[name].chance)
    return out

