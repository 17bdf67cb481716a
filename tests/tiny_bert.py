"""A random tiny BERT with a word-level tokenizer, saved to a folder: the offline stand-in
for a sentence-transformers / Hugging Face model that the encoder, export and service tests
load by path."""

from __future__ import annotations

from pathlib import Path

SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def save_tiny_bert(folder: str | Path, words: list[str]) -> Path:
    """A random 16-d one-layer BERT (seed 0) and a whitespace word-level tokenizer over
    :data:`SPECIAL` and ``words`` (no normaliser of its own; repeated words once), saved to
    ``folder``."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import BertConfig, BertModel, PreTrainedTokenizerFast

    vocab = list(dict.fromkeys([*SPECIAL, *words]))
    tok = Tokenizer(models.WordLevel(vocab={w: i for i, w in enumerate(vocab)},
                                     unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]",
                                   cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]")
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(vocab), hidden_size=16, num_hidden_layers=1,
                        num_attention_heads=2, intermediate_size=32, max_position_embeddings=64)
    BertModel(config).save_pretrained(folder)
    fast.save_pretrained(folder)
    return Path(folder)
