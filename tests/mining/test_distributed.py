"""Ray mining on a small local cluster equals the single-process run."""

import os
from pathlib import Path

import numpy as np
import pytest

from disembed.encoders import HashEncoder
from disembed.mining import MineConfig, mine_embeddings, normalize_rows
from disembed.mining.distributed import merge_lists


def test_merge_lists_equals_one_search():
    from disembed.mining import brute_force_knn

    rng = np.random.default_rng(0)
    x = normalize_rows(rng.standard_normal((30, 8)))
    y = normalize_rows(rng.standard_normal((50, 8)))
    parts = [(*brute_force_knn(x, y[a:b], 3), a) for a, b in ((0, 20), (20, 45), (45, 50))]
    D, I = merge_lists(parts, 3)  # noqa: E741
    D_ref, I_ref = brute_force_knn(x, y, 3)
    np.testing.assert_allclose(D, D_ref, atol=1e-6)
    np.testing.assert_array_equal(I, I_ref)


@pytest.mark.slow  # starting Ray workers (each imports torch) took 221 s on the shared 2-core box
def test_ray_mining_equals_single_process(tmp_path):
    ray = pytest.importorskip("ray", reason="ray not installed: pip install 'disembed[ray]'")
    from disembed.mining.distributed import mine_distributed

    src = [f"s{i}\tSatz {i}" for i in range(70)]
    tgt = [f"t{i}\tSatz {i}" for i in range(35, 120)]
    (tmp_path / "s.tsv").write_text("\n".join(src) + "\n", encoding="utf-8")
    (tmp_path / "t.tsv").write_text("\n".join(tgt) + "\n", encoding="utf-8")
    cfg = MineConfig(k=4)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        mined, _, _ = mine_distributed(tmp_path / "s.tsv", tmp_path / "t.tsv", "hash:32",
                                       run_dir=tmp_path / "run", config=cfg, shard_rows=25,
                                       cache_dir=str(tmp_path / "cache"))
    finally:
        ray.shutdown()
    assert len(list((tmp_path / "run").glob("src-*.npy"))) == 3
    enc = HashEncoder(dim=32)
    x = normalize_rows(enc.encode([s.split("\t")[1] for s in src]))
    y = normalize_rows(enc.encode([t.split("\t")[1] for t in tgt]))
    single = mine_embeddings(x, y, cfg)
    np.testing.assert_allclose(mined.score, single.score, rtol=1e-5)
    assert set(zip(mined.src.tolist(), mined.tgt.tolist(), strict=True)) == set(
        zip(single.src.tolist(), single.tgt.tolist(), strict=True))


def _parent(pid: int) -> int:
    """The parent PID of ``pid`` (0 once it is gone), from ``/proc/PID/stat``."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0
    return int(stat[stat.rindex(")") + 2:].split()[1])  # after "(comm) state": ppid


def _descends_from(pid: int, ancestor: int) -> bool:
    while pid > 1:
        pid = _parent(pid)
        if pid == ancestor:
            return True
    return False


def _ray_workers_running(task: str) -> list[int]:
    """PIDs of this test's Ray worker processes running ``task`` (their title is
    ``ray::<task>``). Only descendants of this process count (``ray.init`` starts the
    raylet, which starts the workers, as children of the driver): another Ray cluster on
    the same machine, another engineer's test run for one, is never touched."""
    me, pids = os.getpid(), []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            title = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if title.startswith(f"ray::{task}") and _descends_from(int(proc.name), me):
            pids.append(int(proc.name))
    return pids


@pytest.mark.slow  # a local Ray cluster of 3 workers: ~1-4 minutes on the shared 2-core box
@pytest.mark.parametrize("task", ["encode_shard", "knn_pair"])
def test_a_worker_killed_mid_phase_changes_nothing(tmp_path, task):
    """One worker is killed (SIGKILL) while it runs a task of the encode or the search phase:
    Ray runs the task again elsewhere, and the TSV equals an uninterrupted run's bytes."""
    import signal
    import threading
    import time

    ray = pytest.importorskip("ray", reason="ray not installed: pip install 'disembed[ray]'")
    if not Path("/proc/self/cmdline").exists():
        pytest.skip("finds Ray workers through /proc (Linux)")
    from disembed.mining import mine_files, write_pairs
    from disembed.mining.distributed import connect, mine_distributed

    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(3000)]
    lines = [" ".join(rng.choice(words, size=8)) for _ in range(60_000)]
    (tmp_path / "s.txt").write_text("\n".join(lines[:40_000]) + "\n", encoding="utf-8")
    (tmp_path / "t.txt").write_text("\n".join(lines[20_000:]) + "\n", encoding="utf-8")
    cfg = MineConfig(k=4, backend="exact")
    mine_files(tmp_path / "s.txt", tmp_path / "t.txt", HashEncoder(dim=64), tmp_path / "ref.tsv",
               run_dir=tmp_path / "ref", config=cfg)
    killed: list[int] = []

    def kill_one():
        deadline = time.monotonic() + 900
        while time.monotonic() < deadline and not killed:
            for pid in _ray_workers_running(task):
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
                return
            time.sleep(0.002)

    killer = threading.Thread(target=kill_one, daemon=True)
    killer.start()
    try:
        mined, cs, ct = mine_distributed(tmp_path / "s.txt", tmp_path / "t.txt", "hash:64",
                                         run_dir=tmp_path / "run", config=cfg,
                                         shard_rows=4000, cache_dir=str(tmp_path / "cache"),
                                         executor=connect("local:3"))
    finally:
        killed.append(-1) if not killed else None
        ray.shutdown()
    write_pairs(tmp_path / "out.tsv", mined, cs, ct)
    assert killed[0] > 0, f"no worker ran {task} while the test watched"
    assert (tmp_path / "out.tsv").read_bytes() == (tmp_path / "ref.tsv").read_bytes()


@pytest.mark.slow  # a local Ray cluster: ~1 minute to start its workers here
def test_cli_cluster_local_2_writes_the_tsv_mine_writes(tmp_path, capsys):
    """The issue's bar: ``disembed mine --cluster local:2`` mines the same pairs (byte for
    byte) as ``disembed mine`` on a test corpus, inputs given as gzip plus a plain file."""
    import gzip

    ray = pytest.importorskip("ray", reason="ray not installed: pip install 'disembed[ray]'")
    from disembed.cli import main

    rng = np.random.default_rng(1)
    words = [f"w{i}" for i in range(500)]
    lines = [" ".join(rng.choice(words, size=6)) for _ in range(3000)]
    with gzip.open(tmp_path / "s1.txt.gz", "wt", encoding="utf-8") as f:
        f.write("\n".join(lines[:1000]) + "\n")
    (tmp_path / "s2.txt").write_text("\n".join(lines[1000:2000]) + "\n", encoding="utf-8")
    (tmp_path / "t.txt").write_text("\n".join(lines[500:3000]) + "\n", encoding="utf-8")
    src = f"{tmp_path}/s1.txt.gz,{tmp_path}/s2.txt"
    base = ["mine", src, str(tmp_path / "t.txt"), "--encoder", "hash:32", "--cache-dir",
            str(tmp_path / "cache"), "--threshold", "1.0"]
    assert main([*base, "--out", str(tmp_path / "one.tsv")]) == 0
    try:
        assert main([*base, "--out", str(tmp_path / "c.tsv"), "--cluster", "local:2",
                     "--shard-rows", "700"]) == 0
    finally:
        ray.shutdown()
    one = (tmp_path / "one.tsv").read_bytes()
    assert one.count(b"\n") > 1000 and (tmp_path / "c.tsv").read_bytes() == one
    assert b"s1.txt:1\t" in one or b"\ts1.txt:" in one  # ids name the gzip file and line


def test_ray_mining_of_repeated_lines_equals_mine_files(tmp_path):
    """Each distinct sentence is encoded and searched once on the cluster too, and pairs
    name the first line of each text, as mine_files' do (issue 48)."""
    ray = pytest.importorskip("ray", reason="ray not installed: pip install 'disembed[ray]'")
    from disembed.mining import mine_files
    from disembed.mining.distributed import mine_distributed

    src = [f"Satz {i % 23}" for i in range(70)] + ["Menü"] * 30
    tgt = [f"Satz {i % 31}" for i in range(10, 90)] + ["Menü"] * 20
    (tmp_path / "s.txt").write_text("\n".join(src) + "\n", encoding="utf-8")
    (tmp_path / "t.txt").write_text("\n".join(tgt) + "\n", encoding="utf-8")
    cfg = MineConfig(k=4)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        mined, _, _ = mine_distributed(tmp_path / "s.txt", tmp_path / "t.txt", "hash:32",
                                       run_dir=tmp_path / "run", config=cfg, shard_rows=10,
                                       cache_dir=str(tmp_path / "cache"))
    finally:
        ray.shutdown()
    assert len(list((tmp_path / "run").glob("src-*.npy"))) == 3  # 24 distinct, not 100 lines
    local = mine_files(tmp_path / "s.txt", tmp_path / "t.txt", HashEncoder(dim=32),
                       tmp_path / "m.tsv", run_dir=tmp_path / "local", config=cfg)
    np.testing.assert_allclose(mined.score, local.score, rtol=1e-5)
    assert set(zip(mined.src.tolist(), mined.tgt.tolist(), strict=True)) == set(
        zip(local.src.tolist(), local.tgt.tolist(), strict=True))
    assert all(src.index(src[i]) == i for i in mined.src)  # first lines
