"""Variants of one recipe side by side: ORACLE's paper vs official forms, linear-map solvers, ...

Run:  PYTHONPATH=src .venv/bin/python benchmarks/bench_recipe_variants.py \
          --encoder use-m3 --pairs-per-language 1000 \
          --variants "oracle+meat" "oracle+meat:oracle_variant=official-new" \
                     "linear-map:solver=procrustes"

Each variant is ``method[:key=value,...]`` (values parsed as JSON when they parse,
else kept as strings). Training data and evaluation follow ``disembed bench`` with
the same settings (same overlap-free training set, same tasks); embeddings come
from the shared cache. Prints one markdown summary table (x100) and, for
``linear-map``, the mean of each map diagnostic over languages.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import time

import numpy as np

from disembed.evaluation import DEFAULT_TASKS
from disembed.experiment import DEFAULT_TRAIN_LANGUAGES, BenchConfig, RunSpec, open_encoder, run
from disembed.reports.tables import summary_table


def parse_variant(spec: str) -> tuple[str, dict]:
    name, _, rest = spec.partition(":")
    params = {}
    for item in filter(None, rest.split(",")):
        key, _, value = item.partition("=")
        try:
            params[key] = json.loads(value)
        except ValueError:
            params[key] = value
    return name, params


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--encoder", default="use-m3")
    ap.add_argument("--languages", default=",".join(DEFAULT_TRAIN_LANGUAGES))
    ap.add_argument("--pairs-per-language", type=int, default=1000)
    ap.add_argument("--tasks", default=",".join(DEFAULT_TASKS))
    ap.add_argument("--variants", nargs="+", required=True)
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    os.environ.setdefault("DISEMBED_PROGRESS", "0")
    config = BenchConfig(encoders=[args.encoder], languages=args.languages.split(","),
                         pairs_per_language=args.pairs_per_language,
                         tasks=args.tasks.split(","))
    encoder = open_encoder(RunSpec(encoder=args.encoder))
    rows, notes, pairs = [], [], 0
    for spec in args.variants:
        name, params = parse_variant(spec)
        t0 = time.perf_counter()
        result = run(RunSpec(method=name, params=params, encoder=args.encoder,
                             data=config.training_data(), tasks=tuple(config.tasks),
                             evaluation=config.eval_options(), label=spec), encoder=encoder)
        model, pairs = result.model, result.training["data"]["total_pairs"]
        rows += [(spec, s) for s in result.scores]
        hist = getattr(model, "history_", None)
        note = f"{spec}: {time.perf_counter() - t0:.0f} s"
        if hist is not None:
            note += f", {len(hist.epochs)} epochs (best {hist.best_epoch})"
        diag = getattr(model, "diagnostics_", None)
        if diag:
            keys = [("matrix", k) for k in ("p_mean_abs", "alpha_mean", "alpha_cv")] + [
                ("heldout", k) for k in ("dD", "dC", "fD", "fC")]
            means = {k: np.mean([d[g][k] for d in diag.values()]) for g, k in keys}
            note += ", mean over languages " + ", ".join(f"{k} {v:.3f}" for k, v in means.items())
        notes.append(note)
    print(f"{args.encoder}, {pairs} training pairs "  # noqa: T201
          f"({args.pairs_per_language} per language, {len(config.languages)} languages)\n")
    print(summary_table(rows))  # noqa: T201
    print("\n" + "\n".join(f"- {n}" for n in notes))  # noqa: T201
    print(f"\nloadavg {os.getloadavg()}")  # noqa: T201


if __name__ == "__main__":
    main()
