"""Experiment 1 of the seed-basin study (issue 37): the default recipe over many training
seeds, with its whole trajectory.

For each seed: the fitted model's history (epochs, best epoch, validation losses), its test
scores on every item (Tatoeba-14, STS17 cross, WMT20 QE; gold tags and untagged), its
validation scores (WMT20 QE dev; xx<->en retrieval of held-out pool pairs when the protocol
has them), and, with ``--trajectory``, the same scores of the weights after every epoch
(test scores here are for understanding only: nothing is chosen on them).

    PYTHONPATH=src python scripts/basins/seeds.py --seeds 0-11 --trajectory \
        --out runs/basins/seeds-main.json                  # the main job's 6,000 pairs

Resumable: seeds already in ``--out`` are skipped.
"""

from __future__ import annotations

import argparse
import copy
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (  # noqa: E402
    Study,
    fmt,
    history_summary,
    load_json,
    main_scores,
    save_json,
    setup_logging,
)

from disembed.evaluation.metrics import retrieval_accuracy  # noqa: E402


def seed_list(text: str) -> list[int]:
    out = []
    for part in text.split(","):
        a, _, b = part.partition("-")
        out += list(range(int(a), int(b) + 1)) if b else [int(a)]
    return out


def heldout_retrieval(model, held) -> float:
    """Mean over languages of xx<->en retrieval of held-out pairs by the meaning part."""
    langs = np.asarray(held.src_lang, dtype=object)
    accs = []
    for lang in dict.fromkeys(held.src_lang):
        rows = langs == lang
        a = model.meaning(held.src[rows], lang)
        b = model.meaning(held.tgt[rows], "en")
        accs.append(retrieval_accuracy(a, b).acc_mean)
    return 100 * float(np.mean(accs))


def validation(study: Study, model, held) -> dict[str, float]:
    out = study.qe_dev(model)
    if held is not None:
        out["heldout_retrieval"] = heldout_retrieval(model, held)
    return out


def trajectory(study: Study, model, states: list[dict], held) -> list[dict]:
    """Scores of the weights after each epoch (test: STS17 and QE; validation: all)."""
    out = []
    probe = copy.deepcopy(model)
    for epoch, state in enumerate(states, start=1):
        probe.head_.load_state_dict(state)
        probe.head_.eval()
        row = {"epoch": epoch, **validation(study, probe, held),
               **main_scores(study.test_scores(probe, ("sts17", "wmt20-qe")))}
        w = probe.head_.meaning.weight.detach().numpy()
        row["dist_identity"] = float(np.linalg.norm(w - np.eye(len(w))))
        out.append(row)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", default="0-5")
    ap.add_argument("--method", default="seed-centered")
    ap.add_argument("--params", default='{"lr": 0.003, "init_scale": 0.9}')
    ap.add_argument("--pairs-per-language", type=int, default=500)
    ap.add_argument("--holdout", type=int, default=0)
    ap.add_argument("--trajectory", action="store_true")
    ap.add_argument("--out", required=True, type=Path)
    args = ap.parse_args()
    setup_logging()
    import json

    params = json.loads(args.params)
    study = Study()
    data, held = study.data(args.pairs_per_language, args.holdout)
    results = load_json(args.out)
    results.setdefault("config", {"method": args.method, "params": params,
                                  "pairs_per_language": args.pairs_per_language,
                                  "holdout": args.holdout, "pairs": len(data),
                                  "digest": data.digest})
    runs = results.setdefault("runs", {})
    for seed in seed_list(args.seeds):
        if str(seed) in runs:
            continue
        states: list[dict] = []
        model_box: list = []

        def snapshot(_record, box=model_box, states=states):
            states.append({k: v.detach().clone() for k, v in box[0].head_.state_dict().items()})

        from disembed.methods import make_method

        model = make_method(args.method, **{**params, "seed": seed})
        model_box.append(model)
        model = _fit(model, data, snapshot)
        row = {"history": history_summary(model), "seconds": model.fit_seconds_,
               "test": main_scores(study.test_scores(model)),
               "validation": validation(study, model, held)}
        if args.trajectory:
            row["trajectory"] = trajectory(study, model, states, held)
        runs[str(seed)] = row
        save_json(args.out, results)
        h = row["history"]
        print(f"seed {seed}: best epoch {h['best_epoch']}/{h['epochs']}  test "  # noqa: T201
              f"{fmt(row['test'])}  dev {row['validation']['qe_dev']:.2f}", flush=True)


def _fit(model, data, snapshot):
    import time

    t0 = time.perf_counter()
    model.fit(data.src, data.tgt, data.src_lang, data.tgt_lang, on_epoch_end=snapshot)
    model.fit_seconds_ = time.perf_counter() - t0
    return model


if __name__ == "__main__":
    main()
