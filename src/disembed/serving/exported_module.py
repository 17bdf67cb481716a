"""The meaning part of a language-dependent recipe as one sentence-transformers module that
identifies the language itself; copied verbatim into the export as ``disembed_meaning.py``.

This file must not import disembed: it runs where only torch, safetensors and
sentence-transformers are installed (``SentenceTransformer(folder, trust_remote_code=True)``).
The routing rule itself is disembed's own file, ``disembed/util/routing_rule.py``, which the
export ships beside this one as ``routing_rule.py``, byte for byte; this module only adapts
it to sentence-transformers. For each row ``e (d,)`` of the (normalised) sentence
embedding, exactly as disembed's ``model.meaning`` (``disembed.methods.routing``):

1. the caller's language (``encode(texts, language="de")``, or ``task="de"``), if any:
   a language with a route (any spelling disembed accepts for it: ``deu``, ``de-DE``,
   ``deu_Latn``, recorded as aliases) takes that route; a well-formed code of a language
   the model never saw (the export carries the list of real languages' codes, so ``hi``
   or ``yo`` is not mistaken for a typo) takes the model's fallback (``unknown``: a route
   such as ``global``, ``mixture``, or ``error``); ``und`` and ``mul`` are no language;
   anything else is an error;
2. without one (or where the fallback is ``mixture``), the routing rule's mixture of every
   language's route weighted by the identifier's posterior over the languages that write
   the text's script (``und-Hani`` names the script of every row), giving way to the whole
   posterior where that restricted posterior is unsure (``prior_confidence``; ``None`` in
   an older export: never). The text is the
   caller's, without the prompt: the transformer (``packed_transformer.py``) hands the
   texts on as the feature ``TEXTS_FEATURE``. A module config without the script table (an
   older export) mixes by the whole posterior, as before;
3. a route is a few affine layers ``y = act(x A^T + a)``.

Every row is handled on its own, so a row's vector never depends on the other rows.
"""

from __future__ import annotations

import json
import os

import numpy as np
import torch
from safetensors.torch import load_file, save_file
from sentence_transformers.base.modules.module import Module

from .packed_transformer import TEXTS_FEATURE

try:  # in an export: disembed's routing rule, shipped beside this file as it is
    from .routing_rule import allowed, logits, mixture, route_weights, script_of, script_subtag
except ImportError:  # inside disembed
    from disembed.util.routing_rule import (
        allowed,
        logits,
        mixture,
        route_weights,
        script_of,
        script_subtag,
    )

CONFIG = "disembed_meaning.json"
WEIGHTS = "model.safetensors"
#: prompts that sentence-transformers passes as ``task``; they name no language
NOT_LANGUAGES = ("query", "document", "passage", "corpus")
#: ``unknown`` values that are no route: mix by the identifier, or refuse
MIXTURE, ERROR = "mixture", "error"


class LanguageRoutedMeaning(Module):
    """Language identification + per-language affine routes; see the module docstring."""

    config_keys = ["languages", "routes", "activations", "aliases", "unknown", "threshold",
                   "route_temperature", "route_map", "min_route_weight", "valid_languages",
                   "no_language", "pooling", "language_scripts", "script_names",
                   "script_ranges", "prior_confidence"]
    forward_kwargs = {"task", "language"}

    def __init__(self, languages: list[str], routes: list[str],
                 activations: dict[str, list[str]], aliases: dict[str, str] | None = None,
                 unknown: str = MIXTURE, threshold: float = -1.0, route_temperature: float = 1.0,
                 route_map: str = "softmax", min_route_weight: float = 0.0,
                 valid_languages: str = "",
                 no_language: list[str] | None = None,
                 pooling: str = "",
                 language_scripts: dict[str, list[str]] | None = None,
                 script_names: list[str] | None = None,
                 script_ranges: dict[str, list[int]] | None = None,
                 prior_confidence: list[float] | None = None,
                 tensors: dict[str, torch.Tensor] | None = None) -> None:
        super().__init__()
        self.languages, self.routes, self.activations = list(languages), list(routes), activations
        self.aliases, self.unknown, self.threshold = dict(aliases or {}), unknown, threshold
        self.route_temperature, self.min_route_weight = route_temperature, min_route_weight
        self.route_map = route_map
        self.valid_languages = valid_languages  # space-separated language subtags
        self._valid = set(valid_languages.split())
        self.no_language = list(no_language or ["und", "mul"])
        # "mean": this module mean-pools the transformer's token embeddings and L2-normalises
        # them in float32 (a bfloat16 transformer's output is not rounded to bfloat16 first);
        # "": it takes the sentence embedding of the modules before it
        self.pooling = pooling
        # the script prior (module docstring); None: an older export, no prior
        self.language_scripts = language_scripts
        self.script_names, self.script_ranges = script_names, script_ranges
        # where the prior gives way to the whole posterior; None: an older export, never
        self.prior_confidence = prior_confidence
        self.tensors = {k: v.float() for k, v in (tensors or {}).items()}

    # --- the language of each row -------------------------------------------
    def language_of(self, code: str) -> str | None:
        """The route for a caller's code, ``None`` for "mix by the identifier"; a clear error
        for a malformed code (or an unseen one where the model's fallback is an error)."""
        base = code.strip().replace("_", "-").split("-")[0].lower()
        for key in (code, code.lower(), base):
            if key in self.routes:
                return key
            if key in self.aliases:
                return self.aliases[key]
        if base in self.no_language:
            return None
        if base not in self._valid:
            raise ValueError(f"unknown language {code!r}: not a well-formed code of a real "
                             f"language; this model has routes for "
                             f"{', '.join(sorted(set(self.routes)))} (or omit it: the model "
                             "identifies the language)")
        if self.unknown == ERROR:
            raise ValueError(f"this model has no route for language {code!r} and its "
                             "fallback for unseen languages is an error; omit the language "
                             "(the model identifies it) or use one of "
                             f"{', '.join(sorted(set(self.routes)))}")
        return None if self.unknown == MIXTURE else self.unknown

    def row_scripts(self, code: str | None, texts: list[str] | None, n: int
                    ) -> list[str | None]:
        """The script each of ``n`` mixed rows is restricted to (``None``: none): the one
        ``und-<Script>`` names, else each text's where the code names no language (or there
        is none), else none (a language the model never saw, as in disembed)."""
        if code is not None:
            base = code.strip().replace("_", "-").split("-")[0].lower()
            if base not in self.no_language:
                return [None] * n
            script = script_subtag(code)
            if script is not None:
                return [script] * n
        if texts is None or len(texts) != n or not self.script_ranges or not self.script_names:
            return [None] * n
        ranges = [self.script_ranges[k] for k in ("starts", "ends", "scripts")]
        return [script_of(text, self.script_names, ranges) for text in texts]

    def route_weights(self, e: torch.Tensor, scripts: list[str | None] | None = None
                      ) -> np.ndarray:
        """``(n, L) float64``: each language's weight for each row of ``e (n, d)``, the rows
        restricted to the languages that write their ``scripts`` (the routing rule:
        :func:`routing_rule.route_weights` over :func:`routing_rule.allowed`)."""
        mask = None
        if self.language_scripts and scripts and any(s is not None for s in scripts):
            mask = allowed(scripts, self.languages, self.language_scripts)
        t = self.tensors
        scores = logits(e.detach().float().cpu().numpy(), t["lid.center"].numpy(),
                        t["lid.W"].numpy(), t["lid.b"].numpy())
        return route_weights(scores, self.route_temperature, self.route_map,
                             self.min_route_weight, mask, self.prior_confidence)

    def identify(self, e: torch.Tensor) -> list[str]:
        """The most likely language of each row of ``e (n, d)`` (reporting only: the
        meaning mixes every language's route)."""
        return [self.languages[int(k)] for k in self.route_weights(e).argmax(axis=1)]

    # --- the meaning part ------------------------------------------------------
    def route(self, name: str, x: torch.Tensor) -> torch.Tensor:
        for i, act in enumerate(self.activations[name]):
            x = x @ self.tensors[f"route.{name}.{i}.weight"].T + self.tensors[
                f"route.{name}.{i}.bias"]
            if act == "relu":
                x = torch.relu(x)
        return x

    def mixture(self, e: torch.Tensor, weights: np.ndarray) -> torch.Tensor:
        """``sum_k w_k route_k(e)`` for each row of ``e (n, d)`` (the routing rule's
        :func:`routing_rule.mixture`)."""
        if not len(e):
            return self.route(self.languages[0], e)

        def run(rows: np.ndarray, name: str) -> np.ndarray:
            return self.route(name, e[torch.from_numpy(rows)]).double().cpu().numpy()

        return torch.from_numpy(mixture(weights, self.languages, run)).to(e.device)

    @staticmethod
    def pooled(features: dict) -> torch.Tensor:
        """Mean of the token embeddings over the attention mask, L2-normalised, in float32."""
        x = features["token_embeddings"].float()
        mask = features["attention_mask"].to(x.dtype).unsqueeze(-1)
        mean = (x * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)
        return torch.nn.functional.normalize(mean, p=2, dim=1)

    def forward(self, features: dict, task: str | None = None, language: str | None = None,
                **kwargs) -> dict:
        texts = features.pop(TEXTS_FEATURE, None)
        e = self.pooled(features) if self.pooling else features["sentence_embedding"].float()
        code = language or (task if task not in (None, *NOT_LANGUAGES) else None)
        name = self.language_of(code) if code else None
        if name:
            features["sentence_embedding"] = self.route(name, e)
        else:
            weights = self.route_weights(e, self.row_scripts(code or None, texts, len(e)))
            features["sentence_embedding"] = self.mixture(e, weights)
        return features

    # --- saving and loading ------------------------------------------------------
    def save(self, output_path: str, *args, safe_serialization: bool = True, **kwargs) -> None:
        os.makedirs(output_path, exist_ok=True)
        with open(os.path.join(output_path, CONFIG), "w", encoding="utf-8") as f:
            json.dump(self.get_config_dict(), f, indent=1, ensure_ascii=False)
        save_file({k: v.contiguous() for k, v in self.tensors.items()},
                  os.path.join(output_path, WEIGHTS))

    @classmethod
    def load(cls, model_name_or_path: str, subfolder: str = "", **kwargs):
        folder = os.path.join(model_name_or_path, subfolder)
        with open(os.path.join(folder, CONFIG), encoding="utf-8") as f:
            config = json.load(f)
        return cls(**config, tensors=load_file(os.path.join(folder, WEIGHTS)))
