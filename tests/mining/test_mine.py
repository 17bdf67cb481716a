"""Collections, resumable embedding, and mine_files end to end with the hash encoder."""

import json

import numpy as np
import pytest

from disembed.encoders import HashEncoder
from disembed.exceptions import ConfigError, DataError
from disembed.mining import (
    Collection,
    MineConfig,
    embed_collection,
    mine_embeddings,
    mine_files,
    normalize_rows,
)

SRC = [f"Satz {i}" for i in range(30)]
TGT = [f"Satz {i}" for i in range(0, 60, 2)] + ["noise a", "noise b"]


def write(path, lines):
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def test_collection_formats_rows_and_errors(tmp_path):
    col = Collection.open(write(tmp_path / "a.tsv", ["x1\tHallo", "x2\tWelt"]))
    assert col.format == "tsv" and col.rows([1, 0]) == [("x2", "Welt"), ("x1", "Hallo")]
    col = Collection.open(write(tmp_path / "b.txt", ["eins", "zwei", "drei"]))
    assert col.rows([2]) == [("3", "drei")]  # plain lines: the id is the line number
    assert [t for _, chunk in col.chunks(2) for t in chunk] == ["eins", "zwei", "drei"]
    bad = write(tmp_path / "c.txt", ["eins", "  ", "drei"])
    with pytest.raises(DataError, match=r"c.txt:2: empty sentence"):
        Collection.open(bad)
    col = Collection.open(bad, skip_bad=True)
    assert len(col) == 2 and col.report.skipped == 1 and col.rows([1]) == [("3", "drei")]
    with pytest.raises(DataError, match=r"d.tsv:2: no tab"):
        Collection.open(write(tmp_path / "d.tsv", ["a\tb", "c"]))


class CountingEncoder(HashEncoder):
    """Hash encoder that counts sentences and can fail after a number of calls."""

    def __init__(self, fail_after=None):
        super().__init__(dim=16)
        self.calls, self.seen, self.fail_after = 0, 0, fail_after

    def encode(self, texts, *, batch_size=64):
        self.calls += 1
        if self.fail_after is not None and self.calls > self.fail_after:
            raise KeyboardInterrupt
        self.seen += len(texts)
        return super().encode(texts, batch_size=batch_size)


def test_embedding_resumes_after_interrupt(tmp_path):
    col = Collection.open(write(tmp_path / "s.txt", SRC))
    enc = CountingEncoder(fail_after=2)
    with pytest.raises(KeyboardInterrupt):
        embed_collection(col, enc, tmp_path / "run" / "s.npy", chunk=7)
    assert json.loads((tmp_path / "run" / "s.json").read_text())["done"] == 14
    enc = CountingEncoder()
    X = embed_collection(col, enc, tmp_path / "run" / "s.npy", chunk=7)
    assert enc.seen == len(SRC) - 14  # only the rows not done before
    np.testing.assert_allclose(X, normalize_rows(HashEncoder(dim=16).encode(SRC)), atol=1e-6)


def test_mine_files_finds_the_hidden_pairs(tmp_path):
    src = write(tmp_path / "s.tsv", [f"s{i}\t{t}" for i, t in enumerate(SRC)])
    tgt = write(tmp_path / "t.tsv", [f"t{i}\t{t}" for i, t in enumerate(TGT)])
    out = tmp_path / "mined.tsv"
    mined = mine_files(src, tgt, HashEncoder(dim=64), out, run_dir=tmp_path / "run",
                       config=MineConfig(k=3, threshold=1.5))
    rows = [line.split("\t") for line in out.read_text(encoding="utf-8").splitlines()]
    assert rows[0] == ["score", "src", "tgt", "src_id", "tgt_id"]
    pairs = {(r[1], r[2]) for r in rows[1:]}
    assert pairs == {(t, t) for t in SRC if t in TGT}  # the 15 identical sentences, nothing else
    assert len(mined) == 15 and all(float(r[0]) >= 1.5 for r in rows[1:])
    assert {r[3] for r in rows[1:]} == {f"s{i}" for i in range(0, 30, 2)}


def test_mine_embeddings_top_and_duplicates(tmp_path):
    x = normalize_rows(np.random.default_rng(0).standard_normal((50, 8)))
    y = np.concatenate([x[:20], x[:20]])  # each target twice: one pair per source survives
    mined = mine_embeddings(x, y, MineConfig(k=2, mode="max-score"))
    assert len(set(mined.src.tolist())) == len(mined)
    top = mine_embeddings(x, y, MineConfig(k=2, top=5))
    np.testing.assert_array_equal(top.score, mined.score[:5])


def test_meaning_view_without_languages_identifies_them_and_center_is_checked(tmp_path):
    import numpy as np

    from disembed import make_method

    src = write(tmp_path / "s.txt", SRC)
    enc = HashEncoder(dim=8)
    X = enc.encode(SRC)
    model = make_method("mean-centering").fit(X, X + 1.0, "de", "en")
    mine_files(src, src, enc, tmp_path / "o.tsv", run_dir=tmp_path / "r", model=model)
    got = np.load(tmp_path / "r" / "src.npy")
    want = model.meaning(X)  # the languages the model predicts; stored unit-normalised
    want /= np.linalg.norm(want, axis=1, keepdims=True)
    np.testing.assert_allclose(got, want, atol=1e-5)
    with pytest.raises(ConfigError, match="center must be"):
        mine_files(src, src, enc, tmp_path / "o2.tsv", run_dir=tmp_path / "r2", center="batch")
    with pytest.raises(ConfigError, match="mode must be one of"):
        MineConfig(mode="both")


def test_a_run_folder_resumes_only_vectors_of_the_same_view_and_model(tmp_path):
    """Issue 32: the resume key holds the view and the model's learned weights. The same run
    folder used raw, then with a model, then with another fit of the same recipe and
    parameters, holds each time the vectors of that run (none resumed from the last)."""
    from disembed import make_method

    src = write(tmp_path / "s.txt", SRC)
    tgt = write(tmp_path / "t.txt", TGT)
    enc = HashEncoder(dim=8)
    X = enc.encode(SRC)
    rng = np.random.default_rng(0)
    first = make_method("mean-centering").fit(X, X + 1.0, "de", "en")
    second = make_method("mean-centering").fit(X + rng.standard_normal(X.shape), X, "de", "en")
    assert first.get_params() == second.get_params()
    run = tmp_path / "run"
    for model in (None, first, second, None):
        mine_files(src, tgt, enc, tmp_path / "o.tsv", run_dir=run, model=model,
                   src_lang="de", tgt_lang="en")
        want = X if model is None else model.meaning(X, "de")
        np.testing.assert_allclose(np.load(run / "src.npy"), normalize_rows(want), atol=1e-5)
