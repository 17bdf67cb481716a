"""Mutation testing of the modules where a silent error would change a published number
(issue 21): make each one wrong on purpose, one small change at a time, and see whether
the default test suite notices.

    pip install -e ".[dev,mutation]"
    python benchmarks/mutation_testing.py                        # every group, ~15-30 min
    python benchmarks/mutation_testing.py --groups margins,knn   # some of them
    python benchmarks/mutation_testing.py --report docs/mutation_survivors.md

The tool is mutmut (pinned in the ``mutation`` extra): it copies ``src/`` to a scratch
folder, writes every mutant of a function beside the original behind a switch, records
once which tests reach which function, then runs, for each mutant, only the tests that
reach it (in forked workers of one warmed-up process). A mutant is *killed* when one of
those tests fails, *survived* when all pass.

The working tree is never touched: the files git tracks (and untracked, unignored ones)
are copied into ``--workdir``/tree and mutated there. A second run reuses that folder:
mutmut re-tests only the functions whose source or tests changed, so an interrupted run
resumes, and a run after a fix re-tests only what the fix touched.

Every survivor must be killed by a test or carry a written reason in
``benchmarks/mutation_reasons/<group>.toml`` (an equivalent mutant: no input can tell it from the
original; or one whose only effect is on a message). A reason names the module, the
function, and the changed line before and after (whitespace-insensitive), so it survives
renumbering. The script prints a table per module, writes ``results.json`` (every
mutant's status, each survivor's diff and reason) and exits 1 while a survivor has no
reason, so it can gate a release.
"""

from __future__ import annotations

import argparse
import difflib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parent.parent
REASONS = ROOT / "benchmarks" / "mutation_reasons"

#: group -> modules. The modules whose mistakes would move a published figure without an
#: error: the loss terms, the margins and the exact k-NN behind mining and retrieval
#: scores, the statistics behind every interval, checkpoints behind resumed training, and
#: the centring behind every centred recipe's vectors.
GROUPS: dict[str, tuple[str, ...]] = {
    "constraints": ("src/disembed/methods/constraints.py",),
    "margins": ("src/disembed/retrieval/margin.py",),
    "knn": ("src/disembed/retrieval/knn.py", "src/disembed/retrieval/topk.py",
            "src/disembed/retrieval/bf16.py"),
    "significance": ("src/disembed/analysis/significance.py",),
    "checkpoint": ("src/disembed/training/checkpoint.py",),
    "centring": ("src/disembed/methods/mean_centering.py",),
}

#: mutmut's exit codes -> status (mutmut/stats.py, 3.8)
STATUS = {1: "killed", 3: "killed", 0: "survived", 5: "no tests", 33: "no tests",
          34: "skipped", 35: "suspicious", 36: "timeout", 37: "caught by type check",
          24: "timeout", -24: "timeout", 152: "timeout", 255: "timeout", -11: "segfault",
          -9: "segfault", None: "not checked"}
#: A mutant that makes a test hang past mutmut's limit (10 x the test's time + 20 s) is
#: detected (counted apart as "timeout"); these are the statuses that need a test or a reason.
NOT_KILLED = ("survived", "no tests", "suspicious", "segfault", "not checked")


@dataclass
class Mutant:
    key: str
    module: str
    function: str
    status: str
    removed: list[str] = field(default_factory=list)
    added: list[str] = field(default_factory=list)
    reason: str | None = None


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--groups", default=",".join(GROUPS),
                   help=f"comma-separated, of: {', '.join(GROUPS)} (default: all)")
    p.add_argument("--workdir", type=Path, default=ROOT / "runs" / "mutation")
    p.add_argument("--max-children", type=int, default=os.cpu_count() or 1,
                   help="mutants tested at once (default: one per CPU)")
    p.add_argument("--report", type=Path, help="also write the survivors as Markdown here")
    p.add_argument("--fresh", action="store_true",
                   help="forget earlier results in --workdir and test every mutant again")
    args = p.parse_args(argv)
    unknown = sorted(set(args.groups.split(",")) - set(GROUPS))
    if unknown:
        p.error(f"unknown group(s) {unknown}; known: {', '.join(GROUPS)}")
    return args


def tracked_files() -> list[str]:
    out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                         cwd=ROOT, check=True, capture_output=True).stdout
    return [f for f in out.decode().split("\0") if f and (ROOT / f).is_file()]


def sync_tree(tree: Path) -> None:
    """Copy the project's files into ``tree``, only those that changed (mtime kept, so mutmut
    sees unchanged sources as unchanged); files gone from the project are removed."""
    wanted = set(tracked_files())
    for rel in wanted:
        src, dst = ROOT / rel, tree / rel
        if dst.is_file() and dst.read_bytes() == src.read_bytes():
            continue
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dst)
    for path in list((tree / "src").rglob("*.py")) + list((tree / "tests").rglob("*.py")):
        if path.relative_to(tree).as_posix() not in wanted:
            path.unlink()


def write_config(tree: Path, modules: list[str]) -> None:
    """The project's pyproject.toml plus mutmut's section: which files to mutate, the whole
    default suite as the tests to choose from, one thread per worker."""
    text = (ROOT / "pyproject.toml").read_text()
    section = "\n".join([
        "", "[tool.mutmut]",
        'source_paths = ["src"]',
        f"only_mutate = {json.dumps(modules)}",
        'pytest_add_cli_args_test_selection = ["tests"]',
        # what the tests read besides src/ and tests/ (the README, CONTRIBUTING's examples)
        'also_copy = ["README.md", "CONTRIBUTING.md", "docs", "benchmarks", "scripts", ".ci"]',
        # -n 0: mutmut runs pytest in its own process and records which tests reach what
        'pytest_add_cli_args = ["-p", "no:cacheprovider", "-n", "0"]',
        # torch is not fork-safe once its thread pools run: fork workers from a clean server
        'process_isolation = "forkserver"',
        "timeout_multiplier = 10.0", "timeout_constant = 20.0", ""])
    (tree / "pyproject.toml").write_text(text + section)


def mutant_env() -> dict[str, str]:
    """The environment the tests of a mutant run in: one thread, no bars, a fixed hash seed,
    the user's embedding cache left alone, and ../shared/data (the tests' default, seen
    from the scratch copy) named explicitly."""
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", DISEMBED_NUM_THREADS="1",
               DISEMBED_PROGRESS="0", PYTHONHASHSEED="0")
    env.pop("DISEMBED_CACHE_DIR", None)
    data = ROOT.parent / "shared" / "data"
    if "DISEMBED_DATA_DIR" not in env and data.is_dir():
        env["DISEMBED_DATA_DIR"] = str(data)
    return env


def run_mutmut(tree: Path, max_children: int, names: list[str] = ()) -> None:
    """``mutmut run`` in ``tree``: the mutants not tested yet (new, or of a changed
    function), or exactly ``names`` again."""
    env = mutant_env()
    cmd = [sys.executable, "-m", "mutmut", "run", "--max-children", str(max_children)]
    print(f"[mutation] {' '.join(cmd)} {f'<{len(names)} mutants again>' if names else ''} "
          f"(in {tree})", file=sys.stderr, flush=True)
    done = subprocess.run(cmd + list(names), cwd=tree, env=env)
    if done.returncode not in (0, 1):  # 1: some mutants survived, the normal outcome
        raise SystemExit(f"mutmut failed with exit code {done.returncode}; see the output above")


def not_killed(tree: Path, modules: list[str]) -> list[str]:
    """Keys of the mutants an earlier run left alive (mutmut keeps a result until the
    function changes, so a survivor is tested again only when named: new tests may kill
    it)."""
    keys = []
    for path in modules:
        meta = tree / "mutants" / f"{path}.meta"
        if meta.exists():
            codes = json.loads(meta.read_text())["exit_code_by_key"]
            keys += [k for k, c in codes.items()
                     if c is not None and STATUS.get(c, "suspicious") in NOT_KILLED]
    return keys


def function_name(mangled: str) -> str:
    """``x_margin`` -> ``margin``; ``xǁBoundǁcertify`` -> ``Bound.certify``."""
    name = mangled[2:]  # both prefixes are two characters
    return name.replace("ǁ", ".")


def changed_lines(source: list[str], spans: dict, mangled: str, number: str
                  ) -> tuple[list[str], list[str]]:
    """The lines the mutant removed and added, each stripped (``difflib`` over the spans)."""
    def body(name: str) -> list[str]:
        start, end = spans[name]
        return [line.replace(name, "FN") for line in source[start - 1:end]]

    before, after = body(f"{mangled}__mutmut_orig"), body(f"{mangled}__mutmut_{number}")
    removed, added = [], []
    for line in difflib.ndiff(before, after):
        if line.startswith("- "):
            removed.append(line[2:].strip())
        elif line.startswith("+ "):
            added.append(line[2:].strip())
    return removed, added


def collect(tree: Path, modules: list[str]) -> list[Mutant]:
    mutants: list[Mutant] = []
    for path in modules:
        mutated = tree / "mutants" / path
        meta = json.loads(Path(f"{mutated}.meta").read_text())
        spans = json.loads(Path(f"{mutated}.spans").read_text())["spans"]
        source = mutated.read_text().splitlines()
        module = path.removeprefix("src/").removesuffix(".py").replace("/", ".")
        for key, code in meta["exit_code_by_key"].items():
            mangled, _, number = key.removeprefix(module + ".").rpartition("__mutmut_")
            m = Mutant(key, module, function_name(mangled), STATUS.get(code, "suspicious"))
            if m.status in NOT_KILLED:
                m.removed, m.added = changed_lines(source, spans, mangled, number)
            mutants.append(m)
    return mutants


def _norm(lines: list[str]) -> list[str]:
    return [re.sub(r"\s+", "", line) for line in lines]


def load_reasons(folder: Path = REASONS) -> list[dict]:
    """Every ``[[survivor]]`` entry of every ``*.toml`` in ``folder``."""
    return [e for path in sorted(folder.glob("*.toml"))
            for e in tomllib.loads(path.read_text()).get("survivor", [])]


def attach_reasons(mutants: list[Mutant], entries: list[dict]) -> list[dict]:
    """Give each surviving mutant its written reason, if one matches; returns the entries
    for the modules tested that matched nothing (stale: the code they explain changed)."""
    used = [False] * len(entries)
    for m in mutants:
        if m.status not in NOT_KILLED:
            continue
        for i, e in enumerate(entries):
            if (e["module"] == m.module and e["function"] == m.function
                    and _norm(e.get("removed", [])) == _norm(m.removed)
                    and _norm(e.get("added", [])) == _norm(m.added)):
                m.reason, used[i] = e["reason"], True
                break
    tested = {m.module for m in mutants}
    return [e for e, u in zip(entries, used, strict=True) if not u and e["module"] in tested]


def summary_table(mutants: list[Mutant]) -> str:
    """One row per module: mutants, how each ended, and how many need a test or a reason."""
    statuses = ("killed", "timeout", "survived", "no tests")
    rows = ["| module | mutants | killed | timeout (detected) | survived | no tests | other | "
            "explained | unexplained |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for module in sorted({m.module for m in mutants}):
        ms = [m for m in mutants if m.module == module]
        count = [sum(m.status == s for m in ms) for s in statuses]
        left = [m for m in ms if m.status in NOT_KILLED]
        explained = sum(m.reason is not None for m in left)
        rows.append(f"| {module} | {len(ms)} | {' | '.join(map(str, count))} | "
                    f"{len(ms) - sum(count)} | {explained} | {len(left) - explained} |")
    return "\n".join(rows)


def survivors_markdown(mutants: list[Mutant]) -> str:
    out = []
    for m in mutants:
        if m.status not in NOT_KILLED:
            continue
        diff = "\n".join([f"- {x}" for x in m.removed] + [f"+ {x}" for x in m.added])
        reason = m.reason or "**no reason: kill it or explain it**"
        out.append(f"**{m.module}.{m.function}** ({m.status}, `{m.key}`): {reason}\n\n"
                   f"```diff\n{diff}\n```\n")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if importlib.util.find_spec("mutmut") is None:
        raise SystemExit(f"mutmut is not installed for {sys.executable}: install the "
                         "pinned version with  pip install -e '.[dev,mutation]'  and run this "
                         "script with that environment's python")
    modules = [m for g in args.groups.split(",") for m in GROUPS[g]]
    tree = args.workdir / "tree"
    if args.fresh and tree.exists():
        shutil.rmtree(tree)
    started = time.time()
    sync_tree(tree)
    write_config(tree, modules)
    earlier = not_killed(tree, modules)
    run_mutmut(tree, args.max_children)
    still_there = {m.key for m in collect(tree, modules)}
    again = [k for k in earlier if k in still_there]
    if again:
        run_mutmut(tree, args.max_children, again)
    mutants = collect(tree, modules)
    if mutants and all(m.status == "not checked" for m in mutants):
        raise SystemExit("mutmut tested no mutant: the test suite fails in the scratch copy "
                         f"(see above); run pytest in {tree / 'mutants'} to see why")
    stale = attach_reasons(mutants, load_reasons())
    table = summary_table(mutants)
    unexplained = [m for m in mutants if m.status in NOT_KILLED and m.reason is None]
    result = {"modules": modules, "seconds": round(time.time() - started, 1),
              "mutmut": _mutmut_version(), "cpu_flags": _cpu_flags(),
              "load_average": os.getloadavg(), "mutants": [asdict(m) for m in mutants],
              "stale_reasons": stale}
    (args.workdir / "results.json").write_text(json.dumps(result, indent=1, ensure_ascii=False))
    print(table)
    if args.report:
        args.report.write_text(f"{table}\n\n{survivors_markdown(mutants)}")
    for e in stale:
        print(f"[mutation] stale reason (matches no survivor): {e['module']}.{e['function']}",
              file=sys.stderr)
    print(f"[mutation] {len(mutants)} mutants, {len(unexplained)} survivors without a reason; "
          f"{args.workdir / 'results.json'}", file=sys.stderr)
    return 1 if unexplained else 0


def _mutmut_version() -> str:
    from importlib.metadata import version

    return version("mutmut")


def _cpu_flags() -> list[str]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return []
    flags = re.search(r"^flags\s*:\s*(.*)$", text, re.M)
    keep = ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "avx512_vnni")
    return [f for f in (flags.group(1).split() if flags else []) if f in keep]


if __name__ == "__main__":
    raise SystemExit(main())
