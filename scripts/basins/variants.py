"""Experiment 4 of the seed-basin study (issue 37): training variants of the default recipe
that might land every seed in the same basin, per training seed, on validation data and
(for understanding) every test item.

A variant is ``name=key:value,key:value``; keys are the recipe's parameters (``lr``,
``init_scale``, ``batch_size``, ``patience``, ``val_fraction``, ...) plus three that only this
prototype patches into the trainer: ``warmup`` (optimiser steps of linear learning-rate
warm-up from 0), ``eps`` (Adam's epsilon) and ``betas`` (``b1/b2``).

    PYTHONPATH=src python scripts/basins/variants.py --seeds 0-5 \
        --variants "lr1e-3=lr:0.001" "warm50=warmup:50" --out runs/basins/variants-main.json
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (  # noqa: E402
    fmt,
    history_summary,
    main_scores,
    open_study,
    save_json,  # noqa: E402
)
from seeds import seed_list, validation  # noqa: E402

from disembed.methods import make_method  # noqa: E402
from disembed.training import trainer  # noqa: E402

DEFAULT = {"lr": 3e-3, "init_scale": 0.9}
PATCHED = ("warmup", "eps", "betas", "bias")
#: the direction ``bias:c`` starts the head's bias along (c times the unit vector): the final
#: bias of a first fit (seed 0) of the default recipe, saved by candidates.py
BIAS_FROM = Path("runs/basins/cand-main-seed0.npz")


def parse(spec: str) -> tuple[str, dict, dict]:
    name, _, rest = spec.partition("=")
    params, patches = dict(DEFAULT), {}
    for item in filter(None, rest.split(",")):
        key, _, value = item.partition(":")
        if key == "betas":
            parsed = tuple(float(x) for x in value.split("/"))
        elif value in ("None", "none"):
            parsed = None
        elif value in ("True", "False"):
            parsed = value == "True"
        else:
            try:
                parsed = int(value)
            except ValueError:
                try:
                    parsed = float(value)
                except ValueError:
                    parsed = value
        (patches if key in PATCHED else params)[key] = parsed
    return name, params, patches


@contextlib.contextmanager
def patched(warmup: int = 0, eps: float | None = None, betas: tuple | None = None,
            bias: float | None = None):
    real_init = trainer.init_state

    def init_(module, config, **kw):
        if bias is not None:
            import numpy as np
            import torch

            b = np.load(BIAS_FROM)["b"]
            with torch.no_grad():
                module.meaning.bias.copy_(torch.as_tensor(bias * b / np.linalg.norm(b),
                                                          dtype=torch.float32))
        state = real_init(module, config, **kw)
        for group in state.optimizer.param_groups:
            if eps is not None:
                group["eps"] = eps
            if betas is not None:
                group["betas"] = betas
        if warmup:
            step, count = state.optimizer.step, [0]

            def warm_step(*a, **k):
                count[0] += 1
                for group in state.optimizer.param_groups:
                    group["lr"] = config.lr * min(1.0, count[0] / warmup)
                return step(*a, **k)

            state.optimizer.step = warm_step
        return state

    trainer.init_state = init_
    try:
        yield
    finally:
        trainer.init_state = real_init


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", default="0-5")
    ap.add_argument("--variants", nargs="+", required=True)
    ap.add_argument("--method", default="seed-centered")
    ap.add_argument("--pairs-per-language", type=int, default=500)
    ap.add_argument("--holdout", type=int, default=0)
    ap.add_argument("--no-test", action="store_true")
    ap.add_argument("--out", required=True, type=Path)
    args = ap.parse_args()
    study, data, held, results = open_study(args, method=args.method)
    out = results.setdefault("variants", {})
    for spec in args.variants:
        name, params, patches = parse(spec)
        per_seed = out.setdefault(name, {"spec": spec, "seeds": {}})["seeds"]
        for seed in seed_list(args.seeds):
            if str(seed) in per_seed and (args.no_test or "test" in per_seed[str(seed)]):
                continue
            model = make_method(args.method, **{**params, "seed": seed})
            t0 = time.perf_counter()
            kwargs = {}
            if params.get("mirror"):  # the two arms chosen on WMT20 QE dev (as run() does)
                kwargs["validate"] = lambda m: study.qe_dev(m)["qe_dev"]
            with patched(**patches):
                model.fit(data.src, data.tgt, data.src_lang, data.tgt_lang, **kwargs)
            row = {"history": history_summary(model), "seconds": time.perf_counter() - t0,
                   "orientation": getattr(model, "orientation_", None),
                   "validation": validation(study, model, held)}
            if not args.no_test:
                row["test"] = main_scores(study.test_scores(model))
            per_seed[str(seed)] = row
            save_json(args.out, results)
            h = row["history"]
            print(f"{name} seed {seed}: best {h['best_epoch']}/{h['epochs']}  dev "  # noqa: T201
                  f"{row['validation']['qe_dev']:.2f}"
                  + (f"  test {fmt(row['test'])}" if "test" in row else ""), flush=True)


if __name__ == "__main__":
    main()
