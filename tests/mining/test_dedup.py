"""Mining and search embed and search each distinct line once, and answer line by line
as a search over every line would (issue 48: crawl-shaped input)."""

import csv

import numpy as np
import pytest

from disembed.encoders import HashEncoder
from disembed.mining import mine_files, normalize_rows
from disembed.mining.distinct_search import line_matches
from disembed.mining.mine import search_files
from disembed.retrieval import brute_force_knn
from disembed.util.dedup import distinct


class CountingEncoder(HashEncoder):
    def __init__(self):
        super().__init__(dim=16)
        self.texts = []

    def encode(self, texts, *, batch_size=64):
        self.texts += list(texts)
        return super().encode(texts, batch_size=batch_size)


def write(path, lines):
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def read_tsv(path):
    with open(path, encoding="utf-8") as f:
        return list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))


def crawl(seed, n, kinds):
    """``n`` lines drawn from ``kinds`` texts, boilerplate (text 0) a third of them."""
    rng = np.random.default_rng(seed)
    picks = np.where(rng.random(n) < 0.33, 0, rng.integers(0, kinds, n))
    return [f"line {p}" if p else "Cookies help us deliver our services." for p in picks]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_line_matches_equal_the_search_over_every_line(seed):
    """Small integer vectors (exact ties): the distinct search expanded line by line gives
    what brute force over every line ranks (equal scores: lower line)."""
    rng = np.random.default_rng(seed)
    kinds = rng.integers(-2, 3, (12, 4)).astype(np.float32)
    lines = rng.integers(0, 12, 70)
    rows = distinct([str(i) for i in lines])
    db_u = kinds[[int(t) for t in rows.texts]]
    q = rng.integers(-2, 3, (25, 4)).astype(np.float32)
    for k in (1, 3, 8, 70):
        D_u, I_u = brute_force_knn(q, db_u, min(k, len(db_u)))
        D, I = line_matches(D_u, I_u, rows, k)  # noqa: E741
        want_D, want_I = brute_force_knn(q, kinds[lines], k)
        np.testing.assert_array_equal(I, want_I)
        np.testing.assert_array_equal(D, want_D)


def test_search_embeds_each_distinct_line_once_and_answers_every_line(tmp_path):
    queries, db = crawl(3, 60, 9), crawl(4, 80, 15)
    enc = CountingEncoder()
    out = tmp_path / "hits.tsv"
    k = 5
    searched = search_files(write(tmp_path / "q.txt", queries), write(tmp_path / "d.txt", db),
                            enc, out, run_dir=tmp_path / "run", k=k)
    assert len(enc.texts) == len(set(queries)) + len(set(db))  # each distinct line once
    assert searched.queries == len(queries) and searched.rows == len(queries) * k
    rows = read_tsv(out)
    ref = HashEncoder(dim=16)
    want_D, want_I = brute_force_knn(normalize_rows(ref.encode(queries)),
                                     normalize_rows(ref.encode(db)), k)
    got_I = np.array([int(r["match_id"]) - 1 for r in rows]).reshape(len(queries), k)
    np.testing.assert_array_equal(got_I, want_I)  # every query line, every tie by line
    assert [r["query"] for r in rows[::k]] == queries
    np.testing.assert_allclose(np.array([float(r["score"]) for r in rows]).reshape(-1, k),
                               want_D, atol=1e-6)


def test_mine_embeds_each_distinct_line_once_and_names_first_lines(tmp_path):
    src = ["Hallo Welt", "Menü", "Guten Tag", "Menü", "Menü", "Danke"]
    tgt = ["Menu", "hello world", "Menu", "good day", "thanks", "Menu"]
    enc = CountingEncoder()
    mined = mine_files(write(tmp_path / "s.txt", src), write(tmp_path / "t.txt", tgt), enc,
                       tmp_path / "m.tsv", run_dir=tmp_path / "run")
    assert len(enc.texts) == len(set(src)) + len(set(tgt))  # each distinct line once
    got = read_tsv(tmp_path / "m.tsv")
    # the same pairs as mining the distinct lines alone, named by each text's first line
    dsrc, dtgt = list(dict.fromkeys(src)), list(dict.fromkeys(tgt))
    alone = mine_files(write(tmp_path / "ds.txt", dsrc), write(tmp_path / "dt.txt", dtgt),
                       HashEncoder(dim=16), tmp_path / "d.tsv", run_dir=tmp_path / "run2")
    want = read_tsv(tmp_path / "d.tsv")
    assert [(r["src"], r["tgt"], r["score"]) for r in got] == \
        [(r["src"], r["tgt"], r["score"]) for r in want]
    for r in got:  # ids: the first line holding each text (1-based line numbers)
        assert int(r["src_id"]) == src.index(r["src"]) + 1
        assert int(r["tgt_id"]) == tgt.index(r["tgt"]) + 1
    assert [src[i] for i in mined.src] == [r["src"] for r in got]
    assert len(alone) == len(mined)


def test_corpus_centering_weighs_a_repeated_line_by_its_count(tmp_path):
    """``center="corpus"`` subtracts the mean of every line, not of the distinct lines."""
    from disembed.mining.mine import _centred

    lines = ["a", "b", "a", "a", "c"]
    rows = distinct(lines)
    X = np.arange(6, dtype=np.float32).reshape(3, 2)
    line_mean = X[rows.inverse].mean(axis=0)
    np.testing.assert_allclose(_centred(X, rows), X - line_mean, rtol=1e-6)
