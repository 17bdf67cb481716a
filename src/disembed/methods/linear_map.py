"""``linear-map``: one affine map per language into the pivot's space (Vasilyev et al.).

For each language ``k`` paired with the pivot ``p`` (English by default), fit on the
parallel embeddings ``x_i`` (language k) and ``y_i`` (pivot) of its pairs

    y ~ A_k x + b_k                                   x, y: (d,); A_k: (d, d); b_k: (d,)

with ``solver``:

* ``"lstsq"`` (default): closed-form least squares ``min sum_i |A x_i + b - y_i|^2``
  (``+ ridge |A|_F^2`` when ``ridge > 0``: with few pairs per language in high
  dimension the plain fit is ill-conditioned and overfits; see docs/recipes.md).
* ``"gradient"``: Adam on ``(1/n) sum_i |A x_i + b - y_i|`` (the unsquared distance, as
  the paper's gradient version), from ``A = I, b = 0``, ``steps`` full-batch steps.
* ``"procrustes"``: ``A`` orthogonal (centred orthogonal Procrustes, SVD), ``b`` fitted.
* ``"procrustes-dilation"``: ``A = Q diag(alpha)``, ``Q`` orthogonal, one dilation per input
  axis, by alternating Procrustes for ``Q`` and least squares for ``alpha`` (20 rounds).

As a disentangler: ``meaning(X, k) = X A_k^T + b_k`` (identity for the pivot and, with
``unknown_language="identity"``, for languages without a map); no language part.

Diagnostics of each ``A`` (``A_j`` its j-th column): the column cosines
``p_jk = sum_i A_ij A_ik / (|A_j| |A_k|)``, ``j != k``, as mean ``|p|``, std, min, max (0 for
an orthogonal map), and the dilations ``alpha_j = |A_j|`` as mean, ``sigma/mean`` and
``(max - min)/mean`` (1, 0, 0 for a rotation). Improvement on held-out pairs (a seeded
``heldout_fraction`` of each language's pairs, not used for fitting), with
``d = |x - y|``, ``d~ = |A x + b - y|``, ``c``/``c~`` the cosines before/after:
``dD = mean (d - d~) / min(d, d~)``, ``dC = mean (c~ - c)``, ``fD = frac(d~ < d)``,
``fC = frac(c~ > c)`` (``dD`` over pairs with ``min(d, d~) >= 1e-6`` only: a sentence
written the same in both languages has ``d = 0``). Both are in ``diagnostics_`` (saved
in config.json) and logged.

Differences from the paper: the maps are fitted on the training split only (the
held-out part measures them); the paper's dilation analysis is over general maps,
and our ``procrustes-dilation`` solver is one concrete way to fit such a map.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import torch

from ..exceptions import CheckpointError, ConfigError, DataError
from ..util.constraints import SEED, Interval, Options
from .base import Disentangler, Languages, as_language_array, fitting, resolving
from .export_map import MeaningMap, affine, identity_layer

logger = logging.getLogger(__name__)

SOLVERS = ("lstsq", "gradient", "procrustes", "procrustes-dilation")


def fit_lstsq(X: np.ndarray, Y: np.ndarray, ridge: float = 0.0
              ) -> tuple[np.ndarray, np.ndarray]:
    """``(A (d, d), b (d,))`` minimising ``|X A^T + b - Y|^2 + ridge |A|^2`` for ``X, Y (n, d)``."""
    X1 = np.hstack([X, np.ones((len(X), 1), X.dtype)]).astype(np.float64)
    if ridge > 0:  # normal equations; the bias is not penalised
        penalty = ridge * np.eye(X1.shape[1])
        penalty[-1, -1] = 0.0
        W = np.linalg.solve(X1.T @ X1 + penalty, X1.T @ Y.astype(np.float64))
    else:
        W, *_ = np.linalg.lstsq(X1, Y.astype(np.float64), rcond=None)  # (d + 1, d)
    return W[:-1].T, W[-1]


def _warn_rank(A: np.ndarray, lang: str, n: int) -> int:
    """The rank of a fitted map ``A (d, d)``; a warning when it is below ``d`` (a
    least-squares map of ``n`` pairs spans at most ``n - 1`` directions), since the meaning
    part of that language then collapses into fewer dimensions."""
    rank = int(np.linalg.matrix_rank(np.asarray(A, np.float64)))
    d = A.shape[0]
    if rank < d:
        logger.warning("linear-map: the %s map has rank %d of %d (fitted on %d pairs): the "
                       "meaning part of %s collapses into %d dimensions; give more than %d "
                       "pairs of that language, or use solver='procrustes' (full rank)",
                       lang, rank, d, n, lang, rank, d)
    return rank


def _orthogonal(Xc: np.ndarray, Yc: np.ndarray) -> np.ndarray:
    U, _, Vt = np.linalg.svd(Yc.T @ Xc)
    return U @ Vt  # argmin over orthogonal Q of |Xc Q^T - Yc|


def fit_procrustes(X: np.ndarray, Y: np.ndarray, dilation: bool = False, rounds: int = 20
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Orthogonal ``A`` (or ``Q diag(alpha)`` with ``dilation``) and ``b`` for ``X, Y (n, d)``."""
    X, Y = X.astype(np.float64), Y.astype(np.float64)
    mx, my = X.mean(0), Y.mean(0)
    Xc, Yc = X - mx, Y - my
    alpha = np.ones(X.shape[1])
    Q = _orthogonal(Xc, Yc)
    for _ in range(rounds if dilation else 0):
        Z = Yc @ Q  # (n, d): targets in the input's axes
        alpha = (Z * Xc).sum(0) / np.maximum((Xc * Xc).sum(0), 1e-12)
        Q = _orthogonal(Xc * alpha, Yc)
    A = Q * alpha  # Q diag(alpha)
    return A, my - A @ mx


def fit_gradient(X: np.ndarray, Y: np.ndarray, steps: int = 500, lr: float = 1e-3,
                 seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``A, b`` minimising ``mean_i |A x_i + b - y_i|`` by full-batch Adam from the identity."""
    torch.manual_seed(seed)
    Xt, Yt = torch.as_tensor(X, dtype=torch.float32), torch.as_tensor(Y, dtype=torch.float32)
    A = torch.eye(X.shape[1], requires_grad=True)
    b = torch.zeros(X.shape[1], requires_grad=True)
    opt = torch.optim.Adam([A, b], lr=lr)
    for _ in range(steps):
        loss = (Xt @ A.T + b - Yt).norm(dim=1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return A.detach().double().numpy(), b.detach().double().numpy()


def map_diagnostics(A: np.ndarray) -> dict[str, float]:
    """Column-cosine and dilation statistics of ``A (d, d)`` (see the module docstring)."""
    norms = np.linalg.norm(A, axis=0)  # (d,) |A_j|
    P = (A.T @ A) / np.outer(norms, norms)
    off = P[~np.eye(len(P), dtype=bool)]
    mean = float(norms.mean())
    return {"p_mean_abs": float(np.abs(off).mean()), "p_std": float(off.std()),
            "p_min": float(off.min()), "p_max": float(off.max()), "alpha_mean": mean,
            "alpha_cv": float(norms.std() / mean), "alpha_range": float(np.ptp(norms) / mean)}


def improvement(X: np.ndarray, Y: np.ndarray, mapped: np.ndarray) -> dict[str, float]:
    """``dD, dC, fD, fC`` of ``mapped (n, d)`` against ``X (n, d)`` as images of ``Y (n, d)``.

    ``dD`` leaves out pairs with ``min(d, d~) < 1e-6`` (e.g. a sentence identical in both
    languages, so ``x = y``), where the ratio is undefined; ``n_dD`` counts the pairs used.
    """
    def cos(a, b):
        return (a * b).sum(1) / np.maximum(np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1),
                                           1e-12)

    d, d_new = np.linalg.norm(X - Y, axis=1), np.linalg.norm(mapped - Y, axis=1)
    c, c_new = cos(X, Y), cos(mapped, Y)
    low = np.minimum(d, d_new)
    ok = low >= 1e-6
    dD = float(((d - d_new)[ok] / low[ok]).mean()) if ok.any() else float("nan")
    return {"dD": dD, "dC": float((c_new - c).mean()), "fD": float((d_new < d).mean()),
            "fC": float((c_new > c).mean()), "n": int(len(X)), "n_dD": int(ok.sum())}


class LinearMap(Disentangler):
    """Per-language affine maps into the pivot language's space; see the module docstring."""

    method = "linear-map"
    paper = "Vasilyev et al.: linear maps between the languages of a multilingual encoder"
    has_language = False
    uses_language = True

    _parameter_constraints = {
        "solver": [Options(*SOLVERS)],
        "heldout_fraction": [Interval(float, 0, 0.5, closed="left")],
        "steps": [Interval(int, 1, None)],
        "lr": [Interval(float, 0, None, closed="neither")],
        "seed": [SEED],
        "ridge": [Interval(float, 0, None)],
    }

    def __init__(self, solver: str = "lstsq", pivot: str = "en", heldout_fraction: float = 0.1,
                 unknown_language: str = "identity", steps: int = 500, lr: float = 1e-3,
                 seed: int = 0, ridge: float = 0.0) -> None:
        if solver not in SOLVERS:
            raise ConfigError(f"solver must be one of {SOLVERS}; got {solver!r}")
        if unknown_language not in ("identity", "error"):
            raise ConfigError("unknown_language must be 'identity' or 'error'; "
                              f"got {unknown_language!r}")
        if not 0 <= heldout_fraction < 0.5:
            raise ConfigError(f"heldout_fraction must be in [0, 0.5); got {heldout_fraction}")
        self.solver, self.pivot, self.heldout_fraction = solver, pivot, heldout_fraction
        if ridge < 0:
            raise ConfigError(f"ridge must be >= 0; got {ridge}")
        self.unknown_language, self.steps, self.lr, self.seed = unknown_language, steps, lr, seed
        self.ridge = ridge

    def _solve(self, X: np.ndarray, Y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if self.solver == "lstsq":
            return fit_lstsq(X, Y, self.ridge)
        if self.solver == "gradient":
            return fit_gradient(X, Y, self.steps, self.lr, self.seed)
        return fit_procrustes(X, Y, dilation=self.solver == "procrustes-dilation")

    def _pairs_by_language(self, src, tgt, src_lang, tgt_lang) -> dict[str, tuple]:
        """``{language: (X (n, d) in that language, Y (n, d) their pivot translations)}``."""
        s_lang = as_language_array(src_lang, len(src))
        t_lang = as_language_array(tgt_lang, len(tgt))
        parts: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {}
        for x, y, a, b in ((src, tgt, s_lang, t_lang), (tgt, src, t_lang, s_lang)):
            rows = (b == self.pivot) & (a != self.pivot)
            for lang in sorted(set(a[rows].tolist())):
                keep = rows & (a == lang)
                parts.setdefault(lang, []).append((x[keep], y[keep]))
        if not parts:
            raise DataError(f"linear-map needs pairs with the pivot language {self.pivot!r} on "
                            f"one side; got languages {sorted(set(s_lang) | set(t_lang))}")
        return {lang: (np.concatenate([p[0] for p in ps]), np.concatenate([p[1] for p in ps]))
                for lang, ps in sorted(parts.items())}

    @fitting
    def fit(self, src: np.ndarray, tgt: np.ndarray, src_lang: Languages,
            tgt_lang: Languages) -> "LinearMap":
        src, tgt = np.asarray(src, np.float32), np.asarray(tgt, np.float32)
        rng = np.random.default_rng(self.seed)
        self.maps_, self.diagnostics_ = {}, {}
        for lang, (X, Y) in self._pairs_by_language(src, tgt, src_lang, tgt_lang).items():
            order = rng.permutation(len(X))
            n_held = int(round(len(X) * self.heldout_fraction))
            held, fit_rows = order[:n_held], order[n_held:]
            A, b = self._solve(X[fit_rows], Y[fit_rows])
            self.maps_[lang] = (A.astype(np.float32), b.astype(np.float32))
            diag: dict[str, Any] = {"n_fit": int(len(fit_rows)), "matrix": map_diagnostics(A),
                                    "rank": _warn_rank(A, lang, len(fit_rows))}
            if n_held:
                diag["heldout"] = improvement(X[held], Y[held], X[held] @ A.T + b)
            self.diagnostics_[lang] = diag
            shown = {k: round(v, 4)
                     for k, v in {**diag["matrix"], **diag.get("heldout", {})}.items()}
            logger.info("linear-map %s->%s (%s, %d pairs): %s", lang, self.pivot, self.solver,
                        len(fit_rows), shown)
        self.languages_ = sorted(self.maps_)
        self.dim_ = int(src.shape[1])
        return self

    @resolving
    def meaning(self, X: np.ndarray, languages: Languages) -> np.ndarray:
        X = self._check(X)
        langs = as_language_array(languages, len(X))
        out = X.copy()
        for lang in set(langs.tolist()):
            rows = langs == lang
            if lang in self.maps_:
                A, b = self.maps_[lang]
                out[rows] = X[rows] @ A.T + b
            elif lang != self.pivot and self.unknown_language == "error":
                raise ConfigError(f"linear-map has no map for {lang!r}; it was fitted on "
                                  f"{self.languages_}. Use unknown_language='identity' to pass "
                                  "such rows through unchanged")
        return out

    #: the columns of :meth:`fit_record`'s diagnostics table: (label, section, key)
    _DIAGNOSTIC_COLUMNS = (("fit pairs", None, "n_fit"), ("held-out pairs", "heldout", "n"),
                           ("mean abs p", "matrix", "p_mean_abs"), ("std p", "matrix", "p_std"),
                           ("mean alpha", "matrix", "alpha_mean"),
                           ("sigma/mean alpha", "matrix", "alpha_cv"),
                           ("range/mean alpha", "matrix", "alpha_range"),
                           ("dD", "heldout", "dD"), ("dC", "heldout", "dC"),
                           ("fD", "heldout", "fD"), ("fC", "heldout", "fC"))

    def fit_record(self) -> dict[str, Any]:
        """The base's record, with the per-language map diagnostics as a table (held-out
        pairs for dD, dC, fD, fC; see the module docstring)."""
        rows = []
        for lang, diag in sorted(getattr(self, "diagnostics_", {}).items()):
            rows.append([lang] + [diag.get(key) if section is None
                                  else (diag.get(section) or {}).get(key)
                                  for _, section, key in self._DIAGNOSTIC_COLUMNS])
        table = {"title": "Map diagnostics (linear-map; held-out pairs for dD, dC, fD, fC)",
                 "columns": ["language", *(c[0] for c in self._DIAGNOSTIC_COLUMNS)],
                 "rows": rows}
        return {**super().fit_record(), "diagnostics": table if rows else None}

    def _state(self) -> dict[str, np.ndarray]:
        state = {}
        for lang, (A, b) in self.maps_.items():
            state[f"A.{lang}"], state[f"b.{lang}"] = A, b
        return state

    def _extra_config(self) -> dict[str, Any]:
        return {"languages": self.languages_, "diagnostics": self.diagnostics_}

    def _set_state(self, state: dict[str, np.ndarray], extra: dict[str, Any]) -> None:
        self.languages_ = list(extra.get("languages", []))
        expected = {f"{p}.{lang}" for lang in self.languages_ for p in "Ab"}
        if expected != set(state):
            raise CheckpointError(f"linear-map weights {sorted(state)} do not match its "
                                  f"languages {self.languages_} (expected {sorted(expected)})")
        d = self.dim_
        for lang in self.languages_:
            if state[f"A.{lang}"].shape != (d, d) or state[f"b.{lang}"].shape != (d,):
                raise CheckpointError(f"linear-map map for {lang!r} has wrong shapes; expected "
                                      f"({d}, {d}) and ({d},)")
        self.maps_ = {lang: (state[f"A.{lang}"], state[f"b.{lang}"]) for lang in self.languages_}
        self.diagnostics_ = extra.get("diagnostics", {})

    def unseen_route(self) -> str:
        """A language without a map passes through unchanged: the pivot's identity route."""
        return self.pivot if self.unknown_language == "identity" else "error"

    def meaning_map(self) -> MeaningMap:
        """``m = A_lang e + b_lang``: one route per mapped language, the identity for the
        pivot."""
        d = self._export_dim()
        routes = {lang: [affine(A, b)] for lang, (A, b) in self.maps_.items()}
        routes[self.pivot] = [identity_layer(d)]
        notes = [f"route {self.pivot!r} (the pivot) is the identity; languages without a map "
                 f"pass through unchanged in disembed (unknown_language='identity'): use the "
                 f"{self.pivot!r} route for them"]
        return MeaningMap(self.name, d, routes, True, notes)
