"""The default recipe on the training configurations a user would pick (issue 46).

Run (resumable: every finished run is reused, so interrupt and run again)::

    PYTHONPATH=src .venv/bin/python benchmarks/bench_default_panel.py \\
        --sizes 500,5000 --seeds 0,1,2 --out runs/default_panel [--sets-at 5000=0,1,3,4,6]

For each language set of :data:`PANEL` (1 to 12 languages, each with English, across
scripts; the README quickstart's ``de,zh`` and ``de,fr,ru,zh`` among them) and each size
(pairs per language), it trains ``disembed train``'s default recipe with its default
settings (:data:`~disembed.experiment.DEFAULT_RECIPE_PARAMS`) on every seed, and
mean-centering once, through ``disembed scale``'s machinery
(:func:`~disembed.experiment.scaling.run_scaling`, one study folder per set and size; 300
pool pairs per language set aside, as there). Evaluation: Tatoeba-14, STS17 (cross-lingual
tracks) and WMT20 QE test, ``--max-eval-items`` items per language/track/pair (default
300). Each task compares the mean over seeds with mean-centering by the two-level (seeds,
items) paired bootstrap of ``disembed scale``; the p-values of every comparison in the
panel are Holm-corrected together. A configuration **fails** when the default is
significantly below mean-centering on a task (Holm-adjusted p < 0.05 and delta < 0) or its
language part finds more than 5% of Tatoeba translations (``leakage_tatoeba``).

Writes ``<out>/panel.md`` (the table) and ``<out>/panel.json``; prints the table. A set
with a language whose pool is too small for a size is skipped at that size (recorded).
``--finished-only`` renders what has finished without training anything.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path

from disembed.analysis.significance import holm
from disembed.exceptions import DisembedError
from disembed.experiment import DEFAULT_RECIPE, DEFAULT_RECIPE_PARAMS
from disembed.experiment.scaling import ScalingConfig, run_scaling

#: the panel: language sets (each with English) across scripts, 1 to 12 languages
PANEL = (
    ("de",), ("zh",), ("ar",), ("ru",), ("de", "zh"), ("ne", "si"), ("de", "fr", "ru", "zh"),
    ("ar", "tr", "zh"), ("es", "fr", "it", "nl"), ("ar", "de", "ne", "ru", "si", "zh"),
    ("de", "es", "fr", "it", "nl", "ro", "tr"),
    ("ar", "de", "es", "fr", "it", "ne", "nl", "ro", "ru", "si", "tr", "zh"),
    ("ar", "de", "es", "et", "fr", "it", "ne", "nl", "ro", "si", "tr", "zh"),
)
TASKS = ("tatoeba", "sts17", "wmt20-qe")
LEAKAGE_LIMIT = 5.0
ALPHA = 0.05


def study(languages: tuple[str, ...], size: int, seeds: list[int], args) -> ScalingConfig:
    return ScalingConfig(
        encoder=args.encoder, methods=["mean-centering", DEFAULT_RECIPE], sizes=[size],
        seeds=seeds, languages=list(languages), holdout_per_language=300, tasks=list(TASKS),
        max_eval_items=args.max_eval_items,
        task_options={"tatoeba": {"languages": "tatoeba-14"}},
        params={DEFAULT_RECIPE: dict(DEFAULT_RECIPE_PARAMS)}, n_resamples=args.n_resamples,
        out_dir=str(Path(args.out) / f"{'-'.join(languages)}" / str(size)),
        finished_only=args.finished_only)


def run_one(languages, size, seeds, args) -> dict | None:
    """One configuration: its comparisons (gold tags) and its default's summary row."""
    try:
        result = run_scaling(study(languages, size, seeds, args))
    except DisembedError as exc:  # a pool too small for this size, or nothing finished
        logging.warning("%s at %d: skipped (%s)", ",".join(languages), size, exc)
        return {"languages": ",".join(languages), "size": size, "skipped": str(exc)}
    rows = {r["method"]: r for r in result.extras["points"]}
    if DEFAULT_RECIPE not in rows or "mean-centering" not in rows:
        return {"languages": ",".join(languages), "size": size, "skipped": "not finished"}
    return {"languages": ",".join(languages), "size": size,
            "seeds": rows[DEFAULT_RECIPE]["seeds"],
            "default": rows[DEFAULT_RECIPE], "reference": rows["mean-centering"],
            "comparisons": [c for c in result.comparisons if c["view"] == "meaning"],
            "kept": [(r.training.get("reference_check") or {}).get("summary", "(none)")
                     for r in result.runs if r.method == DEFAULT_RECIPE],
            "validation": sorted({str(r.training.get("validation")) for r in result.runs
                                  if r.method == DEFAULT_RECIPE})}


def judge(entries: list[dict]) -> None:
    """Holm over every comparison of the panel; mark each configuration pass/fail."""
    comps = [c for e in entries if "comparisons" in e for c in e["comparisons"]]
    for c, p in zip(comps, holm([c["p_value"] for c in comps]), strict=True):
        c["p_panel"] = float(p)
    for e in entries:
        if "comparisons" not in e:
            continue
        below = [c["task"] for c in e["comparisons"]
                 if c["delta"] < 0 and c["p_panel"] < ALPHA]
        leak = 100 * e["default"]["leakage_tatoeba"]
        e["below"], e["leakage"] = below, leak
        e["passes"] = not below and leak <= LEAKAGE_LIMIT


def render(entries: list[dict]) -> str:
    lines = ["| languages (x-en) | pairs/lang | seeds | " + " | ".join(
        f"{t}: default - mean-centering [95% CI]" for t in TASKS)
        + " | leakage | passes |", "|---|---:|---:|" + "---|" * len(TASKS) + "---:|---|"]
    for e in entries:
        if "comparisons" not in e:
            lines.append(f"| {e['languages']} | {e['size']} | - | " + " | ".join(
                "-" for _ in TASKS) + f" | - | not run: {e['skipped']} |")
            continue
        by_task = {c["task"]: c for c in e["comparisons"]}
        cells = []
        for t in TASKS:
            c = by_task.get(t)
            cells.append("-" if c is None else
                         f"{100 * c['mean_a']:.2f} vs {100 * c['mean_b']:.2f}: "
                         f"{100 * c['delta']:+.2f} [{100 * c['ci_low']:+.2f}, "
                         f"{100 * c['ci_high']:+.2f}] p_Holm {c['p_panel']:.2g}")
        lines.append(f"| {e['languages']} | {e['size']} | {e['seeds']} | " + " | ".join(cells)
                     + f" | {e['leakage']:.1f} | {'yes' if e['passes'] else 'NO'} |")
    return "\n".join(lines)


def _sets(which: str) -> tuple[tuple[str, ...], ...]:
    return PANEL if which == "all" else tuple(PANEL[int(i)] for i in which.split(","))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--encoder", default="e5-small")
    ap.add_argument("--sizes", default="500,5000")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--sets", default="all",
                    help="'all' or indices into PANEL, comma-separated (0-based)")
    ap.add_argument("--sets-at", action="append", default=[], metavar="SIZE=I,J",
                    help="other sets at one size, e.g. 5000=0,1,3,4,6 (repeatable)")
    ap.add_argument("--max-eval-items", type=int, default=300)
    ap.add_argument("--n-resamples", type=int, default=2000)
    ap.add_argument("--out", default="runs/default_panel")
    ap.add_argument("--finished-only", action="store_true")
    ap.add_argument("--combine", nargs="+", metavar="PANEL_JSON", default=None,
                    help="fit nothing: join the panel.json of earlier runs (e.g. one per "
                         "size), Holm over all their comparisons together, write to --out")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    os.environ.setdefault("DISEMBED_PROGRESS", "0")
    if args.combine:
        entries = [e for path in args.combine
                   for e in json.loads(Path(path).read_text(encoding="utf-8"))]
    else:
        seeds = [int(s) for s in args.seeds.split(",")]
        at = dict(item.split("=", 1) for item in args.sets_at)
        entries = [run_one(langs, int(size), seeds, args) for size in args.sizes.split(",")
                   for langs in _sets(at.get(size, args.sets))]
    judge(entries)
    table = render(entries)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "panel.md").write_text(table + "\n", encoding="utf-8")
    (Path(args.out) / "panel.json").write_text(json.dumps(entries, indent=1, default=float),
                                                encoding="utf-8")
    print(table)  # noqa: T201
    failed = [e for e in entries if e.get("passes") is False]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
