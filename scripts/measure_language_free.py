"""Measure language-free meaning (issue 17) on the default job's training set: which language
identifier (chosen on held-out training pairs, no test set), its accuracy per Tatoeba
language, gold-tag vs no-tag scores of the default recipe and mean-centering (paired
bootstrap over items), unseen Tatoeba-14 languages inductively (fallbacks and a calibration
on a disjoint half; the transductive figure only as a labelled extra), and the calibration
curve (n = 10 ... 1000; sentences from Tatoeba outside the evaluated items, and from the
Tatoeba-Challenge files, never a test sentence). Writes ``OUT/language_free.json`` and,
for the Tatoeba-Challenge curve, ``OUT/calibration_curve.md``.

    python scripts/measure_language_free.py --out runs/langfree
"""

from __future__ import annotations

import argparse
import copy
import json
import logging
from pathlib import Path

import numpy as np

from disembed.analysis.significance import compare_scores
from disembed.data.io import read_tsv
from disembed.data.languages import to_iso3
from disembed.data.paths import resolve_data_dir
from disembed.encoders import load_encoder
from disembed.encoders.base import supported_languages
from disembed.encoders.cached import cached
from disembed.evaluation import EvalOptions
from disembed.experiment import (
    DEFAULT_RECIPE,
    DEFAULT_RECIPE_PARAMS,
    TrainingData,
    build_tasks,
    evaluate,
)
from disembed.experiment.steps import embed_pairs, load_training_set
from disembed.experiment.validation import validation_options
from disembed.methods import make_method
from disembed.methods.language_id import KINDS, LanguageIdentifier

logger = logging.getLogger("measure_language_free")
TASKS = ("tatoeba", "sts17", "wmt20-qe")
CURVE = (10, 30, 100, 300, 1000)


def retrieval(a: np.ndarray, b: np.ndarray) -> float:
    """Tatoeba's acc_mean: xx->en and en->xx nearest-neighbour accuracy, x100."""
    a = a / np.linalg.norm(a, axis=1, keepdims=True)
    b = b / np.linalg.norm(b, axis=1, keepdims=True)
    sim = a @ b.T
    idx = np.arange(len(a))
    return float(50 * ((sim.argmax(1) == idx).mean() + (sim.argmax(0) == idx).mean()))


def choose_identifier(X, langs, seed=0):
    """Each kind fitted on 80% of the training rows, accuracy on the other 20%."""
    rng = np.random.default_rng(seed)
    val = rng.random(len(X)) < 0.2
    out = {}
    for kind in KINDS:
        pred = LanguageIdentifier(kind).fit(X[~val], langs[~val]).predict(X[val])
        per = {lang: float((pred.nearest[langs[val] == lang] == lang).mean() * 100)
               for lang in sorted(set(langs))}
        out[kind] = {"mean": float(np.mean(list(per.values()))), "per_language": per,
                     "unknown_share": float((pred.codes == "unknown").mean() * 100)}
    return out


def lid_accuracy(model, enc, languages, max_items, lid_items):
    """Per Tatoeba language: share of source sentences identified as their language (the
    first ``lid_items`` of the evaluated subsample, so Tatoeba-14's are cached)."""
    (task,) = build_tasks(["tatoeba"], EvalOptions(
        max_items=max_items, task_options={"tatoeba": {"languages": languages}}),
                          supported=supported_languages(enc))
    known = set(model.known_languages())
    rows = {}
    for subset in task.load_subsets():
        subset = task.subsample(subset)
        subset = subset.take(np.arange(min(lid_items, len(subset))))
        pred = model.predict_language(enc.encode(subset.texts_a))
        lang = subset.lang_a
        rows[lang] = {"n": len(subset), "trained": lang in known,
                      "correct": float((pred.codes == lang).mean() * 100),
                      "unknown": float((pred.codes == "unknown").mean() * 100),
                      "confidence": float(pred.confidence.mean()),
                      "top": max(pred.summary().items(), key=lambda kv: kv[1])[0]}
    return rows


def gold_vs_none(model, enc, max_items):
    opts = EvalOptions(max_items=max_items)
    gold = evaluate(model, enc, TASKS, options=opts, tags="gold")
    none = evaluate(model, enc, TASKS, options=opts, tags="none")
    out = {}
    for g, n in zip(gold, none, strict=True):
        test = compare_scores(n, g, labels=("none", "gold")).bootstrap
        out[g.task] = {"subset": g.main_subset, "gold": 100 * g.main_score(),
                       "none": 100 * n.main_score(), "delta": 100 * test.delta,
                       "ci": [100 * test.ci_low, 100 * test.ci_high], "items": test.n_items,
                       "per_subset": _per_subset(g, n)}
    return out


def _per_subset(gold, none) -> dict[str, list[float]]:
    """Subset -> [gold, no tag] x100 of the main metric on the meaning view."""
    out = {}
    for r in gold.rows:
        if r.view == "meaning" and r.metric == gold.main_metric:
            other = [x.value for x in none.rows
                     if (x.view, x.subset, x.metric) == (r.view, r.subset, r.metric)]
            out[r.subset] = [100 * r.value, 100 * other[0] if other else float("nan")]
    return out


def unseen_inductive(models, enc, languages, max_items, curve_langs, curve_pool,
                     challenge_langs=()):
    """Unseen languages: the evaluated 300 items split in halves A/B (seeded); scores on B.
    Calibration on A's sentences (disjoint from B); transductive: calibrated on B itself.
    Curves: ``calibrate`` on the first n of a pool, scored on B; pool "tatoeba" = Tatoeba
    items outside the evaluated ones (``curve_langs``), "challenge" = Tatoeba-Challenge
    sentences (``challenge_langs``, see :func:`challenge_pool`)."""
    (task,) = build_tasks(["tatoeba"], EvalOptions(
        max_items=None, task_options={"tatoeba": {"languages": tuple(languages)}}),
                          supported=supported_languages(enc))
    rows, curves, pool_info = {}, {"tatoeba": {}, "challenge": {}}, {}
    for full in task.load_subsets():
        lang = full.lang_a
        sub = _take(task, full, max_items)
        Ea, Eb = enc.encode(sub.texts_a), enc.encode(sub.texts_b)
        half = np.random.default_rng([0, len(sub)]).permutation(len(sub))
        A, B = half[: len(sub) // 2], half[len(sub) // 2 :]
        rows[lang] = _unseen_row(models, Ea, Eb, A, B, lang)
        logger.info("%s: %s", lang, {k: round(v, 1) for k, v in rows[lang].items()})
        pools = {}
        if lang in curve_langs:
            rest = np.setdiff1d(np.arange(len(full)), _chosen(task, full, max_items))
            pools["tatoeba"] = enc.encode([full.texts_a[i] for i in rest[:curve_pool]])
        if lang in challenge_langs:
            texts, pool_info[lang] = challenge_pool(lang, full.texts_a)
            pools["challenge"] = enc.encode(texts[: max(CURVE)])
        for source, pool in pools.items():
            for label, model in models.items():
                curves[source].setdefault(label, {})[lang] = _curve(model, pool, Ea[B], Eb[B],
                                                                    lang)
    return rows, curves, pool_info


def _unseen_row(models, Ea, Eb, A, B, lang) -> dict[str, float]:
    """One unseen language's settings, scored on half B (see :func:`unseen_inductive`)."""
    row = {"n_eval": len(B), "raw": retrieval(Ea[B], Eb[B])}
    for label, model in models.items():
        en = model.meaning(Eb[B], "en")
        near = copy.deepcopy(model)
        near.unknown_language = "nearest"
        row[f"{label} gold-tag, default ({model.unknown_policy})"] = retrieval(
            model.meaning(Ea[B], lang), en)
        row[f"{label} no tag, default ({model.unknown_policy})"] = retrieval(
            model.meaning(Ea[B]), en)
        row[f"{label} gold-tag, nearest language"] = retrieval(near.meaning(Ea[B], lang), en)
        row[f"{label} no tag, nearest language"] = retrieval(near.meaning(Ea[B]), en)
        cal = copy.deepcopy(model).calibrate(Ea[A], lang)
        row[f"{label} calibrated (half A)"] = retrieval(cal.meaning(Ea[B], lang), en)
        row[f"{label} calibrated, no tag"] = retrieval(cal.meaning(Ea[B]), en)
        trans = copy.deepcopy(model).calibrate(Ea[B], lang)
        row[f"{label} transductive (B's own mean)"] = retrieval(trans.meaning(Ea[B], lang), en)
    return row


def _curve(model, pool, Ea_B, Eb_B, lang) -> dict[int, float]:
    """n -> B's retrieval (gold tag) after ``calibrate`` on the pool's first n rows."""
    en = model.meaning(Eb_B, "en")
    return {n: retrieval(copy.deepcopy(model).calibrate(pool[:n], lang).meaning(Ea_B, lang), en)
            for n in CURVE if n <= len(pool)}


def _norm(text: str) -> str:
    return " ".join(text.split()).casefold()


def challenge_pool(lang, test_texts, seed=0) -> tuple[list[str], dict[str, int]]:
    """The language's sentences of the Tatoeba-Challenge file (its non-English column), rows
    with pair_in_laser_tatoeba_test == sent_in_laser_tatoeba_test == 0 only, less any
    sentence among ``test_texts`` (the language's Tatoeba test sentences; compared with
    whitespace collapsed and case folded), deduplicated, in a seeded order."""
    code3 = to_iso3(lang)
    flags = ["pair_in_laser_tatoeba_test", "sent_in_laser_tatoeba_test"]
    path = (resolve_data_dir(None) / "parallel" / "tatoeba_challenge_v2021-08-07"
            / f"en-{code3}.tsv")
    rows, _ = read_tsv(path, [code3, *flags], required_nonempty=[code3], skip_bad=True)
    kept = [r[code3] for r in rows if r[flags[0]] == "0" and r[flags[1]] == "0"]
    test = {_norm(t) for t in test_texts}
    pool = list(dict.fromkeys(t for t in kept if _norm(t) not in test))
    order = np.random.default_rng([seed, len(pool)]).permutation(len(pool))
    info = {"rows": len(rows), "flags_zero": len(kept),
            "dropped_as_test": sum(_norm(t) in test for t in kept), "pool": len(pool)}
    return [pool[i] for i in order], info


def curve_table(report) -> str:
    """Markdown: the Tatoeba-Challenge curve per recipe and language, with the mean, beside
    raw and the uncalibrated (tagged, default fallback) figure."""
    curve, unseen = report["curve"]["challenge"], report["unseen"]
    lines = ["| recipe | language | " + " | ".join(f"n = {n}" for n in CURVE)
             + " | uncalibrated (tag) | raw |", "|---|---|" + "---:|" * (len(CURVE) + 2)]
    for label, per in curve.items():
        key = next(k for k in unseen[next(iter(per))] if k.startswith(f"{label} gold-tag, d"))
        cells = {lang: [per[lang].get(n, float("nan")) for n in CURVE]
                 + [unseen[lang][key], unseen[lang]["raw"]] for lang in per}
        cells["mean"] = list(np.mean(list(cells.values()), axis=0))
        for lang, vals in cells.items():
            lines.append(f"| {label} | {lang} | " + " | ".join(f"{v:.2f}" for v in vals) + " |")
    return "\n".join(lines)


def _chosen(task, subset, max_items):
    if max_items is None or len(subset) <= max_items:
        return np.arange(len(subset))
    import zlib

    rng = np.random.default_rng([task.seed, zlib.crc32(subset.name.encode("utf-8"))])
    return np.sort(rng.choice(len(subset), size=max_items, replace=False))


def _take(task, subset, max_items):
    return subset.take(_chosen(task, subset, max_items))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="runs/langfree")
    ap.add_argument("--max-items", type=int, default=300)
    ap.add_argument("--lid-languages", default="tatoeba-36")
    ap.add_argument("--lid-items", type=int, default=100)
    ap.add_argument("--curve-languages", default="ru,th")
    ap.add_argument("--curve-pool", type=int, default=300)
    ap.add_argument("--challenge-languages", default="bg,el,hi,ru,vi",
                    help="unseen languages whose calibration curve (n up to 1000) draws on "
                    "the Tatoeba-Challenge file; '' for none")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s",
                        datefmt="%H:%M:%S")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    enc = cached(load_encoder("e5-small"))
    pairs = load_training_set(TrainingData(), TASKS).pairs
    src, tgt = embed_pairs(enc, pairs)
    X = np.concatenate([src, tgt])
    langs = np.array(list(pairs.src_lang) + list(pairs.tgt_lang), dtype=object)
    report = {"encoder": "e5-small", "training": {"pairs": len(pairs),
                                                  "languages": sorted(set(pairs.src_lang))}}
    report["identifier_validation"] = choose_identifier(X, langs)
    best = max(KINDS, key=lambda k: report["identifier_validation"][k]["mean"])
    report["identifier_chosen"] = best
    logger.info("identifier on held-out training rows: %s", {
        k: round(v["mean"], 1) for k, v in report["identifier_validation"].items()})
    models = {}
    for label, name, params in (("default", DEFAULT_RECIPE, DEFAULT_RECIPE_PARAMS),
                                ("mean-centering", "mean-centering", {})):
        model = make_method(name, **params)
        model.fit(src, tgt, pairs.src_lang, pairs.tgt_lang, **validation_options(model, enc))
        if model.language_id_.kind != best:
            model.language_id_ = LanguageIdentifier(best).fit(X, langs)
        models[label] = model
    report["lid_tatoeba"] = lid_accuracy(models["default"], enc, args.lid_languages,
                                         args.max_items, args.lid_items)
    logger.info("identifier on Tatoeba: %s", {k: round(v["correct"], 1)
                                              for k, v in report["lid_tatoeba"].items()})
    report["gold_vs_none"] = {label: gold_vs_none(m, enc, args.max_items)
                              for label, m in models.items()}
    logger.info("gold vs none: %s", report["gold_vs_none"])
    trained = set(models["default"].known_languages())
    unseen = [x for x in ("ar", "bg", "de", "el", "es", "fr", "hi", "ru", "sw", "th", "tr",
                          "ur", "vi", "zh") if x not in trained]
    report["unseen"], report["curve"], report["curve_challenge_pool"] = unseen_inductive(
        models, enc, unseen, args.max_items, set(args.curve_languages.split(",")),
        args.curve_pool, set(filter(None, args.challenge_languages.split(","))))
    (out / "language_free.json").write_text(json.dumps(report, indent=2))
    if report["curve"]["challenge"]:
        (out / "calibration_curve.md").write_text(curve_table(report) + "\n")
        print(curve_table(report))
    logger.info("wrote %s", out / "language_free.json")


if __name__ == "__main__":
    main()
