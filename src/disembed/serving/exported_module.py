"""The meaning part of a language-dependent recipe as one sentence-transformers module that
identifies the language itself; copied verbatim into the export as ``disembed_meaning.py``.

This file must not import disembed: it runs where only torch, safetensors and
sentence-transformers are installed (``SentenceTransformer(folder, trust_remote_code=True)``).

For each row ``e (d,)`` of the (normalised) sentence embedding:

1. the language: the one the caller names (``encode(texts, language="de")``, or
   ``task="de"``; any alias the export recorded, e.g. ``deu``, ``de-DE``, ``deu_Latn``),
   else the model's language identifier: ``z = (e - c) / |e - c|``, ``k = argmax(W z + b)``
   (the most likely known language, also for a row far from all of them, as disembed's
   ``meaning(X)`` does; ``unknown`` and ``threshold`` are recorded, not used);
2. the route of that language: a few affine layers ``y = act(x A^T + a)``.

Every row is handled on its own, so a row's vector never depends on the other rows.
"""

from __future__ import annotations

import json
import os

import torch
from safetensors.torch import load_file, save_file
from sentence_transformers.base.modules.module import Module

CONFIG = "disembed_meaning.json"
WEIGHTS = "model.safetensors"
#: prompts that sentence-transformers passes as ``task``; they name no language
NOT_LANGUAGES = ("query", "document", "passage", "corpus")


class LanguageRoutedMeaning(Module):
    """Language identification + per-language affine routes; see the module docstring."""

    config_keys = ["languages", "routes", "activations", "aliases", "unknown", "threshold"]
    forward_kwargs = {"task", "language"}

    def __init__(self, languages: list[str], routes: list[str],
                 activations: dict[str, list[str]], aliases: dict[str, str] | None = None,
                 unknown: str = "nearest", threshold: float = -1.0,
                 tensors: dict[str, torch.Tensor] | None = None) -> None:
        super().__init__()
        self.languages, self.routes, self.activations = list(languages), list(routes), activations
        self.aliases, self.unknown, self.threshold = dict(aliases or {}), unknown, threshold
        self.tensors = {k: v.float() for k, v in (tensors or {}).items()}

    # --- the language of each row -------------------------------------------
    def language_of(self, code: str) -> str:
        """The route for a caller's code (an alias, any case); a clear error otherwise."""
        for key in (code, code.lower(), code.replace("_", "-").split("-")[0].lower()):
            if key in self.routes:
                return key
            if key in self.aliases:
                return self.aliases[key]
        raise ValueError(f"unknown language {code!r} for this model; known: "
                         f"{', '.join(sorted(set(self.routes)))} (or omit it: the model "
                         "identifies the language)")

    def identify(self, e: torch.Tensor) -> list[str]:
        """The route of each row of ``e (n, d)``, from the language identifier."""
        t = self.tensors
        z = e - t["lid.center"]
        z = z / z.norm(dim=1, keepdim=True).clamp_min(1e-12)
        best = (z @ t["lid.W"].T + t["lid.b"]).argmax(dim=1)
        return [self.languages[int(k)] for k in best]

    # --- the meaning part ------------------------------------------------------
    def route(self, name: str, x: torch.Tensor) -> torch.Tensor:
        for i, act in enumerate(self.activations[name]):
            x = x @ self.tensors[f"route.{name}.{i}.weight"].T + self.tensors[
                f"route.{name}.{i}.bias"]
            if act == "relu":
                x = torch.relu(x)
        return x

    def forward(self, features: dict, task: str | None = None, language: str | None = None,
                **kwargs) -> dict:
        e = features["sentence_embedding"].float()
        code = language or (task if task not in (None, *NOT_LANGUAGES) else None)
        names = [self.language_of(code)] * len(e) if code else self.identify(e)
        out = None
        for name in dict.fromkeys(names):
            rows = [i for i, n in enumerate(names) if n == name]
            y = self.route(name, e[rows])
            if out is None:
                out = e.new_zeros((len(e), y.shape[1]))
            out[rows] = y
        features["sentence_embedding"] = out
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
