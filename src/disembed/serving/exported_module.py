"""The meaning part of a language-dependent recipe as one sentence-transformers module that
identifies the language itself; copied verbatim into the export as ``disembed_meaning.py``.

This file must not import disembed: it runs where only torch, safetensors and
sentence-transformers are installed (``SentenceTransformer(folder, trust_remote_code=True)``).

For each row ``e (d,)`` of the (normalised) sentence embedding, exactly as disembed's
``model.meaning`` (``disembed.methods.routing``):

1. the caller's language (``encode(texts, language="de")``, or ``task="de"``), if any:
   a language with a route (any spelling disembed accepts for it: ``deu``, ``de-DE``,
   ``deu_Latn``, recorded as aliases) takes that route; a well-formed code of a language
   the model never saw (the export carries the list of real languages' codes, so ``hi``
   or ``yo`` is not mistaken for a typo) takes the model's fallback (``unknown``: a route
   such as ``global``, ``mixture``, or ``error``); ``und`` and ``mul`` are no language;
   anything else is an error;
2. without one (or where the fallback is ``mixture``), the mixture of every language's
   route weighted by the language identifier: ``z = (e - c) / |e - c|``,
   ``w = softmax((W z + b) / T)`` (or ``sparsemax``, where the model says so), weights
   below ``min_route_weight`` dropped and the rest renormalised;
   ``m = sum_k w_k route_k(e)``. No argmax: the vector is continuous in ``e``, so float
   rounding or another precision cannot move it to another language;
3. a route is a few affine layers ``y = act(x A^T + a)``.

Every row is handled on its own, so a row's vector never depends on the other rows.
"""

from __future__ import annotations

import json
import os

import torch
from safetensors.torch import load_file, save_file
from sentence_transformers.base.modules.module import Module
from sentence_transformers.base.modules.transformer import Transformer

CONFIG = "disembed_meaning.json"
WEIGHTS = "model.safetensors"
#: prompts that sentence-transformers passes as ``task``; they name no language
NOT_LANGUAGES = ("query", "document", "passage", "corpus")
#: ``unknown`` values that are no route: mix by the identifier, or refuse
MIXTURE, ERROR = "mixture", "error"


def _sparsemax(z: torch.Tensor) -> torch.Tensor:
    """Row-wise Euclidean projection of ``z (n, L)`` onto the probability simplex."""
    zs = torch.sort(z, dim=1, descending=True).values
    cs = zs.cumsum(dim=1)
    k = torch.arange(1, z.shape[1] + 1, dtype=z.dtype)
    size = (1 + k * zs > cs).sum(dim=1)  # the support's size, >= 1
    tau = (cs.gather(1, (size - 1)[:, None]).squeeze(1) - 1) / size
    return torch.clamp(z - tau[:, None], min=0.0)


class LanguageRoutedMeaning(Module):
    """Language identification + per-language affine routes; see the module docstring."""

    config_keys = ["languages", "routes", "activations", "aliases", "unknown", "threshold",
                   "route_temperature", "route_map", "min_route_weight", "valid_languages",
                   "no_language", "pooling"]
    forward_kwargs = {"task", "language"}

    def __init__(self, languages: list[str], routes: list[str],
                 activations: dict[str, list[str]], aliases: dict[str, str] | None = None,
                 unknown: str = MIXTURE, threshold: float = -1.0, route_temperature: float = 1.0,
                 route_map: str = "softmax", min_route_weight: float = 0.0,
                 valid_languages: str = "",
                 no_language: list[str] | None = None,
                 pooling: str = "",
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

    def route_weights(self, e: torch.Tensor) -> torch.Tensor:
        """``(n, L) float64``: each language's weight for each row of ``e (n, d)``."""
        t = self.tensors
        z = e - t["lid.center"]
        z = z / z.norm(dim=1, keepdim=True).clamp_min(1e-12)
        logits = (z @ t["lid.W"].T + t["lid.b"]).double() / self.route_temperature
        logits = logits - logits.max(dim=1, keepdim=True).values
        w = _sparsemax(logits) if self.route_map == "sparsemax" else torch.softmax(logits, 1)
        w = torch.where(w < self.min_route_weight, torch.zeros_like(w), w)
        return w / w.sum(dim=1, keepdim=True)

    def identify(self, e: torch.Tensor) -> list[str]:
        """The most likely language of each row of ``e (n, d)`` (reporting only: the
        meaning mixes every language's route)."""
        return [self.languages[int(k)] for k in self.route_weights(e).argmax(dim=1)]

    # --- the meaning part ------------------------------------------------------
    def route(self, name: str, x: torch.Tensor) -> torch.Tensor:
        for i, act in enumerate(self.activations[name]):
            x = x @ self.tensors[f"route.{name}.{i}.weight"].T + self.tensors[
                f"route.{name}.{i}.bias"]
            if act == "relu":
                x = torch.relu(x)
        return x

    def mixture(self, e: torch.Tensor) -> torch.Tensor:
        """``sum_k w_k route_k(e)`` for each row of ``e (n, d)`` (step 2 of the docstring)."""
        w = self.route_weights(e)  # (n, L)
        out = None
        for k, name in enumerate(self.languages):
            rows = torch.nonzero(w[:, k] > 0).flatten()
            if not len(rows):
                continue
            every = len(rows) == len(e)  # the usual case (softmax): no gather, no scatter
            y = self.route(name, e if every else e[rows]).double()
            if out is None:
                out = torch.zeros((len(e), y.shape[1]), dtype=torch.float64)
            if every:
                out += w[:, k, None] * y
            else:
                out[rows] += w[rows, k, None] * y
        return self.route(self.languages[0], e) if out is None else out.float()  # n == 0

    @staticmethod
    def pooled(features: dict) -> torch.Tensor:
        """Mean of the token embeddings over the attention mask, L2-normalised, in float32."""
        x = features["token_embeddings"].float()
        mask = features["attention_mask"].to(x.dtype).unsqueeze(-1)
        mean = (x * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)
        return torch.nn.functional.normalize(mean, p=2, dim=1)

    def forward(self, features: dict, task: str | None = None, language: str | None = None,
                **kwargs) -> dict:
        e = self.pooled(features) if self.pooling else features["sentence_embedding"].float()
        code = language or (task if task not in (None, *NOT_LANGUAGES) else None)
        name = self.language_of(code) if code else None
        features["sentence_embedding"] = self.route(name, e) if name else self.mixture(e)
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


class LengthSortedTransformer(Transformer):
    """sentence-transformers' ``Transformer``, run on its batch regrouped by token count.

    ``SentenceTransformer.encode`` sorts texts by their length in characters, a poor proxy
    for tokens across scripts (a Chinese sentence has few characters and many tokens), so
    a batch of 14 languages pads to its longest text in tokens: 48% padding on 2,000
    Tatoeba sentences, 5% where disembed sorts by tokens. This module sorts the batch's rows
    by token count and runs them in sub-batches, each cut to its own longest row, and hands
    back the batch's token embeddings in the batch's order (zeros past a sub-batch's width).
    The cut points minimise padded tokens plus ``PASS_TOKENS`` per pass (a pass reads every
    weight once: on a 2-core AVX-512 CPU, 1 thread, a pass of one 10-token row cost 15-19 ms,
    a token in a 64-row pass 0.27 ms). A row's vector stays a function of the row alone:
    the attention mask hides the padding either way.
    """

    PASS_TOKENS = 128

    @classmethod
    def groups(cls, lengths: list[int]) -> list[tuple[int, int]]:
        """``[start, end)`` of each sub-batch over ``lengths`` sorted longest first: the
        cheapest cut (dynamic programming over the cut points)."""
        n = len(lengths)
        best, cut = [0.0] + [float("inf")] * n, [0] * (n + 1)
        for end in range(1, n + 1):
            for start in range(end):
                cost = best[start] + cls.PASS_TOKENS + (end - start) * lengths[start]
                if cost < best[end]:
                    best[end], cut[end] = cost, start
        out, end = [], n
        while end:
            out.append((cut[end], end))
            end = cut[end]
        return out[::-1]

    def forward(self, features: dict, **kwargs) -> dict:
        mask = features.get("attention_mask")
        if (mask is None or mask.dim() != 2 or len(mask) < 2
                or features.get("modality", "text") != "text"
                or getattr(self.model.config, "output_hidden_states", False)):
            return super().forward(features, **kwargs)
        lengths = mask.sum(dim=1)
        order = torch.argsort(lengths, descending=True, stable=True)
        sorted_lengths = lengths[order].tolist()
        out = None
        for start, end in self.groups(sorted_lengths):
            rows, width = order[start:end], sorted_lengths[start]
            sub = {k: v[rows, :width] if torch.is_tensor(v) and v.shape == mask.shape else v
                   for k, v in features.items()}
            y = super().forward(sub, **kwargs)[self.module_output_name]
            if out is None:
                out = y.new_zeros((*mask.shape, *y.shape[2:]))
            out[rows, :width] = y
        features[self.module_output_name] = out
        return features
