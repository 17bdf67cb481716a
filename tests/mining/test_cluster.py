"""``mine --cluster``: the cluster driver mines the TSV ``mine`` writes (exact), and the
approximate shard path finds the exact pairs. Fast: the driver on :class:`InProcess`
(the same tasks, run in this process); the Ray runs are in test_distributed.py (slow)."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

from disembed.cli import main
from disembed.encoders import HashEncoder
from disembed.exceptions import ConfigError
from disembed.mining import MineConfig, mine_files, write_pairs
from disembed.mining.distributed import InProcess, connect, mine_distributed

distributed = importlib.import_module("disembed.mining.distributed")


def corpus(tmp_path, n_src=90, n_tgt=110):
    src = [f"s{i}\tSatz Nummer {i} über Dinge" for i in range(n_src)]
    tgt = [f"t{i}\tSatz Nummer {i} über Dinge" for i in range(40, 40 + n_tgt)]
    (tmp_path / "s.tsv").write_text("\n".join(src) + "\n", encoding="utf-8")
    (tmp_path / "t.tsv").write_text("\n".join(tgt) + "\n", encoding="utf-8")
    return tmp_path / "s.tsv", tmp_path / "t.tsv"


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
    mine_cli = importlib.import_module("disembed.mining.distributed")
    monkeypatch.setattr(mine_cli, "connect", lambda address: InProcess())
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
    monkeypatch.setattr(distributed, "connect", lambda address: InProcess())
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
