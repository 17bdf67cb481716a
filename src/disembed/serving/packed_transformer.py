"""The export's transformer: sentence-transformers' ``Transformer`` run on its batch regrouped
by token count (:class:`LengthSortedTransformer`), or on its tokens alone for a BERT / XLM-R
encoder (:class:`PackedTransformer`); copied verbatim into an export, where modules.json
names it.

This file must not import disembed: it runs where only torch and sentence-transformers are
installed (``SentenceTransformer(folder, trust_remote_code=True)``). It also hands the
batch's texts, as the caller gave them, to the routed head (``disembed_meaning.py``) as the
feature :data:`TEXTS_FEATURE`, for their script.
"""

from __future__ import annotations

import torch
from sentence_transformers.base.modules.transformer import Transformer

#: the feature :class:`LengthSortedTransformer` adds for the head: the batch's texts as the
#: caller gave them (before the prompt), for their script
TEXTS_FEATURE = "disembed_texts"


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
