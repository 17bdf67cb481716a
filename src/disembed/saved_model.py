"""One saved model: its disentangler, its typed metadata and the encoder it needs.

Every verb that opens a trained model (``evaluate``, ``mine``, ``search``, ``serve``,
``export``, ``analyse``) goes through :class:`SavedModel`, so they decide alike which
encoder to use and whether it is the one the model was trained on:

>>> encoder, model = SavedModel.load("runs/seed/model")          # doctest: +SKIP
>>> model.meaning(encoder.encode(["Guten Morgen"]), "de")        # doctest: +SKIP

**Which encoder.** An encoder named by the caller (``--encoder``); else the spec the
model was trained with (``metadata.encoder_spec``, e.g. ``e5-small``); else the encoder
rebuilt from the recorded identity by its backend
(:meth:`~disembed.encoders.EncoderPlugin.spec_of`).

**The rule for a backend that differs on this machine.** The encoder must have the
identity the model was trained on. If it does not, its backend is asked whether the two
stand in for each other (:meth:`~disembed.encoders.EncoderPlugin.interchangeable`): the
e5-small torch backend accepts float32 for bfloat16 and back (``e5-small`` picks the
dtype by the hardware, so a model trained where bfloat16 is native opens in float32
elsewhere); the two agree to a measured cosine (docs/saved_models.md) and the
acceptance is logged as a warning. Any other difference is refused with an error that
says which encoder to pass. Without a caller's ``--encoder``, a spec that no longer
gives the recorded identity falls back to rebuilding it exactly from the identity.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping

from .data.languages import normalize_language
from .encoders import (
    Encoder,
    EncoderIdentity,
    encoder_backend,
    identity_from_dict,
    load_encoder,
    rebuild_encoder,
)
from .encoders.cached import cached
from .exceptions import CheckpointError, ConfigError, UnknownNameError
from .methods import Disentangler, load_disentangler

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ModelMetadata:
    """What a saved model records besides its weights (``config.json``'s ``metadata``).

    Attributes:
        recipe: the method's name (``seed-centered``, ``oracle+meat``...).
        params: its hyperparameters.
        encoder_spec: the ``load_encoder`` spec it was trained with, if recorded.
        encoder: the identity of that encoder, if recorded.
        training: where its training pairs came from (languages, sizes, digest), if recorded.
        extra: any other metadata entries, as saved.
    """

    recipe: str
    params: Mapping[str, Any]
    encoder_spec: str | None = None
    encoder: EncoderIdentity | None = None
    training: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, model: Disentangler, where: str) -> "ModelMetadata":
        meta = dict(getattr(model, "metadata_", None) or {})
        identity = meta.pop("encoder", None)
        return cls(recipe=model.name, params=model.get_params(),
                   encoder_spec=meta.pop("encoder_spec", None) or None,
                   encoder=identity_from_dict(identity, where) if identity else None,
                   training=meta.pop("training", None), extra=meta)

    def to_dict(self) -> dict[str, Any]:
        """The ``metadata`` entry ``Disentangler.save`` writes."""
        return {**self.extra, "encoder": self.encoder.to_dict() if self.encoder else None,
                "encoder_spec": self.encoder_spec, "training": self.training}


def _describe(identity: EncoderIdentity) -> str:
    extra = "".join(f", {k}={v}" for k, v in identity.extra)
    return (f"{identity.backend} {identity.model} (revision {identity.revision}, "
            f"{identity.dim}-d{extra})")


@dataclass
class SavedModel:
    """A saved model folder opened: ``disentangler``, ``metadata`` and (on first use)
    ``encoder``; iterating gives ``(encoder, disentangler)``. See the module docstring."""

    path: Path
    disentangler: Disentangler
    metadata: ModelMetadata
    requested_encoder: str | None = None
    encoder_options: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def load(cls, directory: str | Path, encoder: str | None = None,
             encoder_options: Mapping[str, Any] | None = None) -> "SavedModel":
        """Open ``directory`` (``config.json`` + ``model.safetensors``); ``encoder``: a spec
        to use instead of the model's own (checked against it)."""
        directory = Path(directory)
        model = load_disentangler(directory)
        return cls(directory, model, ModelMetadata.of(model, str(directory)), encoder or None,
                   dict(encoder_options or {}))

    def __iter__(self) -> Iterator[Any]:
        return iter((self.encoder, self.disentangler))

    @property
    def encoder_spec(self) -> str:
        """The spec the encoder is opened from (module docstring, "Which encoder")."""
        if self.requested_encoder:
            return self.requested_encoder
        if self.metadata.encoder_spec:
            return self.metadata.encoder_spec
        if self.metadata.encoder is not None:
            spec, _ = encoder_backend(self.metadata.encoder).spec_of(self.metadata.encoder)
            return spec
        raise ConfigError(f"the model in {self.path} does not record which encoder it was "
                          "trained on; name it (--encoder SPEC)")

    @functools.cached_property
    def encoder(self) -> Encoder:
        """The bare encoder (no cache) the model is used with, checked (:meth:`check_encoder`)."""
        saved = self.metadata.encoder
        if self.requested_encoder or self.metadata.encoder_spec or saved is None:
            encoder = load_encoder(self.encoder_spec, **self.encoder_options)
        else:
            encoder = rebuild_encoder(saved)
        if (not self.requested_encoder and saved is not None
                and not self._same_encoder(saved, encoder.identity)):
            encoder = rebuild_encoder(saved)  # the spec now gives another encoder here
        self.check_encoder(encoder)
        return encoder

    def _same_encoder(self, saved: EncoderIdentity, here: EncoderIdentity) -> bool:
        if saved.to_dict() == here.to_dict():
            return True
        try:
            backend = encoder_backend(here)
        except UnknownNameError:
            return False
        note = backend.interchangeable(saved, here)
        if note:
            logger.warning("%s: %s", self.path, note)
        return note is not None

    def check_encoder(self, encoder: Encoder, spec_name: str | None = None) -> None:
        """``encoder`` must be the one the model was trained on (or one its backend accepts
        in its place, logged) and give embeddings of the model's dimension."""
        saved = self.metadata.encoder
        spec_name = spec_name or self.encoder_spec
        if saved is not None and not self._same_encoder(saved, encoder.identity):
            raise ConfigError(
                f"the model in {self.path} was trained on encoder "
                f"{self.metadata.encoder_spec or '?'} = {_describe(saved)}, but this run uses "
                f"{spec_name} = {_describe(encoder.identity)}; use the encoder it was trained "
                "on (leave --encoder out to use it)")
        if encoder.dim != self.disentangler.dim_:
            raise ConfigError(f"the model in {self.path} expects {self.disentangler.dim_}-d "
                              f"embeddings but encoder {spec_name} gives {encoder.dim}-d")

    def require_identity(self) -> EncoderIdentity:
        """The recorded encoder identity (an export needs it)."""
        if self.metadata.encoder is None:
            raise CheckpointError(f"{self.path} does not record its encoder (metadata "
                                  "'encoder' is missing); models saved by 'disembed train' or "
                                  "'bench' do")
        return self.metadata.encoder


def calibrate_saved(directory: str | Path, language: str, texts: list[str], *,
                    out: str | Path | None = None, encoder: str | None = None,
                    cache_dir: str | Path | None = None, batch_size: int = 64) -> SavedModel:
    """Add ``language`` to the saved model in ``directory`` from unlabeled ``texts`` of it
    (:meth:`~disembed.methods.Disentangler.calibrate`: its mean, its class in the language
    identifier), and save it to ``out`` (default: in place, each file written atomically).
    The metadata records how many sentences calibrated which language; ``export`` and
    ``serve`` read the calibrated model like any other."""

    code = normalize_language(language)
    texts = [t for t in texts if t.strip()]
    saved = SavedModel.load(directory, encoder)
    X = cached(saved.encoder, cache_dir).encode(texts, batch_size=batch_size)
    model = saved.disentangler.calibrate(X, code)
    metadata = dict(getattr(model, "metadata_", {}) or {})
    metadata["calibrated"] = {**metadata.get("calibrated", {}), code: {"sentences": len(texts)}}
    target = Path(out) if out is not None else Path(directory)
    model.save(target, metadata=metadata)
    return SavedModel.load(target, encoder)


__all__ = ["ModelMetadata", "SavedModel", "calibrate_saved"]
