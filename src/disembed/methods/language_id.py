"""A language identifier on raw sentence embeddings, fitted and saved with every model that
uses a language, so that ``model.meaning(X)`` works without a tag.

Two kinds, chosen by measurement (docs/language_id.md):

* ``"centroid"``: the nearest centred language mean. Rows are centred by the global mean
  ``mu`` of the training rows and L2-normalised, ``z = (e - mu) / |e - mu|``; language ``k``
  has the unit centroid ``c_k`` of its rows; the score is ``s_k = cos(z, c_k)``.
* ``"softmax"``: multinomial logistic regression on the same ``z``:
  ``p(k | e) = softmax(W z + b)_k``, fitted by L-BFGS on the mean cross-entropy plus
  ``l2 * |W|^2`` (deterministic: full batch, no sampling).

Both answer a code per row with a confidence (the softmax probability; for ``centroid`` the
softmax of ``temperature * s``) and "unknown" where the row is far from every known
language: its best centroid cosine is below ``threshold``, the ``outlier_quantile`` of the
training rows' cosines to their own language's centroid. Everything is row-wise, so a
row's answer never depends on the other rows of the call.

:meth:`LanguageIdentifier.route_weights` is what a model mixes its per-language routes with
for a row without a tag (:mod:`.routing`): the posterior tempered by ``route_temperature``
``T``, ``softmax(logits / T)``, weights below :data:`MIN_ROUTE_WEIGHT` dropped and the rest
renormalised. ``T`` was chosen on validation data (docs/language_free.md, "No hard
route"); it is saved with the identifier, so it is part of the saved model. So is
``prior_confidence`` (:data:`~disembed.util.routing_rule.PRIOR_CONFIDENCE`): where the
posterior restricted to the languages of a text's script is unsure, the route takes a share
of the whole posterior (docs/language_free.md, "When the prior is unsure"); a model saved
before it keeps the prior whole (``None``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Literal, Sequence

import numpy as np

from ..data.languages import language_scripts
from ..exceptions import CheckpointError, ConfigError, NotFittedError
from ..util import routing_rule as rule
from ..util.routing_rule import MIN_ROUTE_WEIGHT, PRIOR_CONFIDENCE, ROUTE_MAPS

logger = logging.getLogger(__name__)

#: the code :class:`LanguagePrediction` gives a row far from every known language
UNKNOWN = "unknown"
KINDS = ("centroid", "softmax")
#: the temperature of the route weights (docs/language_free.md, "No hard route"); saved
#: with the identifier, and what a model saved before it existed gets
DEFAULT_ROUTE_TEMPERATURE = 1.0
#: how logits become route weights (:data:`~disembed.util.routing_rule.ROUTE_MAPS`):
#: ``softmax`` (the tempered posterior) or ``sparsemax`` (the posterior's Euclidean
#: projection onto the simplex: piecewise linear, exactly one-hot where one language leads
#: by a margin); docs/language_free.md, "No hard route". A route weight below
#: :data:`~disembed.util.routing_rule.MIN_ROUTE_WEIGHT` is dropped.
DEFAULT_ROUTE_MAP = "softmax"


@dataclass(frozen=True)
class LanguagePrediction:
    """The language of each row as the model identified it.

    ``codes (n,)``: a known language code per row, or ``"unknown"``; ``confidence (n,)``:
    the probability of the predicted language; ``nearest (n,)``: the most likely known
    language even where ``codes`` says unknown; ``similarity (n,)``: the row's cosine to
    that language's centroid (what decides "unknown")."""

    codes: np.ndarray
    confidence: np.ndarray
    nearest: np.ndarray
    similarity: np.ndarray

    def __len__(self) -> int:
        return len(self.codes)

    def summary(self) -> dict[str, int]:
        """How many rows each predicted code got."""
        values, counts = np.unique(self.codes.astype(str), return_counts=True)
        return {str(v): int(c) for v, c in zip(values, counts, strict=True)}


def _unit(Z: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(Z, axis=1, keepdims=True)
    return Z / np.maximum(norms, 1e-12)


class LanguageIdentifier:
    """Predicts the language of raw embeddings; see the module docstring."""

    def __init__(self, kind: Literal["centroid", "softmax"] = "softmax", l2: float = 1e-4,
                 temperature: float = 20.0, outlier_quantile: float = 0.001,
                 route_temperature: float = DEFAULT_ROUTE_TEMPERATURE,
                 route_map: Literal["softmax", "sparsemax"] = DEFAULT_ROUTE_MAP,
                 prior_confidence: Sequence[float] | None = PRIOR_CONFIDENCE) -> None:
        if kind not in KINDS:
            raise ConfigError(f"language identifier kind must be one of {KINDS}; got {kind!r}")
        if route_map not in ROUTE_MAPS:
            raise ConfigError(f"route_map must be one of {ROUTE_MAPS}; got {route_map!r}")
        self.route_map = route_map
        if not (isinstance(route_temperature, (int, float)) and route_temperature > 0):
            raise ConfigError("route_temperature must be a positive number (1: the posterior "
                              f"as it is; larger: softer); got {route_temperature!r}")
        self.kind, self.l2, self.temperature = kind, l2, temperature
        self.outlier_quantile = outlier_quantile
        self.route_temperature = float(route_temperature)
        self.prior_confidence = checked_confidence(prior_confidence, ConfigError)

    @property
    def is_fitted(self) -> bool:
        return hasattr(self, "centroids_")

    def fit(self, X: np.ndarray, languages: np.ndarray) -> "LanguageIdentifier":
        """Fit on raw embeddings ``X (n, d)`` with one canonical code per row."""
        X = np.asarray(X, np.float32)
        langs = np.asarray(languages, dtype=object)
        self.languages_ = sorted(set(langs.tolist()))
        self.center_ = X.mean(axis=0)  # (d,)
        Z = _unit(X - self.center_)
        y = np.array([self.languages_.index(x) for x in langs], dtype=np.int64)
        self.centroids_ = _unit(np.stack([Z[y == k].mean(axis=0)  # (L, d)
                                          for k in range(len(self.languages_))]))
        own = (Z * self.centroids_[y]).sum(axis=1)  # cosine of each row to its own centroid
        self.threshold_ = float(np.quantile(own, self.outlier_quantile))
        if self.kind == "softmax" and len(self.languages_) > 1:
            self.W_, self.b_ = _fit_softmax(Z, y, len(self.languages_), self.l2)
        else:
            self.W_ = self.centroids_ * self.temperature
            self.b_ = np.zeros(len(self.languages_), np.float32)
        return self

    def _logits(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(Z (n, d), logits (n, L))`` of raw embeddings ``X (n, d)``, float32."""
        if not self.is_fitted:
            raise NotFittedError("this LanguageIdentifier is not fitted; fit it first")
        Z = _unit(np.asarray(X, np.float32) - self.center_)
        return Z, rule.logits(X, self.center_, self.W_, self.b_)

    def logits(self, X: np.ndarray) -> np.ndarray:
        """``(n, L) float32``: the identifier's logits for raw embeddings ``X (n, d)`` (the
        routing rule's :func:`~disembed.util.routing_rule.logits`): one pass, from which
        :meth:`route_weights`, :meth:`predict` and the reported language all read."""
        return self._logits(X)[1]

    def route_weights(self, X: np.ndarray, allowed: np.ndarray | None = None, *,
                      scores: np.ndarray | None = None) -> np.ndarray:
        """``(n, L) float64``: the weight of each language's route for each row of raw
        embeddings ``X (n, d)`` (the routing rule's
        :func:`~disembed.util.routing_rule.route_weights` at this identifier's temperature
        and map). ``allowed (n, L) bool``: the languages each row may be in (the script
        prior, :meth:`allowed_for_scripts`). ``scores``: the :meth:`logits` of ``X``,
        where the caller has them already (no second pass)."""
        scores = self.logits(X) if scores is None else scores
        return rule.route_weights(scores, self.route_temperature, self.route_map,
                                  MIN_ROUTE_WEIGHT, allowed, self.prior_confidence)

    def language_scripts(self) -> dict[str, list[str]]:
        """Each known language's scripts (:func:`~disembed.data.languages.language_scripts`),
        what the routing rule's mask reads."""
        return {code: sorted(language_scripts(code)) for code in self.languages_}

    def allowed_for_scripts(self, scripts: Sequence[str | None]) -> np.ndarray:
        """``(n, L) bool``: for each row's script (ISO 15924, ``None``: none known), the
        languages of :attr:`languages_` that write it (the routing rule's
        :func:`~disembed.util.routing_rule.allowed`); all of them where the row has no
        script or none of them writes it (a Greek text for a model without Greek: the
        identifier's whole posterior, as without the prior)."""
        return rule.allowed(list(scripts), self.languages_, self.language_scripts())

    def report(self, scripts: Sequence[str | None], scores: np.ndarray
               ) -> tuple[list[str], np.ndarray]:
        """``(tags, probabilities)`` reported for rows with these ``scripts`` and
        :meth:`logits` (:func:`~disembed.util.routing_rule.reported_languages`: ``und`` or
        ``und-<Script>`` where unsure or no training language writes the script)."""
        return rule.reported_languages(scores, self.languages_, list(scripts),
                                       self.language_scripts())

    def predict(self, X: np.ndarray) -> LanguagePrediction:
        """The language of each row of raw embeddings ``X (n, d)``."""
        Z, logits = self._logits(X)  # (n, d), (n, L)
        prob = rule.mapped(logits)  # the softmax, the routing rule's
        best = prob.argmax(axis=1)
        nearest = np.asarray(self.languages_, dtype=object)[best]
        sim = (Z * self.centroids_[best]).sum(axis=1)
        codes = np.where(sim < self.threshold_, UNKNOWN, nearest).astype(object)
        return LanguagePrediction(codes, prob[np.arange(len(Z)), best].astype(np.float32),
                                  nearest, sim.astype(np.float32))

    def add_language(self, code: str, X: np.ndarray) -> None:
        """Add (or replace) language ``code`` from its raw embeddings ``X (n, d)``: its
        centroid joins the centroids, and a row of logits ``temperature * cos(z, c)`` with a
        bias matching the known languages' typical top logit joins the softmax."""
        c = _unit((_unit(np.asarray(X, np.float32) - self.center_)).mean(axis=0)[None])[0]
        if code in self.languages_:
            k = self.languages_.index(code)
            self.centroids_[k] = c
            if self.kind == "centroid":
                self.W_[k] = c * self.temperature
            return
        scale = float(np.linalg.norm(self.W_, axis=1).mean())
        self.languages_ = [*self.languages_, code]
        self.centroids_ = np.vstack([self.centroids_, c[None]]).astype(np.float32)
        self.W_ = np.vstack([self.W_, (c * scale)[None]]).astype(np.float32)
        self.b_ = np.append(self.b_, self.b_.mean()).astype(np.float32)

    # --- persistence (inside the model's config.json + model.safetensors) -------------
    def state(self, prefix: str) -> dict[str, np.ndarray]:
        return {f"{prefix}center": self.center_.astype(np.float32),
                f"{prefix}centroids": self.centroids_.astype(np.float32),
                f"{prefix}W": np.asarray(self.W_, np.float32),
                f"{prefix}b": np.asarray(self.b_, np.float32)}

    def config(self) -> dict[str, Any]:
        return {"kind": self.kind, "l2": self.l2, "temperature": self.temperature,
                "outlier_quantile": self.outlier_quantile, "languages": self.languages_,
                "threshold": self.threshold_, "route_temperature": self.route_temperature,
                "route_map": self.route_map,
                "prior_confidence": None if self.prior_confidence is None
                else list(self.prior_confidence)}

    @classmethod
    def from_saved(cls, config: dict[str, Any], state: dict[str, np.ndarray],
                   prefix: str) -> "LanguageIdentifier":
        try:
            # a model saved before route weights existed mixes with the default temperature,
            # and one saved before the prior's confidence keeps the prior whole
            lid = cls(config["kind"], config["l2"], config["temperature"],
                      config["outlier_quantile"],
                      config.get("route_temperature", DEFAULT_ROUTE_TEMPERATURE),
                      config.get("route_map", DEFAULT_ROUTE_MAP))
            lid.prior_confidence = checked_confidence(config.get("prior_confidence"),
                                                      CheckpointError)
            lid.languages_ = list(config["languages"])
            lid.threshold_ = float(config["threshold"])
            lid.center_ = state[f"{prefix}center"]
            lid.centroids_ = state[f"{prefix}centroids"]
            lid.W_, lid.b_ = state[f"{prefix}W"], state[f"{prefix}b"]
        except (KeyError, TypeError) as exc:
            raise CheckpointError(f"the saved language identifier lacks {exc}; re-save the "
                                  "model") from None
        n, d = len(lid.languages_), lid.center_.shape[0]
        shapes = {"centroids": (lid.centroids_.shape, (n, d)), "W": (lid.W_.shape, (n, d)),
                  "b": (lid.b_.shape, (n,))}
        wrong = {k: v for k, v in shapes.items() if v[0] != v[1]}
        if wrong:
            raise CheckpointError(f"saved language identifier has wrong shapes (got, expected): "
                                  f"{wrong}")
        return lid


def checked_confidence(value: Any, error: type[Exception]) -> tuple[float, float] | None:
    """``(lo, hi)`` with ``0 <= lo < hi <= 1`` (or ``None``), as floats; ``error`` (a
    ``ConfigError`` for a caller's value, a ``CheckpointError`` for a saved one) otherwise."""
    if value is None:
        return None
    try:
        lo, hi = (float(v) for v in value)
    except (TypeError, ValueError):
        lo = hi = float("nan")
    if not 0.0 <= lo < hi <= 1.0:
        raise error(f"prior_confidence must be two probabilities (lo, hi) with 0 <= lo < hi "
                    f"<= 1 (the script prior's top weight where it starts and stops giving "
                    f"way to the whole posterior), or None (the prior whole); got {value!r}")
    return lo, hi


def _fit_softmax(Z: np.ndarray, y: np.ndarray, n_classes: int, l2: float
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Multinomial logistic regression ``softmax(W z + b)`` by full-batch L-BFGS."""
    import torch

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        Zt, yt = torch.from_numpy(np.ascontiguousarray(Z)), torch.from_numpy(y)
        W = torch.zeros(n_classes, Z.shape[1], requires_grad=True)
        b = torch.zeros(n_classes, requires_grad=True)
        opt = torch.optim.LBFGS([W, b], lr=1.0, max_iter=200, history_size=20,
                                line_search_fn="strong_wolfe")

        def closure() -> torch.Tensor:
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(Zt @ W.T + b, yt) + l2 * (W * W).sum()
            loss.backward()
            return loss

        opt.step(closure)
    return W.detach().numpy().astype(np.float32), b.detach().numpy().astype(np.float32)
