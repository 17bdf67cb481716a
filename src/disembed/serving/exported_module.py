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

**The script prior** (disembed's ``tags_with_scripts``): a row without a language (no
code, ``und``, ``mul``) is restricted to the training languages that write its text's
script, the logits of the others set to ``-inf`` before the softmax, where one of them does;
``und-Hani`` names the script of every row. The text's script is :func:`script_of`, the
twin of ``disembed.util.scripts.script_of`` over the code point table the export carries
(``script_names``, ``script_ranges``; ``language_scripts``: each language's scripts), on
the text as the caller gave it, without the prompt: the transformer
(:class:`LengthSortedTransformer`) hands the texts on as the feature
:data:`TEXTS_FEATURE`. A module config without these keys (an older export) mixes by the
whole posterior, as before.

Every row is handled on its own, so a row's vector never depends on the other rows.
"""

from __future__ import annotations

import bisect
import json
import os
import re
import unicodedata

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
#: the feature :class:`LengthSortedTransformer` adds for the head: the batch's texts as the
#: caller gave them (before the prompt), for their script
TEXTS_FEATURE = "disembed_texts"
#: the control characters disembed replaces by a space (``disembed.util.text``)
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


#: scripts that stand for several (the twin of ``disembed.data.languages.SCRIPT_PARTS``): a
#: row tagged ``und-Jpan`` may be in any language that writes one of them
SCRIPT_PARTS = {"Hans": ("Hani",), "Hant": ("Hani",), "Jpan": ("Hani", "Hira", "Kana"),
                "Kore": ("Hang", "Hani")}


def script_of(text: str, names: list[str], ranges: dict[str, list[int]]) -> str | None:
    """The script of most of ``text``'s letters (``None``: no letter): the twin of
    ``disembed.util.scripts.script_of``. The text is put in NFC and its control characters
    become spaces (``disembed.util.text.normalize_text``); each code point inside one of
    the inclusive ``ranges["starts"][i]..ranges["ends"][i]`` counts for the script
    ``names[ranges["scripts"][i]]``; ties go to the script first in ``names``."""
    starts, ends, scripts = ranges["starts"], ranges["ends"], ranges["scripts"]
    counts = [0] * len(names)
    for ch in _CONTROL.sub(" ", unicodedata.normalize("NFC", text)):
        cp = ord(ch)
        i = bisect.bisect_right(starts, cp) - 1
        if i >= 0 and cp <= ends[i]:
            counts[scripts[i]] += 1
    best = max(counts, default=0)
    return names[counts.index(best)] if best else None


def script_subtag(code: str) -> str | None:
    """The script of a code that names no language (``und-Hani``, ``mul_hani`` -> ``Hani``),
    as disembed's ``normalize_tag`` reads it; ``None`` for any other code."""
    parts = code.strip().replace("_", "-").split("-")
    script = parts[1] if len(parts) > 1 and len(parts[1]) == 4 else None
    if script is None or not script.isascii() or not script.isalpha():
        return None
    return script.title()


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
                   "no_language", "pooling", "language_scripts", "script_names",
                   "script_ranges"]
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
        return [script_of(text, self.script_names, self.script_ranges) for text in texts]

    def allowed(self, scripts: list[str | None]) -> torch.Tensor | None:
        """``(n, L) bool``: the languages each row may be in, those that write its script;
        every language where none does or the row has no script (``None``: every row)."""
        if not self.language_scripts or all(s is None for s in scripts):
            return None
        writes = [set(self.language_scripts.get(code, ())) for code in self.languages]
        rows = [[bool(set(SCRIPT_PARTS.get(s, (s,))) & w) for w in writes] for s in scripts]
        return torch.tensor([row if any(row) else [True] * len(row) for row in rows],
                            dtype=torch.bool).reshape(len(scripts), len(self.languages))

    def route_weights(self, e: torch.Tensor, allowed: torch.Tensor | None = None
                      ) -> torch.Tensor:
        """``(n, L) float64``: each language's weight for each row of ``e (n, d)``;
        ``allowed (n, L) bool``: the others' logits are ``-inf`` (the twin of disembed's
        ``LanguageIdentifier.route_weights``: masked first, then the small weights
        dropped, then renormalised)."""
        t = self.tensors
        z = e - t["lid.center"]
        z = z / z.norm(dim=1, keepdim=True).clamp_min(1e-12)
        logits = (z @ t["lid.W"].T + t["lid.b"]).double() / self.route_temperature
        if allowed is not None:
            logits = logits.masked_fill(~allowed.to(logits.device), float("-inf"))
        logits = logits - logits.max(dim=1, keepdim=True).values
        w = _sparsemax(logits) if self.route_map == "sparsemax" else torch.softmax(logits, 1)
        w = torch.where(w < self.min_route_weight, torch.zeros_like(w), w)
        return w / w.sum(dim=1, keepdim=True)

    def identify(self, e: torch.Tensor, allowed: torch.Tensor | None = None) -> list[str]:
        """The most likely language of each row of ``e (n, d)`` (reporting only: the
        meaning mixes every language's route)."""
        return [self.languages[int(k)] for k in self.route_weights(e, allowed).argmax(dim=1)]

    # --- the meaning part ------------------------------------------------------
    def route(self, name: str, x: torch.Tensor) -> torch.Tensor:
        for i, act in enumerate(self.activations[name]):
            x = x @ self.tensors[f"route.{name}.{i}.weight"].T + self.tensors[
                f"route.{name}.{i}.bias"]
            if act == "relu":
                x = torch.relu(x)
        return x

    def mixture(self, e: torch.Tensor, allowed: torch.Tensor | None = None) -> torch.Tensor:
        """``sum_k w_k route_k(e)`` for each row of ``e (n, d)`` (step 2 of the docstring)."""
        w = self.route_weights(e, allowed)  # (n, L)
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
        texts = features.pop(TEXTS_FEATURE, None)
        e = self.pooled(features) if self.pooling else features["sentence_embedding"].float()
        code = language or (task if task not in (None, *NOT_LANGUAGES) else None)
        name = self.language_of(code) if code else None
        if name:
            features["sentence_embedding"] = self.route(name, e)
        else:
            allowed = self.allowed(self.row_scripts(code or None, texts, len(e)))
            features["sentence_embedding"] = self.mixture(e, allowed)
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


#: architectures whose layers :class:`PackedTransformer` runs itself: post-LN BERT-style
#: encoders with absolute positions (Hugging Face's module names)
PACKED_MODEL_TYPES = ("xlm-roberta", "bert")


def _packable(model) -> bool:
    """Whether ``model`` is a Hugging Face BERT / XLM-R encoder in the layout
    :func:`packed_hidden_states` reads, in eval mode without gradients, asked for the last
    layer only."""
    config = getattr(model, "config", None)
    if (config is None or torch.is_grad_enabled()
            or getattr(config, "model_type", None) not in PACKED_MODEL_TYPES
            or getattr(config, "is_decoder", False) or model.training
            or getattr(config, "output_hidden_states", False)
            or getattr(config, "position_embedding_type", "absolute") != "absolute"):
        return False
    layers = getattr(getattr(model, "encoder", None), "layer", None)
    return layers is not None and all(
        hasattr(layer, "attention") and hasattr(layer.attention, "self")
        and hasattr(layer, "intermediate") and not getattr(layer, "add_cross_attention", False)
        for layer in layers)


def _fused_qkv(attention) -> tuple[torch.Tensor, torch.Tensor]:
    """The query, key and value projections as one ``(3H, H)`` matrix (built once, and again
    if the module's weights were moved or cast)."""
    q, k, v = attention.query, attention.key, attention.value
    cached = getattr(attention, "_disembed_qkv", None)
    if cached is not None and cached[2] == (q.weight.data_ptr(), q.weight.dtype):
        return cached[0], cached[1]
    with torch.inference_mode(False), torch.no_grad():  # plain tensors, usable in any mode
        weight = torch.cat([q.weight, k.weight, v.weight])
        bias = torch.cat([q.bias, k.bias, v.bias])
    attention._disembed_qkv = (weight, bias, (q.weight.data_ptr(), q.weight.dtype))
    return weight, bias


def attention_groups(lengths: torch.Tensor) -> list[torch.Tensor]:
    """Each text's token rows in the packed layout (every text's tokens one after another),
    grouped by length: one ``(b, L)`` index per length."""
    starts = torch.cumsum(lengths, 0) - lengths
    return [starts[(lengths == n).nonzero().squeeze(1)][:, None] + torch.arange(n)[None, :]
            for n in torch.unique(lengths).tolist()]


def packed_hidden_states(model, input_ids: torch.Tensor, mask: torch.Tensor,
                         token_type_ids: torch.Tensor | None = None) -> torch.Tensor:
    """The last hidden states ``(b, L, H)`` of a BERT / XLM-R ``model``, every layer's
    matmuls run on the token rows alone (``(T, H)``, ``T`` the batch's tokens): a batch of
    mixed lengths costs its tokens, not rows x its longest row. Attention runs per group of
    texts of one length, unpadded (:func:`attention_groups`): bfloat16 attention over a
    padded width sums in another order, so a row's vector would depend on how long the
    batch's other rows are. Padded positions come back zero. Disembed's own e5-small backend
    (``E5Model.hidden_states``) computes the same.
    """
    x = model.embeddings(input_ids=input_ids, token_type_ids=token_type_ids)
    b, length, hidden = x.shape
    flat = mask.reshape(-1).nonzero().squeeze(1)  # token positions in (b * L)
    groups = attention_groups(mask.sum(dim=1))
    h = x.reshape(b * length, hidden)[flat]
    for layer in model.encoder.layer:
        att = layer.attention
        heads = att.self.num_attention_heads
        weight, qkv_bias = _fused_qkv(att.self)
        qkv = torch.nn.functional.linear(h, weight, qkv_bias)
        ctx = h.new_empty(h.shape)
        for index in groups:
            g, width = index.shape
            part = qkv[index].view(g, width, 3, heads, hidden // heads).permute(2, 0, 3, 1, 4)
            out = torch.nn.functional.scaled_dot_product_attention(
                part[0], part[1], part[2])  # (g, heads, W, head_dim)
            ctx[index.reshape(-1)] = out.transpose(1, 2).reshape(g * width, hidden)
        h = att.output.LayerNorm(h + att.output.dense(ctx))
        inner = layer.intermediate.intermediate_act_fn(layer.intermediate.dense(h))
        h = layer.output.LayerNorm(h + layer.output.dense(inner))
    out = h.new_zeros(b * length, hidden)
    out[flat] = h
    return out.view(b, length, hidden)


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

    It also hands the batch's texts, as the caller gave them (without the prompt, which
    ``preprocess`` prepends), to the routed head as the feature :data:`TEXTS_FEATURE`: the
    head restricts an untagged row to the languages of its script. The feature never
    reaches the Hugging Face model.
    """

    PASS_TOKENS = 128

    def preprocess(self, inputs, prompt: str | None = None, **kwargs) -> dict:
        features = super().preprocess(inputs, prompt=prompt, **kwargs)
        if (features and features.get("modality", "text") == "text"
                and all(isinstance(text, str) for text in inputs)):
            features[TEXTS_FEATURE] = list(inputs)
        return features

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
        texts = features.pop(TEXTS_FEATURE, None)
        features = self.token_embeddings(features, **kwargs)
        if texts is not None:
            features[TEXTS_FEATURE] = texts
        return features

    def token_embeddings(self, features: dict, **kwargs) -> dict:
        """``features`` with the transformer's token embeddings (the forward less
        :data:`TEXTS_FEATURE`)."""
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


class PackedTransformer(LengthSortedTransformer):
    """sentence-transformers' ``Transformer``, run on its batch's tokens without padding.

    ``SentenceTransformer.encode`` sorts texts by their length in characters, a poor proxy
    for tokens across scripts (a Chinese sentence has few characters and many tokens), so
    a batch of 14 languages pads to its longest text in tokens: 48% padding on 2,000
    Tatoeba sentences, 5% where disembed sorts by tokens. For a BERT / XLM-R encoder this
    module runs every layer's matmuls on the token rows alone
    (:func:`packed_hidden_states`, disembed's own e5-small computation), so the padding
    costs attention only. Any other architecture runs as in
    :class:`LengthSortedTransformer`. A row's vector stays a function of the row alone:
    the attention mask hides the padding either way.
    """

    def token_embeddings(self, features: dict, **kwargs) -> dict:
        mask = features.get("attention_mask")
        if (mask is None or mask.dim() != 2 or features.get("modality", "text") != "text"
                or not _packable(self.model) or set(features) - PACKED_INPUTS):
            return super().token_embeddings(features, **kwargs)
        features[self.module_output_name] = packed_hidden_states(
            self.model, features["input_ids"], mask.bool(), features.get("token_type_ids"))
        return features


#: the features :class:`PackedTransformer` knows what to do with (anything else, e.g.
#: ``inputs_embeds``, runs through the model itself)
PACKED_INPUTS = {"input_ids", "attention_mask", "token_type_ids", "modality", "prompt_length",
                 "task"}
