"""Run one command and measure it as a whole: wall time, load, and the peak memory of every
process it starts (Ray's driver, raylet and each worker apart), sampled from /proc.

    python benchmarks/measure_run.py --out runs/million/exact.json -- \
        disembed mine runs/million/src.tsv runs/million/tgt.tsv --encoder use-m3 --out mined.tsv

Every ``--interval`` seconds the process tree under the command (found through /proc's
parent links, so a local Ray cluster's workers count) is read: each process' resident set
size, its peak (``VmHWM``: the kernel's own high-water mark, so a spike between two samples
is not missed while the process lives) and the sum over the tree. The JSON holds the
command, exit code, wall seconds, the load average before and after and its maximum while
running, the CPU flags that matter for the kernels, peak RSS per process (with its command
line) and the peak of the tree's total RSS. Linux only. The report is also written every
``--snapshot`` seconds while the command runs (``exit_code`` null), so a run stopped from
outside keeps its figures so far.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path


def children_of() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        tree.setdefault(ppid, []).append(int(entry))
    return tree


def descendants(root: int) -> list[int]:
    tree, out, todo = children_of(), [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo += tree.get(pid, [])
    return out


def memory_kib(pid: int) -> tuple[int, int, str] | None:
    """``(VmRSS, VmHWM, command line)`` of ``pid`` in KiB, or None if it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:160]
    except OSError:
        return None
    fields = dict(re.findall(r"^(VmRSS|VmHWM):\s+(\d+) kB", status, re.M))
    return int(fields.get("VmRSS", 0)), int(fields.get("VmHWM", 0)), cmd.strip()


def cpu_flags() -> list[str]:
    text = Path("/proc/cpuinfo").read_text()
    flags = re.search(r"^flags\s*:\s*(.*)$", text, re.M)
    keep = ("avx2", "fma", "avx512f", "avx512_bf16", "avx512_vnni", "amx_bf16", "amx_tile")
    return [f for f in (flags.group(1).split() if flags else []) if f in keep]


def _report(cmd, t0, load_before, load_max, tree_peak, peaks, exit_code) -> dict:
    wall = time.perf_counter() - t0
    processes = [{"pid": pid, **v, "peak_rss_gib": round(v["peak_rss_kib"] / 2**20, 2)}
                 for pid, v in peaks.items()]
    return {"command": cmd, "exit_code": exit_code, "wall_s": round(wall, 1),
            "load_before": load_before, "load_after": os.getloadavg(), "load_max_1min": load_max,
            "cpu_flags": cpu_flags(), "started": time.strftime("%Y-%m-%d %H:%M:%S %Z",
                                                               time.localtime(time.time() - wall)),
            "tree_peak_rss_gib": round(tree_peak / 2**20, 2),
            "processes": sorted(processes, key=lambda r: -r["peak_rss_kib"])}


def write_json(path: Path, report: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(report, indent=1))
    tmp.replace(path)


def measure(cmd: list[str], interval: float, out: Path | None = None,
            snapshot_every: float = 60.0) -> dict:
    load_before = os.getloadavg()
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd)
    peaks: dict[int, dict] = {}
    tree_peak, load_max = 0, load_before[0]
    last_snapshot = t0
    while proc.poll() is None:
        total = 0
        for pid in descendants(proc.pid):
            mem = memory_kib(pid)
            if mem is None:
                continue
            rss, hwm, line = mem
            total += rss
            seen = peaks.setdefault(pid, {"command": line, "peak_rss_kib": 0})
            seen["peak_rss_kib"] = max(seen["peak_rss_kib"], hwm, rss)
        tree_peak = max(tree_peak, total)
        load_max = max(load_max, os.getloadavg()[0])
        if out is not None and time.perf_counter() - last_snapshot >= snapshot_every:
            # a run stopped from outside still leaves what was measured so far
            write_json(out, _report(cmd, t0, load_before, load_max, tree_peak, peaks, None))
            last_snapshot = time.perf_counter()
        time.sleep(interval)
    return _report(cmd, t0, load_before, load_max, tree_peak, peaks, proc.returncode)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, required=True, help="JSON report")
    p.add_argument("--interval", type=float, default=1.0, help="seconds between samples")
    p.add_argument("--snapshot", type=float, default=60.0, help="seconds between writes of "
                   "the report so far (exit_code null until the command ends)")
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command to run")
    args = p.parse_args(argv)
    cmd = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not cmd:
        p.error("give the command to measure after --")
    report = measure(cmd, args.interval, args.out, args.snapshot)
    write_json(args.out, report)
    print(f"{report['wall_s']} s, exit {report['exit_code']}, tree peak "
          f"{report['tree_peak_rss_gib']} GiB, load {report['load_before'][0]:.2f} -> "
          f"{report['load_after'][0]:.2f} (max {report['load_max_1min']:.2f})", file=sys.stderr)
    for proc in report["processes"][:8]:
        print(f"  {proc['peak_rss_gib']:6.2f} GiB  {proc['command'][:100]}", file=sys.stderr)
    return report["exit_code"]


if __name__ == "__main__":
    raise SystemExit(main())
