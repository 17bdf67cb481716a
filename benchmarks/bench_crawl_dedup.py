"""Crawl-shaped input: time and peak memory of ``disembed mine`` / ``search`` against the
same number of distinct lines (issue 48).

    PYTHONPATH=src python benchmarks/bench_crawl_dedup.py runs/crawl --lines 20000

Each case writes its two input files, then runs the CLI in a child process under
``ulimit -v`` (``--limit-kb``, default 8,000,000) and ``/usr/bin/time``: wall seconds and
peak RSS. Cases: the issue's table (5,000 and 20,000 identical lines a side; ``--lines``
lines with 10% one boilerplate line; ``search`` with 3,000 identical lines), and a crawl
corpus with 10%, 30% and 60% of its lines repeated from a pool of boilerplate lines (Zipf
weights) plus 10% near-duplicates (another line with its case, spacing or digits changed:
distinct texts, so searched, and near-ties for the search). Each is compared with
``--lines`` distinct lines. Writes ``results.json`` and prints a markdown table with the
command, the CPU flags and the load before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import numpy as np

ENCODER = "hash:16"
WORDS = ("river house market light paper stone window garden train winter music street "
         "bread cloud forest letter bridge doctor school mountain").split()


def distinct_lines(n: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, 6)) + f" {i}" for i in range(n)]


def near_duplicate(line: str, rng: np.random.Generator) -> str:
    """The same line with its case, spacing or digits changed (a distinct text)."""
    kind = rng.integers(3)
    if kind == 0:
        return line.upper() if rng.random() < 0.5 else line.title()
    if kind == 1:
        return line.replace(" ", "  ", 1) + " "
    return "".join(str((int(c) + 1) % 10) if c.isdigit() else c for c in line)


def crawl(n: int, dup_share: float, seed: int, near_share: float = 0.1) -> list[str]:
    """``n`` lines: ``dup_share`` of them drawn from 200 boilerplate lines (Zipf weights),
    ``near_share`` near-duplicates of another line, the rest distinct."""
    rng = np.random.default_rng(seed)
    pool = [f"boilerplate {j}: " + " ".join(rng.choice(WORDS, 5)) for j in range(200)]
    weights = 1.0 / np.arange(1, 201)
    lines = distinct_lines(n, seed + 1)
    dup = rng.random(n) < dup_share
    for i in np.flatnonzero(dup):
        lines[i] = pool[rng.choice(200, p=weights / weights.sum())]
    near = np.flatnonzero(~dup & (rng.random(n) < near_share / max(1e-9, 1 - dup_share)))
    for i in near[1:]:
        lines[i] = near_duplicate(lines[int(rng.integers(0, i))], rng)
    return lines


def boilerplate(n: int, share: float, seed: int) -> list[str]:
    lines = distinct_lines(n, seed)
    rng = np.random.default_rng(seed)
    for i in np.flatnonzero(rng.random(n) < share):
        lines[i] = "Accept all cookies to continue browsing this site"
    return lines


def cases(n: int) -> list[tuple[str, str, list[str], list[str]]]:
    same = ["The same line, again and again."]
    return [
        ("mine", "5,000 identical lines a side", same * 5000, same * 5000),
        ("mine", "5,000 distinct lines a side", distinct_lines(5000, 1), distinct_lines(5000, 2)),
        ("mine", "20,000 identical lines a side", same * 20000, same * 20000),
        ("mine", "20,000 distinct lines a side", distinct_lines(20000, 1),
         distinct_lines(20000, 2)),
        ("mine", f"{n:,} lines, 10% one boilerplate line", boilerplate(n, 0.1, 1),
         boilerplate(n, 0.1, 2)),
        ("search", "3,000 identical lines (queries and database)", same * 3000, same * 3000),
        ("search", "3,000 distinct lines", distinct_lines(3000, 1), distinct_lines(3000, 2)),
        ("mine", f"{n:,} distinct lines a side", distinct_lines(n, 3), distinct_lines(n, 4)),
        *[("mine", f"crawl {n:,} a side, {int(s * 100)}% repeated + 10% near-duplicates",
           crawl(n, s, 5), crawl(n, s, 6)) for s in (0.1, 0.3, 0.6)],
        ("search", f"crawl {n:,} queries x {n:,}, 30% repeated + 10% near-duplicates",
         crawl(n, 0.3, 7), crawl(n, 0.3, 8)),
        ("search", f"{n:,} distinct queries x {n:,}", distinct_lines(n, 9),
         distinct_lines(n, 10)),
    ]


def run(verb: str, a: Path, b: Path, out: Path, limit_kb: int) -> dict:
    cmd = [sys.executable, "-m", "disembed", verb, str(a), str(b), "--out", str(out),
           "--encoder", ENCODER, "--run-dir", str(out) + ".run", "-q", "--no-progress"]
    timed = ["/usr/bin/time", "-f", "%e %M", *cmd]

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit_kb * 1024, limit_kb * 1024))

    proc = subprocess.run(timed, capture_output=True, text=True, preexec_fn=limit)
    wall, rss = proc.stderr.strip().splitlines()[-1].split()[-2:]
    return {"exit": proc.returncode, "seconds": float(wall), "peak_rss_mb": int(rss) / 1024,
            "error": proc.stderr[-300:] if proc.returncode else ""}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--lines", type=int, default=20000)
    ap.add_argument("--limit-kb", type=int, default=8_000_000)
    ap.add_argument("--only", default="", help="run only cases whose name holds this")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    flags = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    report = {"command": " ".join(sys.argv), "encoder": ENCODER,
              "load_before": os.getloadavg(), "cpu_flags": sorted(
                  f for f in next((ln for ln in flags.splitlines() if ln.startswith("Flags")),
                                  "").split() if f.startswith(("avx", "amx", "fma"))),
              "cases": []}
    for i, (verb, name, a, b) in enumerate(cases(args.lines)):
        if args.only not in name:
            continue
        pa, pb = args.out / f"{i}.a.txt", args.out / f"{i}.b.txt"
        for path, lines in ((pa, a), (pb, b)):
            path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
        result = run(verb, pa, pb, args.out / f"{i}.{verb}.tsv", args.limit_kb)
        report["cases"].append({"verb": verb, "case": name, "distinct": [len(set(a)),
                                len(set(b))], "load": os.getloadavg()[0], **result})
        print(f"| {verb} | {name} | {result['seconds']:.1f} s | "  # noqa: T201
              f"{result['peak_rss_mb']:.0f} MB | exit {result['exit']} |", flush=True)
        (args.out / "results.json").write_text(json.dumps(report, indent=1))
    report["load_after"] = os.getloadavg()
    (args.out / "results.json").write_text(json.dumps(report, indent=1))
    print(f"load {report['load_before']} -> {report['load_after']}; "  # noqa: T201
          f"flags {' '.join(report['cpu_flags'])}")


if __name__ == "__main__":
    main()
