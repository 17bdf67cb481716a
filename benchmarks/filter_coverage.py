"""Choose the filter's length-coverage weight and slack on validation pairs (not Tatoeba test).

    PYTHONPATH=src python benchmarks/filter_coverage.py --out /tmp/filter_coverage.json

The planted-noise set of benchmarks/bench_filter.py, built the same way from other
sentences: the Tatoeba-Challenge v2021-08-07 pairs of each language (``parallel/``), less
the rows the data flags as overlapping the LASER Tatoeba test, less every pair whose
either side is in that language's Tatoeba test set or in the disentangler's training
pairs; a seeded sample of ``--pool`` of them per language. The disentangler is the
benchmark's (mean-centering on ``build_training_set``). Each language pair is scored as
one chunk with the coverage term off (the margin, the rules, the model's language check,
each pair's length deviation ``z``), then every ``(weight, slack)`` of the grid is
applied: F1 of "keep" at its own F1-best threshold, and the AUC of true pairs against
each noise type. The chosen pair is the F1-best (ties: the smaller weight).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_filter import NOISE, PAIRS, TRAIN, auc, build_pairs, tatoeba_lists  # noqa: E402

from disembed import build_training_set, cached, load_encoder  # noqa: E402
from disembed.data.paths import resolve_data_dir  # noqa: E402
from disembed.data.training_set import _tatoeba_challenge  # noqa: E402
from disembed.experiment.steps import fit_method  # noqa: E402
from disembed.filtering import PairScorer, RuleConfig, choose_threshold, make_check  # noqa: E402
from disembed.filtering.coverage import coverage_penalty  # noqa: E402

WEIGHTS = (0.0, 0.05, 0.1, 0.2, 0.3, 0.5)
SLACKS = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0)


def challenge_lists(pool: int, blocked: set[str], seed: int = 0):
    """A loader for build_pairs: Tatoeba-Challenge pairs free of the Tatoeba test and of
    ``blocked`` (the training sentences), ``pool`` at most per language, cached."""
    root = resolve_data_dir(None) / "parallel"
    memo: dict[str, tuple[list[str], list[str]]] = {}

    def load(lang: str) -> tuple[list[str], list[str]]:
        if lang not in memo:
            test_src, test_en = tatoeba_lists(lang)
            banned = blocked | set(test_src) | set(test_en)
            seen, rows = set(), []
            for s, e in _tatoeba_challenge(root, lang):
                if s in banned or e in banned or e in seen:
                    continue
                seen.add(e)
                rows.append((s, e))
            rng = np.random.default_rng(seed)
            take = rng.permutation(len(rows))[:pool]
            memo[lang] = ([rows[i][0] for i in take], [rows[i][1] for i in take])
        return memo[lang]
    return load


def evaluate(score, reason, label, kind, lang) -> dict:
    ranked = np.where(reason == "", score, score - 1e3)
    choice = choose_threshold(score, label, reason == "")
    per_pair = {x: choose_threshold(score[lang == x], label[lang == x],
                                    reason[lang == x] == "").threshold
                for x in dict.fromkeys(lang.tolist())}
    spread = (max(per_pair.values()) - min(per_pair.values())) / abs(choice.threshold)
    good = ranked[label == 1]
    aucs = {t: auc(good, ranked[kind == t]) for t in NOISE}
    aucs["all"] = auc(good, ranked[label == 0])
    c = choice.chosen
    return {"f1": c.f1, "precision": c.precision, "recall": c.recall,
            "threshold": choice.threshold, "auc": aucs, "per_pair_threshold": per_pair,
            "threshold_spread": spread}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--good", type=int, default=800)
    ap.add_argument("--noise", type=int, default=80)
    ap.add_argument("--pool", type=int, default=2000)
    ap.add_argument("--train", type=int, default=400)
    ap.add_argument("--languages", default=",".join(PAIRS))
    ap.add_argument("--out", default="/tmp/filter_coverage.json")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    encoder = cached(load_encoder("e5-small"))
    train = build_training_set(TRAIN, args.train)
    model = fit_method("mean-centering", encoder, train.pairs)
    load = challenge_lists(args.pool, set(train.pairs.src) | set(train.pairs.tgt))
    rng = np.random.default_rng(1)
    scorer = PairScorer(encoder, model, make_check("model", model),
                        rules=RuleConfig(coverage_weight=0.0))
    margin, cosine, z, reason, label, kind, lang = [], [], [], [], [], [], []
    for x in args.languages.split(","):
        rows = build_pairs(x, args.good, args.noise, encoder, rng, load)
        s = scorer.score([r[0] for r in rows], [r[1] for r in rows], x, "en")
        margin.append(s.score)
        cosine.append(s.cosine)
        z.append(s.length_z)
        reason.append(s.reason)
        label += [r[2] for r in rows]
        kind += [r[3] for r in rows]
        lang += [x] * len(rows)
    margin, z, reason = np.concatenate(margin), np.concatenate(z), np.concatenate(reason)
    label, kind, lang = np.array(label), np.array(kind), np.array(lang)
    cosine = np.concatenate(cosine)  # reference: the plain meaning cosine, no rule
    reference = evaluate(cosine, np.full(len(label), "", object), label, kind, lang)
    grid = []
    for w in WEIGHTS:
        for slack in SLACKS if w else SLACKS[:1]:
            score = margin - coverage_penalty(z, w, slack)
            grid.append({"weight": w, "slack": slack,
                         **evaluate(score, reason, label, kind, lang)})
    best = max(grid, key=lambda g: (round(g["f1"], 4), -g["weight"]))
    report = {"command": " ".join([sys.executable, *sys.argv]), "encoder": "e5-small",
              "pairs": len(label), "languages": args.languages.split(","),
              "training": train.summary(), "grid": grid, "chosen": best,
              "mean-centering cosine": reference}
    Path(args.out).write_text(json.dumps(report, indent=1), encoding="utf-8")
    for g in grid:
        print(f"w {g['weight']:<5} slack {g['slack']:<4} F1 {g['f1']:.3f} "  # noqa: T201
              f"thr {g['threshold']:.3f} spread {g['threshold_spread']:.2f} "
              + " ".join(f"{k}={v:.3f}" for k, v in g["auc"].items()))
    print("cosine: F1 %.3f " % reference["f1"] + " ".join(  # noqa: T201
        f"{k}={v:.3f}" for k, v in reference["auc"].items()))
    print("chosen:", best["weight"], best["slack"])  # noqa: T201


if __name__ == "__main__":
    main()
