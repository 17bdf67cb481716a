"""Experiment 6 of the seed-basin study (issue 37): the epoch chosen on WMT20 QE dev
instead of the validation loss, on top of ``mirror=True``.

For each seed, both arms of ``mirror=True`` are trained with their weights kept after every
epoch; each epoch's weights are scored on QE dev; the (arm, epoch) with the best QE dev is
scored on every test item, beside the arm ``mirror=True`` keeps (best validation-loss epoch).

    PYTHONPATH=src python scripts/basins/epochs.py --seeds 0-5 --out runs/basins/epochs-main.json
"""

from __future__ import annotations

import argparse
import copy
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import Study, fmt, load_json, main_scores, save_json, setup_logging  # noqa: E402
from seeds import seed_list  # noqa: E402

from disembed.methods import make_method  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", default="0-5")
    ap.add_argument("--params", default='{"lr": 0.003, "init_scale": 0.9}')
    ap.add_argument("--pairs-per-language", type=int, default=500)
    ap.add_argument("--out", required=True, type=Path)
    args = ap.parse_args()
    setup_logging()
    import json

    params = json.loads(args.params)
    study = Study()
    data, _ = study.data(args.pairs_per_language, 0)
    results = load_json(args.out)
    results.setdefault("config", {"params": params, "pairs": len(data), "digest": data.digest})
    runs = results.setdefault("runs", {})
    for seed in seed_list(args.seeds):
        if str(seed) in runs:
            continue
        model = make_method("seed-centered", **{**params, "seed": seed, "mirror": True})
        states: list = []
        model.fit(data.src, data.tgt, data.src_lang, data.tgt_lang,
                  on_epoch_end=lambda _r, m=model, s=states: s.append(
                      {k: v.detach().clone() for k, v in m.head_.state_dict().items()}),
                  validate=lambda m: study.qe_dev(m)["qe_dev"])
        kept = model.orientation_["kept"]
        n_trained = len(model.history_.epochs) if kept == "trained" else len(states) - len(
            model.history_.epochs)
        probe = copy.deepcopy(model)
        devs = []
        for state in states:
            probe.head_.load_state_dict(state)
            devs.append(study.qe_dev(probe)["qe_dev"])
        best = int(np.argmax(devs))
        probe.head_.load_state_dict(states[best])
        runs[str(seed)] = {
            "orientation": model.orientation_, "dev_per_epoch": devs,
            "trained_epochs": n_trained, "chosen_index": best,
            "chosen_arm": "trained" if best < n_trained else "mirrored",
            "kept_test": main_scores(study.test_scores(model)),
            "chosen_test": main_scores(study.test_scores(probe))}
        save_json(args.out, results)
        r = runs[str(seed)]
        print(f"seed {seed}: mirror keeps {kept} -> {fmt(r['kept_test'])}; best dev epoch "  # noqa: T201
              f"{best} ({r['chosen_arm']}, dev {devs[best]:.2f}) -> {fmt(r['chosen_test'])}",
              flush=True)


if __name__ == "__main__":
    main()
