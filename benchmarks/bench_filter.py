"""Bitext filtering with planted noise: disembed filter beside the field's filters, one run.

    PYTHONPATH=src python benchmarks/bench_filter.py --out /tmp/bench_filter.json

**Data.** For each of de-en, ru-en, zh-en and ar-en (``--languages``), ``--good`` true
pairs from the Tatoeba test set (LASER v1, ``/work/shared/data/tatoeba``) and ``--noise``
planted noisy pairs of each type, built from other pairs of the same set:

* ``copy``: the source as its own target, half exact, half near (case changed, last word
  dropped); ``untranslated``: the target is the next source-language sentence;
* ``third_language``: the target is a translation of the source in a third language (the
  same English sentence in another Tatoeba set: fr, ja, nl, ...);
* ``misaligned``: the target is the English sentence nearest to the true one (raw e5
  cosine), topically close and wrong; ``partial``: the target's first half only (sentences
  of 6+ words);
* ``nonsense``: number-, URL- or boilerplate-only lines; ``length``: the true target
  followed by three other sentences; ``swapped``: the sides exchanged.

Pairs of even index form the validation split (every threshold is chosen there, ours and
the baselines'), odd ones the test split (every figure). AUC of each noise type: good vs
that type on the test split (ties count half), from each method's continuous score;
F1 of "keep" at the validation threshold.

**Methods.** ``disembed`` (the filter: rules, the model's language identifier on each
side, ratio margin of the meaning cosine less the length-coverage penalty; a rule drop
ranks below every kept pair); ``disembed+langid`` (langid instead of the model's
identifier); ``disembed, margin only`` (the filter without the length-coverage term);
OpusFilter 3.3.1's LengthRatioFilter (char, 3), CharacterScoreFilter (each side's script, 1.0),
TerminalPunctuationFilter (-2), NonZeroNumeralsFilter (0.5) and its LangidFilter (its
``confidence`` re-run with langid 1.1.6: OpusFilter's own needs py3langid's removed
``from_pickled_model``), as all-must-pass plus the sum of its scores for AUC;
bicleaner-hardrules' rules re-implemented (its package needs fasttext, which does not
build here: see docs/filtering.md); LASER-style ratio margin on the raw embeddings;
mean-centering's meaning cosine. The disentangler is mean-centering fitted on
``build_training_set`` pairs (no Tatoeba test sentence in them) for de, ru, zh, ar, fr, ja
(``--train-languages``; default: ``--languages`` then those, six in all).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from filter_baselines import bicleaner_rules, opusfilter_scores  # noqa: E402

from disembed import build_training_set, cached, load_encoder  # noqa: E402
from disembed.data.tatoeba import load_tatoeba  # noqa: E402
from disembed.experiment.steps import fit_method  # noqa: E402
from disembed.filtering import (  # noqa: E402
    PairScorer,
    RuleConfig,
    choose_threshold,
    make_check,
)
from disembed.retrieval.knn import normalize_rows  # noqa: E402

PAIRS = ("de", "ru", "zh", "ar")
THIRD = ("fr", "ja", "nl", "pt", "pl", "es", "it", "de", "zh", "ar", "ru", "tr")
TRAIN = ["de", "ru", "zh", "ar", "fr", "ja"]
NOISE = ("copy", "untranslated", "third_language", "misaligned", "partial", "nonsense",
         "length", "swapped")
BOILERPLATE = ["123 456", "https://www.example.com/index.html", "Home | About | Contact",
               "© 2021", "+49 30 1234567", "12.05.2019", "www.shop.de/warenkorb", "* * *",
               "Page 3 of 12", "info@example.org"]
logger = logging.getLogger("bench_filter")


def _near_copy(text: str) -> str:
    words = text.split()
    return " ".join(words[:-1]).lower() if len(words) > 2 else text.upper()


def tatoeba_lists(lang: str) -> tuple[list[str], list[str]]:
    """``(sentences of lang, their English translations)``: the Tatoeba test set."""
    ts = load_tatoeba(lang)
    return list(ts.source), list(ts.english)


def build_pairs(lang: str, n_good: int, n_noise: int, encoder, rng, load=tatoeba_lists
                ) -> list[tuple]:
    """``(src, tgt, label, type)`` rows for ``lang``-en (module docstring) from the
    translations ``load(lang)`` gives (the third-language targets from ``load(other)``)."""
    src, en = load(lang)
    order = rng.permutation(len(src))
    good, rest = order[:n_good], order[n_good:]
    rows = [(src[i], en[i], 1, "good") for i in good]
    pick = iter(rng.permutation(rest).tolist() * 4)

    def take(n, ok=lambda i: True):
        out = []
        while len(out) < n:
            i = next(pick)
            if ok(i):
                out.append(i)
        return out
    rows += [(src[i], src[i] if k % 2 == 0 else _near_copy(src[i]), 0, "copy")
             for k, i in enumerate(take(n_noise))]
    rows += [(src[i], src[(i + 1) % len(src)], 0, "untranslated") for i in take(n_noise)]
    third = {}
    for other in THIRD:
        if other == lang:
            continue
        o_src, o_en = load(other)
        for e, s in zip(o_en, o_src, strict=True):
            third.setdefault(e, s)
    with_third = [i for i in rest if en[i] in third]
    rows += [(src[i], third[en[i]], 0, "third_language")
             for i in rng.permutation(with_third)[:n_noise]]
    E = normalize_rows(encoder.encode(en, batch_size=64))
    sims = E @ E.T
    np.fill_diagonal(sims, -1)
    rows += [(src[i], en[int(sims[i].argmax())], 0, "misaligned") for i in take(n_noise)]
    rows += [(src[i], " ".join(en[i].split()[: len(en[i].split()) // 2]), 0, "partial")
             for i in take(n_noise, lambda i: len(en[i].split()) >= 6)]
    rows += [(b, b, 0, "nonsense") if k % 2 == 0 else (src[i], b, 0, "nonsense")
             for k, (i, b) in enumerate(zip(take(n_noise), rng.choice(BOILERPLATE, n_noise),
                                            strict=True))]
    rows += [(src[i], " ".join([en[i], *rng.choice(en, 3)]), 0, "length") for i in take(n_noise)]
    rows += [(en[i], src[i], 0, "swapped") for i in take(n_noise)]
    return rows


def auc(pos: np.ndarray, neg: np.ndarray) -> float:
    """P(score of a good pair > score of a noisy one), ties counting half."""
    if not len(pos) or not len(neg):
        return float("nan")
    greater = (pos[:, None] > neg[None, :]).mean()
    ties = (pos[:, None] == neg[None, :]).mean()
    return float(greater + 0.5 * ties)


def ours(scorer: PairScorer, src, tgt, lang) -> np.ndarray:
    s = scorer.score(src, tgt, lang, "en")
    return np.where(s.reason == "", s.score, s.score - 1e3)  # a rule drop ranks below all


def evaluate(name: str, score: np.ndarray, label, kind, split, decision=None) -> dict:
    val, test = split == 0, split == 1
    if decision is None:
        choice = choose_threshold(score[val], label[val], np.ones(val.sum(), bool))
        decision = score >= choice.threshold
        threshold = choice.threshold
        on_val = {"precision": choice.chosen.precision, "recall": choice.chosen.recall}
    else:
        threshold, on_val = None, None
    keep, lab = decision[test], label[test].astype(bool)
    tp = int((keep & lab).sum())
    p, r = tp / max(int(keep.sum()), 1), tp / max(int(lab.sum()), 1)
    out = {"method": name, "threshold": threshold, "validation": on_val, "precision": p,
           "recall": r,
           "f1": 2 * p * r / (p + r) if tp else 0.0, "auc": {}}
    good = score[test & (label == 1)]
    for t in NOISE:
        out["auc"][t] = auc(good, score[test & (kind == t)])
    out["auc"]["all"] = auc(good, score[test & (label == 0)])
    return out


def per_pair_thresholds(score, label, lang, split) -> dict:
    """The F1-best threshold of each language pair alone (validation): calibration."""
    out = {}
    for x in sorted(set(lang.tolist()), key=lang.tolist().index):
        m = (lang == x) & (split == 0)
        out[x] = choose_threshold(score[m], label[m], np.ones(m.sum(), bool)).threshold
    return out


def main() -> None:  # noqa: PLR0915 - one straight script
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--good", type=int, default=400)
    ap.add_argument("--noise", type=int, default=40)
    ap.add_argument("--train", type=int, default=400, help="training pairs per language")
    ap.add_argument("--encoder", default="e5-small")
    ap.add_argument("--languages", default=",".join(PAIRS),
                    help="the X of the X-en pairs (Tatoeba test sets), comma-separated")
    ap.add_argument("--train-languages", default=None,
                    help="the disentangler's training languages (default: --languages, "
                         "then fr, ja, de, ru up to six)")
    ap.add_argument("--out", default="/tmp/bench_filter.json")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    load = lambda: os.getloadavg()[0]  # noqa: E731
    t0, load0 = time.time(), load()
    encoder = cached(load_encoder(args.encoder))
    rng = np.random.default_rng(0)
    rows, lang = [], []
    pairs = args.languages.split(",")
    train_langs = (args.train_languages.split(",") if args.train_languages else
                   list(dict.fromkeys([*pairs, *TRAIN]))[:max(6, len(pairs))])
    for x in pairs:
        got = build_pairs(x, args.good, args.noise, encoder, rng)
        rows += got
        lang += [x] * len(got)
    src = [r[0] for r in rows]
    tgt = [r[1] for r in rows]
    label = np.array([r[2] for r in rows])
    kind = np.array([r[3] for r in rows])
    lang = np.array(lang)
    split = np.arange(len(rows)) % 2
    train = build_training_set(train_langs, args.train)
    model = fit_method("mean-centering", encoder, train.pairs)
    results, scores = [], {}
    margin_only = RuleConfig(coverage_weight=0.0)  # the score before the length coverage
    checks = {"disembed": (make_check("model", model), RuleConfig()),
              "disembed+langid": (make_check("langid", None, [*train_langs, "en"]),
                                  RuleConfig()),
              "disembed, margin only": (make_check("model", model), margin_only)}
    timing = {}
    for name, (check, rules) in checks.items():
        scorer = PairScorer(encoder, model, check, rules=rules)
        score = np.zeros(len(rows))
        t = time.perf_counter()
        for x in pairs:
            m = np.flatnonzero(lang == x)
            score[m] = ours(scorer, [src[i] for i in m], [tgt[i] for i in m], x)
        timing[name] = (time.perf_counter() - t) / len(rows)
        scores[name] = score
        results.append(evaluate(name, score, label, kind, split))
    raw = PairScorer(encoder, None, None, rules=margin_only)  # LASER's margin, as it is
    mc = PairScorer(encoder, model, None)
    for name, scorer in (("raw margin (LASER)", raw), ("mean-centering cosine", mc)):
        score = np.zeros(len(rows))
        for x in pairs:
            m = np.flatnonzero(lang == x)
            s = scorer.score([src[i] for i in m], [tgt[i] for i in m])
            score[m] = s.score if scorer is raw else s.cosine
        scores[name] = score
        results.append(evaluate(name, score, label, kind, split))
    t = time.perf_counter()
    opus_sum, opus_pass = opusfilter_scores(src, tgt, lang)
    timing["opusfilter"] = (time.perf_counter() - t) / len(rows)
    results.append(evaluate("OpusFilter (5 filters)", opus_sum, label, kind, split, opus_pass))
    t = time.perf_counter()
    bic = bicleaner_rules(src, tgt, lang)
    timing["bicleaner-hardrules"] = (time.perf_counter() - t) / len(rows)
    results.append(evaluate("bicleaner-hardrules (rules)", bic.astype(float), label, kind,
                            split, bic))
    calibration = {name: per_pair_thresholds(scores[name], label, lang, split)
                   for name in ("disembed", "mean-centering cosine", "raw margin (LASER)")}
    calibration["mean-centering cosine (plain cosine, reference)"] = calibration.pop(
        "mean-centering cosine")
    report = {"command": " ".join([sys.executable, *sys.argv]), "encoder": args.encoder,
              "languages": pairs, "coverage": {"weight": RuleConfig().coverage_weight,
                                               "slack": RuleConfig().coverage_slack},
              "pairs": len(rows), "good_per_pair": args.good, "noise_per_type": args.noise,
              "training": train.summary(), "results": results,
              "per_pair_best_threshold": calibration, "seconds_per_pair": timing,
              "seconds": time.time() - t0, "load_before": load0, "load_after": load(),
              "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
              "git": subprocess.run(["git", "rev-parse", "--short", "HEAD"],
                                    capture_output=True, text=True).stdout.strip()}
    Path(args.out).write_text(json.dumps(report, indent=1), encoding="utf-8")
    for r in results:
        aucs = " ".join(f"{k}={v:.3f}" for k, v in r["auc"].items())
        print(f"{r['method']:30s} F1 {r['f1']:.3f} P {r['precision']:.3f} "  # noqa: T201
              f"R {r['recall']:.3f} thr {r['threshold']}  {aucs}")
    print(json.dumps(calibration, indent=1))  # noqa: T201


if __name__ == "__main__":
    main()
