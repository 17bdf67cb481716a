"""Experiment 2 of the seed-basin study (issue 37): which of the things a training seed
draws decides the basin?

A training seed of a trained recipe draws three things in the trainer (the head starts at
0.9 x identity, so its initialisation draws nothing): the validation split (``seed``), the
shuffling and training negatives (one generator, ``seed + 1``) and the validation
negatives (``seed + 2``). Here each is given its own seed, in a full factorial over
``--split-seeds`` x ``--order-seeds`` (validation negatives follow ``--valneg`` or the
order seed), and every run is scored on the test sets (for understanding only) and on the
validation data.

    PYTHONPATH=src python scripts/basins/factors.py --split-seeds 0-5 --order-seeds 0-5 \
        --out runs/basins/factors-main.json

Resumable: cells already in ``--out`` are skipped.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (  # noqa: E402
    Study,
    fmt,
    history_summary,
    load_json,
    main_scores,
    save_json,
    setup_logging,  # noqa: E402
)
from seeds import seed_list, validation  # noqa: E402

from disembed.methods import make_method  # noqa: E402
from disembed.training import trainer  # noqa: E402


@contextlib.contextmanager
def seeds_apart(split: int, order: int, valneg: int):
    """Within: the trainer's validation split from ``split``, its shuffling and training
    negatives from ``order``, its validation negatives from ``valneg``."""
    real_split, real_init, real_validate = (trainer.PairData.split, trainer.init_state,
                                            trainer.validate)

    def split_(src, tgt, s, t, config):
        return real_split(src, tgt, s, t, dataclasses.replace(config, seed=split))

    def init_(module, config, **kw):
        state = real_init(module, config, **kw)
        state.generator = torch.Generator().manual_seed(order + 1)
        return state

    def validate_(state, data, config, loss_fn):
        return real_validate(state, data, dataclasses.replace(config, seed=valneg), loss_fn)

    trainer.PairData.split, trainer.init_state, trainer.validate = (
        split_, init_, validate_)
    try:
        yield
    finally:
        trainer.PairData.split, trainer.init_state, trainer.validate = (
            real_split, real_init, real_validate)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--split-seeds", default="0-5")
    ap.add_argument("--order-seeds", default="0-5")
    ap.add_argument("--valneg", type=int, default=None,
                    help="one validation-negatives seed for all (default: the order seed)")
    ap.add_argument("--method", default="seed-centered")
    ap.add_argument("--params", default='{"lr": 0.003, "init_scale": 0.9}')
    ap.add_argument("--pairs-per-language", type=int, default=500)
    ap.add_argument("--holdout", type=int, default=0)
    ap.add_argument("--out", required=True, type=Path)
    args = ap.parse_args()
    setup_logging()
    params = json.loads(args.params)
    study = Study()
    data, held = study.data(args.pairs_per_language, args.holdout)
    results = load_json(args.out)
    results.setdefault("config", {"method": args.method, "params": params,
                                  "pairs": len(data), "digest": data.digest,
                                  "valneg": args.valneg})
    cells = results.setdefault("cells", {})
    for split in seed_list(args.split_seeds):
        for order in seed_list(args.order_seeds):
            key = f"{split},{order}"
            if key in cells:
                continue
            valneg = order if args.valneg is None else args.valneg
            model = make_method(args.method, **params)
            t0 = time.perf_counter()
            with seeds_apart(split, order, valneg):
                model.fit(data.src, data.tgt, data.src_lang, data.tgt_lang)
            cells[key] = {"history": history_summary(model),
                          "seconds": time.perf_counter() - t0,
                          "test": main_scores(study.test_scores(model)),
                          "validation": validation(study, model, held)}
            save_json(args.out, results)
            h = cells[key]["history"]
            print(f"split {split} order {order}: best {h['best_epoch']}/{h['epochs']}  "  # noqa: T201
                  f"test {fmt(cells[key]['test'])}  dev "
                  f"{cells[key]['validation']['qe_dev']:.2f}", flush=True)


if __name__ == "__main__":
    main()
