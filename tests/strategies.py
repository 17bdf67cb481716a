"""Hypothesis strategies shared by the property tests: file bytes that look like what the
readers expect, damaged in the ways real files are (bad bytes, CR, BOM, tabs, blanks)."""

from __future__ import annotations

import io

import numpy as np
from hypothesis import settings
from hypothesis import strategies as st


def bounded(max_examples: int) -> settings:
    """Settings of the default suite: a fixed number of examples, the same ones every run
    (derandomized, no example database), no per-example deadline on a loaded machine.
    To explore further, raise the count and set ``derandomize=False`` for a local run."""
    return settings(max_examples=max_examples, deadline=None, derandomize=True, database=None)

TOKENS = ["a", "Satz", "中文", " ", "\t", "\r", "\ufeff", "x y", "é", "0", "\u2028"]
HEADERS = ["a\tb", "b\ta\tc", "a", "", "a\ta", "src\ttgt"]


def _line(tokens=TOKENS):
    return st.lists(st.sampled_from(tokens), max_size=5).map("".join)


@st.composite
def damaged(draw, text: str) -> bytes:
    """``text`` as UTF-8, sometimes with a few arbitrary bytes spliced in."""
    data = text.encode("utf-8")
    if draw(st.booleans()):
        junk = draw(st.binary(min_size=1, max_size=4))
        at = draw(st.integers(0, len(data)))
        data = data[:at] + junk + data[at:]
    return data


@st.composite
def text_file(draw) -> bytes:
    """Lines of text (or arbitrary bytes), with or without a final newline."""
    if draw(st.integers(0, 9)) == 0:
        return draw(st.binary(max_size=64))
    lines = draw(st.lists(_line(), max_size=8))
    text = "\n".join(lines) + draw(st.sampled_from(["", "\n", "\r\n"]))
    return draw(damaged(text))


@st.composite
def tsv_file(draw) -> bytes:
    """A header row (often naming a and b) and rows of tab-separated cells."""
    header = draw(st.sampled_from(HEADERS))
    rows = draw(st.lists(_line(), max_size=6))
    return draw(damaged("\n".join([header, *rows]) + "\n"))


@st.composite
def npy_file(draw) -> bytes:
    """``numpy.save`` of small arrays of many dtypes and shapes, sometimes cut or damaged,
    or arbitrary bytes."""
    kind = draw(st.integers(0, 4))
    if kind == 0:
        return draw(st.binary(max_size=200))
    dtype = draw(st.sampled_from(["<f4", ">f8", "<i4", "|u1", "<c8", "|b1", "<U3", "O"]))
    shape = draw(st.lists(st.integers(0, 4), min_size=0, max_size=3).map(tuple))
    if dtype == "O":
        array = np.empty(shape, dtype=object)
    else:
        array = np.zeros(shape, dtype=dtype)
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=True)
    data = buffer.getvalue()
    if kind == 1 and data:
        data = data[: draw(st.integers(0, len(data) - 1))]
    elif kind == 2 and data:
        at = draw(st.integers(0, len(data) - 1))
        data = data[:at] + bytes([data[at] ^ draw(st.integers(1, 255))]) + data[at + 1 :]
    return data


def int_matrix(rows: int, dim: int):
    """``(rows, dim)`` float32 with small integer values: exact products, many ties,
    duplicate and zero rows."""
    return st.lists(st.integers(-2, 2), min_size=rows * dim, max_size=rows * dim).map(
        lambda v: np.asarray(v, dtype=np.float32).reshape(rows, dim))
