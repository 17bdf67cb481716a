"""Semantic mutation testing (issue 32): realistic bugs written by hand, one at a time, and
whether the default test suite notices each.

    python benchmarks/semantic_mutants.py                          # every mutant
    python benchmarks/semantic_mutants.py --packages evaluation,data
    python benchmarks/semantic_mutants.py --only subsample-pairs-kept-items-with-first-gold
    python benchmarks/semantic_mutants.py --check                  # do all still apply? (fast)
    python benchmarks/semantic_mutants.py --confirm                # survivors vs the whole suite

mutmut (``mutation_testing.py``) changes operators: a ``<`` for a ``<=``, a ``None`` for a
value. The bugs people really make are larger and carry meaning: a subsample that pairs the
kept items with the first N gold scores, a cache key that forgets an input, a choice made on
the test split, a source and target swapped. Each mutant here models one such bug:

    [[mutant]]                                     # benchmarks/semantic_mutants/<package>.toml
    name = "subsample-pairs-kept-items-with-first-gold"   # the bug it models
    class = "graded-task subsampling"              # its failure class
    file = "src/disembed/evaluation/base.py"
    anchor = "PairedSubset.take"                   # function, Class.method, or "<module>"
    before = "self.gold[idx]"                      # the exact code now ...
    after = "self.gold[: len(idx)]"                # ... and with the bug
    tests = ["tests/evaluation/test_subsample.py"] # optional: run these first
    why = "what a user would see"

A mutant is applied to a scratch copy of the project (``--workdir``, default
``runs/semantic-mutants``; the working tree is never touched): ``before`` must occur exactly
once inside ``anchor`` (whitespace between tokens may differ, so reformatting does not break
a mutant; a multi-line ``after`` is re-indented to where ``before`` starts). The mutated file
must still compile. Then ``pytest -x`` runs the mutant's package selection (:data:`SELECTION`,
after the mutant's own ``tests``) with ``-m 'not slow'``, i.e. the default suite's tests for
that package, with the mutated ``src`` first on ``PYTHONPATH``.

Outcomes: **killed** (a test failed: the first failing test is recorded), **survived** (every
test passed), **timeout** (ran past ``--timeout``; counted as detected, reported apart),
**does not apply** (``before`` is no longer in ``anchor``, or is there twice, or the anchor is
gone: the code changed and the mutant must be rewritten to model the same bug in the new code),
**broken** (the mutated file does not compile: a wrong mutant), **baseline failed** (the
unmutated selection fails; nothing can be judged). Survivors need a written reason in
``benchmarks/mutation_reasons/semantic.toml`` (``[[semantic]] name = ..., reason = ...``).

The script prints a table per package, writes ``results.json`` and ``results.md`` into
``--workdir``, and exits 1 on any survivor without a reason, any mutant that does not apply,
any broken mutant or a failed baseline. ``--confirm`` re-runs each survivor against the whole
default suite (``pytest -x tests``: slower, but the done-when is "killed by the default
suite"). ``--check`` only applies every mutant (no tests): a second, so a refactor that
makes mutants stale is found at once (CI runs it).
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parent.parent
MUTANTS = ROOT / "benchmarks" / "semantic_mutants"
REASONS = ROOT / "benchmarks" / "mutation_reasons" / "semantic.toml"

#: package -> the default-suite tests run against its mutants (after a mutant's own
#: ``tests``). Each package's own folder, plus the folders whose tests drive that package
#: end to end (the CLI verbs, the experiment runs, the service, the reliability checks).
SELECTION: dict[str, tuple[str, ...]] = {
    "analysis": ("tests/analysis", "tests/experiment/test_scaling.py", "tests/cli/test_analyse.py"),
    "cli": ("tests/cli", "tests/reliability/test_cli_outcomes.py", "tests/test_readme.py"),
    "data": ("tests/data", "tests/test_readme.py"),
    "encoders": ("tests/encoders", "tests/test_cache.py"),
    "evaluation": ("tests/evaluation",),
    "experiment": ("tests/experiment", "tests/cli/test_train_defaults.py"),
    "filtering": ("tests/filtering",),
    "methods": ("tests/methods",),
    "mining": ("tests/mining",),
    "reports": ("tests/reports", "tests/experiment/test_scaling.py"),
    "retrieval": ("tests/retrieval", "tests/mining/test_knn.py", "tests/mining/test_margin.py"),
    "serving": ("tests/serving", "tests/reliability/test_service_seams.py",
                "tests/reliability/test_service_bad_inputs.py"),
    "training": ("tests/training",),
}

APPLIES, MISSING, AMBIGUOUS, NO_ANCHOR, SAME = ("ok", "snippet not found in anchor",
                                                 "snippet found more than once in anchor",
                                                 "anchor not found", "after equals before")
DETECTED = ("killed", "timeout")


@dataclass
class Mutant:
    name: str
    klass: str
    file: str
    anchor: str
    before: str
    after: str
    package: str
    why: str = ""
    tests: list[str] = field(default_factory=list)
    timeout: float | None = None  # seconds; default: from the selection's baseline


@dataclass
class Outcome:
    name: str
    package: str
    klass: str
    file: str
    anchor: str
    status: str
    detail: str = ""  # the first failing test, or why it does not apply
    seconds: float = 0.0
    tests: list[str] = field(default_factory=list)
    reason: str | None = None
    confirmed: str | None = None  # whole-suite result of a survivor (--confirm)


# -- reading the mutants ---------------------------------------------------------------------

def load_mutants(folder: Path = MUTANTS) -> list[Mutant]:
    """Every ``[[mutant]]`` of every ``*.toml`` in ``folder``; names must be unique."""
    out: list[Mutant] = []
    for path in sorted(folder.glob("*.toml")):
        for entry in tomllib.loads(path.read_text(encoding="utf-8")).get("mutant", []):
            missing = [k for k in ("name", "class", "file", "anchor", "before", "after")
                       if k not in entry]
            if missing:
                raise SystemExit(f"{path}: mutant {entry.get('name', '?')!r} lacks {missing}")
            package = entry.get("package") or _package_of(entry["file"])
            out.append(Mutant(entry["name"], entry["class"], entry["file"], entry["anchor"],
                              entry["before"], entry["after"], package, entry.get("why", ""),
                              list(entry.get("tests", [])), entry.get("timeout")))
    names = [m.name for m in out]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise SystemExit(f"mutant names must be unique; repeated: {dupes}")
    return out


def _package_of(file: str) -> str:
    parts = Path(file).parts  # src/disembed/<package>/...
    return parts[2] if len(parts) > 3 else Path(parts[-1]).stem


#: mutmut group -> the tests of its modules (``--from-reasons``)
REASON_TESTS: dict[str, tuple[str, ...]] = {
    "constraints": ("tests/methods/test_constraints.py", "tests/methods/test_recipe_losses.py",
                    "tests/methods/test_seed_loss.py"),
    "knn": ("tests/retrieval", "tests/mining/test_knn.py", "tests/mining/test_knn_properties.py"),
    "margins": ("tests/mining/test_margin.py", "tests/mining/test_knn_properties.py"),
    "significance": ("tests/analysis",),
    "checkpoint": ("tests/training/test_checkpoint.py",),
    "centring": ("tests/methods/test_centering.py",),
}


def reason_mutants(folder: Path = REASONS.parent) -> list[Mutant]:
    """The accepted survivors of the mutmut campaign (``benchmarks/mutation_reasons/<group>
    .toml``) as mutants: to re-test them under other library versions (``--python`` of a
    minimal-versions venv), where an equivalence argument may not hold."""
    out = []
    for path in sorted(folder.glob("*.toml")):
        if path.stem not in REASON_TESTS:
            continue
        entries = tomllib.loads(path.read_text(encoding="utf-8")).get("survivor", [])
        for i, e in enumerate(entries):
            file = "src/" + e["module"].replace(".", "/") + ".py"
            name = e["function"].split(".")[-1]  # mutmut writes a def line's name as FN

            def lines(key, name=name, e=e):
                return "\n".join(re.sub(r"\bFN\b", name, x) for x in e.get(key, []))

            out.append(Mutant(f"{path.stem}-{i:03d}-{e['function']}", "mutmut survivor", file,
                              e["function"], lines("removed"), lines("added"), path.stem,
                              e["reason"].split(".")[0], list(REASON_TESTS[path.stem])))
    return out


def load_reasons(path: Path = REASONS) -> dict[str, str]:
    if not path.is_file():
        return {}
    return {e["name"]: e["reason"]
            for e in tomllib.loads(path.read_text(encoding="utf-8")).get("semantic", [])}


# -- applying one mutant ---------------------------------------------------------------------

def _pattern(snippet: str) -> re.Pattern:
    """``snippet`` as a regex in which whitespace between any two characters may differ."""
    chars = [re.escape(c) for c in re.sub(r"\s+", "", snippet)]
    return re.compile(r"\s*".join(chars))


def anchor_span(source: str, anchor: str) -> tuple[int, int] | None:
    """Character offsets of ``anchor`` (a function, ``Class.method`` or ``<module>``)."""
    if anchor == "<module>":
        return 0, len(source)
    tree = ast.parse(source)
    starts = [0]
    for line in source.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))

    def find(nodes, names):
        for node in nodes:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) \
                    and node.name == names[0]:
                if len(names) == 1:
                    first = min([node.lineno] + [d.lineno for d in node.decorator_list])
                    return starts[first - 1], starts[node.end_lineno]
                return find(node.body, names[1:])
        return None

    return find(tree.body, anchor.split("."))


def apply(source: str, mutant: Mutant) -> tuple[str, str]:
    """``(status, mutated source)``; status is :data:`APPLIES` or why it does not apply."""
    if re.sub(r"\s+", "", mutant.before) == re.sub(r"\s+", "", mutant.after):
        return SAME, source
    span = anchor_span(source, mutant.anchor)
    if span is None:
        return NO_ANCHOR, source
    body = source[span[0]:span[1]]
    hits = list(_pattern(mutant.before).finditer(body))
    if not hits:
        return MISSING, source
    if len(hits) > 1:
        return AMBIGUOUS, source
    start, end = span[0] + hits[0].start(), span[0] + hits[0].end()
    line_start = source.rfind("\n", 0, start) + 1
    indent = re.match(r"[ \t]*", source[line_start:]).group(0)
    first, *rest = textwrap.dedent(mutant.after.strip("\n")).split("\n")
    lines = [first.lstrip()] + [(indent + x) if x.strip() else x for x in rest]
    return APPLIES, source[:start] + "\n".join(lines) + source[end:]


def check_all(mutants: list[Mutant], root: Path = ROOT) -> list[Outcome]:
    """Apply every mutant in memory: which no longer apply, which break the file."""
    out = []
    for m in mutants:
        path = root / m.file
        if not path.is_file():
            out.append(_outcome(m, "does not apply", f"{m.file} is gone"))
            continue
        status, mutated = apply(path.read_text(encoding="utf-8"), m)
        if status != APPLIES:
            out.append(_outcome(m, "does not apply", f"{status} ({m.anchor})"))
            continue
        try:
            compile(mutated, str(path), "exec")
        except SyntaxError as exc:
            out.append(_outcome(m, "broken", f"line {exc.lineno}: {exc.msg}"))
            continue
        out.append(_outcome(m, "applies"))
    return out


def _outcome(m: Mutant, status: str, detail: str = "", **kw) -> Outcome:
    return Outcome(m.name, m.package, m.klass, m.file, m.anchor, status, detail, **kw)


# -- running the tests -----------------------------------------------------------------------

def tracked_files() -> list[str]:
    out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                         cwd=ROOT, check=True, capture_output=True).stdout
    return [f for f in out.decode().split("\0") if f and (ROOT / f).is_file()]


def make_tree(tree: Path) -> None:
    """A fresh copy of the project's files (tracked and untracked, unignored) in ``tree``."""
    if tree.exists():
        shutil.rmtree(tree)
    for rel in tracked_files():
        dst = tree / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, dst)


def shared_data_dir() -> Path | None:
    """``../shared/data`` beside the main checkout (a worktree's parent may not have it)."""
    common = subprocess.run(["git", "rev-parse", "--path-format=absolute", "--git-common-dir"],
                            cwd=ROOT, capture_output=True, text=True).stdout.strip()
    for base in (ROOT, Path(common).parent if common else ROOT):
        candidate = base.parent / "shared" / "data"
        if candidate.is_dir():
            return candidate.resolve()
    return None


def test_env(tree: Path, data_dir: str | None) -> dict[str, str]:
    """One thread, no bars, fixed hash seed, no bytecode (a mutant and the original may have
    the same size and second), a private cache, the mutated tree first on the path."""
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", DISEMBED_NUM_THREADS="1",
               DISEMBED_PROGRESS="0", PYTHONHASHSEED="0", PYTHONDONTWRITEBYTECODE="1",
               PYTHONPATH=str(tree / "src"))
    env.pop("DISEMBED_CACHE_DIR", None)
    if data_dir is None:
        env.pop("DISEMBED_DATA_DIR", None)
    else:
        env["DISEMBED_DATA_DIR"] = data_dir
    return env


def run_pytest(tree: Path, tests: list[str], env: dict, timeout: float) -> tuple[str, str, float]:
    """``(status, first failing test or error line, seconds)`` of ``pytest -x`` in ``tree``."""
    # -n 0: one process (pyproject's addopts spread the suite over the cores); the mutant's
    # own tests run first and -x stops at the first failure, as documented
    cmd = [PYTHON[0], "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-n", "0",
           "-m", "not slow", "--no-header", "-rfE", *tests]
    t0 = time.perf_counter()
    # a session of its own: on a timeout the whole group goes (servers, workers a test started)
    with subprocess.Popen(cmd, cwd=tree, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, start_new_session=True) as proc:
        try:
            text, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            return "timeout", f"over {timeout:.0f} s", time.perf_counter() - t0
    seconds = time.perf_counter() - t0
    if proc.returncode == 0:
        return "survived", "", seconds
    if proc.returncode == 1:
        return "killed", _first_failure(text), seconds
    if proc.returncode in (2, 3):  # interrupted / internal error: e.g. an import fails
        return "killed", "error: " + _first_failure(text), seconds
    return f"error (pytest exit {proc.returncode})", text[-400:], seconds


def _first_failure(text: str) -> str:
    m = re.search(r"^(?:FAILED|ERROR) (\S+)", text, re.M)
    if m:
        return m.group(1)
    m = re.search(r"^_{3,} (.+?) _{3,}$", text, re.M)
    return m.group(1) if m else text.strip().splitlines()[-1][:200] if text.strip() else ""


#: ``--tests``: run these instead of every mutant's selection
OVERRIDE: list[str] = []
#: ``--python``: the interpreter that runs the tests
PYTHON: list[str] = [sys.executable]


def selection(m: Mutant) -> list[str]:
    if OVERRIDE:
        return list(OVERRIDE)
    default = () if m.klass == "mutmut survivor" else ("tests",)  # those name their tests
    return list(dict.fromkeys(m.tests + list(SELECTION.get(m.package, default))))


class Worker:
    """One scratch copy of the project; mutants run in it one at a time."""

    def __init__(self, tree: Path, data_dir: str | None) -> None:
        self.tree, self.env = tree, test_env(tree, data_dir)
        make_tree(tree)
        probe = subprocess.run([PYTHON[0], "-c", "import disembed; print(disembed.__file__)"],
                               cwd=tree, env=self.env, capture_output=True, text=True)
        if not probe.stdout.strip().startswith(str(tree)):
            raise SystemExit(f"the scratch copy's disembed is not imported from {tree} "
                             f"(got {probe.stdout.strip() or probe.stderr[-300:]}); is another "
                             "disembed installed in a way that wins over PYTHONPATH?")

    def run(self, m: Mutant, timeout: float, tests: list[str] | None = None) -> Outcome:
        path = self.tree / m.file
        original = path.read_bytes()
        status, mutated = apply(original.decode("utf-8"), m)
        if status != APPLIES:
            return _outcome(m, "does not apply", f"{status} ({m.anchor})")
        try:
            compile(mutated, str(path), "exec")
        except SyntaxError as exc:
            return _outcome(m, "broken", f"line {exc.lineno}: {exc.msg}")
        tests = tests or selection(m)
        try:
            path.write_text(mutated, encoding="utf-8")
            status, detail, seconds = run_pytest(self.tree, tests, self.env, timeout)
        finally:
            path.write_bytes(original)
        return _outcome(m, status, detail, seconds=round(seconds, 1), tests=tests)

    def baseline(self, tests: list[str], timeout: float) -> tuple[str, str, float]:
        return run_pytest(self.tree, tests, self.env, timeout)


# -- the campaign ----------------------------------------------------------------------------

def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--packages", help=f"comma-separated, of: {', '.join(SELECTION)}")
    p.add_argument("--only", help="comma-separated mutant names")
    p.add_argument("--workdir", type=Path, default=ROOT / "runs" / "semantic-mutants")
    p.add_argument("--jobs", type=int, default=1, help="mutants tested at once (own copies)")
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds per mutant")
    p.add_argument("--data-dir", default="auto",
                   help="DISEMBED_DATA_DIR for the tests: a folder, 'none' (no real data: "
                        "what a fresh clone has) or 'auto' (the caller's $DISEMBED_DATA_DIR, "
                        "else ../shared/data beside the main checkout; default)")
    p.add_argument("--no-baseline", action="store_true",
                   help="skip running each selection unmutated first")
    p.add_argument("--tests", help="comma-separated test paths to run instead of each mutant's "
                                   "selection (to see whether a new test kills chosen mutants)")
    p.add_argument("--confirm", action="store_true",
                   help="re-run each survivor against the whole default suite")
    p.add_argument("--check", action="store_true", help="only check that every mutant applies")
    p.add_argument("--from-reasons", action="store_true",
                   help="test the mutmut campaign's accepted survivors (mutation_reasons/*.toml) "
                        "instead, e.g. under --python of a minimal-versions venv")
    p.add_argument("--python", default=sys.executable,
                   help="the interpreter that runs the tests (default: this one)")
    p.add_argument("--list", action="store_true", help="list the mutants and exit")
    return p.parse_args(argv)


def choose(mutants: list[Mutant], args: argparse.Namespace) -> list[Mutant]:
    if args.packages:
        wanted = set(args.packages.split(","))
        unknown = wanted - {m.package for m in mutants}
        if unknown:
            raise SystemExit(f"no mutants for package(s) {sorted(unknown)}")
        mutants = [m for m in mutants if m.package in wanted]
    if args.only:
        names = args.only.split(",")
        unknown = set(names) - {m.name for m in mutants}
        if unknown:
            raise SystemExit(f"unknown mutant(s) {sorted(unknown)}")
        mutants = [m for m in mutants if m.name in names]
    return mutants


def resolve_data(arg: str, scratch: Path) -> str | None:
    if arg == "none":
        empty = scratch / "no-data"
        empty.mkdir(parents=True, exist_ok=True)
        return str(empty)
    if arg == "auto":
        if os.environ.get("DISEMBED_DATA_DIR"):
            return os.environ["DISEMBED_DATA_DIR"]
        found = shared_data_dir()
        return None if found is None else str(found)
    return str(Path(arg).resolve())


def campaign(mutants: list[Mutant], args: argparse.Namespace, data_dir: str | None
             ) -> tuple[list[Outcome], dict]:
    jobs = max(1, min(args.jobs, len(mutants)))
    workers = [Worker(args.workdir / f"tree-{i}", data_dir) for i in range(jobs)]
    baselines: dict = {}
    if not args.no_baseline:
        for tests in dict.fromkeys(tuple(selection(m)) for m in mutants):
            status, detail, seconds = workers[0].baseline(list(tests), args.timeout)
            baselines[" ".join(tests)] = {"status": status, "detail": detail,
                                          "seconds": round(seconds, 1)}
            print(f"[semantic] baseline {status:9s} {seconds:7.1f} s  {' '.join(tests)}"
                  + (f"  {detail}" if detail else ""), file=sys.stderr, flush=True)
    todo = list(mutants)
    results: list[Outcome] = []

    def work(worker: Worker) -> None:
        while True:
            try:
                m = todo.pop(0)
            except IndexError:
                return
            base = baselines.get(" ".join(selection(m)))
            if base is not None and base["status"] != "survived":
                out = _outcome(m, "baseline failed", base["detail"])
            else:
                out = worker.run(m, limit(m, base, args.timeout))
            results.append(out)
            print(f"[semantic] {out.status:14s} {out.seconds:7.1f} s  {m.package:10s} {m.name}"
                  + (f"  ({out.detail})" if out.detail else ""), file=sys.stderr, flush=True)

    with ThreadPoolExecutor(jobs) as pool:
        for f in [pool.submit(work, w) for w in workers]:
            f.result()
    order = {m.name: i for i, m in enumerate(mutants)}
    results.sort(key=lambda o: order[o.name])
    if args.confirm:
        for out in results:
            if out.status == "survived":
                m = next(x for x in mutants if x.name == out.name)
                whole = workers[0].run(m, args.timeout * 4, tests=["tests"])
                out.confirmed = whole.status + (f" ({whole.detail})" if whole.detail else "")
                print(f"[semantic] whole suite: {out.confirmed}  {m.name}", file=sys.stderr,
                      flush=True)
    return results, baselines


def limit(m: Mutant, base: dict | None, ceiling: float) -> float:
    """Seconds a mutant's tests may run: its own ``timeout``, else 5x the selection's
    baseline (at least 2 minutes), never over ``--timeout``."""
    if m.timeout:
        return float(m.timeout)
    return ceiling if base is None else min(ceiling, max(120.0, 5 * base["seconds"]))


def table(results: list[Outcome]) -> str:
    """One row per package and a total: how each mutant ended."""
    cols = ("killed", "timeout", "survived", "does not apply", "other")
    rows = ["| package | mutants | killed | timeout | survived (reason) | does not apply | "
            "other |", "|---|---:|---:|---:|---:|---:|---:|"]

    def counts(group: list[Outcome]) -> list[str]:
        c = {k: 0 for k in cols}
        for o in group:
            c[o.status if o.status in cols else "other"] += 1
        explained = sum(o.status == "survived" and o.reason is not None for o in group)
        return [str(len(group)), str(c["killed"]), str(c["timeout"]),
                f"{c['survived']} ({explained})", str(c["does not apply"]), str(c["other"])]

    for package in sorted({o.package for o in results}):
        rows.append(f"| {package} | " + " | ".join(
            counts([o for o in results if o.package == package])) + " |")
    rows.append("| **all** | " + " | ".join(counts(results)) + " |")
    return "\n".join(rows)


def details(results: list[Outcome]) -> str:
    lines = ["| mutant | class | status | first failing test / reason |", "|---|---|---|---|"]
    for o in results:
        note = o.reason if o.status == "survived" and o.reason else o.detail
        if o.confirmed:
            note = f"{note}; whole suite: {o.confirmed}"
        lines.append(f"| `{o.name}` | {o.klass} | {o.status} | {note} |".replace("\n", " "))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    OVERRIDE[:] = args.tests.split(",") if args.tests else []
    PYTHON[:] = [args.python]
    mutants = choose(reason_mutants() if args.from_reasons else load_mutants(), args)
    if args.list:
        for m in mutants:
            print(f"{m.package:11s} {m.klass:40s} {m.name}")
        print(f"{len(mutants)} mutants", file=sys.stderr)
        return 0
    reasons = load_reasons()
    if args.check:
        results = check_all(mutants)
        bad = [o for o in results if o.status != "applies"]
        for o in bad:
            print(f"[semantic] {o.status}: {o.name} in {o.file}: {o.detail}", file=sys.stderr)
        print(f"[semantic] {len(mutants) - len(bad)} of {len(mutants)} mutants apply",
              file=sys.stderr)
        return 1 if bad else 0
    args.workdir = args.workdir.resolve()  # the tests run inside it: paths must be absolute
    args.workdir.mkdir(parents=True, exist_ok=True)
    data_dir = resolve_data(args.data_dir, args.workdir)
    started = time.time()
    results, baselines = campaign(mutants, args, data_dir)
    stale = explain(results, mutants, reasons, args.from_reasons)
    text = table(results)
    print(text)
    report = {"seconds": round(time.time() - started, 1), "data_dir": data_dir,
              "commit": _commit(), "load_average": os.getloadavg(), "baselines": baselines,
              "python": args.python, "mutants": [asdict(o) for o in results],
              "stale_reasons": stale}
    (args.workdir / "results.json").write_text(json.dumps(report, indent=1, ensure_ascii=False))
    (args.workdir / "results.md").write_text(f"{text}\n\n{details(results)}\n")
    return verdict(results, stale, args)


def explain(results: list[Outcome], mutants: list[Mutant], reasons: dict[str, str],
            from_reasons: bool) -> list[str]:
    """Give each survivor its written reason; returns the reasons that match no survivor
    (stale). ``from_reasons``: the mutants are mutmut's accepted survivors, whose reason is
    the one they were accepted with."""
    by_name = {m.name: m for m in mutants}
    for o in results:
        if o.status == "survived":
            o.reason = by_name[o.name].why if from_reasons else reasons.get(o.name)
    if from_reasons:
        return []
    chosen, known = set(by_name), {m.name for m in load_mutants()}
    return sorted(name for name in reasons if name not in known or (name in chosen and not any(
        o.name == name and o.status == "survived" for o in results)))


def verdict(results: list[Outcome], stale: list[str], args: argparse.Namespace) -> int:
    """Print what needs attention; 1 if anything does. With ``--from-reasons`` that is every
    accepted survivor a test kills here: its written equivalence does not hold for these
    library versions."""
    if args.from_reasons:
        failing = [o for o in results if o.status != "survived"]
    else:
        failing = [o for o in results if o.status not in DETECTED
                   and not (o.status == "survived" and o.reason)]
    for o in failing:
        print(f"[semantic] {o.status.upper()}: {o.name} ({o.file}, {o.anchor})"
              + (f": {o.detail}" if o.detail else ""), file=sys.stderr)
    for name in stale:
        print(f"[semantic] stale reason (no such survivor): {name}", file=sys.stderr)
    print(f"[semantic] {len(results)} mutants, {len(failing)} need attention; "
          f"{args.workdir / 'results.md'}", file=sys.stderr)
    return 1 if failing else 0


def _commit() -> str:
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True,
                          text=True).stdout.strip()


if __name__ == "__main__":
    raise SystemExit(main())
