"""Fault injection: ``kill -9`` at seeded points and a full disk, for encode, mine, train, bench.

After a kill, the outputs are the previous ones or the new ones (never a mix, never a
part); a rerun of the same command ends with outputs byte-identical to an undisturbed
run and no temporary files anywhere. Under a file-size limit the command exits 2 with
"disk full / file too large: <path>" and the previous outputs are untouched.

The default suite kills ``encode`` and ``mine`` at a few seeded events; the sweep (every
event of ``encode``, many of ``mine``, random delays, ``train`` and ``bench``, a really
full tmpfs) is marked slow: ``pytest -m slow tests/faults``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
from harness import (
    Outcome,
    finish,
    kill_points,
    run_disembed,
    snapshot,
    start_disembed,
    temp_files,
)
from tiny_data import add_full_data, write_tiny_data

from disembed.methods import load_disentangler
from disembed.util.files import finish_pending

NEW = [f"sentence number {i}" for i in range(40)]
OLD = [f"an older line {i}" for i in range(7)]
SRC = [f"s{i}\tSatz {i}" for i in range(30)]
TGT = [f"t{i}\tSatz {i}" for i in range(10, 40)]


def _write(path: Path, lines: list[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _env(root: Path) -> dict[str, str]:
    return {"DISEMBED_CACHE_DIR": str(root / "cache"), "DISEMBED_DATA_DIR": str(root / "data")}


# --- encode ------------------------------------------------------------------------------

def _encode(root: Path, lines: list[str], **faults):
    inp = _write(root / "in" / f"input-{len(lines)}.txt", lines)
    argv = ["encode", str(inp), "--out", str(root / "out" / "e.npy"), "--encoder", "hash:16",
            "--batch-size", "3"]
    return run_disembed(argv, root / "proc", env=_env(root), **faults)


def _encode_outputs(root: Path) -> tuple:
    return snapshot([root / "out" / "e.npy", root / "out" / "e.txt"])


@pytest.fixture(scope="module")
def encode_reference(tmp_path_factory):
    root = tmp_path_factory.mktemp("encode-ref")
    assert _encode(root, OLD).code == 0  # as in each kill test: the events of this second run
    done = _encode(root, NEW)
    assert done.code == 0, done.stderr
    old_root = tmp_path_factory.mktemp("encode-old")
    assert _encode(old_root, OLD).code == 0
    return _encode_outputs(root), _encode_outputs(old_root), done.events


def _check_encode_kill(root: Path, point: int, new: dict, old: dict) -> None:
    assert _encode(root, OLD).code == 0  # the previous good pair
    hurt = _encode(root, NEW, kill_at=point)
    assert hurt.killed, (point, hurt.code, hurt.stderr)
    finish_pending(root / "out")  # what any reader (npy:, the next write) does first
    assert _encode_outputs(root) in (old, new), point
    done = _encode(root, NEW)
    assert done.code == 0, done.stderr
    assert _encode_outputs(root) == new
    assert temp_files(root) == []


def test_encode_killed_at_seeded_events(encode_reference, tmp_path):
    new, old, events = encode_reference
    assert events >= 8
    for point in kill_points(events, 6, seed=2):
        _check_encode_kill(tmp_path / f"kill-{point}", point, new, old)


@pytest.mark.slow
def test_encode_killed_at_every_event(encode_reference, tmp_path):
    new, old, events = encode_reference
    for point in range(1, events + 1):
        _check_encode_kill(tmp_path / f"kill-{point}", point, new, old)


# --- mine --------------------------------------------------------------------------------

def _mine(root: Path, src: list[str], tgt: list[str], proc: Path | None = None, **faults):
    s = _write(root / "in" / f"s-{len(src)}.tsv", src)
    t = _write(root / "in" / f"t-{len(tgt)}.tsv", tgt)
    argv = ["mine", str(s), str(t), "--out", str(root / "out" / "m.tsv"), "--run-dir",
            str(root / "out" / "run"), "--encoder", "hash:16", "--chunk", "4", "-k", "3"]
    return run_disembed(argv, proc or root / "proc", env=_env(root), **faults)


@pytest.fixture(scope="module")
def mine_reference(tmp_path_factory):
    root = tmp_path_factory.mktemp("mine-ref")
    assert _mine(root, SRC[:12], TGT[:12]).code == 0
    done = _mine(root, SRC, TGT)
    assert done.code == 0, done.stderr
    old_root = tmp_path_factory.mktemp("mine-old")
    assert _mine(old_root, SRC[:12], TGT[:12]).code == 0
    return ((root / "out" / "m.tsv").read_bytes(), (old_root / "out" / "m.tsv").read_bytes(),
            done.events)


def _check_mine_kill(root: Path, point: int, reference) -> None:
    new, old, _ = reference
    assert _mine(root, SRC[:12], TGT[:12]).code == 0  # previous output and run directory
    hurt = _mine(root, SRC, TGT, kill_at=point)
    assert hurt.killed, (point, hurt.code, hurt.stderr)
    assert (root / "out" / "m.tsv").read_bytes() in (old, new), point
    done = _mine(root, SRC, TGT)
    assert done.code == 0, done.stderr
    assert (root / "out" / "m.tsv").read_bytes() == new, point
    assert temp_files(root) == []


def test_mine_killed_at_seeded_points(mine_reference, tmp_path):
    events = mine_reference[2]
    assert events >= 20
    for point in kill_points(events, 3, seed=11):
        _check_mine_kill(tmp_path / f"kill-{point}", point, mine_reference)


# --- a full disk (RLIMIT_FSIZE, as `ulimit -f`) -------------------------------------------

def test_encode_with_a_full_disk_keeps_the_previous_outputs(tmp_path):
    assert _encode(tmp_path, OLD).code == 0
    before = _encode_outputs(tmp_path)
    hurt = _encode(tmp_path, NEW, fsize_limit=1500)  # the cache shard is bigger: refused
    assert hurt.code == 2, hurt.stderr
    assert "disk full / file too large: " + str(tmp_path / "cache") in hurt.stderr
    assert "Traceback" not in hurt.stderr
    assert _encode_outputs(tmp_path) == before and temp_files(tmp_path) == []
    # with the sentences cached, the matrix itself (2.7 kB) is what no longer fits
    assert _encode(tmp_path / "warm", NEW).code == 0
    shutil.copytree(tmp_path / "warm" / "cache", tmp_path / "cache", dirs_exist_ok=True)
    hurt = _encode(tmp_path, NEW, fsize_limit=1500)
    assert hurt.code == 2 and "disk full / file too large: " + str(tmp_path / "out" / "e.npy") \
        in hurt.stderr, hurt.stderr
    assert _encode_outputs(tmp_path) == before and temp_files(tmp_path) == []
    assert _encode(tmp_path, NEW).code == 0  # space again: the same command completes


def test_mine_with_a_full_disk_keeps_the_previous_output(tmp_path):
    assert _mine(tmp_path, SRC[:12], TGT[:12]).code == 0
    before = (tmp_path / "out" / "m.tsv").read_bytes()
    # four distinct copies of each side (mining embeds each distinct line once, so a line
    # repeated four times would add nothing to write)
    src = [f"{s} ({i})" for i in range(4) for s in SRC]
    tgt = [f"{t} ({i})" for i in range(4) for t in TGT]
    hurt = _mine(tmp_path, src, tgt, fsize_limit=4000)
    assert hurt.code == 2 and "disk full / file too large: " in hurt.stderr, hurt.stderr
    assert (tmp_path / "out" / "m.tsv").read_bytes() == before
    assert temp_files(tmp_path) == []


# --- the slow sweep: more points, train and bench, a real tmpfs ---------------------------

@pytest.mark.slow
def test_encode_killed_after_random_delays(encode_reference, tmp_path):
    new, old, _ = encode_reference
    import random

    rng = random.Random(5)
    for i in range(12):
        root = tmp_path / f"delay-{i}"
        assert _encode(root, OLD).code == 0
        _encode(root, NEW, kill_after=rng.uniform(0.0, 0.08))
        finish_pending(root / "out")
        assert _encode_outputs(root) in (old, new)
        assert _encode(root, NEW).code == 0
        assert _encode_outputs(root) == new and temp_files(root) == []


@pytest.mark.slow
def test_mine_killed_at_many_points(mine_reference, tmp_path):
    for point in kill_points(mine_reference[2], 16, seed=3):
        _check_mine_kill(tmp_path / f"kill-{point}", point, mine_reference)


def _data(root: Path) -> None:
    if not (root / "data").exists():
        (root / "data").mkdir(parents=True)
        add_full_data(write_tiny_data(root / "data"))


def _train(root: Path, **faults):
    _data(root)
    argv = ["train", "--method", "seed", "--encoder", "hash:16", "--languages", "de,zh",
            "--pairs-per-language", "40", "--max-epochs", "4", "--train-batch-size", "16",
            "--out", str(root / "model")]
    return run_disembed(argv, root / "proc", env=_env(root), **faults)


@pytest.mark.slow
def test_train_killed_at_seeded_points_resumes_to_the_same_model(tmp_path):
    ref = _train(tmp_path / "ref")
    assert ref.code == 0, ref.stderr
    files = ("model.safetensors", "config.json")

    def model_files(root: Path) -> dict:
        load_disentangler(root / "model")  # completes a save cut between its two renames
        return {f: (root / "model" / f).read_bytes() for f in files}

    def train_or_done(root: Path, **faults):
        """A rerun after a kill that came once the model was saved is refused (issue 33:
        train never replaces a trained model without --overwrite): that model is the run's."""
        done = _train(root, **faults)
        if not faults and done.code == 2 and "already holds a trained model" in done.stderr:
            return Outcome(0, done.stdout, done.stderr, done.events)
        return done

    _kill_then_rerun(tmp_path, train_or_done, model_files, model_files(tmp_path / "ref"),
                     kill_points(ref.events, 8, seed=7))


def _kill_then_rerun(tmp_path: Path, job, outputs, expected, points: list[int]) -> None:
    """At each fault point: ``job`` killed there, then run again, must finish with
    ``outputs(root) == expected`` and leave no temporary files."""
    for point in points:
        root = tmp_path / f"kill-{point}"
        hurt = job(root, kill_at=point)
        assert hurt.killed, (point, hurt.stderr)
        done = job(root)
        assert done.code == 0, done.stderr
        assert outputs(root) == expected, point
        assert temp_files(root) == []


def _bench(root: Path, **faults):
    _data(root)
    argv = ["bench", "--encoder", "hash:16", "--methods", "baseline,mean-centering,seed",
            "--tasks", "sts17", "--languages", "de,zh", "--pairs-per-language", "40",
            "--max-epochs", "3", "--max-eval-items", "all", "--out", str(root / "bench")]
    return run_disembed(argv, root / "proc", env=_env(root), **faults)


def _bench_results(root: Path) -> dict:
    """Scores of every run and the trained weights (timings differ between runs)."""
    out = {}
    for result in sorted((root / "bench").rglob("result.json")):
        key = str(result.parent.relative_to(root))
        out[key] = [{k: v for k, v in s.items() if k != "seconds"}
                    for s in json.loads(result.read_text())["scores"]]
        weights = result.parent / "model" / "model.safetensors"
        out[key + "/weights"] = weights.read_bytes() if weights.exists() else None
    return out


@pytest.mark.slow
def test_bench_killed_at_seeded_points_finishes_with_the_same_results(tmp_path):
    ref = _bench(tmp_path / "ref")
    assert ref.code == 0, ref.stderr
    expected = _bench_results(tmp_path / "ref")
    assert len(expected) == 8  # three methods and the floor, scores and weights each
    _kill_then_rerun(tmp_path, _bench,
                     lambda root: (_bench_results(root),
                                   (root / "bench" / "results.md").is_file()),
                     (expected, True), kill_points(ref.events, 6, seed=13))


@pytest.fixture
def small_tmpfs(tmp_path):
    """A 256 KiB tmpfs (needs root and mount); skipped where it cannot be made."""
    mount = tmp_path / "tmpfs"
    mount.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mount)],
                          capture_output=True)
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {made.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


@pytest.mark.slow
def test_a_really_full_disk_is_a_clear_error(small_tmpfs, tmp_path):
    """ENOSPC, not a file-size limit: the cache and outputs on a full tmpfs (mining's
    memory maps are preallocated, so this is an error and not a SIGBUS)."""
    root = small_tmpfs
    assert _mine(root, SRC[:12], TGT[:12], tmp_path / "proc").code == 0
    before = (root / "out" / "m.tsv").read_bytes()
    filler = root / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        while os.write(fd, b"\0" * 4096):
            pass
    except OSError:
        pass  # the disk is full
    finally:
        os.close(fd)
    os.truncate(filler, max(filler.stat().st_size - 16 * 1024, 0))  # leave a little room
    hurt = _mine(root, SRC * 20, TGT * 20, tmp_path / "proc")
    assert hurt.code == 2, hurt.stderr
    assert "disk full / file too large: " in hurt.stderr and "No space left" in hurt.stderr
    assert (root / "out" / "m.tsv").read_bytes() == before
    filler.unlink()
    assert temp_files(root) == []
    assert _mine(root, SRC * 20, TGT * 20, tmp_path / "proc").code == 0


# --- two writers, one run folder (issue 22: wrong pairs, SIGBUS) ---------------------------

def _mine_argv(root: Path, run_dir: Path, out: str) -> list[str]:
    s = _write(root / "in" / "s.tsv", SRC)
    t = _write(root / "in" / "t.tsv", TGT)
    return ["mine", str(s), str(t), "--out", str(root / out), "--run-dir", str(run_dir),
            "--encoder", "hash:16", "--chunk", "4", "-k", "3"]


def test_a_second_mine_waits_for_the_run_folder_then_fails_clearly_or_finishes(
        mine_reference, tmp_path):
    """The parent holds the run folder's lock: a child with a timeout fails clearly (exit
    2); one without waits (still running while the lock is held), then mines right."""
    from disembed.util.locks import folder_lock

    run_dir = tmp_path / "run"
    with folder_lock(run_dir):
        impatient = run_disembed(_mine_argv(tmp_path, run_dir, "a.tsv"), tmp_path / "p1",
                                 env={**_env(tmp_path), "DISEMBED_LOCK_TIMEOUT": "0.2"})
        assert impatient.code == 2, impatient.stderr
        assert "still in use by another disembed process after 0.2 s" in impatient.stderr
        assert "Traceback" not in impatient.stderr
        patient = start_disembed(_mine_argv(tmp_path, run_dir, "b.tsv"), tmp_path / "p2",
                                 env=_env(tmp_path))
        time.sleep(1.0)
        assert patient.running(), "the second writer did not wait for the first"
        assert not (tmp_path / "b.tsv").exists()
    done = finish(patient, timeout=120)
    assert done.code == 0, done.stderr
    assert (tmp_path / "b.tsv").read_bytes() == mine_reference[0]
    assert not (tmp_path / "a.tsv").exists()


@pytest.mark.slow
@pytest.mark.parametrize("trial", range(3))
def test_two_mines_sharing_a_run_folder_both_write_their_right_pairs(trial, tmp_path):
    """Started together on one run folder with different inputs (as two ``mine`` runs with
    the same ``--out``, hence the same default ``OUT.run/``): each must write its own pairs."""
    jobs = []
    for j, word in enumerate(("Satz", "Zeile")):
        src = [f"s{i}\t{word} Nummer {i} von vielen" for i in range(6000)]
        tgt = [f"t{i}\t{word} Nummer {i} von vielen" for i in range(3000, 9000)]
        ref = tmp_path / f"ref{j}"
        argv = _big_mine(ref, src, tgt, ref / "run", "m.tsv")
        assert run_disembed(argv, ref / "p", env=_env(ref)).code == 0
        jobs.append((src, tgt, (ref / "m.tsv").read_bytes()))
    root = tmp_path / "both"
    children = [start_disembed(_big_mine(root / f"in{j}", src, tgt, root / "run",
                                         f"../m{j}.tsv"), root / f"p{j}", env=_env(root))
                for j, (src, tgt, _) in enumerate(jobs)]
    for j, child in enumerate(children):
        done = finish(child, timeout=300)
        assert done.code == 0, done.stderr
        assert (root / f"m{j}.tsv").read_bytes() == jobs[j][2], (trial, j)
    assert temp_files(root) == []


def _big_mine(root: Path, src, tgt, run_dir: Path, out: str) -> list[str]:
    s = _write(root / "in" / "s.tsv", src)
    t = _write(root / "in" / "t.tsv", tgt)
    return ["mine", str(s), str(t), "--out", str(root / out), "--run-dir", str(run_dir),
            "--encoder", "hash:16", "--chunk", "64", "-k", "4"]


# --- export killed: no work folder left for good (issue 22: 341 MB left behind) ------------

@pytest.mark.slow
def test_export_killed_leaves_nothing_after_the_next_export(tmp_path):
    """SIGKILL at the first and a middle event of an export (the harness's counted fsyncs
    and renames): the old export stays whole, and the next export removes the dead one's
    work folder."""
    import sys

    sys.path.insert(0, str(Path(__file__).parents[1] / "serving"))
    from test_export import EN, build_tiny_bert

    from disembed import load_encoder
    from disembed.methods import make_method

    bert = build_tiny_bert(tmp_path / "bert")
    enc = load_encoder(f"st:{bert}", pooling="mean")
    rng = np.random.default_rng(0)
    words = [" ".join(rng.choice(EN, size=3)) for _ in range(60)]
    X = enc.encode(words)
    model = make_method("mean-centering").fit(X, X[::-1], "de", "en")
    model.save(tmp_path / "m", metadata={"encoder": enc.identity.to_dict(),
                                         "encoder_spec": f"st:{bert}"})
    argv = ["export", "--model", str(tmp_path / "m"), "--out", str(tmp_path / "exp"),
            "--overwrite"]
    assert run_disembed(argv, tmp_path / "p0").code == 0
    done = run_disembed(argv, tmp_path / "p1")  # an overwrite: the events of each kill run
    assert done.code == 0, done.stderr
    before = snapshot(sorted((tmp_path / "exp").rglob("*.json")))
    for point in kill_points(done.events, 3, seed=5):
        hurt = run_disembed(argv, tmp_path / f"p{point}", kill_at=point)
        assert hurt.killed, (point, hurt.code, hurt.stderr)
        assert (tmp_path / "exp" / "modules.json").is_file()  # old or new, never gone
        again = run_disembed(argv, tmp_path / f"q{point}")
        assert again.code == 0, again.stderr
        assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []
        assert snapshot(sorted((tmp_path / "exp").rglob("*.json"))) == before
