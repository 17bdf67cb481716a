"""The fitted-disentangler interface shared by every method: the estimator.

A disentangler is sklearn-style: hyperparameters in ``__init__`` and nothing
else there, ``fit(...) -> self``, learned state in attributes ending in ``_``.
It maps embeddings ``X (n, d)`` of sentences in known languages to a meaning
part and (for most methods) a language part. Its other jobs live beside it and are mixed
in: routing by language (:mod:`.language_routing`: codes, the identifier, calibration) and
persistence (:mod:`.persistence`: ``config.json`` + ``model.safetensors``, loaded strictly).

**What a recipe's methods are wrapped in, and where.** A recipe writes ``fit`` for
canonical codes of every training row and ``meaning`` / ``language`` / ``views`` for rows
of ONE route (a code, or one code per row), each wrapped by a decorator written on the
method itself (``@fitting def fit``,
``@resolving def meaning``); :meth:`Disentangler.__init_subclass__` only checks that none
is missing, and refuses the class when one is:

* ``fit`` in :func:`fitting`: codes normalised, rows checked finite, the fit timed, and a
  :class:`.LanguageIdentifier` fitted on the raw training embeddings where the recipe
  :attr:`~Disentangler.uses_language`;
* ``meaning``, ``language`` and ``views`` in :func:`~.language_routing.resolving`: the
  rows routed once (:meth:`~.language_routing.LanguageRouting.routing`), the recipe's
  function run once per route and mixed for rows without a tag.

A wrapped function carries its original as ``__wrapped__`` and its job as
``_disembed_wraps``
(:meth:`~.language_routing.LanguageRouting.routed` runs it under a routing computed
already: the one text path, :mod:`.text_path`).

Nothing depends on the other rows of a call: ``meaning(X)[i] == meaning(X[i:i+1])``.
"""

from __future__ import annotations

import functools
import inspect
import time
from abc import ABC, abstractmethod
from typing import Any, ClassVar

import numpy as np

from ..exceptions import ConfigError, NonFiniteError, NotFittedError, ShapeError
from ..util.constraints import Constraint, validate_params
from .export_map import MeaningMap
from .language_id import LanguageIdentifier
from .language_routing import (  # noqa: F401 - re-exported: recipes import them from here
    LanguageRouting,
    Languages,
    as_language_array,
    normalize_languages,
    resolving,
)
from .persistence import (  # noqa: F401 - re-exported for the loaders and tests
    CONFIG_CHECKSUM,
    FORMAT_VERSION,
    WEIGHTS_CHECKSUM,
    Persistent,
    config_digest,
    read_saved,
)

#: the methods of a recipe that are decorated, and with what (each recipe writes the
#: decorator on its method; :meth:`Disentangler.__init_subclass__` refuses a class that
#: forgot one)
WRAPPED = {"fit": "fitting", "meaning": "resolving", "language": "resolving",
           "views": "resolving"}
#: the mark each decorator leaves on the function it returns (``_disembed_wraps``)
_WRAP_MARKS = {"fitting": "fit", "resolving": "routes"}
#: what each decorator does, for the error that names a missing one
WRAP_JOBS = {"fitting": "codes normalised, rows checked, the language identifier fitted",
             "resolving": "rows routed by their tag or the identifier's posterior, one call "
                          "per route"}


def _check_finite(matrix, name: str, chunk: int = 65536) -> None:
    """Refuse training embeddings with NaN or inf rows (the optimisers otherwise fail
    deep in torch, or fit NaN means), in chunks so that a memmap is not read whole."""
    for start in range(0, len(matrix), chunk):
        block = np.asarray(matrix[start:start + chunk], np.float32)
        bad = ~np.isfinite(block).all(axis=tuple(range(1, block.ndim)))
        if bad.any():
            raise NonFiniteError(f"fit: {name} row {start + int(np.argmax(bad))} holds NaN or "
                                 "infinite values (expected finite embeddings); drop or "
                                 "re-encode those rows")


def fitting(fn):
    """Wrap a recipe's ``fit``: codes normalised, and a language identifier fitted on the raw
    training embeddings when the recipe uses a language (once, however deep ``super().fit``
    goes)."""
    @functools.wraps(fn)
    def wrapper(self, src, tgt, src_lang, tgt_lang, *args, **kwargs):
        if getattr(self, "_fitting_now", False):
            return fn(self, src, tgt, src_lang, tgt_lang, *args, **kwargs)
        s_lang = normalize_languages(src_lang, len(src))
        t_lang = normalize_languages(tgt_lang, len(tgt))
        if any(x is None for x in (*s_lang, *t_lang)):
            raise ConfigError("fit needs the language of every training row; got None")
        _check_finite(src, "src")
        _check_finite(tgt, "tgt")
        self._fitting_now = True
        t0 = time.perf_counter()
        try:
            out = fn(self, src, tgt, s_lang, t_lang, *args, **kwargs)
        finally:
            del self._fitting_now
        self.fit_seconds_ = time.perf_counter() - t0
        self.language_id_ = None
        if self.uses_language:
            X = np.concatenate([np.asarray(src, np.float32), np.asarray(tgt, np.float32)])
            self.language_id_ = LanguageIdentifier().fit(X, np.concatenate([s_lang, t_lang]))
        return out

    wrapper._disembed_wraps = "fit"  # type: ignore[attr-defined]
    return wrapper


class Disentangler(LanguageRouting, Persistent, ABC):
    """Base class: ``fit`` on parallel embeddings, then ``meaning`` / ``language``; routing
    and persistence are mixed in (module docstring)."""

    #: registry name, written to config.json
    method: ClassVar[str] = ""
    #: whether :meth:`language` returns a language part
    has_language: ClassVar[bool] = True
    #: whether :meth:`fit` needs translation pairs (``baseline`` does not)
    needs_data: ClassVar[bool] = True
    #: whether :meth:`meaning` / :meth:`language` depend on the language of each row (the
    #: service then asks for one); every recipe declares it (a recipe whose answer depends
    #: on its hyperparameters, e.g. ``center``, makes it a property). The base's ``True`` is
    #: the safe answer for a recipe that forgot; the contract tests reject forgetting.
    uses_language: ClassVar[bool] = True
    #: what ``disembed tune`` tries by default: hyperparameter -> values (pykeen's
    #: ``hpo_default``); empty: nothing to tune
    hpo_default: ClassVar[dict[str, list]] = {}
    #: what each hyperparameter accepts (:mod:`disembed.util.constraints`), checked by
    #: :meth:`check_params` for every method a config names, before anything runs
    _parameter_constraints: ClassVar[dict[str, list[Constraint]]] = {}

    #: the paper the recipe reproduces (model cards cite it); empty: disembed's own
    paper: ClassVar[str] = ""

    def papers(self) -> list[str]:
        """The papers behind this configured method (the recipe's, plus any it composes)."""
        return [self.paper] if self.paper else []

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Check that the recipe's own ``fit`` is decorated with :func:`fitting` and its
        ``meaning``, ``language`` and ``views`` with :func:`~.language_routing.resolving`
        (:data:`WRAPPED`; module docstring). The wrapping is written where it happens, on
        the recipe's method; a method without it would silently skip the routing (or the
        identifier's fit), so the class is refused when it is defined."""
        super().__init_subclass__(**kwargs)
        for attr, wrapper in WRAPPED.items():
            fn = cls.__dict__.get(attr)
            if fn is None or getattr(fn, "__isabstractmethod__", False):
                continue
            if getattr(fn, "_disembed_wraps", None) != _WRAP_MARKS[wrapper]:
                raise TypeError(
                    f"{cls.__module__}.{cls.__qualname__}.{attr} is not decorated with "
                    f"@{wrapper}: a recipe's {attr} runs inside it ({WRAP_JOBS[wrapper]}). "
                    f"Write '@{wrapper}' above 'def {attr}' (from disembed.methods import "
                    f"{wrapper}), as CONTRIBUTING.md's worked example does")

    @property
    def name(self) -> str:
        """What this configured method is called, e.g. ``oracle+meat`` for MEAT with ORACLE's
        terms; the registry name by default. ``make_method(name, **get_params())`` rebuilds
        it, and it is the name ``save`` writes."""
        return self.method

    # --- fitting -------------------------------------------------------------
    @abstractmethod
    def fit(self, src: np.ndarray, tgt: np.ndarray, src_lang: Languages,
            tgt_lang: Languages) -> "Disentangler":
        """Learn from ``n`` translation pairs: ``src (n, d)`` translates ``tgt (n, d)``."""

    @classmethod
    def param_names(cls) -> list[str]:
        """Names of the hyperparameters ``__init__`` takes (what ``get_params`` returns)."""
        return [p for p in inspect.signature(cls.__init__).parameters if p != "self"]

    @classmethod
    def fit_accepts(cls, option: str) -> bool:
        """Whether :meth:`fit` takes the keyword ``option`` (trained recipes take
        ``checkpoint_dir`` and ``on_epoch_end``; closed-form ones take neither)."""
        return option in inspect.signature(cls.fit).parameters

    @classmethod
    def check_params(cls, params: dict[str, Any], owner: str | None = None) -> None:
        """Raise :class:`~disembed.exceptions.ConfigError` unless every key of ``params`` is a
        hyperparameter of this method ("did you mean") and every value meets its declared
        constraint (type and range)."""
        validate_params(owner or cls.method or cls.__name__, params, cls.param_names(),
                        cls._parameter_constraints)

    def get_params(self) -> dict[str, Any]:
        """Hyperparameters as given to ``__init__`` (JSON-safe)."""
        return {name: getattr(self, name) for name in self.param_names()}

    # --- what other layers ask of a recipe -------------------------------------
    def check_settings(self) -> None:
        """Raise :class:`~disembed.exceptions.ConfigError` now for settings that only
        fitting would otherwise find wrong (a trained recipe's training settings); a
        recipe without such settings has nothing to check."""
        return None

    def fit_record(self) -> dict[str, Any]:
        """What a run records of the last :meth:`fit`: ``seconds`` spent in it, ``history``
        (a trained recipe's per-epoch record, JSON-safe) and ``diagnostics`` (a table the
        recipe reports about its fit, ``{"title", "columns", "rows"}``); ``None`` where a
        recipe has none, ``seconds`` 0 for a model that was loaded, not fitted."""
        return {"seconds": float(getattr(self, "fit_seconds_", 0.0)), "history": None,
                "diagnostics": None}

    # --- inference -----------------------------------------------------------
    @property
    def is_fitted(self) -> bool:
        return hasattr(self, "dim_")

    def _check(self, X: np.ndarray) -> np.ndarray:
        if not self.is_fitted:
            raise NotFittedError(f"This {type(self).__name__} is not fitted yet; call fit(...) "
                                 "or load a saved model before using it")
        X = np.asarray(X, dtype=np.float32)
        if X.ndim != 2:
            raise ShapeError(f"expected a 2-D (n, d) array of embeddings, got shape {X.shape}")
        if X.shape[1] != self.dim_:
            raise ShapeError(f"X has {X.shape[1]} features, but this {type(self).__name__} "
                             f"expects {self.dim_}: was it fitted on another encoder?")
        return X

    @abstractmethod
    def meaning(self, X: np.ndarray, languages: Languages = None) -> np.ndarray:
        """Meaning part ``(n, d_m) float32`` of embeddings ``X (n, d)``; ``languages``: see
        the module docstring (``None``: identified from the embedding)."""

    def language(self, X: np.ndarray, languages: Languages = None) -> np.ndarray | None:
        """Language part ``(n, d_l) float32``, or ``None`` for methods without one."""
        return None

    def meaning_map(self) -> MeaningMap:
        """The meaning part as affine layers (one route per language where it
        :attr:`uses_language`), what the sentence-transformers export writes; see
        :mod:`.export_map`. Recipes without such a form raise ``ConfigError``."""
        raise ConfigError(f"{self.name} has no exported form (its meaning part is not a "
                          "stack of affine layers); serve it with 'disembed serve --model DIR' "
                          "instead")

    def _export_dim(self) -> int:
        """``dim_`` of a fitted model (what :meth:`meaning_map` starts from)."""
        if not self.is_fitted:
            raise ConfigError(f"this {type(self).__name__} is not fitted; export a trained "
                              "model")
        return int(self.dim_)

    def transform(self, X: np.ndarray, languages: Languages) -> np.ndarray:
        return self.meaning(X, languages)

    def views(self, X: np.ndarray, language: Languages = None) -> dict[str, np.ndarray]:
        """``{"meaning": ..., "language": ...}`` for sentences of one language (evaluation)."""
        out = {"meaning": self.meaning(X, language)}
        lang = self.language(X, language)
        if lang is not None:
            out["language"] = lang
        return out

