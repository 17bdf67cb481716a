"""A per-character normalisation map as SentencePiece's *precompiled charsmap*.

The ``tokenizers`` library runs a charsmap (``normalizers.Precompiled``) in one pass over
the text, where a chain of one ``Replace`` rule per character walks the text once per rule
(4,837 rules for e5-small's map: 1,000 Tatoeba sentences of de/zh/ar/ru took ~9 s to
normalise so and ~0.03 s with the charsmap, one run on a loaded 2-core machine). The blob
is SentencePiece's format: the byte length of a double-array trie (little-endian u32), the
trie in darts-clone's unit layout, then the replacement strings, each ended by a NUL. A
unit holds a label byte (bits 0-7), a has-leaf flag (bit 8), and the XOR offset to its
children (bits 10-31, shifted by 8 more when bit 9 is set); a leaf's value unit (bit 31 set)
holds the byte offset of its replacement.

One difference from a character-by-character map, from the ``tokenizers`` side: it looks
up whole grapheme clusters shorter than 6 bytes first, and for a cluster that starts with a
mapped character it uses that character's replacement for the whole cluster (the cluster's
other characters, combining marks, are dropped). The clusters this can touch are a mapped
character (e.g. a no-break space, a half-width katakana) followed by a combining mark, under
6 bytes in UTF-8; :func:`grapheme_divergences` lists the cases a text holds.
"""

from __future__ import annotations

import struct
from typing import Mapping

_LEAF_VALUE = 1 << 31
_HAS_LEAF = 1 << 8
_MAX_OFFSET = 1 << 21


def _offset_bits(offset: int) -> int:
    if offset < _MAX_OFFSET:
        return offset << 10
    if offset % 256 == 0 and offset >> 8 < _MAX_OFFSET:
        return ((offset >> 8) << 10) | (1 << 9)
    raise ValueError(f"trie offset {offset} does not fit a darts-clone unit")


def _trie(keys: Mapping[bytes, int]) -> dict:
    root: dict = {"children": {}, "value": None}
    for key, value in keys.items():
        node = root
        for byte in key:
            node = node["children"].setdefault(byte, {"children": {}, "value": None})
        node["value"] = value
    return root


def _place(node: dict, used: set[int], bases: set[int], start: int) -> int:
    """The lowest base from ``start`` that no other node has and whose child slots (and
    value slot) are all free. Bases are unique, so a label found at ``base ^ byte`` can only
    be this node's child (another node's child with that label would need the same base)."""
    labels = sorted(node["children"]) + ([0] if node["value"] is not None else [])
    base = start
    while True:
        slots = [base ^ c for c in labels]
        if base not in bases and all(s not in used and s != 0 for s in slots):
            used.update(slots)
            bases.add(base)
            return base
        base += 1


def double_array(keys: Mapping[bytes, int]) -> list[int]:
    """darts-clone units for ``keys`` (byte strings without NUL) -> values (< 2**31). The
    array covers every base's whole 256-unit block: a lookup of any byte stays inside it."""
    root = _trie(keys)
    units: dict[int, int] = {}
    used, bases = {0}, set()
    queue = [(0, root)]
    start = 1
    while queue:
        position, node = queue.pop(0)
        base = _place(node, used, bases, start)
        start = max(start, base - 255)
        label = 0 if position == 0 else units.get(position, 0) & 0xFF
        leaf = _HAS_LEAF if node["value"] is not None else 0
        units[position] = label | leaf | _offset_bits(position ^ base)
        if node["value"] is not None:
            units[base] = _LEAF_VALUE | node["value"]
        for byte, child in sorted(node["children"].items()):
            units[base ^ byte] = byte  # its label; the rest is filled when it is placed
            queue.append((base ^ byte, child))
    array = [0] * ((max(max(units), max(bases)) | 0xFF) + 1)
    for position, unit in units.items():
        array[position] = unit
    return array


def precompiled_charsmap(mapping: Mapping[int, str]) -> bytes:
    """SentencePiece's precompiled charsmap of a code point -> replacement map."""
    blob, offsets = bytearray(), {}
    keys = {}
    for cp, out in sorted(mapping.items()):
        if cp == 0:
            continue  # NUL never reaches the map (disembed's edge makes it a space)
        if out not in offsets:
            offsets[out] = len(blob)
            blob += out.encode("utf-8") + b"\0"
        keys[chr(cp).encode("utf-8")] = offsets[out]
    units = double_array(keys)
    trie = b"".join(struct.pack("<I", u) for u in units)
    return struct.pack("<I", len(trie)) + trie + bytes(blob)


def _extends(ch: str) -> bool:
    """Whether ``ch`` joins the cluster before it (a combining mark, ZWJ, ZWNJ)."""
    import unicodedata

    return unicodedata.category(ch) in ("Mn", "Mc", "Me") or ch in "\u200c\u200d"


def grapheme_divergences(text: str, mapping: Mapping[int, str]) -> list[str]:
    """The clusters of ``text`` that the charsmap maps differently from a character-by-
    character map: a mapped character followed by combining marks (or ZWJ/ZWNJ), under 6
    bytes in all (see the module docstring)."""
    out = []
    for i, ch in enumerate(text):
        if ord(ch) not in mapping:
            continue
        j = i + 1
        while j < len(text) and _extends(text[j]):
            j += 1
        if j > i + 1 and len(text[i:j].encode("utf-8")) < 6:
            out.append(text[i:j])
    return out
