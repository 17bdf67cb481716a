"""The fitted-disentangler interface shared by every method.

A disentangler is sklearn-style: hyperparameters in ``__init__`` and nothing
else there, ``fit(...) -> self``, learned state in attributes ending in ``_``.
It maps embeddings ``X (n, d)`` of sentences in known languages to a meaning
part and (for most methods) a language part. It saves as ``config.json`` +
``model.safetensors`` and loads strictly.

Languages, the same for every recipe (the base class wraps each recipe's ``fit``,
``meaning``, ``language`` and ``views`` when the subclass is defined, so a recipe only ever
sees canonical codes of rows it can handle):

* every code goes through :func:`~disembed.data.languages.normalize_language` (``deu``,
  ``de-DE``, ``DE`` and ``deu_Latn`` are ``de``; an unknown code is a ``ConfigError``);
* ``languages`` may be ``None`` (predict every row), one code for all rows, or one code per
  row with ``None`` entries predicted;
* a model that :attr:`~Disentangler.uses_language` fits a :class:`.LanguageIdentifier` on
  the raw training embeddings with itself, saves it with itself, and uses it for rows
  without a tag: each such row is the mixture of every language's route weighted by the
  identifier's tempered posterior (:mod:`.routing`; also where it flags the row "unknown",
  far from every known language), never a hard argmax, so the meaning is continuous in the
  embedding (the languages it finds most likely and their confidence are logged;
  docs/language_free.md, "No hard route");
* a language the model never saw gets its ``unknown_language`` fallback, row by row:
  ``"global"`` (the mean over the training languages; the default of the recipes that have
  the choice, chosen on validation data), ``"nearest"`` (the identifier's mixture, as for
  an untagged row) or ``"error"``; :meth:`~Disentangler.calibrate` adds a
  language from unlabeled sentences of it.

Nothing depends on the other rows of a call: ``meaning(X)[i] == meaning(X[i:i+1])``.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
import logging
import time
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, ClassVar, Sequence

import numpy as np

from ..data.languages import normalize_language, normalize_tag, script_subtag
from ..exceptions import (
    CheckpointError,
    ConfigError,
    DataError,
    NonFiniteError,
    NotFittedError,
    ShapeError,
)
from ..util.constraints import Constraint, validate_params
from ..util.files import AtomicFile, commit_together, finish_pending, saving_now
from ..util.text import text_list
from .config_checks import check_saved
from .export_map import GLOBAL_ROUTE, MeaningMap
from .language_id import UNKNOWN, LanguageIdentifier, LanguagePrediction
from .routing import Routing

logger = logging.getLogger(__name__)

FORMAT_VERSION = 1
#: config.json key holding the sha256 (hex) of model.safetensors, checked on load
WEIGHTS_CHECKSUM = "weights_sha256"
#: config.json key holding the sha256 (hex) of the rest of config.json (canonical JSON:
#: sorted keys, no spaces), checked on load: an edited method, parameter or learned entry
#: (such as a reordered ``learned.languages``) is refused, not silently used
CONFIG_CHECKSUM = "config_sha256"


def config_digest(config: dict[str, Any]) -> str:
    """sha256 of ``config`` without its :data:`CONFIG_CHECKSUM`, as canonical JSON."""
    body = {k: v for k, v in config.items() if k != CONFIG_CHECKSUM}
    body = json.loads(json.dumps(body, default=str))  # exactly what a reader gets back
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(canonical.encode("ascii")).hexdigest()

Languages = str | Sequence[str | None] | None
#: config.json key (under "learned") and weight-name prefix of the language identifier
LANGUAGE_ID_KEY = "language_id"
_LID_PREFIX = "language_id."


def as_language_array(languages: Languages, n: int) -> np.ndarray:
    """One language code per row: broadcast a single code (or ``None``), check a sequence's
    length."""
    if languages is None or isinstance(languages, str):
        return np.full(n, languages, dtype=object)
    arr = np.asarray(text_list(languages, "languages", "language codes"), dtype=object)
    if arr.shape != (n,):
        raise ShapeError(f"got {arr.shape[0] if arr.ndim else 0} language codes for {n} rows; "
                         "give one code per row or a single code for all")
    return arr


def normalize_languages(languages: Languages, n: int) -> np.ndarray:
    """``(n,)`` object array of canonical codes (``None`` kept; BCP-47's ``und`` and ``mul``,
    no one language, become ``None``: :func:`~disembed.data.languages.normalize_tag`;
    ``"unknown"``, what :meth:`Disentangler.predict_language` answers far from every known
    language, is kept and gets the unseen-language fallback), each distinct code normalised
    once."""
    arr = as_language_array(languages, n)

    def canonical_of(code):
        return UNKNOWN if code == UNKNOWN else normalize_tag(code)

    canonical = {code: canonical_of(code) for code in set(arr.tolist())}
    return np.array([canonical[code] for code in arr.tolist()], dtype=object).reshape(n)


def _resolving(fn):
    """Wrap a recipe's ``meaning``/``language``/``views`` so it gets canonical codes: one
    call per route, mixed for rows without a tag (:meth:`Disentangler.routing`)."""
    @functools.wraps(fn)
    def wrapper(self, X, languages=None, *args, **kwargs):
        X = self._check(X)
        routing = self.routing(X, languages)
        return routing.apply(lambda rows, code: fn(self, X if rows is None else X[rows], code,
                                                   *args, **kwargs), len(X))

    wrapper._resolves_languages = True  # type: ignore[attr-defined]
    return wrapper


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


def _fitting(fn):
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

    wrapper._fits_language_id = True  # type: ignore[attr-defined]
    return wrapper


class Disentangler(ABC):
    """Base class: ``fit`` on parallel embeddings, then ``meaning`` / ``language``."""

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
        super().__init_subclass__(**kwargs)
        for attr in ("meaning", "language", "views"):
            fn = cls.__dict__.get(attr)
            if fn is not None and not getattr(fn, "_resolves_languages", False):
                setattr(cls, attr, _resolving(fn))
        fit = cls.__dict__.get("fit")
        if fit is not None and not getattr(fit, "_fits_language_id", False):
            cls.fit = _fitting(fit)  # type: ignore[method-assign]

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

    @property
    def language_identifier(self) -> Any:
        """The language identifier fitted with the model (on its raw training embeddings),
        or ``None``: a recipe that uses no language, or a model saved before it had one."""
        return getattr(self, "language_id_", None)

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

    # --- languages -------------------------------------------------------------
    def known_languages(self) -> list[str]:
        """The languages this model has a route for (trained or calibrated)."""
        lid = getattr(self, "language_id_", None)
        return sorted(set(getattr(self, "languages_", [])) | set(lid.languages_ if lid else []))

    def predict_language(self, X: np.ndarray) -> LanguagePrediction:
        """The language of each row of raw embeddings ``X (n, d)``, as the model's language
        identifier sees it ("unknown" where a row is far from every known language)."""
        X = self._check(X)
        lid = getattr(self, "language_id_", None)
        if lid is None:
            raise ConfigError(f"this {self.name} model has no language identifier: "
                              + ("it uses no language, so none is needed" if not
                                 self.uses_language else "it was saved by an older disembed; "
                                 "refit it, or give the language of every row"))
        return lid.predict(X)

    def routing(self, X: np.ndarray, languages: Languages) -> Routing:
        """How each row of raw embeddings ``X (n, d)`` is routed (:mod:`.routing`): a tagged
        row by its canonical tag (a tag the model never saw by the recipe's
        ``unknown_language`` fallback); a row without a tag, and an unseen tag where the
        fallback is ``"nearest"``, by the mixture of every language's route weighted by the
        language identifier's tempered posterior
        (:meth:`~.language_id.LanguageIdentifier.route_weights`)."""
        langs = normalize_languages(languages, len(X))
        if not self.uses_language:
            return Routing.hard(np.array([None if script_subtag(x) else x
                                          for x in langs.tolist()], dtype=object))
        missing = np.array([x is None or script_subtag(x) is not None for x in langs.tolist()],
                           dtype=bool)
        mixed = missing.copy()
        lid = self.language_identifier
        if self.unknown_policy == "nearest" and lid is not None:
            known = set(self.known_languages())
            mixed |= np.array([x is not None and x not in known for x in langs.tolist()])
        if not mixed.any():
            return Routing.hard(langs)
        pred = self.predict_language(X[mixed])  # an older model without one: a clear error
        if missing.any():
            logger.info("%s: no language given for %d row(s): each is the mixture of the "
                        "routes of the languages it may be in, weighted by the identifier "
                        "(most likely: %s; mean confidence %.2f)", self.name,
                        int(missing.sum()), pred.summary(), float(pred.confidence.mean()))
        allowed = lid.allowed_for_scripts([script_subtag(x) for x in langs[mixed].tolist()])
        return Routing(langs, mixed, lid.route_weights(X[mixed], allowed),
                       tuple(lid.languages_))

    def resolve_languages(self, X: np.ndarray, languages: Languages) -> np.ndarray:
        """``(n,)`` the code each row is reported as (the service's ``language`` field): its
        canonical tag, or for a row the model routes by the identifier
        (:meth:`routing`), the language of its largest route weight: the identifier's most
        likely language among those the row's script allows (``und-Hani``: among the
        languages that write Han; untagged, or a script no training language writes: among
        all, the identifier's own most likely one), also for a row it calls "unknown".
        ``meaning`` does not route by these codes: such a row is a mixture."""
        routing = self.routing(X, languages)
        langs = routing.codes.copy()
        if routing.mixed.any():
            best = routing.weights.argmax(axis=1)
            langs[routing.mixed] = np.asarray(routing.languages, dtype=object)[best]
        return langs

    @property
    def unknown_policy(self) -> str:
        """What a language the model never saw gets (its ``unknown_language``)."""
        return str(getattr(self, "unknown_language", "nearest"))

    def unseen_route(self) -> str:
        """What an exported model does with a language tag it has no route for, as
        :meth:`meaning` does: the name of a :meth:`meaning_map` route (``"global"``: the
        mean over the training languages), ``"mixture"`` (the identifier's mixture, as for
        an untagged row: ``unknown_language="nearest"``) or ``"error"``."""
        policy = self.unknown_policy
        if policy in ("nearest", "error"):
            return "mixture" if policy == "nearest" else "error"
        return GLOBAL_ROUTE

    def calibrate(self, X: np.ndarray, language: str, *,
                  check_language: bool = True) -> "Disentangler":
        """Add language ``language`` from raw embeddings ``X (n, d)`` of unlabeled sentences
        of it: the recipe's route for it (:meth:`_calibrate`, e.g. its mean) and the
        language identifier's class. Returns ``self``.

        Calibrating a language the model already knows replaces what training fitted for
        it, so the sentences must be of that language: with ``check_language`` (the
        default) the language identifier must find at least half of them to be
        ``language``, else a :class:`~disembed.exceptions.DataError` says what they look
        like (German given Chinese text no longer replaces the German mean)."""
        X = self._check(X)
        code = normalize_language(language)
        if not self.uses_language:
            raise ConfigError(f"{self.name} uses no language, so there is nothing to calibrate;"
                              " its meaning is the same for every language")
        if len(X) < 2:
            raise ConfigError(f"calibrate needs at least 2 sentences of {code!r}, got {len(X)}")
        if code in self.known_languages():
            self._check_replacement(X, code, check_language)
        self._calibrate(X, code)
        if getattr(self, "language_id_", None) is not None:
            self.language_id_.add_language(code, X)
        # recorded: a calibrated language is appended to the sorted languages fit saved,
        # and a load tells it from a reordered list by this (config_checks)
        meta = dict(getattr(self, "metadata_", None) or {})
        self.metadata_ = {**meta, "calibrated": {**(meta.get("calibrated") or {}),
                                                 code: {"sentences": len(X)}}}
        logger.info("%s: calibrated %r from %d sentences", self.name, code, len(X))
        return self

    def _check_replacement(self, X: np.ndarray, code: str, check: bool) -> None:
        """Sentences that replace a known language's statistics must be of it (see
        :meth:`calibrate`)."""
        lid = self.language_identifier
        if not check or lid is None:
            logger.warning("%s: calibrating %r replaces what training fitted for it (%s)",
                           self.name, code, "language check skipped" if not check else
                           "not checked: the model has no language identifier")
            return
        pred = lid.predict(X)
        share = float(np.mean(pred.codes.astype(str) == code))
        if share < 0.5:
            found = ", ".join(f"{k}: {v}" for k, v in sorted(pred.summary().items(),
                                                            key=lambda kv: -kv[1]))
            raise DataError(
                f"{self.name} knows {code!r} from training, and calibrating it would replace "
                f"that; but its language identifier finds only {share:.0%} of these "
                f"{len(X)} sentences to be {code!r} ({found}). Give sentences of {code!r}, "
                "or (if they are) skip this check (check_language=False / "
                "--skip-language-check)")
        logger.warning("%s: calibrating %r replaces what training fitted for it (%.0f%% of "
                       "the sentences identified as %r)", self.name, code, 100 * share, code)

    def _calibrate(self, X: np.ndarray, code: str) -> None:
        """Give language ``code`` a route from its raw embeddings ``X (n, d)``."""
        raise ConfigError(f"{self.name} cannot be calibrated to a new language (it has no "
                          "per-language statistic to add); its unknown-language fallback "
                          f"({self.unknown_policy}) applies")

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

    # --- persistence ---------------------------------------------------------
    def _state(self) -> dict[str, np.ndarray]:
        """Learned tensors to save (name -> array)."""
        return {}

    def _extra_config(self) -> dict[str, Any]:
        """Learned non-tensor state to save (JSON-safe)."""
        return {}

    def saved_state(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """``(tensors, learned config)`` that :meth:`save` writes: the recipe's
        (:meth:`_state`, :meth:`_extra_config`) and its language identifier's."""
        state = {k: np.ascontiguousarray(v) for k, v in self._state().items()}
        learned = dict(self._extra_config())
        lid = getattr(self, "language_id_", None)
        if lid is not None:
            state.update(lid.state(_LID_PREFIX))
            learned[LANGUAGE_ID_KEY] = lid.config()
        return state, learned

    def restore(self, state: dict[str, np.ndarray], learned: dict[str, Any]) -> None:
        """Rebuild a loaded model's learned state: the recipe's (:meth:`_set_state`) and its
        language identifier's (saved under ``language_id``)."""
        learned = dict(learned)
        lid_config = learned.pop(LANGUAGE_ID_KEY, None)
        state = dict(state)
        lid_state = {k: state.pop(k) for k in list(state) if k.startswith(_LID_PREFIX)}
        self._set_state(state, learned)
        self.language_id_ = (None if lid_config is None else
                             LanguageIdentifier.from_saved(lid_config, lid_state, _LID_PREFIX))

    def _set_state(self, state: dict[str, np.ndarray], extra: dict[str, Any]  # noqa: B027
                   ) -> None:  # methods without learned state keep this no-op
        """Rebuild learned state; must check names and shapes strictly."""

    def save(self, directory: str | Path, metadata: dict[str, Any] | None = None) -> Path:
        """Write ``config.json`` and ``model.safetensors`` into ``directory`` (atomically);
        ``metadata`` defaults to the model's own (``metadata_``: what it was loaded with, or
        what ``fit_method`` recorded)."""
        from safetensors.numpy import save as save_tensors

        if not self.is_fitted:
            raise NotFittedError(f"cannot save an unfitted {type(self).__name__}")
        directory = Path(directory)
        state, learned = self.saved_state()
        bad = sorted(k for k, v in state.items() if not np.isfinite(v).all())
        if bad:
            raise NonFiniteError(f"refusing to save this {type(self).__name__}: its weights "
                                 f"{bad} hold NaN or infinite values (training diverged; "
                                 "retrain with a lower learning rate, --lr)")
        blob = save_tensors(state)
        config = {
            "format_version": FORMAT_VERSION,
            "method": self.name,
            "params": self.get_params(),
            "dim": int(self.dim_),
            "state": {k: list(v.shape) for k, v in state.items()},
            "learned": learned,
            "metadata": (metadata if metadata is not None
                         else dict(getattr(self, "metadata_", None) or {})),
            WEIGHTS_CHECKSUM: hashlib.sha256(blob).hexdigest(),
        }
        config[CONFIG_CHECKSUM] = config_digest(config)
        # the two files are renamed as one step (a journal, util.files.commit_together):
        # a run killed at any point leaves the old model or the new one, both loadable
        # (calibrate rewrites a model in place), never weights beside another's config
        directory.mkdir(parents=True, exist_ok=True)
        weights = AtomicFile(directory / "model.safetensors", stream=False)
        try:
            cfg = AtomicFile(directory / "config.json", stream=False)
        except BaseException:
            weights.discard()
            raise
        try:
            weights.write(blob)
            cfg.write(json.dumps(config, indent=2, sort_keys=True, default=str).encode())
            commit_together([weights, cfg])
        except BaseException:
            weights.discard()
            cfg.discard()
            raise
        return directory


def _verify_checksum(weights_path: Path, recorded: str | None) -> None:
    """The sha256 of the weights file must match the one ``save`` recorded."""
    if recorded is None:
        logger.warning("%s was saved without a checksum (by an older disembed); loading it "
                       "unverified", weights_path)
        return
    h = hashlib.sha256()
    with open(weights_path, "rb") as f:
        while block := f.read(1 << 20):
            h.update(block)
    if h.hexdigest() != recorded:
        raise CheckpointError(
            f"{weights_path} does not match the checksum in config.json (sha256 "
            f"{h.hexdigest()[:16]}..., recorded {str(recorded)[:16]}...): the file is "
            "corrupt or was changed after saving; restore it or train the model again")


def _read_config(cfg_path: Path) -> dict[str, Any]:
    try:
        config = json.loads(cfg_path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise CheckpointError(f"{cfg_path} is not valid JSON: {exc}") from None
    kinds = {"format_version": int, "method": str, "params": dict, "dim": int, "state": dict}
    for key, kind in kinds.items():
        if not isinstance(config, dict) or not isinstance(config.get(key), kind):
            raise CheckpointError(f"{cfg_path} has no valid {key!r} entry (a "
                                  f"{kind.__name__}); expected keys {', '.join(kinds)}")
    if config["format_version"] != FORMAT_VERSION:
        raise CheckpointError(f"{cfg_path}: format_version {config['format_version']}, this "
                              f"disembed reads {FORMAT_VERSION}")
    recorded = config.get(CONFIG_CHECKSUM)
    if recorded is None:
        if WEIGHTS_CHECKSUM in config:
            logger.warning("%s was saved without a checksum of its own content (by an older "
                           "disembed); its method, parameters and learned entries are used "
                           "unverified", cfg_path)
    elif recorded != config_digest(config):
        raise CheckpointError(
            f"{cfg_path} does not match its own checksum ({CONFIG_CHECKSUM}): its method, "
            "parameters or learned entries (e.g. the order of learned.languages) were edited "
            "after saving, which would silently change what the model computes; restore the "
            "file or train the model again")
    return config


def _read_state(weights_path: Path, cfg_path: Path, config: dict[str, Any]
                ) -> dict[str, np.ndarray]:
    from safetensors import SafetensorError
    from safetensors.numpy import load_file

    _verify_checksum(weights_path, config.get(WEIGHTS_CHECKSUM))
    try:
        state = load_file(str(weights_path))
    except (SafetensorError, OSError) as exc:
        raise CheckpointError(f"{weights_path} could not be read ({exc}); re-save the "
                              "model") from None
    try:
        expected = {k: tuple(v) for k, v in config["state"].items()}
    except TypeError:
        raise CheckpointError(f"{cfg_path}: 'state' must map tensor names to shapes") from None
    got = {k: tuple(v.shape) for k, v in state.items()}
    if expected != got:
        missing = sorted(set(expected) - set(got))
        unexpected = sorted(set(got) - set(expected))
        wrong = sorted(k for k in set(expected) & set(got) if expected[k] != got[k])
        raise CheckpointError(
            f"{weights_path} does not match {cfg_path}: missing keys {missing}, unexpected keys "
            f"{unexpected}, wrong shapes {[(k, expected[k], got[k]) for k in wrong]}")
    bad = sorted(k for k, v in state.items() if not np.isfinite(v).all())
    if bad:
        raise CheckpointError(f"{weights_path}: weights {bad} hold NaN or infinite values; "
                              "the file is corrupt or the training diverged: retrain it")
    return state


def _finish_interrupted_save(directory: Path) -> None:
    """Complete the save of a writer killed between renaming its two files (the journal
    :meth:`Disentangler.save` leaves); a folder this process cannot write is read as is."""
    try:
        finish_pending(directory)
    except OSError as exc:
        logger.warning("%s: an interrupted save could not be completed (%s); rerun as a user "
                       "who can write the folder, or save the model again", directory, exc)


#: how long a load waits for a save in progress in the same folder before it reports
#: what it read (seconds)
SAVE_WAIT_SECONDS = 30.0


def _stamp(directory: Path) -> tuple:
    """What changes when a save renames a file into ``directory``: each file's inode, size
    and modification time."""
    out = []
    for name in ("config.json", "model.safetensors"):
        try:
            st = (directory / name).stat()
            out.append((st.st_ino, st.st_size, st.st_mtime_ns))
        except OSError:
            out.append(None)
    return tuple(out)


def read_saved(directory: Path) -> tuple[Path, dict[str, Any], dict[str, np.ndarray]]:
    """``(config path, config, weights)`` of a saved disentangler, every key, shape and the
    checksum checked, and the learned config as its constructor and ``fit`` make it
    (:mod:`.config_checks`); :func:`~disembed.methods.load_disentangler` builds the model.

    A read that meets a save in progress (another process renaming the two files in
    place: one is new, the other old, so they disagree) is not called corrupt: it waits
    and reads again, for at most :data:`SAVE_WAIT_SECONDS`, while a live writer's journal
    is there or a file changed under it."""
    deadline = time.monotonic() + SAVE_WAIT_SECONDS
    while True:
        before = _stamp(directory)
        try:
            return _read_saved_once(directory)
        except CheckpointError:
            changed = before != _stamp(directory) or saving_now(directory)
            if not changed or time.monotonic() > deadline:
                raise
            logger.info("%s is being saved by another process; reading it again", directory)
            time.sleep(0.02)


def _read_saved_once(directory: Path) -> tuple[Path, dict[str, Any], dict[str, np.ndarray]]:
    cfg_path, weights_path = directory / "config.json", directory / "model.safetensors"
    _finish_interrupted_save(directory)
    for path in (cfg_path, weights_path):
        if not path.is_file():
            raise CheckpointError(f"{directory} is not a saved disentangler: {path.name} is "
                                  "missing (expected config.json + model.safetensors)")
    config = _read_config(cfg_path)
    state = _read_state(weights_path, cfg_path, config)
    check_saved(cfg_path, config, state)
    return cfg_path, config, state
