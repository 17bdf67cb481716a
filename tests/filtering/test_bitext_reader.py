"""read_bitext: every input form gives the same pairs with their line numbers; misaligned
files, short rows and bad bytes are errors naming the file and line."""

from __future__ import annotations

import gzip
import io
import sys

import pytest

from disembed.data.bitext import read_bitext
from disembed.exceptions import DataError

PAIRS = [("Hallo Welt.", "Hello world."), ("Guten Tag.", "Good day."), ("Ja.", "Yes."),
         ("Nein.", "No."), ("Danke.", "Thanks.")]


def pairs(chunks):
    out = []
    for chunk in chunks:
        out += list(zip(chunk.lines, chunk.src, chunk.tgt, strict=True))
    return out


def tsv(rows, header=True):
    head = ["src\ttgt"] if header else []
    return "\n".join(head + [f"{s}\t{t}" for s, t in rows]) + "\n"


@pytest.fixture
def forms(tmp_path):
    (tmp_path / "h.tsv").write_text(tsv(PAIRS), encoding="utf-8")
    (tmp_path / "n.tsv").write_text(tsv(PAIRS, header=False), encoding="utf-8")
    with gzip.open(tmp_path / "h.tsv.gz", "wt", encoding="utf-8") as f:
        f.write(tsv(PAIRS))
    (tmp_path / "a.de").write_text("\n".join(s for s, _ in PAIRS) + "\n", encoding="utf-8")
    with gzip.open(tmp_path / "a.en.gz", "wt", encoding="utf-8") as f:
        f.write("\n".join(t for _, t in PAIRS) + "\n")
    return tmp_path


def test_every_form_reads_the_same_pairs(forms):
    expected = [(i + 2, s, t) for i, (s, t) in enumerate(PAIRS)]  # after the header row
    assert pairs(read_bitext(forms / "h.tsv")) == expected
    assert pairs(read_bitext(forms / "h.tsv.gz", chunk_size=2)) == expected
    shifted = [(n - 1, s, t) for n, s, t in expected]  # no header: line 1 is a pair
    assert pairs(read_bitext(forms / "n.tsv")) == shifted
    assert pairs(read_bitext([forms / "a.de", forms / "a.en.gz"])) == shifted


def test_chunks_hold_at_most_chunk_size_pairs_in_order(forms):
    chunks = list(read_bitext(forms / "h.tsv", chunk_size=2))
    assert [len(c) for c in chunks] == [2, 2, 1]
    assert [c.index for c in chunks] == [0, 1, 2] and [c.start for c in chunks] == [0, 2, 4]


def test_standard_input_plain_and_gzip(forms, monkeypatch):
    for data in ((forms / "n.tsv").read_bytes(), gzip.compress((forms / "n.tsv").read_bytes())):
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BufferedReader(io.BytesIO(data))))
        assert [(s, t) for _, s, t in pairs(read_bitext("-"))] == PAIRS


def test_named_and_numbered_columns(tmp_path):
    rows = ["id\tde\ten"] + [f"{i}\t{s}\t{t}" for i, (s, t) in enumerate(PAIRS)]
    (tmp_path / "c.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    got = pairs(read_bitext(tmp_path / "c.tsv", src_col="de", tgt_col="en"))
    assert [(s, t) for _, s, t in got] == PAIRS
    got = pairs(read_bitext(tmp_path / "c.tsv", header="no", src_col="3", tgt_col="2"))
    assert got[0] == (1, "en", "de") and got[1] == (2, PAIRS[0][1], PAIRS[0][0])
    with pytest.raises(DataError, match="no column named 'fr'"):
        list(read_bitext(tmp_path / "c.tsv", src_col="fr", tgt_col="en"))


def test_misaligned_files_name_the_file_and_line(tmp_path):
    (tmp_path / "a.txt").write_text("a\nb\nc\n", encoding="utf-8")
    (tmp_path / "b.txt").write_text("x\ny\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"b\.txt has 2 lines .*a\.txt:3 has no partner"):
        list(read_bitext([tmp_path / "a.txt", tmp_path / "b.txt"]))
    with pytest.raises(DataError, match=r"b\.txt has 2 lines .*a\.txt:3 has no partner"):
        list(read_bitext([tmp_path / "b.txt", tmp_path / "a.txt"]))  # either side short


def test_short_rows_and_bad_bytes_name_the_line_or_are_skipped(tmp_path):
    (tmp_path / "r.tsv").write_bytes(b"src\ttgt\na\tb\nonly\nc\xff\td\ne\tf\n")
    with pytest.raises(DataError, match=r"r\.tsv:3: 1 column"):
        list(read_bitext(tmp_path / "r.tsv"))
    got = pairs(read_bitext(tmp_path / "r.tsv", skip_bad=True))
    assert got == [(2, "a", "b"), (5, "e", "f")]
    (tmp_path / "t.txt").write_text("a\tb\n", encoding="utf-8")
    (tmp_path / "u.txt").write_text("c\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"t\.txt:1: a tab inside a sentence"):
        list(read_bitext([tmp_path / "t.txt", tmp_path / "u.txt"]))


def test_byte_order_mark_and_wide_encodings(tmp_path):
    (tmp_path / "bom.tsv").write_bytes(b"\xef\xbb\xbf" + tsv(PAIRS).encode())
    assert [(s, t) for _, s, t in pairs(read_bitext(tmp_path / "bom.tsv"))] == PAIRS
    (tmp_path / "w.tsv").write_bytes(tsv(PAIRS).encode("utf-16"))
    with pytest.raises(DataError, match="UTF-16 text, not UTF-8; convert it first"):
        list(read_bitext(tmp_path / "w.tsv"))
