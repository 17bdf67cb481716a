"""``mine --cluster``: the cluster driver mines the TSV ``mine`` writes (exact), and the
approximate shard path finds the exact pairs. Fast: the driver on :class:`InProcess`
(the same tasks, run in this process); the Ray runs are in test_distributed.py (slow)."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

from disembed.cli import main
from disembed.encoders import HashEncoder
from disembed.exceptions import ConfigError, DataError
from disembed.mining import MineConfig, mine_embeddings, mine_files, normalize_rows, write_pairs
from disembed.mining.distributed import (
    InProcess,
    connect,
    mine_distributed,
    mine_embeddings_distributed,
)

distributed = importlib.import_module("disembed.mining.distributed")


def corpus(tmp_path, n_src=90, n_tgt=110):
    src = [f"s{i}\tSatz Nummer {i} über Dinge" for i in range(n_src)]
    tgt = [f"t{i}\tSatz Nummer {i} über Dinge" for i in range(40, 40 + n_tgt)]
    (tmp_path / "s.tsv").write_text("\n".join(src) + "\n", encoding="utf-8")
    (tmp_path / "t.tsv").write_text("\n".join(tgt) + "\n", encoding="utf-8")
    return tmp_path / "s.tsv", tmp_path / "t.tsv"


def in_process(monkeypatch):
    """``mine --cluster`` runs its tasks in this process (no Ray): the verb's own reference
    to ``connect`` is the one it calls."""
    monkeypatch.setattr(importlib.import_module("disembed.cli.mine"), "connect",
                        lambda address: InProcess())


def test_driver_in_process_writes_the_bytes_mine_writes(tmp_path):
    s, t = corpus(tmp_path)
    cfg = MineConfig(k=4, threshold=1.0)
    mine_files(s, t, HashEncoder(dim=32), tmp_path / "one.tsv", run_dir=tmp_path / "r1",
               config=cfg)
    mined, cs, ct = mine_distributed(s, t, "hash:32", run_dir=tmp_path / "r2", config=cfg,
                                     shard_rows=25, cache_dir=str(tmp_path / "cache"),
                                     executor=InProcess())
    write_pairs(tmp_path / "many.tsv", mined, cs, ct)
    assert len(list((tmp_path / "r2").glob("src-*.npy"))) == 4  # 90 rows in shards of 25
    assert (tmp_path / "many.tsv").read_bytes() == (tmp_path / "one.tsv").read_bytes()
    assert mined.backend == "exact" and len(mined) > 40


def test_shards_are_reused_and_a_changed_input_gets_new_ones(tmp_path):
    s, t = corpus(tmp_path)
    calls = []
    real = distributed.encode_shard

    def counting(*args):
        calls.append(args[4])
        return real(*args)

    run = dict(run_dir=tmp_path / "r", config=MineConfig(k=3), shard_rows=40,
               cache_dir=str(tmp_path / "cache"), executor=InProcess())
    orig = distributed.encode_shard
    distributed.encode_shard = counting
    try:
        mine_distributed(s, t, "hash:16", **run)
        first = {p for p in calls if not p.endswith("x")}
        mine_distributed(s, t, "hash:16", **run)
        assert len(list((tmp_path / "r").glob("*.npy"))) == len(first) == 6
        s.write_text(s.read_text().replace("Satz Nummer 3 ", "Satz Nummer drei "))
        mine_distributed(s, t, "hash:16", **run)
    finally:
        distributed.encode_shard = orig
    names = [p.split("/")[-1] for p in calls]
    assert len([n for n in names if n.startswith("src")]) == 3 * 3  # 3 shards, 3 runs
    # the edited source has new shard names; the target's are the same each time
    assert len({n for n in names if n.startswith("src")}) == 6
    assert len({n for n in names if n.startswith("tgt")}) == 3


def test_approximate_shards_find_the_exact_pairs(tmp_path):
    s, t = corpus(tmp_path, 400, 500)
    exact, *_ = mine_distributed(s, t, "hash:32", run_dir=tmp_path / "r", shard_rows=150,
                                 config=MineConfig(k=4, backend="exact"), executor=InProcess(),
                                 cache_dir=str(tmp_path / "cache"))
    approx, *_ = mine_distributed(s, t, "hash:32", run_dir=tmp_path / "r", shard_rows=150,
                                  config=MineConfig(k=4, backend="approx",
                                                    backend_options={"recall": 0.95}),
                                  executor=InProcess(), cache_dir=str(tmp_path / "cache"))
    assert approx.backend == "approx" and len(list((tmp_path / "r").glob("*.faiss"))) == 2 + 7
    good = lambda m: {(a, b) for a, b, sc in zip(m.src.tolist(), m.tgt.tolist(),  # noqa: E731
                                                 m.score.tolist(), strict=True) if sc > 1.05}
    assert len(good(exact)) > 300 and len(good(exact) & good(approx)) / len(good(exact)) > 0.97


@pytest.mark.parametrize("options", [
    [], ["--top", "25", "--margin", "distance", "--mode", "forward"],
    ["--threshold", "1.05", "--mode", "intersection", "-k", "2"],
    ["--margin", "absolute", "--mode", "backward", "--top", "7"]])
def test_cli_cluster_writes_what_mine_writes(tmp_path, monkeypatch, capsys, options):
    s, t = corpus(tmp_path)
    in_process(monkeypatch)
    base = ["mine", str(s), str(t), "--encoder", "hash:32", "--cache-dir",
            str(tmp_path / "cache"), "-k", "4", *options]
    assert main([*base, "--out", str(tmp_path / "one.tsv")]) == 0
    assert main([*base, "--out", str(tmp_path / "c.tsv"), "--cluster", "local:2",
                 "--shard-rows", "30"]) == 0
    out = capsys.readouterr().out
    assert (tmp_path / "c.tsv").read_bytes() == (tmp_path / "one.tsv").read_bytes()
    assert out.count("pairs") == 2
    if "--top" in options:  # the options reached both paths
        top = int(options[options.index("--top") + 1])
        assert (tmp_path / "c.tsv").read_bytes().count(b"\n") == top + 1


@pytest.mark.parametrize("address", ["local:x", "nowhere", "http://host"])
def test_a_bad_cluster_address_is_a_clear_error(address):
    pytest.importorskip("ray")
    with pytest.raises(ConfigError, match="expected local, local:N, auto, ray://host:port"):
        connect(address)


def test_merge_keeps_missing_neighbours_missing():
    from disembed.mining.distributed import merge_lists

    D1, I1 = np.array([[0.9, -np.inf]]), np.array([[3, -1]])
    D2, I2 = np.array([[0.5, 0.4]]), np.array([[0, 1]])
    D, I = merge_lists([(D1, I1, 0), (D2, I2, 10)], 3)  # noqa: E741
    assert I.tolist() == [[3, 10, 11]] and D.tolist() == [[0.9, 0.5, 0.4]]


@pytest.mark.parametrize("langs", [[], ["--src-lang", "de", "--tgt-lang", "en"]])
def test_cli_cluster_meaning_view_writes_what_mine_writes(tmp_path, monkeypatch, langs):
    """``--model`` (tagged, or each row's language identified by the model) through the
    cluster driver gives ``mine``'s bytes; the raw run gives others (the view is applied)."""
    from disembed import make_method

    s, t = corpus(tmp_path)
    rng = np.random.default_rng(0)
    X, Y = rng.standard_normal((2, 60, 32)).astype(np.float32)
    make_method("mean-centering").fit(X, Y + 0.5, "de", "en").save(tmp_path / "model")
    in_process(monkeypatch)
    base = ["mine", str(s), str(t), "--encoder", "hash:32", "--cache-dir",
            str(tmp_path / "cache"), "-k", "3", "--mode", "intersection"]
    assert main([*base, "--out", str(tmp_path / "raw.tsv"), "--cluster", "local"]) == 0
    base += ["--model", str(tmp_path / "model"), *langs]
    assert main([*base, "--out", str(tmp_path / "one.tsv")]) == 0
    assert main([*base, "--out", str(tmp_path / "c.tsv"), "--cluster", "local:2",
                 "--shard-rows", "30"]) == 0
    one = (tmp_path / "one.tsv").read_bytes()
    assert (tmp_path / "c.tsv").read_bytes() == one
    assert one != (tmp_path / "raw.tsv").read_bytes() and one.count(b"\n") > 10


def test_shards_of_one_file_mapped_as_two_languages_are_kept_apart(tmp_path, monkeypatch):
    """Issue 32: with a language-dependent model, the source file's shards mapped as "de"
    are not reused when the same file is mined as "fr" in the same run folder."""
    from disembed import make_method

    s, t = corpus(tmp_path)
    rng = np.random.default_rng(1)
    X = rng.standard_normal((90, 32)).astype(np.float32)
    X[:45] += 2.0  # the German rows' mean is far from the French rows'
    make_method("mean-centering").fit(X, X - X.mean(0), ["de"] * 45 + ["fr"] * 45, "en").save(
        tmp_path / "model")
    in_process(monkeypatch)
    base = ["mine", str(s), str(t), "--encoder", "hash:32", "--cache-dir",
            str(tmp_path / "cache"), "-k", "3", "--model", str(tmp_path / "model"),
            "--tgt-lang", "en"]
    out = {}
    for lang in ("de", "fr"):
        assert main([*base, "--src-lang", lang, "--out", str(tmp_path / f"one-{lang}.tsv")]) == 0
        assert main([*base, "--src-lang", lang, "--out", str(tmp_path / f"c-{lang}.tsv"),
                     "--cluster", "local", "--shard-rows", "30",
                     "--run-dir", str(tmp_path / "shared-run")]) == 0
        out[lang] = (tmp_path / f"c-{lang}.tsv").read_bytes()
        assert out[lang] == (tmp_path / f"one-{lang}.tsv").read_bytes()
    assert out["de"] != out["fr"]


# --------------------------------------------------------------- precomputed embeddings


def planted(n_src=130, n_tgt=170, d=24, seed=0):
    """Unnormalised source and target rows; targets 30.. are noisy copies of sources 0..n."""
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((n_src, d)) * rng.uniform(0.5, 3.0, (n_src, 1))).astype(np.float32)
    y = rng.standard_normal((n_tgt, d)).astype(np.float32)
    y[30:30 + 90] = 2.0 * x[:90] + 0.3 * rng.standard_normal((90, d)).astype(np.float32)
    return x, y


def save_pair(tmp_path, x, y):
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    return tmp_path / "x.npy", tmp_path / "y.npy"


@pytest.mark.parametrize("cfg", [MineConfig(k=4), MineConfig(k=3, mode="intersection"),
                                 MineConfig(k=4, margin="distance", mode="forward", top=40),
                                 MineConfig(k=2, threshold=1.02, mode="backward")])
def test_embeddings_on_shards_mine_what_one_process_mines(tmp_path, cfg):
    """Precomputed, unnormalised embeddings in shards of 40 rows (uneven last shards) give
    exactly :func:`mine_embeddings`' pairs and scores on the normalised rows."""
    x, y = planted()
    xs, ys = save_pair(tmp_path, x, y)
    mined = mine_embeddings_distributed(xs, ys, run_dir=tmp_path / "r", config=cfg,
                                        shard_rows=40, executor=InProcess())
    one = mine_embeddings(normalize_rows(x), normalize_rows(y), cfg)
    assert len(list((tmp_path / "r").glob("src-emb-*.npy"))) == 4  # 130 rows: 40+40+40+10
    assert len(list((tmp_path / "r").glob("tgt-emb-*.npy"))) == 5
    np.testing.assert_array_equal(mined.score, one.score)
    np.testing.assert_array_equal(mined.src, one.src)
    np.testing.assert_array_equal(mined.tgt, one.tgt)
    assert mined.backend == "exact" and mined.k == cfg.k and len(mined) > 0
    if cfg.mode == "max-score":  # the planted translations are found
        found = set(zip(mined.src.tolist(), mined.tgt.tolist(), strict=True))
        assert sum((i, 30 + i) in found for i in range(90)) >= 85


def test_embedding_shards_are_reused_and_a_changed_file_gets_new_ones(tmp_path, monkeypatch):
    x, y = planted()
    xs, ys = save_pair(tmp_path, x, y)
    made = []
    real = shard_search_module().save_npy

    def counting(out, X):
        made.append(str(out).rsplit("/", 1)[-1])
        return real(out, X)

    monkeypatch.setattr(distributed, "save_npy", counting)
    run = dict(run_dir=tmp_path / "r", config=MineConfig(k=3), shard_rows=50,
               executor=InProcess())
    first = mine_embeddings_distributed(xs, ys, **run)
    assert len(made) == 3 + 4
    again = mine_embeddings_distributed(xs, ys, **run)
    assert len(made) == 3 + 4  # nothing cut again
    np.testing.assert_array_equal(first.score, again.score)
    x[7] += 1.0  # one row of the source file changes: its shards get new names
    np.save(xs, x)
    mine_embeddings_distributed(xs, ys, **run)
    assert len(made) == 3 + 4 + 3
    assert len({m for m in made if m.startswith("src")}) == 6
    assert len({m for m in made if m.startswith("tgt")}) == 4


def shard_search_module():
    return importlib.import_module("disembed.mining.shard_search")


def test_embeddings_on_approximate_shards_find_the_exact_pairs(tmp_path):
    pytest.importorskip("faiss", reason="faiss not installed: pip install 'disembed[faiss]'")
    x, y = planted(600, 700, d=32, seed=1)
    xs, ys = save_pair(tmp_path, x, y)
    common = dict(run_dir=tmp_path / "r", shard_rows=250, executor=InProcess())
    exact = mine_embeddings_distributed(xs, ys, config=MineConfig(k=4, backend="exact"),
                                        **common)
    approx = mine_embeddings_distributed(
        xs, ys, config=MineConfig(k=4, backend="approx", backend_options={"recall": 0.95}),
        **common)
    assert approx.backend == "approx"
    pairs = lambda m: set(zip(m.src.tolist(), m.tgt.tolist(), strict=True))  # noqa: E731
    planted_pairs = {(i, 30 + i) for i in range(90)}
    assert len(planted_pairs & pairs(exact)) >= 85
    assert len(planted_pairs & pairs(approx)) >= len(planted_pairs & pairs(exact)) - 2


def test_bad_embedding_inputs_are_clear_errors(tmp_path):
    x, y = planted()
    xs, ys = save_pair(tmp_path, x, y)
    run = dict(run_dir=tmp_path / "r", executor=InProcess())
    with pytest.raises(DataError, match=r"source embeddings .*nope.npy: no such file; "
                                        r"expected an \(n, d\) .npy matrix"):
        mine_embeddings_distributed(tmp_path / "nope.npy", ys, **run)
    np.save(tmp_path / "flat.npy", y[0])
    with pytest.raises(DataError, match=r"target embeddings .*flat.npy: shape \(24,\), dtype "
                                        r"float32; expected a non-empty \(n, d\) matrix"):
        mine_embeddings_distributed(xs, tmp_path / "flat.npy", **run)
    np.save(tmp_path / "words.npy", np.array([["a", "b"]]))
    with pytest.raises(DataError, match=r"shape \(1, 2\), dtype <U1; expected"):
        mine_embeddings_distributed(xs, tmp_path / "words.npy", **run)
    (tmp_path / "text.npy").write_text("not numpy")
    with pytest.raises(DataError, match="text.npy: not a readable .npy file"):
        mine_embeddings_distributed(tmp_path / "text.npy", ys, **run)
    np.save(tmp_path / "narrow.npy", y[:, :10])
    with pytest.raises(DataError, match="source embeddings have 24 dimensions and target "
                                        "embeddings 10; both sides must come from the same"):
        mine_embeddings_distributed(xs, tmp_path / "narrow.npy", **run)
    with pytest.raises(ConfigError, match="must be the path of a .npy file .* got a ndarray; "
                                          "save an array with numpy.save, or mine it in this "
                                          "process with mine_embeddings"):
        mine_embeddings_distributed(x, ys, **run)
    with pytest.raises(ConfigError, match="shard_rows must be >= 1, got 0"):
        mine_embeddings_distributed(xs, ys, shard_rows=0, **run)
    assert not (tmp_path / "r").exists()  # nothing written for a refused call


def test_a_stopped_search_resumes_at_the_pairs_not_yet_searched(tmp_path, monkeypatch):
    """Each shard pair's lists are kept in the run folder: a rerun searches nothing again,
    a missing pair file is searched again alone, and an unreadable or misshapen one is
    searched again (with a warning) instead of being trusted; the pairs are the same."""
    search = shard_search_module()
    x, y = planted()
    xs, ys = save_pair(tmp_path, x, y)
    searched = []
    real = search.knn_both

    def counting(a, b, k, *rest):
        searched.append((len(a), len(b)))
        return real(a, b, k, *rest)

    monkeypatch.setattr(search, "knn_both", counting)
    run = dict(run_dir=tmp_path / "r", config=MineConfig(k=3), shard_rows=50,
               executor=InProcess())
    first = mine_embeddings_distributed(xs, ys, **run)
    pair_files = sorted((tmp_path / "r").glob("knn-*.npz"))
    assert len(searched) == len(pair_files) == 3 * 4
    mine_embeddings_distributed(xs, ys, **run)
    assert len(searched) == 12  # every pair read back
    pair_files[5].unlink()
    pair_files[0].write_bytes(b"not an npz")
    np.savez(pair_files[7], a0=np.zeros((3, 3)), a1=np.zeros((3, 3)),
             a2=np.zeros((3, 3)), a3=np.zeros((3, 3)))
    with caplog_at_warning() as records:
        again = mine_embeddings_distributed(xs, ys, **run)
    assert len(searched) == 12 + 3
    assert sum("cannot be read" in r for r in records) == 1
    assert sum("have shapes" in r for r in records) == 1
    for a, b in ((first.score, again.score), (first.src, again.src), (first.tgt, again.tgt)):
        np.testing.assert_array_equal(a, b)
    mine_embeddings_distributed(xs, ys, **{**run, "config": MineConfig(k=2)})
    assert len(searched) == 12 + 3 + 12  # another k: other files, searched anew


def caplog_at_warning():
    """The warning messages of disembed.mining.shard_search logged inside the block."""
    import contextlib
    import logging

    @contextlib.contextmanager
    def capture():
        records: list[str] = []
        handler = logging.Handler(logging.WARNING)
        handler.emit = lambda record: records.append(record.getMessage())
        log = logging.getLogger("disembed.mining.shard_search")
        log.addHandler(handler)
        try:
            yield records
        finally:
            log.removeHandler(handler)

    return capture()


def test_approximate_pair_lists_are_kept_and_read_back(tmp_path, monkeypatch):
    pytest.importorskip("faiss", reason="faiss not installed: pip install 'disembed[faiss]'")
    x, y = planted(300, 320, d=16, seed=2)
    xs, ys = save_pair(tmp_path, x, y)
    cfg = MineConfig(k=3, backend="approx", backend_options={"nprobe": 4})
    run = dict(run_dir=tmp_path / "r", config=cfg, shard_rows=150, executor=InProcess())
    first = mine_embeddings_distributed(xs, ys, **run)
    assert len(list((tmp_path / "r").glob("ann-*.npz"))) == 2 * (2 * 3)  # 2 x 3 pairs, 2 ways
    approximate = importlib.import_module("disembed.retrieval.approximate")
    monkeypatch.setattr(approximate, "search_index", lambda *a, **kw: pytest.fail("searched"))
    again = mine_embeddings_distributed(xs, ys, **run)
    np.testing.assert_array_equal(first.score, again.score)
    np.testing.assert_array_equal(first.tgt, again.tgt)
