"""Every search, margin and scoring option of the mining verbs reaches the library (issue 32):
the CLI writes what the public API computes with the same settings, not the defaults.

The options are given values other than their defaults, so a verb that drops one (mines
with the ratio margin whatever ``--margin`` says, scores over 4 neighbours whatever ``-k``
says, swaps the two pools or the two languages) writes other numbers than the library.
"""

import json

import numpy as np
import pytest

from disembed.cli import main
from disembed.encoders import HashEncoder
from disembed.mining import MineConfig, mine_embeddings, score_embeddings
from disembed.retrieval.knn import normalize_rows

WORDS = ["Haus", "Baum", "Fluss", "Stadt", "Berg", "Licht", "Feld", "Wald"]
SRC = [f"{WORDS[i % 8]} {WORDS[(3 * i) % 8]} {i}" for i in range(24)]
TGT = [f"{WORDS[i % 8]} {WORDS[(3 * i) % 8]} {i}" for i in range(8, 32)] + ["Wald Licht"]


@pytest.fixture
def files(tmp_path, monkeypatch):
    monkeypatch.setenv("DISEMBED_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "s.tsv").write_text("".join(f"s{i}\t{t}\n" for i, t in enumerate(SRC)),
                                    encoding="utf-8")
    (tmp_path / "t.tsv").write_text("".join(f"t{i}\t{t}\n" for i, t in enumerate(TGT)),
                                    encoding="utf-8")
    return tmp_path


def vectors(texts):
    return normalize_rows(HashEncoder(dim=64).encode(texts))


def rows(path):
    return [line.split("\t") for line in path.read_text(encoding="utf-8").splitlines()[1:]]


OPTION = {"--margin": "margin", "--mode": "mode", "-k": "k"}


@pytest.mark.parametrize("options", [
    ["--margin", "distance"],
    ["--margin", "absolute", "--mode", "forward"],
    ["-k", "2", "--mode", "backward"],
    ["-k", "7", "--mode", "intersection", "--margin", "distance"],
])
def test_mine_writes_what_the_library_mines_with_the_same_settings(files, options):
    out = files / "m.tsv"
    assert main(["mine", str(files / "s.tsv"), str(files / "t.tsv"), "--out", str(out),
                 "--encoder", "hash:64", *options]) == 0
    settings = {OPTION[a]: (int(b) if a == "-k" else b) for a, b in zip(options[::2],
                                                                      options[1::2], strict=True)}
    want = mine_embeddings(vectors(SRC), vectors(TGT), MineConfig(**settings))
    got = rows(out)
    assert [(r[3], r[4]) for r in got] == [(f"s{s}", f"t{t}") for s, t in zip(
        want.src.tolist(), want.tgt.tolist(), strict=True)]
    np.testing.assert_allclose([float(r[0]) for r in got], want.score, atol=2e-6)
    default = mine_embeddings(vectors(SRC), vectors(TGT), MineConfig())
    assert len(default) != len(want) or not np.allclose(default.score, want.score)


def test_mine_and_search_pass_the_recall_target_to_auto(files, monkeypatch):
    """``auto`` may search approximately: ``--recall`` must reach it as it reaches approx."""
    import disembed.cli.mine as mine_cli
    import disembed.cli.search as search_cli

    seen = []
    real_mine, real_search = mine_cli.mine_files, search_cli.search_files
    monkeypatch.setattr(mine_cli, "mine_files", lambda *a, **kw: seen.append(
        ("mine", kw["config"].backend, kw["config"].backend_options)) or real_mine(*a, **kw))
    monkeypatch.setattr(search_cli, "search_files", lambda *a, **kw: seen.append(
        ("search", kw["backend"], kw["backend_options"])) or real_search(*a, **kw))
    for backend in ("auto", "approx", "exact"):
        extra = [] if backend == "auto" else ["--backend", backend]
        assert main(["mine", str(files / "s.tsv"), str(files / "t.tsv"), "--out",
                     str(files / f"m-{backend}.tsv"), "--encoder", "hash:64", "--recall", "0.9",
                     *extra]) == 0
    assert main(["search", str(files / "s.tsv"), str(files / "t.tsv"), "--out",
                 str(files / "q.tsv"), "--encoder", "hash:64", "--recall", "0.9",
                 "--backend", "auto"]) == 0
    assert seen == [("mine", "auto", {"recall": 0.9}), ("mine", "approx", {"recall": 0.9}),
                    ("mine", "exact", {}), ("search", "auto", {"recall": 0.9})]


@pytest.mark.parametrize("options", [
    ["--score", "ratio", "-k", "2"],
    ["--score", "distance", "-k", "3", "--pools"],
])
def test_score_writes_what_the_library_scores_with_the_same_settings(files, options):
    pairs = [(SRC[i], TGT[j]) for i, j in ((0, 3), (5, 5), (9, 1), (12, 4), (20, 12), (23, 0))]
    (files / "p.tsv").write_text("src\ttgt\n" + "".join(f"{a}\t{b}\n" for a, b in pairs),
                                 encoding="utf-8")
    src_pool, tgt_pool = SRC[:17], TGT[4:]
    (files / "sp.txt").write_text("\n".join(src_pool) + "\n", encoding="utf-8")
    (files / "tp.txt").write_text("\n".join(tgt_pool) + "\n", encoding="utf-8")
    pools = options[-1] == "--pools"
    cli = options[:-1] if pools else options
    if pools:
        cli += ["--src-pool", str(files / "sp.txt"), "--tgt-pool", str(files / "tp.txt")]
    assert main(["score", str(files / "p.tsv"), "--out", str(files / "o.tsv"),
                 "--encoder", "hash:64", *cli]) == 0
    a, b = vectors([p[0] for p in pairs]), vectors([p[1] for p in pairs])
    kw = {"k": int(options[3])}
    if pools:
        kw.update(src_pool=vectors(src_pool), tgt_pool=vectors(tgt_pool))
    want = score_embeddings(a, b, options[1], **kw)
    got = [float(r[0]) for r in rows(files / "o.tsv")]
    np.testing.assert_allclose(got, want, atol=2e-6)
    # the settings matter on this data: four neighbours (or swapped pools) score otherwise
    other = score_embeddings(a, b, options[1], k=4, **({"src_pool": kw["tgt_pool"],
                                                        "tgt_pool": kw["src_pool"]}
                                                       if pools else {}))
    assert not np.allclose(other, want, atol=1e-4)


def test_search_maps_queries_and_database_in_their_own_languages(files):
    """With ``--model``, the queries are mapped as ``--src-lang`` and the database as
    ``--tgt-lang`` (a per-language map: swapping them moves every score)."""
    from disembed import make_method
    from disembed.mining import search

    rng = np.random.default_rng(0)
    fit_src, fit_tgt = rng.standard_normal((80, 64)), rng.standard_normal((80, 64))
    model = make_method("linear-map").fit(fit_src.astype(np.float32),
                                          fit_tgt.astype(np.float32), "de", "en")
    model.save(files / "model")
    assert main(["search", str(files / "s.tsv"), str(files / "t.tsv"), "--out",
                 str(files / "q.tsv"), "--encoder", "hash:64", "--model", str(files / "model"),
                 "--src-lang", "de", "--tgt-lang", "en", "-k", "3"]) == 0
    q = normalize_rows(model.meaning(HashEncoder(dim=64).encode(SRC), "de"))
    d = normalize_rows(model.meaning(HashEncoder(dim=64).encode(TGT), "en"))
    D, I = search(q, d, 3)  # noqa: E741
    got = rows(files / "q.tsv")
    assert [r[3] for r in got] == [f"t{i}" for i in I.ravel().tolist()]
    np.testing.assert_allclose([float(r[2]) for r in got], D.ravel(), atol=2e-6)


def test_evaluate_scores_the_qe_split_asked_for(tiny_data_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("DISEMBED_CACHE_DIR", str(tmp_path / "cache"))
    for split, pairs in (("test21", ["en-cs"]), ("test", ["en-de", "ru-en"])):
        out = tmp_path / f"{split}.json"
        assert main(["evaluate", "--encoder", "hash:16", "--tasks", "wmt20-qe", "--qe-split",
                     split, "--data-dir", str(tiny_data_dir), "--out", str(out)]) == 0
        scores = json.loads(out.read_text())["scores"][0]
        assert scores["config"]["split"] == split
        assert sorted({r["subset"] for r in scores["rows"]}) == pairs
