"""BUCC 2018 mining F1 (sample gold, threshold fitted on the gold) for raw and meaning views.

    PYTHONPATH=src python benchmarks/bench_bucc.py --encoder use-m3 --pairs de-en,fr-en,zh-en \
        --methods baseline,seed --train-pairs 2000 --out runs/bucc-use-m3.json \
        --plot docs/mining_bucc_hist.png --backends exact,approx

The same numbers come from ``disembed bench --tasks bucc``; this script adds the score
histograms. Trained methods are trained with the BUCC pools among the evaluation sets
kept out, so no pair sharing a sentence with a BUCC pool is trained on (and the BUCC gold
file is never a training source).
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from pathlib import Path

import numpy as np

from disembed.evaluation.bucc import LASER_F1, BuccTask, best_threshold
from disembed.experiment import RunSpec, TrainingData, open_encoder, run
from disembed.methods import method_class
from disembed.reports.plots import plot_score_histogram

logger = logging.getLogger("bench_bucc")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--encoder", default="use-m3")
    ap.add_argument("--pairs", default="de-en,fr-en,zh-en")
    ap.add_argument("--methods", default="baseline", help="registered method names")
    ap.add_argument("--train-pairs", type=int, default=2000, help="pairs per language")
    ap.add_argument("--train-languages", default="de,fr,zh")
    ap.add_argument("--max-epochs", type=int, default=None, help="trained methods: epoch cap")
    ap.add_argument("--backends", default="exact",
                    help="comma-separated k-NN backends, each mined on the same embeddings "
                         "(e.g. exact,approx,approx@0.99,approx-pq: the approximate path's F1 "
                         "against exact; @R sets the recall target, default 0.98)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--plot", default=None)
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    encoder = open_encoder(RunSpec(encoder=args.encoder))
    tasks = {}
    for name in args.backends.split(","):  # e.g. approx@0.99: the approximate path at recall 0.99
        backend, _, recall = name.partition("@")
        tasks[name] = BuccTask(args.pairs.split(","), backend=backend,
                               recall=float(recall or 0.98))
    data = TrainingData(tuple(args.train_languages.split(",")), args.train_pairs,
                        keep_out=("tatoeba", "sts17", "wmt20-qe", "bucc2018"))
    results, hist = [], {}
    for method in args.methods.split(","):
        params = {"max_epochs": args.max_epochs} if args.max_epochs and "max_epochs" in \
            method_class(method).param_names() else {}
        t0 = time.perf_counter()
        result = run(RunSpec(method=method, params=params, encoder=args.encoder,
                             data=data if method_class(method).needs_data else None, tasks=()),
                     encoder=encoder)
        for subset in next(iter(tasks.values())).load_subsets():
            pair = subset.name
            a = result.model.meaning(encoder.encode(subset.texts_a), subset.lang_a)
            b = result.model.meaning(encoder.encode(subset.texts_b), "en")
            for backend, task in tasks.items():
                t1 = time.perf_counter()
                score, is_gold = task.mine(subset, a, b)
                p, r, f1, threshold = best_threshold(score, is_gold, len(subset.gold_pairs))
                row = {"pair": pair, "method": method, "encoder": args.encoder,
                       "backend": backend, "precision": p, "recall": r, "f1": f1,
                       "threshold": threshold, "mine_seconds": round(time.perf_counter() - t1, 1),
                       "seconds": round(time.perf_counter() - t0, 1), "laser_f1": LASER_F1[pair],
                       "train_pairs": (result.training.get("data") or {}).get("total_pairs", 0)}
                results.append(row)
                hist.setdefault(f"{args.encoder} {method} {pair}", (score, is_gold, threshold))
                logger.info("%s", json.dumps(row))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"config": vars(args), "results": results}, indent=1))
    if args.plot:
        plot_score_histogram(dict(list(hist.items())[:3]), args.plot)
    for r in results:
        logger.info("%-8s %-14s %-9s P %.3f R %.3f F1 %.3f (LASER %.1f) %.1fs", r["pair"],
                    r["method"], r["backend"], r["precision"], r["recall"], r["f1"],
                    r["laser_f1"], r["mine_seconds"])


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
