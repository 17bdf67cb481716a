"""What every encoder backend owns besides ``encode``: rebuilding itself from a saved
identity (the spec round trip), its sentence-transformers export modules, and which saved
identities it accepts as the same encoder on this machine.

A backend class subclasses :class:`EncoderPlugin`, sets ``backend`` (the
``EncoderIdentity.backend`` it writes) and overrides what it supports; the defaults say
"not supported" with an error that names the backend. :func:`identity_from_dict` reads the
identity a saved model records.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Mapping, Sequence

from ..exceptions import CheckpointError, ConfigError, require
from ..util.text import CONTROL_CHARACTERS, UNICODE_FORM
from .base import EncoderIdentity


@dataclass
class ExportedBase:
    """An encoder as sentence-transformers modules, and the text put before inputs."""

    modules: list
    prefix: str
    description: str
    notes: list[str] = field(default_factory=list)
    #: the Hugging Face id of the base model (a model card's ``base_model``), None when it
    #: is a local folder; and its licence (an SPDX-style hub id, ``other`` when unknown)
    base_model: str | None = None
    license: str = "other"
    #: the precision the encoder computes in (``float32``, ``bfloat16``): the export tells
    #: sentence-transformers to load its transformer so, to compute as the library does
    dtype: str = "float32"
    #: the modules after the first are mean pooling and L2 normalisation (a head may then
    #: take the transformer's token embeddings and pool them itself, in float32)
    mean_pooled: bool = False


def st_modules() -> dict:
    """Transformer, Pooling, Normalize, Dense and Router across sentence-transformers layouts."""
    require("sentence_transformers", "st", "Exporting to sentence-transformers")
    try:
        from sentence_transformers.sentence_transformer import modules as m
    except ImportError:  # sentence-transformers < 6
        from sentence_transformers import models as m
    names = ("Transformer", "Pooling", "Normalize", "Dense", "Router")
    return {name: getattr(m, name, None) for name in names}


def edge_normalizers() -> list:
    """The ``tokenizers`` normalisers that do what :func:`~disembed.util.text.normalize_text`
    does (NFC, then control characters other than TAB and LF to a space), to put first in an
    exported tokenizer's normaliser: the export then embeds the string disembed embeds."""
    from tokenizers import Regex, normalizers

    return [getattr(normalizers, UNICODE_FORM)(),
            normalizers.Replace(Regex(CONTROL_CHARACTERS), " ")]


def with_edge_normalizer(tokenizer) -> bool:
    """Put :func:`edge_normalizers` in front of a transformers fast tokenizer's own
    normaliser, in place; ``False`` for a tokenizer without a ``tokenizers`` backend."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        return False
    from tokenizers import normalizers

    own = backend.normalizer
    backend.normalizer = normalizers.Sequence([*edge_normalizers(), *([own] if own else [])])
    return True


def identity_from_dict(saved: Mapping[str, Any], where: str) -> EncoderIdentity:
    """The :class:`EncoderIdentity` of a saved ``to_dict()`` (``extra`` as a mapping)."""
    fields = dict(saved)
    fields["extra"] = tuple(sorted((str(k), str(v)) for k, v in
                                   dict(fields.get("extra") or {}).items()))
    try:
        return EncoderIdentity(**fields)
    except TypeError as exc:
        raise CheckpointError(f"{where}: the saved encoder identity is malformed ({exc})") from None


class EncoderPlugin:
    """Class-level knowledge of one backend (see the module docstring)."""

    #: the ``EncoderIdentity.backend`` this class writes
    backend: ClassVar[str] = ""

    @classmethod
    def spec_of(cls, identity: EncoderIdentity) -> tuple[str, dict[str, Any]]:
        """The ``load_encoder`` spec and options that rebuild the encoder ``identity`` names."""
        raise ConfigError(f"the {cls.backend!r} encoder cannot be rebuilt from a saved "
                          "identity; pass --encoder explicitly")

    @classmethod
    def export_modules(cls, identity: EncoderIdentity, workdir: Path) -> ExportedBase:
        """The encoder ``identity`` names as sentence-transformers modules."""
        raise ConfigError(
            f"the model was trained on the {cls.backend!r} encoder ({identity.model}), which "
            "has no sentence-transformers form; serve it with 'disembed serve --model DIR'")

    #: the most tokens one forward pass takes (the backend windows or cuts longer texts),
    #: or ``None`` when the backend does not say
    max_input_tokens: ClassVar[int | None] = None

    def token_counts(self, texts: Sequence[str]) -> list[int] | None:
        """How many tokens each text becomes (prefix and special tokens included), or
        ``None`` for a backend without a tokenizer: a caller then counts words."""
        return None

    @classmethod
    def recorded_options(cls) -> dict[str, Any]:
        """Options for loading the encoder a saved model records, as :meth:`spec_of`'s
        are added to (a backend that can download overrides this: local files only)."""
        return {}

    @classmethod
    def interchangeable(cls, saved: EncoderIdentity, here: EncoderIdentity) -> str | None:
        """Why ``here`` may stand in for ``saved`` though they differ (a note to log), or
        ``None`` when it may not. By default only an equal identity is the same encoder.
        A saved model never picks such a stand-in by itself: it rebuilds ``saved``
        (:mod:`disembed.saved_model`)."""
        return None

    @classmethod
    def fallback(cls, identity: EncoderIdentity) -> tuple[str, dict[str, Any], str] | None:
        """Where the encoder ``identity`` names cannot run here at all (an optional
        dependency is missing): ``(spec, options, agreement)`` of the stand-in a saved model
        uses instead, ``agreement`` saying how closely its meaning vectors were measured to
        agree; ``None``: there is none (the install hint is raised)."""
        return None
