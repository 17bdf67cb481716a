"""Experiment 5 of the seed-basin study (issue 37): what tells the two basins apart without
a test set?

For each seed: arm A is the default recipe as it is; arm B the same seed with the meaning
bias started at ``-eps`` times the unit direction of A's final bias (so it ends in the
other basin). For both arms: WMT20 QE dev (gold tags and untagged), and label-free
statistics of the meaning part on the trainer's own validation split (the 10% of the
training pairs the seed holds out) and on the pool's held-out pairs: the mean cosine of
translations, of same-language non-translations, their margin, and xx<->en retrieval.

    PYTHONPATH=src python scripts/basins/arms.py --seeds 0-5 --holdout 300 \
        --out runs/basins/arms-500.json
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import history_summary, open_study, save_json  # noqa: E402
from seeds import heldout_retrieval, seed_list  # noqa: E402

from disembed.methods import make_method  # noqa: E402
from disembed.training.batches import PairData  # noqa: E402

DEFAULT = {"lr": 3e-3, "init_scale": 0.9}


def label_free(model, src, tgt, src_lang, tgt_lang) -> dict[str, float]:
    """Mean cosine of translations and of shifted same-language pairs, and their margin."""
    a = model.meaning(src, list(src_lang))
    b = model.meaning(tgt, list(tgt_lang))
    a = a / np.linalg.norm(a, axis=1, keepdims=True)
    b = b / np.linalg.norm(b, axis=1, keepdims=True)
    trans = float(np.mean(np.sum(a * b, axis=1)))
    langs = np.asarray(src_lang, dtype=object)
    neg = []
    for lang in dict.fromkeys(src_lang):
        rows = np.flatnonzero(langs == lang)
        if len(rows) > 1:
            neg.append(np.sum(a[rows] * b[np.roll(rows, 1)], axis=1))
    other = float(np.mean(np.concatenate(neg)))
    return {"cos_translation": 100 * trans, "cos_other": 100 * other,
            "margin": 100 * (trans - other)}


def fit(data, seed: int, bias=None):
    model = make_method("seed-centered", **{**DEFAULT, "seed": seed})
    if bias is not None:
        real = model._new_head

        def new_head(dim, real=real):
            head = real(dim)
            with torch.no_grad():
                head.meaning.bias.copy_(torch.as_tensor(bias, dtype=torch.float32))
            return head

        model._new_head = new_head
    model.fit(data.src, data.tgt, data.src_lang, data.tgt_lang)
    return model


def measures(study, model, data, held, seed: int) -> dict:
    config = model.train_config
    split = PairData.split(data.src, data.tgt, np.zeros(len(data)), np.zeros(len(data)),
                           config)
    val = split.val_idx.numpy()
    out = {**study.qe_dev(model), "history": history_summary(model),
           "bias": model.head_.meaning.bias.detach().numpy().tolist(),
           "val": label_free(model, data.src[val], data.tgt[val],
                             [data.src_lang[i] for i in val], [data.tgt_lang[i] for i in val])}
    if held is not None:
        out["heldout"] = label_free(model, held.src, held.tgt, held.src_lang, held.tgt_lang)
        out["heldout"]["retrieval"] = heldout_retrieval(model, held)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", default="0-5")
    ap.add_argument("--pairs-per-language", type=int, default=500)
    ap.add_argument("--holdout", type=int, default=300)
    ap.add_argument("--eps", type=float, default=0.05)
    ap.add_argument("--out", required=True, type=Path)
    args = ap.parse_args()
    study, data, held, results = open_study(args, eps=args.eps)
    runs = results.setdefault("runs", {})
    for seed in seed_list(args.seeds):
        if str(seed) in runs:
            continue
        a = fit(data, seed)
        b_a = a.head_.meaning.bias.detach().numpy()
        b = fit(data, seed, bias=-args.eps * b_a / np.linalg.norm(b_a))
        runs[str(seed)] = {"A": measures(study, a, data, held, seed),
                           "B": measures(study, b, data, held, seed)}
        save_json(args.out, results)
        ra, rb = runs[str(seed)]["A"], runs[str(seed)]["B"]
        cos_ab = float(np.dot(ra["bias"], rb["bias"]) / np.linalg.norm(ra["bias"])
                       / np.linalg.norm(rb["bias"]))
        print(f"seed {seed}: dev A {ra['qe_dev']:.2f} B {rb['qe_dev']:.2f}  cos(bA,bB) "  # noqa: T201
              f"{cos_ab:.2f}  val margin A {ra['val']['margin']:.2f} B "
              f"{rb['val']['margin']:.2f}  val trans A {ra['val']['cos_translation']:.2f} B "
              f"{rb['val']['cos_translation']:.2f}", flush=True)


if __name__ == "__main__":
    main()
