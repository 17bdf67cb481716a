"""How each row of a call is routed through a language-dependent recipe: by its tag, or by
the language identifier's posterior (a weighted mixture of routes, never a hard argmax
between languages).

A recipe that :attr:`~.base.Disentangler.uses_language` computes its parts of a row ``x``
through the *route* of one language ``k`` (mean-centering: ``x - mu_k``; a ``*-centered``
head: ``head(x - mu_k)``; LIR: ``(I - C_k C_k^T) x``; linear-map: ``A_k x + b_k``). A row
with a tag takes its tag's route. A row without one (and a tag the model never saw, where
its ``unknown_language`` is ``"nearest"``) takes the mixture of every route weighted by the
identifier's tempered posterior:

    m(x) = sum_k w_k(x) route_k(x),    w(x) = softmax((W z + b) / T),  z = (x - c) / |x - c|

(:meth:`~.language_id.LanguageIdentifier.route_weights`; weights under
:data:`~.language_id.MIN_ROUTE_WEIGHT` dropped and the rest renormalised, row by row).
``w`` is a smooth function of ``x``, so ``m`` is continuous: float rounding, another batch
or another precision can no longer move a sentence to another language's route, as the
argmax did (cosine 0.73-0.90 between two runs of the same text). A row's mixture uses only
the row itself: ``meaning(X)[i] == meaning(X[i:i+1])``.

:class:`Routing` holds the decision for one call; :meth:`Routing.apply` runs a recipe's
function once per route over the rows that need it and mixes the results. Outputs may be
an array ``(n, ...)``, ``None`` (no language part), or a dict of arrays (``views``).

**The script prior.** An untagged row whose text is known carries its script as the tag
``und-<Script>`` (:func:`tags_with_scripts`, what every surface with texts sends: the
library's :meth:`~disembed.saved_model.SavedModel.meaning`, ``evaluate``, the CLI, the
service, the export): its weights are the identifier's posterior restricted to the
training languages that write that script and renormalised
(:meth:`~.language_id.LanguageIdentifier.allowed_for_scripts`), or the whole posterior
where none writes it. The restriction is a function of the text, so the map stays
continuous in ``x``; ``meaning(X)`` without texts keeps the whole posterior.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from ..data.languages import normalize_tag
from ..exceptions import ShapeError
from ..util.scripts import script_tag


def _map(fn: Callable, *trees: Any) -> Any:
    """``fn`` over the arrays of one or more outputs of the same structure."""
    first = trees[0]
    if first is None:
        return None
    if isinstance(first, dict):
        return {k: _map(fn, *(t[k] for t in trees)) for k in first}
    return fn(*trees)


@dataclass(frozen=True)
class Routing:
    """The route of every row of one call.

    ``codes (n,)``: the code (or ``None``) a hard-routed row is handed to the recipe with;
    ``mixed (n,) bool``: rows that take the weighted mixture instead; ``weights (m, L)
    float64``: the weights of the ``m`` mixed rows (in row order) over ``languages``."""

    codes: np.ndarray
    mixed: np.ndarray
    weights: np.ndarray
    languages: tuple[str, ...]
    #: ``(m, L) float32``: the identifier's logits of the mixed rows (its one pass), and
    #: ``(m,)`` the script each mixed row was restricted to (``None``: none)
    scores: np.ndarray | None = None
    scripts: tuple[str | None, ...] = ()

    @classmethod
    def hard(cls, codes: np.ndarray) -> "Routing":
        """Every row by its code."""
        return cls(codes, np.zeros(len(codes), bool), np.zeros((0, 0)), ())

    def apply(self, call: Callable[[np.ndarray | None, Any], Any], n: int) -> Any:
        """The recipe's output for all ``n`` rows. ``call(rows, code)`` runs the recipe on the
        rows ``rows`` (an index array; ``None``: all rows) with ``code`` (one code, or one per
        row)."""
        if not self.mixed.any():
            return call(None, _one_or_each(self.codes))
        out = None
        hard = np.flatnonzero(~self.mixed)
        if len(hard):
            out = _place(out, hard, call(hard, _one_or_each(self.codes[hard])), n)
        mixed = np.flatnonzero(self.mixed)
        acc = None
        for k, code in enumerate(self.languages):
            w = self.weights[:, k]
            take = np.flatnonzero(w > 0)
            if not len(take):
                continue
            y = call(mixed[take], code)
            if acc is None:
                acc = _map(lambda a: np.zeros((len(mixed), *a.shape[1:]), np.float64), y)
            _map(functools.partial(_add_weighted, rows=take, weight=w[take]), acc, y)
        return _place(out, mixed, _map(lambda a: a.astype(np.float32), acc), n)


def _add_weighted(total: np.ndarray, part: np.ndarray, rows: np.ndarray, weight: np.ndarray
                  ) -> None:
    """``total[rows] += weight * part`` (``weight (r,)`` broadcast over ``part (r, ...)``)."""
    total[rows] += weight.reshape(-1, *([1] * (part.ndim - 1))) * part


def _one_or_each(codes: np.ndarray) -> Any:
    """One code where every row has the same, else the array (recipes take either)."""
    first = codes[0] if len(codes) else None
    if all(x == first for x in codes.tolist()):
        return first
    return codes


def _place(out: Any, rows: np.ndarray, part: Any, n: int) -> Any:
    """Write ``part`` into rows ``rows`` of ``out`` (allocated on first use)."""
    if out is None:
        out = _map(lambda a: np.zeros((n, *a.shape[1:]), a.dtype), part)
    _map(lambda o, a: o.__setitem__(rows, a), out, part)
    return out


def tags_with_scripts(texts: Sequence[str], languages: Any = None) -> list[str | None]:
    """One tag per text, as every surface that has the texts gives them to a model: the
    given tag (one for all, or one per text; normalised), and for a text without one
    (``None``, ``und``, ``mul``) its script, ``und-<Script>``
    (:func:`~disembed.util.scripts.script_tag`; ``None`` for a text without letters)."""
    n = len(texts)
    if languages is None or isinstance(languages, str):
        languages = [languages] * n
    languages = list(languages)
    if len(languages) != n:
        raise ShapeError(f"got {len(languages)} language codes for {n} texts; give one code "
                         "per text or a single code for all")
    tags = [normalize_tag(code) if code is not None else None for code in languages]
    return [script_tag(text) if tag is None else tag
            for text, tag in zip(texts, tags, strict=True)]
