"""The fitted-disentangler interface shared by every method.

A disentangler is sklearn-style: hyperparameters in ``__init__`` and nothing
else there, ``fit(...) -> self``, learned state in attributes ending in ``_``.
It maps embeddings ``X (n, d)`` of sentences in known languages to a meaning
part and (for most methods) a language part. It saves as ``config.json`` +
``model.safetensors`` and loads strictly.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import logging
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, ClassVar, Sequence

import numpy as np

from ..exceptions import CheckpointError, ConfigError, NonFiniteError, NotFittedError, ShapeError
from ..util.files import atomic_write_bytes
from .export_map import MeaningMap

logger = logging.getLogger(__name__)

FORMAT_VERSION = 1
#: config.json key holding the sha256 (hex) of model.safetensors, checked on load
WEIGHTS_CHECKSUM = "weights_sha256"

Languages = str | Sequence[str]


def as_language_array(languages: Languages, n: int) -> np.ndarray:
    """One language code per row: broadcast a single code, check a sequence's length."""
    if isinstance(languages, str):
        return np.full(n, languages, dtype=object)
    arr = np.asarray(list(languages), dtype=object)
    if arr.shape != (n,):
        raise ShapeError(f"got {arr.shape[0] if arr.ndim else 0} language codes for {n} rows; "
                         "give one code per row or a single code for all")
    return arr


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

    def get_params(self) -> dict[str, Any]:
        """Hyperparameters as given to ``__init__`` (JSON-safe)."""
        return {name: getattr(self, name) for name in self.param_names()}

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
    def meaning(self, X: np.ndarray, languages: Languages) -> np.ndarray:
        """Meaning part ``(n, d_m) float32`` of embeddings ``X (n, d)``."""

    def language(self, X: np.ndarray, languages: Languages) -> np.ndarray | None:
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

    def views(self, X: np.ndarray, language: str) -> dict[str, np.ndarray]:
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

    def _set_state(self, state: dict[str, np.ndarray], extra: dict[str, Any]  # noqa: B027
                   ) -> None:  # methods without learned state keep this no-op
        """Rebuild learned state; must check names and shapes strictly."""

    def save(self, directory: str | Path, metadata: dict[str, Any] | None = None) -> Path:
        """Write ``config.json`` and ``model.safetensors`` into ``directory`` (atomically)."""
        from safetensors.numpy import save as save_tensors

        if not self.is_fitted:
            raise NotFittedError(f"cannot save an unfitted {type(self).__name__}")
        directory = Path(directory)
        state = {k: np.ascontiguousarray(v) for k, v in self._state().items()}
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
            "learned": self._extra_config(),
            "metadata": metadata or {},
            WEIGHTS_CHECKSUM: hashlib.sha256(blob).hexdigest(),
        }
        # weights first: a run killed in between leaves a config whose checksum no longer
        # matches, which load_disentangler reports, never a silent mix of two models
        atomic_write_bytes(directory / "model.safetensors", [blob])
        atomic_write_bytes(directory / "config.json",
                           [json.dumps(config, indent=2, sort_keys=True, default=str).encode()])
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


def read_saved(directory: Path) -> tuple[Path, dict[str, Any], dict[str, np.ndarray]]:
    """``(config path, config, weights)`` of a saved disentangler, every key, shape and the
    checksum checked; :func:`~disembed.methods.load_disentangler` builds the model."""
    cfg_path, weights_path = directory / "config.json", directory / "model.safetensors"
    for path in (cfg_path, weights_path):
        if not path.is_file():
            raise CheckpointError(f"{directory} is not a saved disentangler: {path.name} is "
                                  "missing (expected config.json + model.safetensors)")
    config = _read_config(cfg_path)
    return cfg_path, config, _read_state(weights_path, cfg_path, config)
