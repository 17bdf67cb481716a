"""Any sentence-transformers / Hugging Face model, by hub name or local path.

Pooling, normalisation, prefix (or instruction) and maximum length are options.
Known model families get the settings their model cards prescribe when the
option is left as ``None``:

=====================  ==========  ===========================================
family                 pooling     prefix
=====================  ==========  ===========================================
LaBSE                  cls         none
multilingual-e5-*      mean        ``passage: `` (``query: `` for queries)
Qwen3-Embedding-*      lasttoken   ``Instruct: {instruction}\\nQuery:`` on queries
=====================  ==========  ===========================================

A folder saved by sentence-transformers (with ``modules.json``) is loaded as saved
unless pooling is given (its default prompt, if it has one, becomes the prefix unless
``prefix`` is given); a plain Hugging Face folder gets Transformer + Pooling (+ Normalize).
"""

from __future__ import annotations

import glob
import hashlib
import os
from pathlib import Path
from typing import Sequence

import numpy as np

from ..exceptions import ConfigError, require
from .base import EncoderIdentity, check_batch_size, check_texts
from .plugin import EncoderPlugin, ExportedBase, st_modules, with_edge_normalizer

POOLING_MODES = ("mean", "cls", "lasttoken", "max")

#: licences of hub models whose cards state one (for an export's model card)
KNOWN_LICENSES = {"sentence-transformers/labse": "apache-2.0",
                  "intfloat/multilingual-e5-small": "mit", "intfloat/multilingual-e5-base": "mit",
                  "intfloat/multilingual-e5-large": "mit",
                  "qwen/qwen3-embedding-0.6b": "apache-2.0"}

_FAMILY_DEFAULTS = (
    ("labse", {"pooling": "cls", "prefix": ""}),
    ("multilingual-e5", {"pooling": "mean", "prefix": "passage: "}),
    ("qwen3-embedding", {"pooling": "lasttoken", "prefix": ""}),
)


def family_defaults(model: str) -> dict:
    lowered = model.lower()
    for marker, settings in _FAMILY_DEFAULTS:
        if marker in lowered:
            return dict(settings)
    return {}


def _weights_revision(model: str) -> str:
    """Checksum of a local folder's weight files (size + first/last MiB), else the name."""
    if not os.path.isdir(model):
        return "hub:" + model
    h = hashlib.sha256()
    files = sorted(
        glob.glob(os.path.join(model, "**", "*.safetensors"), recursive=True)
        + glob.glob(os.path.join(model, "**", "*.bin"), recursive=True)
    )
    for path in files:
        size = os.path.getsize(path)
        h.update(f"{os.path.relpath(path, model)}:{size}".encode())
        with open(path, "rb") as f:
            h.update(f.read(1 << 20))
            if size > 2 << 20:
                f.seek(-(1 << 20), os.SEEK_END)
                h.update(f.read())
    return "local:" + h.hexdigest()[:16]


def _st_modules():
    """Transformer, Pooling, Normalize across sentence-transformers 3.x-6.x layouts."""
    try:
        from sentence_transformers.sentence_transformer.modules import (
            Normalize,
            Pooling,
            Transformer,
        )
    except ImportError:
        from sentence_transformers.models import Normalize, Pooling, Transformer
    return Transformer, Pooling, Normalize


def _call_first(obj, *names):
    for name in names:
        method = getattr(obj, name, None)
        if method is not None:
            return method()
    raise AttributeError(f"{type(obj).__name__} has none of {names}")


def _check_model_name(model: str) -> None:
    """A path-like name must exist; anything else is tried as a hub name."""
    looks_local = model.startswith(("/", "./", "../", "~")) or model.count("/") > 1 \
        or os.sep != "/" and os.sep in model
    if looks_local and not os.path.isdir(os.path.expanduser(model)):
        raise ConfigError(f"st:{model}: no such model folder; give an existing folder saved by "
                          "sentence-transformers or transformers, or a hub name such as "
                          "sentence-transformers/LaBSE")


def _load_model(st, model: str, pooling: str | None, normalize: bool, max_length: int | None,
                device: str, local_files_only: bool = False):
    """The SentenceTransformer and its pooling (``"__saved__"``: read it from the model);
    ``local_files_only``: from a local folder or the local Hugging Face cache, never a
    download."""
    is_st_folder = os.path.isfile(os.path.join(model, "modules.json"))
    offline = {"local_files_only": True} if local_files_only else {}
    if is_st_folder and pooling is None:
        return st.SentenceTransformer(model, device=device, **offline), "__saved__"
    pooling = pooling or "mean"
    Transformer, Pooling, Normalize = _st_modules()
    transformer = Transformer(model, max_seq_length=max_length, **_offline_kwargs(
        Transformer, offline))
    width = _call_first(transformer, "get_embedding_dimension", "get_word_embedding_dimension")
    pool = Pooling(width, pooling_mode=pooling)
    modules = [transformer, pool] + ([Normalize()] if normalize else [])
    return st.SentenceTransformer(modules=modules, device=device, **offline), pooling


def _offline_kwargs(transformer_cls, offline: dict) -> dict:
    """``local_files_only`` for the model, tokenizer and config of a ``Transformer`` module,
    under the keyword names of this sentence-transformers version."""
    if not offline:
        return {}
    import inspect

    params = inspect.signature(transformer_cls.__init__).parameters
    names = (("model_kwargs", "processor_kwargs", "config_kwargs") if "model_kwargs" in params
             else ("model_args", "tokenizer_args", "config_args"))
    return {name: dict(offline) for name in names if name in params}


class SentenceTransformerEncoder(EncoderPlugin):
    """Wraps ``sentence_transformers.SentenceTransformer`` behind the encoder protocol.

    Args:
        model: hub name (needs network or a warm HF cache) or local folder.
        pooling: one of ``mean``, ``cls``, ``lasttoken``, ``max``; ``None`` = family default
            or the folder's own pooling.
        prefix: text put before every sentence (e5: ``"passage: "``).
        normalize: L2-normalise outputs.
        max_length: token limit; ``None`` keeps the model's.
        device: torch device string; CPU unless given.
    """

    backend = "st"

    @classmethod
    def spec_of(cls, identity: EncoderIdentity) -> tuple[str, dict]:
        extra = dict(identity.extra)
        options: dict = {"prefix": identity.prefix, "normalize": identity.normalize}
        if extra.get("max_length"):
            options["max_length"] = int(extra["max_length"])
        if not os.path.isfile(os.path.join(identity.model, "modules.json")):
            options["pooling"] = identity.pooling  # a saved folder keeps its own pooling
        return f"st:{identity.model}", options

    @classmethod
    def recorded_options(cls) -> dict:
        """A saved model's encoder is loaded from local files only, never downloaded."""
        return {"local_files_only": True}

    @classmethod
    def rebuild(cls, identity: EncoderIdentity) -> "SentenceTransformerEncoder":
        """The encoder ``identity`` names (from local files only: a saved model never makes
        disembed download): the folder's own pooling first, then the recorded one (a model
        trained with an explicit pooling on a saved folder)."""
        spec, options = cls.spec_of(identity)
        options.pop("pooling", None)
        options.update(cls.recorded_options())
        tries = [None, identity.pooling] if os.path.isdir(identity.model) else [identity.pooling]
        for pooling in dict.fromkeys(tries):
            encoder = cls(identity.model, pooling=pooling, **options)
            if encoder.identity.to_dict() == identity.to_dict():
                return encoder
        raise ConfigError(f"{spec} no longer has the identity the model was trained on "
                          f"({identity.to_dict()} vs now {encoder.identity.to_dict()}): the "
                          "weights or settings changed; use the original model folder")

    @classmethod
    def export_modules(cls, identity: EncoderIdentity, workdir: Path) -> ExportedBase:
        """The same sentence-transformers model, pooling, prefix and maximum length the model
        was trained on (checked by rebuilding the identity), normalised if it was; its
        tokenizer's normaliser starts with disembed's text normalisation
        (:func:`~.plugin.edge_normalizers`)."""
        modules = list(cls.rebuild(identity).sentence_transformer)
        if identity.normalize and type(modules[-1]).__name__ != "Normalize":
            modules.append(st_modules()["Normalize"]())
        notes = []
        if not with_edge_normalizer(getattr(modules[0], "tokenizer", None)):
            notes.append("the base model's tokenizer has no 'tokenizers' normaliser to carry "
                         "disembed's text normalisation (NFC, control characters to a space): "
                         "normalise texts that way before encoding them")
        local = os.path.exists(identity.model) or identity.model.count("/") != 1
        return ExportedBase(modules, identity.prefix, identity.model, notes,
                            base_model=None if local else identity.model,
                            license=KNOWN_LICENSES.get(identity.model.lower(), "other"))

    def __init__(
        self,
        model: str,
        *,
        pooling: str | None = None,
        prefix: str | None = None,
        normalize: bool = True,
        max_length: int | None = None,
        device: str = "cpu",
        local_files_only: bool = False,
    ) -> None:
        _check_model_name(model)
        st = require("sentence_transformers", "st", "The st: encoder backend")
        defaults = family_defaults(model)
        pooling = pooling or defaults.get("pooling")
        if pooling is not None and pooling not in POOLING_MODES:
            raise ConfigError(
                f"pooling must be one of {', '.join(POOLING_MODES)}; got {pooling!r}"
            )
        self.prefix = defaults.get("prefix", "") if prefix is None else prefix
        self.normalize = bool(normalize)
        try:
            self._model, pooling = _load_model(st, model, pooling, normalize, max_length, device,
                                               local_files_only)
        except (OSError, ValueError) as exc:  # transformers' "not found" / "no network"
            first = (str(exc).splitlines() or [""])[0][:300]
            if local_files_only and not os.path.isdir(model):
                raise ConfigError(
                    f"st:{model} is not in the local Hugging Face cache, and disembed never "
                    "downloads the encoder a saved model names; download it yourself (e.g. "
                    f"huggingface-cli download {model}) or name it with --encoder st:{model}"
                ) from None
            raise ConfigError(
                f"st:{model}: the model could not be loaded ({type(exc).__name__}: {first}). "
                "Give a local folder saved by sentence-transformers or transformers, or a hub "
                "name (which needs network or a warm Hugging Face cache)") from None
        if pooling == "__saved__":
            pooling = self._saved_pooling()
            saved_prompt = self._default_prompt()
            if prefix is None and saved_prompt:  # the folder's own default prompt, added once
                self.prefix = saved_prompt
        if max_length is not None:
            self._model.max_seq_length = int(max_length)
        self.dim = int(_call_first(self._model, "get_embedding_dimension",
                                   "get_sentence_embedding_dimension"))
        self.pooling = pooling
        self.name = f"st:{model}"
        self.identity = EncoderIdentity(
            backend="st",
            model=os.path.abspath(model) if os.path.isdir(model) else model,
            revision=_weights_revision(model),
            dim=self.dim,
            pooling=pooling,
            prefix=self.prefix,
            normalize=self.normalize,
            extra=(("max_length", str(self._model.max_seq_length)),),
        )

    @property
    def sentence_transformer(self):
        """The wrapped ``SentenceTransformer`` (its modules, e.g. for an export)."""
        return self._model

    def _default_prompt(self) -> str:
        name = getattr(self._model, "default_prompt_name", None)
        return (getattr(self._model, "prompts", None) or {}).get(name, "") if name else ""

    def _saved_pooling(self) -> str:
        for module in self._model:
            mode = getattr(module, "get_pooling_mode_str", None)  # sentence-transformers < 5
            if mode is not None:
                return mode()
            mode = getattr(module, "pooling_mode", None)  # 5.x and later
            if isinstance(mode, str):
                return mode
            if isinstance(mode, (list, tuple)):
                return "+".join(mode)
        return "saved"

    @property
    def max_input_tokens(self) -> int | None:  # type: ignore[override]
        return int(self._model.max_seq_length) if self._model.max_seq_length else None

    def token_counts(self, texts: Sequence[str]) -> list[int] | None:
        """Tokens of ``prefix + text`` by the model's tokenizer (special tokens included,
        before the model's truncation), or ``None`` when it has none."""
        tokenizer = getattr(self._model, "tokenizer", None)
        if tokenizer is None:
            return None
        ids = tokenizer([self.prefix + t for t in texts], add_special_tokens=True)["input_ids"]
        return [len(x) for x in ids]

    def encode(self, texts: Sequence[str], *, batch_size: int = 64) -> np.ndarray:
        batch_size = check_batch_size(batch_size, self.name)
        texts = check_texts(texts, self.name)
        if self.prefix:
            texts = [self.prefix + t for t in texts]
        out = self._model.encode(
            texts,
            prompt="",  # the prefix (a saved default prompt included) is added above, once
            batch_size=batch_size,
            convert_to_numpy=True,
            normalize_embeddings=self.normalize,
            show_progress_bar=False,
        )
        return np.ascontiguousarray(out, dtype=np.float32).reshape(len(texts), self.dim)
