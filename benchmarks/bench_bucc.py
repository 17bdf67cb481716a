"""BUCC 2018 mining F1 (sample gold, threshold fitted on the gold) for raw and meaning views.

    PYTHONPATH=src python benchmarks/bench_bucc.py --encoder use-m3 --pairs de-en,fr-en,zh-en \
        --methods raw,seed --train-pairs 2000 --out runs/bucc-use-m3.json \
        --plot docs/mining_bucc_hist.png

``seed`` is trained on pairs from ``build_training_set`` with the BUCC pools among
the evaluation sets, so no pair sharing a sentence with a BUCC pool is trained on
(and the BUCC gold file is never a training source).
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from pathlib import Path

import numpy as np

from disembed import build_training_set, cached, fit_method, load_encoder
from disembed.mining import MineConfig, normalize_rows
from disembed.mining.bucc import LASER_F1, evaluate_bucc, load_bucc
from disembed.reports.plots import plot_score_histogram

logger = logging.getLogger("bench_bucc")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--encoder", default="use-m3")
    ap.add_argument("--pairs", default="de-en,fr-en,zh-en")
    ap.add_argument("--methods", default="raw", help="raw and/or registered method names")
    ap.add_argument("--train-pairs", type=int, default=2000, help="pairs per language")
    ap.add_argument("--train-languages", default="de,fr,zh")
    ap.add_argument("--max-epochs", type=int, default=None, help="neural methods: epoch cap")
    ap.add_argument("--backend", default="exact")
    ap.add_argument("--out", required=True)
    ap.add_argument("--plot", default=None)
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    encoder = cached(load_encoder(args.encoder))
    pairs = args.pairs.split(",")
    config = MineConfig(k=4, margin="ratio", mode="max-score", backend=args.backend)
    results, hist = [], {}
    for method in args.methods.split(","):
        model, train_info = None, {}
        if method != "raw":
            langs = args.train_languages.split(",")
            train = build_training_set(langs, args.train_pairs,
                                       eval_sets=("tatoeba", "sts17", "wmt20-qe", "bucc2018"))
            params = {"max_epochs": args.max_epochs} if args.max_epochs and method != \
                "mean-centering" else {}
            model = fit_method(method, encoder, train.pairs, params=params)
            train_info = {"train_pairs": len(train.pairs), "languages": langs}

        def embed(texts, lang, model=model):
            X = encoder.encode(texts)
            return normalize_rows(model.meaning(X, lang) if model is not None else X)

        for pair in pairs:
            t0 = time.perf_counter()
            res, score, is_gold = evaluate_bucc(load_bucc(pair), embed, config)
            row = {**res.to_dict(), "method": method, "encoder": args.encoder,
                   "seconds": round(time.perf_counter() - t0, 1), "laser_f1": LASER_F1[pair],
                   **train_info}
            results.append(row)
            hist[f"{args.encoder} {method} {pair}"] = (score, is_gold, res.threshold)
            logger.info("%s", json.dumps(row))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"config": vars(args), "results": results}, indent=1))
    if args.plot:
        keys = [k for k in hist if k.endswith(pairs[-1])] + [k for k in hist
                                                            if not k.endswith(pairs[-1])]
        plot_score_histogram({k: hist[k] for k in keys[:3]}, args.plot)
    for r in results:
        logger.info("%-8s %-6s P %.3f R %.3f F1 %.3f (LASER %.1f)", r["pair"], r["method"],
                    r["precision"], r["recall"], r["f1"], r["laser_f1"])


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
