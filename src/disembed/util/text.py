"""Small text helpers, and the one edge where every text is normalised before any encoder
sees it.

:func:`normalize_text` is applied where texts enter an encoder
(:func:`disembed.encoders.base.check_texts`, which every backend and the embedding cache
call, so the cache is keyed by the normalised text), and the exported sentence-transformers
folders carry the same two steps in their tokenizer's normaliser
(:data:`UNICODE_FORM`, :data:`CONTROL_CHARACTERS`), so a process without disembed
normalises alike. The library, the CLI, the service and the export therefore embed the same
string for the same text:

1. **Unicode NFC** (canonical composition): the NFC and NFD spellings of a sentence
   (``Việt`` as one code point per letter or as ``e`` + combining marks) are the same
   text, so they get the same vector. NFC, not NFKC: NFKC also folds compatibility
   characters (``²`` -> ``2``, ``ﬁ`` -> ``fi``, full-width letters), which changes what
   some texts say and what other encoders' tokenizers see; the e5 tokenizer already folds
   those character by character (its SentencePiece ``nmt_nfkc`` table), and what its
   table cannot do, composing ``e`` + ``U+0301`` into ``é``, is exactly what NFC adds
   (docs/ecosystem.md, "One text, one string", for the measurement).
2. **Control characters become a space**: every character of Unicode category ``Cc``
   except TAB and LF (C0 ``U+0000-U+001F``, DEL ``U+007F``, C1 ``U+0080-U+009F``),
   NUL included. The whole text is embedded: a NUL byte no longer ends the text in one
   surface (the C engine's string cut) and not in another, and a control character
   between two words still separates them.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Iterator, Mapping
from collections.abc import Set as AbcSet

from ..exceptions import DataError

# the two steps are the routing rule's (one file, shipped with every export)
from .routing_rule import UNICODE_FORM, normalize_text  # noqa: F401

#: the control characters mapped to a space (category Cc less TAB and LF), as a regular
#: expression the ``tokenizers`` library (Oniguruma) reads
#: (:data:`~.routing_rule.CONTROL` in Python's spelling)
CONTROL_CHARACTERS = r"[\x{00}-\x{08}\x{0B}-\x{1F}\x{7F}-\x{9F}]"


def slug(text: str, max_length: int = 60) -> str:
    """``text`` as a file-name-safe slug: runs of other characters become ``_``."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_")[:max_length]


#: characters that show nothing: Unicode's format characters (category Cf: zero-width
#: space, joiners, word joiner, the byte-order mark, directional marks ...)
_INVISIBLE = "Cf"


def is_blank(text: str) -> bool:
    """Whether ``text`` holds nothing to embed: only whitespace, invisible format
    characters and variation selectors (a line of zero-width spaces, or of a lone emoji
    presentation selector U+FE0F, is as empty as an empty line)."""

    return all(ch.isspace() or unicodedata.category(ch) == _INVISIBLE
               or _variation_selector(ch) for ch in text)


def _variation_selector(ch: str) -> bool:
    """U+FE00-U+FE0F and U+E0100-U+E01EF: they only choose a glyph for the character
    before them, and show nothing alone."""
    return "\ufe00" <= ch <= "\ufe0f" or "\U000e0100" <= ch <= "\U000e01ef"


def lone_surrogate(text: str) -> int:
    """The index of the first lone surrogate (``U+D800``-``U+DFFF``) in ``text``, or -1: a
    Python string can hold one (from JSON escapes, ``surrogateescape``), but it is no text
    and cannot be written as UTF-8."""
    for i, ch in enumerate(text):
        if "\ud800" <= ch <= "\udfff":
            return i
    return -1


def bare_carriage_return(text: str) -> int:
    """The index of the first carriage return (CR) in ``text`` that does not end a line
    (CRLF's CR does), or -1."""
    at = text.find("\r")
    while at >= 0:
        if text[at + 1:at + 2] != "\n":
            return at
        at = text.find("\r", at + 1)
    return -1


def text_list(texts: object, source: str = "input", what: str = "sentences") -> list:
    """``texts`` as a list, refusing what is not an ordered, sized sequence of sentences: a
    single string (or bytes), which ``list()`` would split into characters; a set or a
    mapping, whose order is not the caller's; a generator or other one-shot iterator, which
    a retry or a second pass would find empty; an int or any other non-sequence. Each gets
    an error saying what was given, what is expected and how to fix it. Every API that
    takes texts calls this (through :func:`~disembed.encoders.base.check_texts` or
    directly) before anything else; lists of language codes too (``what``).
    """
    kind = type(texts).__name__
    if isinstance(texts, (str, bytes, bytearray)):
        hint = " (decode it first)" if not isinstance(texts, str) else ""
        raise DataError(f"{source}: expected a list of {what}, got a single {kind} "
                        f"({texts[:40]!r}){hint}; wrap it in a list: [text] (a single string is "
                        "not read as its characters)")
    if isinstance(texts, (AbcSet, Mapping)):
        raise DataError(f"{source}: expected a list of {what}, got a {kind}, whose order "
                        "is not yours (each result must go back to its row); pass a list "
                        "(e.g. sorted(texts) or list(dict.fromkeys(texts)))")
    if isinstance(texts, Iterator):
        raise DataError(f"{source}: expected a list of {what}, got a one-shot {kind} "
                        "(a generator or iterator cannot be read twice or counted); pass "
                        "list(texts)")
    if getattr(texts, "ndim", 1) != 1:
        raise DataError(f"{source}: expected a list of {what}, got a {texts.ndim}-D "
                        f"array of shape {texts.shape}; pass a 1-D list or array of str")
    if not (hasattr(texts, "__len__") and hasattr(texts, "__getitem__")
            and isinstance(texts, Iterable)):
        raise DataError(f"{source}: expected a list of {what}, got {kind} ({texts!r:.40}); "
                        "pass a list of str")
    return list(texts)
