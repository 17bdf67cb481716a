"""The precompiled charsmap does what the per-character map does, in one pass.

Bugs feared: a trie whose lookups land on another node's child (a character mapped that
the map leaves alone, or mapped to another's replacement), a lookup past the array's end
(a panic in tokenizers), a replacement cut or run on, and the chain of one Replace rule per
character coming back (4,837 passes over every text).
"""

from __future__ import annotations

import random
import sys

import pytest

normalizers = pytest.importorskip("tokenizers").normalizers

from disembed.encoders.charsmap import (  # noqa: E402
    double_array,
    grapheme_divergences,
    precompiled_charsmap,
)
from disembed.encoders.e5_format import bundled_weights, read_e5_file  # noqa: E402


@pytest.fixture(scope="module")
def e5_map():
    return read_e5_file(bundled_weights()).norm_map


def test_every_code_point_maps_as_the_table_says(e5_map):
    """All 1.1M code points (but the separator, NUL and surrogates), each on its own."""
    charsmap = normalizers.Precompiled(precompiled_charsmap(e5_map))
    sep = next(chr(cp) for cp in range(0xE000, 0xF900) if cp not in e5_map)  # private use
    points = [cp for cp in range(1, sys.maxunicode + 1)
              if chr(cp) != sep and not 0xD800 <= cp <= 0xDFFF]
    got = charsmap.normalize_str(sep.join(map(chr, points))).split(sep)
    want = [chr(cp).translate(e5_map) for cp in points]
    assert len(got) == len(points)
    wrong = [(hex(cp), g, w) for cp, g, w in zip(points, got, want, strict=True) if g != w]
    assert not wrong, f"{len(wrong)} code points differ, e.g. {wrong[:5]}"


def test_strings_map_as_a_translate_does_without_mapped_clusters(e5_map):
    charsmap = normalizers.Precompiled(precompiled_charsmap(e5_map))
    rng = random.Random(0)
    mapped = [chr(cp) for cp in e5_map if cp]
    plain = list("abc xyzÄöü中文ﾃｽﾄ🙂")
    checked = 0
    for _ in range(3000):
        text = "".join(rng.choice(mapped) if rng.random() < 0.5 else rng.choice(plain)
                       for _ in range(rng.randint(1, 20)))
        if grapheme_divergences(text, e5_map):
            continue
        assert charsmap.normalize_str(text) == text.translate(e5_map), repr(text)
        checked += 1
    assert checked > 2500


def test_the_one_known_difference_is_found_by_grapheme_divergences():
    """tokenizers looks a cluster under 6 bytes up whole: a mapped character followed by a
    combining mark takes the character's replacement for both."""
    table = {ord("\u00a0"): " ", ord("é"): "E"}
    charsmap = normalizers.Precompiled(precompiled_charsmap(table))
    assert charsmap.normalize_str("a\u00a0b é") == "a b E"
    assert charsmap.normalize_str("x\u00a0\u0301y") == "x y"  # the mark is dropped
    assert grapheme_divergences("x\u00a0\u0301y", table) == ["\u00a0\u0301"]
    assert grapheme_divergences("a\u00a0b e\u0301", table) == []


def test_bases_are_unique_and_the_array_covers_every_block():
    keys = {bytes([a, b]): i for i, (a, b) in enumerate((a, b) for a in range(1, 40)
                                                     for b in range(1, 40))}
    units = double_array(keys)
    assert len(units) % 256 == 0
    charsmap_table = {0x100 + i: str(i % 7) for i in range(500)}
    charsmap = normalizers.Precompiled(precompiled_charsmap(charsmap_table))
    text = "".join(chr(0x100 + i) for i in range(500)) + "\uffff\U0010ffff"
    assert charsmap.normalize_str(text) == text.translate(charsmap_table)


def test_the_export_tokenizer_maps_in_one_pass():
    pytest.importorskip("transformers")
    import json

    from disembed.encoders.e5_export import hf_tokenizer

    normalizer = json.loads(hf_tokenizer(read_e5_file(bundled_weights())).to_str())["normalizer"]
    steps = [n["type"] for n in normalizer["normalizers"]]
    assert "Precompiled" in steps and len(steps) < 10, steps  # not a Replace per character
