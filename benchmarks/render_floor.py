"""The tables of docs/benchmarks.md (issue 36) from ``bench_mining_floor.py`` JSON files.

    python benchmarks/render_floor.py runs/floor-of-record/floor-40k.json \
        runs/floor-of-record/floor-100k.json --project 1000000 --project-dim 512

Prints markdown: per file, the machine (CPU model and flags, threads, load average at the
start and end, the command and commit), every phase's best wall seconds and CPU seconds
with the ratios to both product floors, the stages before and after (seconds and shares),
the agreement of the top-k index sets, and the done-when targets met or not; then the
re-projection to ``--project`` rows a side from the largest file.

Re-projection (stage by stage, from the best repeat of each phase): work that touches
every pair (``products``, ``selection``, ``fallback``, both floors, faiss flat) scales with
``(N / n) * (M / m)``; work per row (``copies``: conversion and rounding statistics of the
rows; ``certification``: float32 re-scoring of a fixed number of candidates per list)
with ``(N + M) / (n + m)``. ``--project-dim`` scales what multiplies vectors (products,
floors, faiss, copies, certification, fallback) by ``D / d``; selection reads
similarities and does not depend on it. A stage's wall seconds are its share of the
phase's wall time (the stages of the new search are summed over its workers, so shares,
not sums, carry over). It assumes the rates of the measured size hold at the projected
one (no cache or memory effect with size, the same fraction of lists uncertified).
``--measured S``: a run of the code before that took S seconds at that size is
re-projected to the code after as ``S * projected(after) / projected(before)``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

PAIRWISE = {"products", "selection", "fallback"}
DIM_FREE = {"selection"}
ORDER = ("floor-bf16", "floor-fp32", "before", "exact", "exact-fp32", "exact-bf16",
         "faiss-flat")
LABELS = {"floor-bf16": "bfloat16 product floor", "floor-fp32": "float32 product floor",
          "before": "exact, before issue 36", "exact": "**exact (default), after**",
          "exact-fp32": "exact-fp32, after", "exact-bf16": "exact-bf16, after",
          "faiss-flat": "faiss IndexFlatIP (two searches)"}
STAGES = ("products", "selection", "certification", "copies", "fallback")


def best_runs(report: dict) -> dict:
    best: dict = {}
    for run in report["runs"]:
        if run["phase"] not in best or run["seconds"] < best[run["phase"]]["seconds"]:
            best[run["phase"]] = run
    return best


def phase_table(report: dict, best: dict) -> list[str]:
    secs = {p: r["seconds"] for p, r in best.items()}
    lines = ["| phase | best wall s | CPU s | / bf16 floor | / fp32 floor | all repeats (s) |",
             "|---|---:|---:|---:|---:|---|"]
    for p in (p for p in ORDER if p in best):
        runs = [f"{r['seconds']:.2f}" for r in report["runs"] if r["phase"] == p]
        ratio = [f"{secs[p] / secs[f]:.2f}x" if f in secs else "n/a"
                 for f in ("floor-bf16", "floor-fp32")]
        lines.append(f"| {LABELS[p]} | {secs[p]:.2f} | {best[p].get('cpu_seconds', 0):.2f} | "
                     f"{ratio[0]} | {ratio[1]} | {', '.join(runs)} |")
    return lines


def stage_table(best: dict) -> list[str]:
    phases = [p for p in ("before", "exact", "exact-fp32", "exact-bf16")
              if p in best and "stages" in best[p]]
    if not phases:
        return []
    lines = ["| stage | " + " | ".join(LABELS[p].strip("*") for p in phases) + " |",
             "|---|" + "---:|" * len(phases)]
    for s in STAGES:
        cells = []
        for p in phases:
            st = best[p]["stages"]
            total = sum(st.values()) or 1.0
            cells.append(f"{st.get(s, 0.0):.2f} s ({100 * st.get(s, 0.0) / total:.0f}%)")
        lines.append(f"| {s} | " + " | ".join(cells) + " |")
    lines.append("| wall of the phase | " + " | ".join(f"{best[p]['seconds']:.2f} s"
                                                       for p in phases) + " |")
    return lines


def agreement_lines(report: dict) -> list[str]:
    out = []
    for key, name in (("agreement_exact_vs_exact_fp32", "exact vs exact-fp32 (float32 reference)"),
                      ("agreement_exact_vs_faiss_flat", "exact vs faiss flat")):
        if key not in report:
            continue
        parts = [f"{d}: {a['rows_differing']} of {a['rows']} rows differ"
                 + (f" (exact matches float64 on {a['first_matches_float64']}, the other on "
                    f"{a['second_matches_float64']})" if a["rows_differing"] else "")
                 for d, a in report[key].items()]
        out.append(f"* top-k index sets, {name}: " + "; ".join(parts))
    return out


def targets(report: dict, best: dict) -> list[str]:
    secs = {p: r["seconds"] for p, r in best.items()}
    out = []
    bf16_native = "avx512_bf16" in report["cpu_flags"] or "amx_bf16" in report["cpu_flags"]
    if bf16_native and {"exact", "floor-bf16"} <= secs.keys():
        r = secs["exact"] / secs["floor-bf16"]
        out.append(f"* exact / bfloat16 floor {r:.2f}x (target <= 1.5): "
                   f"{'met' if r <= 1.5 else 'NOT met'}")
    if {"exact", "floor-fp32"} <= secs.keys() and best["exact"].get("precision") == "float32":
        r = secs["exact"] / secs["floor-fp32"]
        out.append(f"* float32 machine: exact / float32 floor {r:.2f}x (target <= 1.3): "
                   f"{'met' if r <= 1.3 else 'NOT met'}")
    agree = report.get("agreement_exact_vs_exact_fp32")
    if agree:
        same = all(a["rows_differing"] == 0 for a in agree.values())
        out.append(f"* identical top-k index sets to the float32 reference: "
                   f"{'yes' if same else 'NO'}")
    return out


def render(report: dict, path: str) -> list[str]:
    best = best_runs(report)
    n, m = report["rows"]
    head = [f"### {n:,} x {m:,} x {report['dim']}, k={report['k']} ({report['data']})", "",
            f"`{path}`: {report.get('cpu_model', '?')}, flags `{report['cpu_flags']}`, "
            f"{report['threads'].get('threads')} threads ({report['threads'].get('source')}), "
            f"bfloat16 faster by the probe: {report['probe'].get('bf16_faster')}; load average "
            f"{report['load_start']} at the start, {report['load_end']} at the end; "
            f"{report['repeats']} repeats, best of each; commit {report.get('commit', '?')}; "
            f"command `{report.get('command', '?')}`.", ""]
    return (head + phase_table(report, best) + [""] + stage_table(best) + [""]
            + agreement_lines(report) + targets(report, best) + [""])


def project(report: dict, rows: int, dim: int | None) -> list[str]:
    best = best_runs(report)
    n, m = report["rows"]
    pair, row = rows * rows / (n * m), 2 * rows / (n + m)
    dscale = (dim or report["dim"]) / report["dim"]
    lines = [f"### Re-projected to {rows:,} x {rows:,} x {dim or report['dim']} "
             f"(from {n:,} x {m:,} x {report['dim']})", "",
             "| phase | projected wall s | products | selection | certification | copies "
             "| fallback |", "|---|---:|---:|---:|---:|---:|---:|"]
    for p in (p for p in ORDER if p in best):
        r = best[p]
        if "stages" not in r:
            lines.append(f"| {LABELS[p]} | {r['seconds'] * pair * dscale:,.0f} |  |  |  |  |  |")
            continue
        total = sum(r["stages"].values()) or 1.0
        cells = {}
        for s in STAGES:
            scale = (pair if s in PAIRWISE else row) * (1.0 if s in DIM_FREE else dscale)
            cells[s] = r["seconds"] * r["stages"].get(s, 0.0) / total * scale
        lines.append(f"| {LABELS[p]} | {sum(cells.values()):,.0f} | "
                     + " | ".join(f"{cells[s]:,.0f}" for s in STAGES) + " |")
    return lines + [""]


def rescale(report: dict, rows: int, dim: int | None, measured: float) -> list[str]:
    """A measured run of the code before (``measured`` s) re-projected to the code after:
    times the ratio of their projected wall times, and against the projected floors."""
    table = {ln.split(" | ")[0].lstrip("| "): float(ln.split(" | ")[1].replace(",", ""))
             for ln in project(report, rows, dim)[4:-1]}
    before, after = table.get(LABELS["before"]), table.get(LABELS["exact"])
    floor = table.get(LABELS["floor-bf16"])
    if not (before and after and floor):
        return ["(re-projection of the measured run needs the before, exact and "
                "floor-bf16 phases)", ""]
    return [f"* measured before issue 36: {measured:,.0f} s; projected after / before "
            f"{after / before:.2f} -> **{measured * after / before:,.0f} s after**; at the "
            f"bfloat16 product floor {measured * floor / before:,.0f} s (after / floor "
            f"{after / floor:.2f}x, before / floor {before / floor:.2f}x)", ""]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("reports", nargs="+", help="bench_mining_floor.py --out files")
    ap.add_argument("--project", type=int, default=None, help="rows a side to re-project to")
    ap.add_argument("--project-dim", type=int, default=None)
    ap.add_argument("--measured", type=float, default=None,
                    help="seconds a run of the code before took at --project rows: "
                    "re-projected to the code after by the projected ratio")
    args = ap.parse_args()
    reports = [(p, json.loads(Path(p).read_text())) for p in args.reports]
    out: list[str] = []
    for path, report in reports:
        out += render(report, path)
    if args.project:
        _, largest = max(reports, key=lambda pr: pr[1]["rows"][0] * pr[1]["rows"][1])
        out += project(largest, args.project, args.project_dim)
        if args.measured:
            out += rescale(largest, args.project, args.project_dim, args.measured)
    print("\n".join(out))  # noqa: T201


if __name__ == "__main__":
    main()
