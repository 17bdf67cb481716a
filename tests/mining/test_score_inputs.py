"""``score_tsv`` / ``disembed score`` read every bitext form ``filter`` reads (header TSV,
headerless TSV, two line-aligned files, ``.gz`` on standard input), stream ``cosine`` in
chunks with output equal to one whole-file chunk, and embed each distinct line once."""

from __future__ import annotations

import gzip
import io
import sys

import numpy as np
import pytest

from disembed.cli import main
from disembed.encoders import HashEncoder
from disembed.mining import score_tsv

#: pairs with repeats inside and across chunks, so chunk boundaries meet duplicates
PAIRS = [(f"Satz {i % 7} hier", f"sentence {i % 5} there") for i in range(23)] + [
    ("Guten Morgen.", "Good morning."), ("Danke sehr.", "Thank you."),
    ("Guten Morgen.", "Good morning."), ("Wie spät ist es?", "What time is it?")]


class Counting:
    """The hash encoder, counting the texts it is asked to embed."""

    def __init__(self, dim: int = 16) -> None:
        self.inner = HashEncoder(dim)
        self.texts: list[str] = []

    def encode(self, texts, batch_size: int = 64):
        self.texts += list(texts)
        return self.inner.encode(texts, batch_size=batch_size)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def scores(path) -> list[float]:
    return [float(line.split("\t")[0])
            for line in path.read_text(encoding="utf-8").splitlines()[1:]]


@pytest.fixture
def forms(tmp_path):
    body = "".join(f"{a}\t{b}\n" for a, b in PAIRS)
    (tmp_path / "h.tsv").write_text("src\ttgt\n" + body, encoding="utf-8")
    (tmp_path / "n.tsv").write_text(body, encoding="utf-8")
    (tmp_path / "a.de").write_text("".join(a + "\n" for a, _ in PAIRS), encoding="utf-8")
    (tmp_path / "a.en").write_text("".join(b + "\n" for _, b in PAIRS), encoding="utf-8")
    (tmp_path / "h.tsv.gz").write_bytes(gzip.compress(("src\ttgt\n" + body).encode()))
    return tmp_path


@pytest.mark.parametrize("kind", ["cosine", "ratio"])
def test_every_input_form_gives_the_header_tsvs_scores(forms, monkeypatch, kind):
    enc = HashEncoder(16)
    assert score_tsv(forms / "h.tsv", enc, forms / "h.out", kind=kind) == len(PAIRS)
    want = scores(forms / "h.out")
    assert len(set(want)) > 5  # the pairs differ: a constant score would not be a test
    score_tsv(forms / "n.tsv", enc, forms / "n.out", kind=kind)
    score_tsv([forms / "a.de", forms / "a.en"], enc, forms / "a.out", kind=kind)
    data = (forms / "h.tsv.gz").read_bytes()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BufferedReader(io.BytesIO(data))))
    score_tsv("-", enc, forms / "z.out", kind=kind)
    for name in ("n.out", "a.out", "z.out"):
        assert scores(forms / name) == want, name
    lines = (forms / "a.out").read_text(encoding="utf-8").splitlines()
    assert lines[0] == "score\tsrc\ttgt" and lines[1].split("\t")[1:] == list(PAIRS[0])


def test_the_cli_reads_two_files_and_a_headerless_tsv(forms, capsys):
    assert main(["score", str(forms / "h.tsv"), "--out", str(forms / "h.out"),
                 "--encoder", "hash:16", "--cache-dir", str(forms / "cache")]) == 0
    assert main(["score", str(forms / "a.de"), str(forms / "a.en"), "--out",
                 str(forms / "a.out"), "--encoder", "hash:16", "--cache-dir",
                 str(forms / "cache")]) == 0
    assert main(["score", str(forms / "n.tsv"), "--no-header", "--src-col", "2", "--tgt-col",
                 "1", "--out", str(forms / "r.out"), "--encoder", "hash:16",
                 "--cache-dir", str(forms / "cache")]) == 0
    assert scores(forms / "a.out") == scores(forms / "h.out")
    np.testing.assert_allclose(scores(forms / "r.out"), scores(forms / "h.out"), atol=2e-6)
    assert (forms / "r.out").read_text(encoding="utf-8").splitlines()[0] == "score\ttgt\tsrc"


def test_a_headerless_tsv_keeps_its_other_columns(tmp_path):
    (tmp_path / "h.tsv").write_text("src\tid\ttgt\n" + "".join(
        f"{a}\t{i}\t{b}\n" for i, (a, b) in enumerate(PAIRS)), encoding="utf-8")
    (tmp_path / "n.tsv").write_text("".join(
        f"{a}\t{b}\t{i}\n" for i, (a, b) in enumerate(PAIRS)), encoding="utf-8")
    enc = HashEncoder(16)
    score_tsv(tmp_path / "h.tsv", enc, tmp_path / "h.out")
    score_tsv(tmp_path / "n.tsv", enc, tmp_path / "n.out")  # default: columns 1 and 2
    lines = (tmp_path / "n.out").read_text(encoding="utf-8").splitlines()
    assert lines[0] == "score\tsrc\ttgt\tcol3"
    assert lines[-1].split("\t")[1:] == [*PAIRS[-1], str(len(PAIRS) - 1)]
    assert scores(tmp_path / "n.out") == scores(tmp_path / "h.out")


@pytest.mark.parametrize("chunk_size", [1, 2, 3, 7, 26])
@pytest.mark.parametrize("threshold", [None, 0.2])
def test_chunked_output_equals_one_chunk_byte_for_byte(forms, chunk_size, threshold):
    enc = HashEncoder(16)
    n_all = score_tsv(forms / "h.tsv", enc, forms / "one.out", threshold=threshold,
                      chunk_size=10**6)
    n = score_tsv(forms / "h.tsv", enc, forms / "many.out", threshold=threshold,
                  chunk_size=chunk_size)
    assert n == n_all and (threshold is None or 0 < n < len(PAIRS))
    assert (forms / "many.out").read_bytes() == (forms / "one.out").read_bytes()


@pytest.mark.parametrize("kind", ["cosine", "ratio"])
def test_ten_thousand_identical_pairs_embed_each_distinct_line_once(tmp_path, kind):
    (tmp_path / "dup.tsv").write_text("src\ttgt\n" + "Hallo Welt.\tHello world.\n" * 10000,
                                      encoding="utf-8")
    enc = Counting()
    assert score_tsv(tmp_path / "dup.tsv", enc, tmp_path / "o.tsv", kind=kind) == 10000
    assert sorted(enc.texts) == ["Hallo Welt.", "Hello world."]
    rows = (tmp_path / "o.tsv").read_text(encoding="utf-8").splitlines()
    assert len(rows) == 10001 and len(set(rows[1:])) == 1
    if kind == "cosine":  # streamed: once per chunk
        enc.texts.clear()
        score_tsv(tmp_path / "dup.tsv", enc, tmp_path / "c.tsv", chunk_size=1000)
        assert len(enc.texts) == 2 * 10 and set(enc.texts) == {"Hallo Welt.", "Hello world."}
        assert (tmp_path / "c.tsv").read_bytes() == (tmp_path / "o.tsv").read_bytes()


def test_margin_embeds_pairs_and_pools_each_distinct_line_once(forms):
    enc = Counting()
    score_tsv(forms / "h.tsv", enc, forms / "m.out", kind="distance",
              src_pool=["Guten Morgen.", "Hallo.", "Hallo."])
    distinct_pairs = len({a for a, _ in PAIRS}) + len({b for _, b in PAIRS})
    assert len(enc.texts) == distinct_pairs + 2  # the pool's "Hallo." once
