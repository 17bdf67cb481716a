"""Why the default recipe drifts on small language sets (issue 46, docs/default_panel.md).

Run:  PYTHONPATH=src .venv/bin/python scripts/default_drift.py de,fr,ru,zh 500 0,1 \
          '{"batch_size": 225}'

Trains ``seed-centered`` (lr 3e-3 from 0.9 x identity, ``mirror=False``; the JSON argument
overrides settings) on LANGUAGES x SIZE pool pairs (300 per language set aside, as
``disembed scale``) for each seed and prints: epochs, best epoch, steps, the head's distance
from the identity, its bias length; then, for the head blended with mean-centering at
alpha 1, 0.75, 0.5, 0.25, the test scores (Tatoeba-14 / STS17 / WMT20 QE at 300 items,
Tatoeba by the language part) and held-out retrieval and cosine margin on the set-aside
pairs (per language). Mean-centering first, for reference.
"""

from __future__ import annotations

import json
import sys
import time

import numpy as np
import torch

from disembed.evaluation import EvalOptions
from disembed.evaluation.metrics import l2_normalize, retrieval_accuracy
from disembed.experiment.spec import RunSpec, TrainingData, Workspace
from disembed.experiment.steps import embed_pairs, evaluate, load_training_set, open_encoder
from disembed.methods import make_method

TASKS = ("tatoeba", "sts17", "wmt20-qe")
OPTIONS = EvalOptions(max_items=300, task_options={"tatoeba": {"languages": "tatoeba-14"}})


def heldout(model, held, hs, ht) -> tuple[float, float]:
    """Mean over languages of held-out retrieval and cosine margin (x100)."""
    acc, marg = [], []
    for lang in sorted(set(held.src_lang)):
        idx = [i for i, x in enumerate(held.src_lang) if x == lang]
        ms = model.meaning(hs[idx], [lang] * len(idx))
        mt = model.meaning(ht[idx], ["en"] * len(idx))
        acc.append(retrieval_accuracy(ms, mt).acc_mean)
        sims = l2_normalize(ms) @ l2_normalize(mt).T
        gold = np.diag(sims)
        marg.append(float(np.mean(gold - (sims.sum(1) - gold) / (len(gold) - 1))))
    return 100 * float(np.mean(acc)), 100 * float(np.mean(marg))


def test(model, encoder, workspace) -> tuple[float, ...]:
    by = {s.task: s for s in evaluate(model, encoder, TASKS, options=OPTIONS,
                                      data_dir=workspace.data_dir)}
    return (100 * by["tatoeba"].main_score("meaning"), 100 * by["sts17"].main_score("meaning"),
            100 * by["wmt20-qe"].main_score("meaning"),
            100 * by["tatoeba"].main_score("language"))


def line(model, encoder, workspace, held, hs, ht) -> str:
    return ("test %.2f %.2f %.2f leak %.2f" % test(model, encoder, workspace)
            + "  held-out retrieval %.2f margin %.2f" % heldout(model, held, hs, ht))


def main() -> None:
    langs, size = tuple(sys.argv[1].split(",")), int(sys.argv[2])
    seeds = [int(s) for s in sys.argv[3].split(",")]
    extra = json.loads(sys.argv[4]) if len(sys.argv) > 4 else {}
    workspace = Workspace()
    encoder = open_encoder(RunSpec(encoder="e5-small"), workspace)
    built = load_training_set(TrainingData(langs, size, holdout_per_language=300), TASKS,
                              workspace)
    src, tgt = embed_pairs(encoder, built.pairs)
    hs, ht = embed_pairs(encoder, built.heldout)
    args = (encoder, workspace, built.heldout, hs, ht)
    mc = make_method("mean-centering").fit(src, tgt, built.pairs.src_lang, built.pairs.tgt_lang)
    print("pairs", len(built.pairs), "held out", len(built.heldout))  # noqa: T201
    print("mean-centering:", line(mc, *args), flush=True)  # noqa: T201
    for seed in seeds:
        params = {"lr": 3e-3, "init_scale": 0.9, "mirror": False, "seed": seed, **extra}
        model, t0 = make_method("seed-centered", **params), time.time()
        model.fit(src, tgt, built.pairs.src_lang, built.pairs.tgt_lang)
        weight = model.head_.meaning.weight.detach().numpy().copy()
        bias = model.head_.meaning.bias.detach().numpy().copy()
        eye, h = np.eye(len(weight)), model.history_
        print(f"seed {seed}: {time.time() - t0:.1f}s epochs {len(h.epochs)} best "  # noqa: T201
              f"{h.best_epoch} steps {h.steps} |W-I| {np.linalg.norm(weight - eye):.3f} "
              f"|W-0.9I| {np.linalg.norm(weight - 0.9 * eye):.3f} "
              f"mean diag {np.trace(weight) / len(weight):.3f} |b| {np.linalg.norm(bias):.3f}")
        for alpha in (1.0, 0.75, 0.5, 0.25):
            with torch.no_grad():
                model.head_.meaning.weight.copy_(torch.tensor(alpha * weight
                                                              + (1 - alpha) * eye))
                model.head_.meaning.bias.copy_(torch.tensor(alpha * bias))
            print(f"   alpha {alpha}:", line(model, *args), flush=True)  # noqa: T201


if __name__ == "__main__":
    main()
