"""Re-test chosen mutants of a mutation run one at a time, each in a fresh pytest process.

    python benchmarks/mutation_retest.py --workdir runs/mutation KEY [KEY ...]
    python benchmarks/mutation_retest.py --tests tests/methods/test_centering.py \\
        'disembed.methods.mean_centering.x_check_unknown_language__mutmut_4'

For when mutmut's forked workers stall (docs/mutation.md) or after new tests, to confirm
survivors and timeouts without a full run. Uses the mutated tree that
``mutation_testing.py`` left in ``--workdir``: each mutant runs with ``MUTANT_UNDER_TEST``
set and that tree on ``PYTHONPATH``, against ``--tests`` (test files of this checkout) or,
by default, the tests mutmut recorded as reaching the mutated function. Prints one line
per mutant (killed / survived / timeout) and exits 1 if any survived. A key that names no
mutant survives (the control: the unmutated code passes its tests).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from mutation_testing import ROOT, mutant_env


def tests_for(key: str, stats: dict) -> list[str]:
    function = key.rpartition("__mutmut_")[0]
    durations = stats["duration_by_test"]
    return sorted(stats["tests_by_mangled_function_name"].get(function, []),
                  key=lambda t: durations.get(t, 0.0))


def retest(key: str, mutants: Path, tests: list[str], cwd: Path, limit: float) -> str:
    env = dict(mutant_env(), PYTHONPATH=str(mutants / "src"), MUTANT_UNDER_TEST=key)
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-n", "0", *tests]
    try:
        done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, timeout=limit)
    except subprocess.TimeoutExpired:
        return "timeout"
    return {0: "survived", 1: "killed"}.get(done.returncode, f"error (exit {done.returncode})")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("keys", nargs="+", help="mutant keys, as in results.json")
    p.add_argument("--workdir", type=Path, default=ROOT / "runs" / "mutation")
    p.add_argument("--tests", help="comma-separated test files of this checkout (default: the "
                                   "tests mutmut recorded for each mutant, from the mutated tree)")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds per mutant")
    args = p.parse_args(argv)
    mutants = args.workdir / "tree" / "mutants"
    stats_file = mutants / "mutmut-stats.json"
    if not stats_file.is_file():
        raise SystemExit(f"no mutation run in {args.workdir}: run benchmarks/mutation_testing.py "
                         f"--workdir {args.workdir} first")
    stats = json.loads(stats_file.read_text())
    survived = 0
    for key in args.keys:
        tests = args.tests.split(",") if args.tests else tests_for(key, stats)
        cwd = ROOT if args.tests else mutants
        t0 = time.perf_counter()
        status = retest(key, mutants, tests, cwd, args.timeout) if tests else "no tests"
        survived += status == "survived"
        print(f"{status:9s} {time.perf_counter() - t0:6.1f} s  {key}", flush=True)
    return 1 if survived else 0


if __name__ == "__main__":
    raise SystemExit(main())
