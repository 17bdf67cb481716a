"""`disembed filter`: the same kept pairs from a TSV, a headerless .gz on standard input and
two line-aligned files; --dev prints its candidates; a run killed with SIGKILL resumes to
the bytes of an uninterrupted run."""

from __future__ import annotations

import gzip
import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from disembed.cli import main

SRC = Path(__file__).resolve().parents[2] / "src"
ROWS = [(f"Ich sehe {i} Hunde im Garten.", f"I see {i} dogs in the garden.") for i in range(40)]
ROWS += [("Hallo Welt", "Hallo Welt"), ("123", "123")]
ARGS = ["--encoder", "hash:16", "--language-check", "none", "--chunk-size", "16",
        "--threshold", "0.5", "--no-progress", "-q"]


def test_every_input_form_keeps_the_same_pairs(tmp_path, monkeypatch, capsys):
    (tmp_path / "p.tsv").write_text("src\ttgt\n" + "".join(f"{s}\t{t}\n" for s, t in ROWS),
                                    encoding="utf-8")
    (tmp_path / "p.de").write_text("".join(f"{s}\n" for s, _ in ROWS), encoding="utf-8")
    (tmp_path / "p.en").write_text("".join(f"{t}\n" for _, t in ROWS), encoding="utf-8")
    assert main(["filter", str(tmp_path / "p.tsv"), "--out", str(tmp_path / "a.tsv"),
                 *ARGS]) == 0
    out = capsys.readouterr().out
    assert "kept 18 of 42 pairs" in out and "copy 1, no_letters 1" in out
    assert main(["filter", str(tmp_path / "p.de"), str(tmp_path / "p.en"), "--out",
                 str(tmp_path / "b.tsv"), *ARGS]) == 0
    data = gzip.compress("".join(f"{s}\t{t}\n" for s, t in ROWS).encode())
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    assert main(["filter", "-", "--no-header", "--out", str(tmp_path / "c.tsv"), *ARGS]) == 0
    kept = (tmp_path / "a.tsv").read_bytes()
    assert kept and kept == (tmp_path / "b.tsv").read_bytes() == (tmp_path / "c.tsv").read_bytes()
    scores = (tmp_path / "a.tsv.scores.tsv").read_text(encoding="utf-8").splitlines()
    assert len(scores) == 1 + len(ROWS) and scores[-1].split("\t")[5] == "no_letters"


def test_dev_prints_precision_and_recall_per_candidate(tmp_path, capsys):
    (tmp_path / "p.tsv").write_text("".join(f"{s}\t{t}\n" for s, t in ROWS), encoding="utf-8")
    wrong = ROWS[1:20] + ROWS[:1]
    dev = ["src\ttgt\tlabel"] + [f"{s}\t{t}\t1" for s, t in ROWS[:20]] + \
        [f"{s}\t{t2}\t0" for (s, _), (_, t2) in zip(ROWS[:20], wrong, strict=True)]
    (tmp_path / "dev.tsv").write_text("\n".join(dev) + "\n", encoding="utf-8")
    args = [a for a in ARGS if a not in ("--threshold", "0.5")]
    assert main(["filter", str(tmp_path / "p.tsv"), "--dev", str(tmp_path / "dev.tsv"),
                 "--out", str(tmp_path / "k.tsv"), *args]) == 0
    out = capsys.readouterr().out
    assert "precision" in out and out.count("<- chosen") == 1
    chosen = next(line for line in out.splitlines() if "<- chosen" in line).split()
    assert f"threshold {float(chosen[0]):.4f}" in out


@pytest.mark.slow
def test_kill_9_mid_run_then_resume_gives_the_same_bytes(tmp_path):
    rows = [(f"Satz {i} über den Hund.", f"sentence {i} about the dog.") for i in range(4000)]
    (tmp_path / "p.tsv").write_text("".join(f"{s}\t{t}\n" for s, t in rows), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(SRC)}

    def run(out, **kw):
        cmd = [sys.executable, "-m", "disembed", "filter", str(tmp_path / "p.tsv"), "--out",
               str(tmp_path / out), "--encoder", "hash:16", "--language-check", "none",
               "--chunk-size", "20", "--threshold", "0.5", "--no-progress", "-q"]
        return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                **kw)

    assert run("a.tsv").wait(timeout=300) == 0
    proc = run("b.tsv")
    parts = tmp_path / "b.tsv.run"
    while proc.poll() is None and len(list(parts.glob("part-*.tsv"))) < 20:
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    done = len(list(parts.glob("part-*.tsv")))
    assert proc.returncode == -signal.SIGKILL and 20 <= done < 200, done
    assert not (tmp_path / "b.tsv").exists()
    again = run("b.tsv")
    out, _ = again.communicate(timeout=300)
    assert again.returncode == 0 and b"chunk(s) resumed" in out
    for name in ("b.tsv", "b.tsv.scores.tsv"):
        assert (tmp_path / name).read_bytes() == (tmp_path / name.replace("b", "a")).read_bytes()


def test_length_coverage_reaches_the_run_and_refuses_a_negative_weight(tmp_path, capsys):
    (tmp_path / "p.tsv").write_text("".join(f"{s}\t{t}\n" for s, t in ROWS), encoding="utf-8")
    out = ["filter", str(tmp_path / "p.tsv"), "--out", str(tmp_path / "k.tsv"), *ARGS]
    with pytest.raises(SystemExit):
        main([*out, "--length-coverage", "-1"])
    assert "expected a number >= 0" in capsys.readouterr().err
    for ratio in ("0.5", "1"):  # was "internal error ... a bug" (RuleConfig's ValueError)
        with pytest.raises(SystemExit):
            main([*out, "--max-length-ratio", ratio])
        assert "expected a number above 1" in capsys.readouterr().err
    assert main([*out, "--length-coverage", "0.3"]) == 0
    manifest = json.loads((tmp_path / "k.tsv.run" / "manifest.json").read_text())
    assert manifest["config"]["rules"]["coverage_weight"] == 0.3  # a change starts over
