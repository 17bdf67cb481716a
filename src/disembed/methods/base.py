"""The fitted-disentangler interface shared by every method.

A disentangler is sklearn-style: hyperparameters in ``__init__`` and nothing
else there, ``fit(...) -> self``, learned state in attributes ending in ``_``.
It maps embeddings ``X (n, d)`` of sentences in known languages to a meaning
part and (for most methods) a language part. It saves as ``config.json`` +
``model.safetensors`` and loads strictly.
"""

from __future__ import annotations

import inspect
import json
import logging
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, ClassVar, Sequence

import numpy as np

from ..exceptions import CheckpointError, NotFittedError, ShapeError
from ..util.files import atomic_write_bytes

logger = logging.getLogger(__name__)

FORMAT_VERSION = 1

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
        config = {
            "format_version": FORMAT_VERSION,
            "method": self.name,
            "params": self.get_params(),
            "dim": int(self.dim_),
            "state": {k: list(v.shape) for k, v in state.items()},
            "learned": self._extra_config(),
            "metadata": metadata or {},
        }
        atomic_write_bytes(directory / "model.safetensors", [save_tensors(state)])
        atomic_write_bytes(directory / "config.json",
                           [json.dumps(config, indent=2, sort_keys=True, default=str).encode()])
        return directory


def load_disentangler(directory: str | Path) -> Disentangler:
    """Load a saved disentangler; every key and shape is checked against its config.

    ``method`` is a registered name, an alias or a composed name (``"oracle+meat"``), its
    params the hyperparameters; both go to :func:`~disembed.methods.make_method`, so
    models saved when ``oracle+meat`` was a generated class (params holding
    ``oracle_variant``/``oracle_weight``) load as MEAT with ORACLE's terms.
    """
    from safetensors import SafetensorError
    from safetensors.numpy import load_file

    from . import make_method

    directory = Path(directory)
    cfg_path, weights_path = directory / "config.json", directory / "model.safetensors"
    for path in (cfg_path, weights_path):
        if not path.is_file():
            raise CheckpointError(f"{directory} is not a saved disentangler: {path.name} is "
                                  "missing (expected config.json + model.safetensors)")
    try:
        config = json.loads(cfg_path.read_text())
    except ValueError as exc:
        raise CheckpointError(f"{cfg_path} is not valid JSON: {exc}") from None
    for key in ("format_version", "method", "params", "dim", "state"):
        if key not in config:
            raise CheckpointError(f"{cfg_path} has no {key!r} entry; expected keys "
                                  "format_version, method, params, dim, state")
    if config["format_version"] != FORMAT_VERSION:
        raise CheckpointError(f"{cfg_path}: format_version {config['format_version']}, this "
                              f"disembed reads {FORMAT_VERSION}")
    try:
        state = load_file(str(weights_path))
    except (SafetensorError, OSError) as exc:
        raise CheckpointError(f"{weights_path} could not be read ({exc}); re-save the "
                              "model") from None
    expected = {k: tuple(v) for k, v in config["state"].items()}
    got = {k: tuple(v.shape) for k, v in state.items()}
    if expected != got:
        missing = sorted(set(expected) - set(got))
        unexpected = sorted(set(got) - set(expected))
        wrong = sorted(k for k in set(expected) & set(got) if expected[k] != got[k])
        raise CheckpointError(
            f"{weights_path} does not match {cfg_path}: missing keys {missing}, unexpected keys "
            f"{unexpected}, wrong shapes {[(k, expected[k], got[k]) for k in wrong]}")
    model = make_method(config["method"], **config["params"])
    model.dim_ = int(config["dim"])
    model._set_state(state, config.get("learned", {}))
    model.metadata_ = config.get("metadata", {})
    return model
