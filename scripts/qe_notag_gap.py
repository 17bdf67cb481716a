"""Where the default recipe's no-tag loss on WMT20 QE comes from (issue 17 point 6), and how
centring choices that need no tag compare (choose on ``--split dev``; look at ``test`` once).

For each QE pair and side (source / MT output) of the bench's subsample (300 items, seed 0):
how often the model's language identifier names another language than the gold one, what it
names instead, its mean confidence, and the pair's Pearson x100 (cos(source, MT) vs z_mean)
under several ways to pick the centring mean of each row:

* ``gold``: the gold tag (the lab's figure);
* ``argmax``: the identifier's language (what ``meaning(X)`` does on main);
* ``argmax, gold where wrong``: the identifier's language, but the gold tag on the rows it
  gets wrong: the share of the gap those rows carry;
* ``gold where wrong, except MT taken for the source language``: the same, but an MT
  output the identifier takes for the *source's* language (an untranslated output) keeps
  that language: the gap that is left is what those outputs carry;
* ``soft``: the probability-weighted mean of the language means (``sum_k p_k mu_k``);
* ``soft T=t``: the same with the posterior tempered, ``p_k ~ p_k^(1/t)``;
* ``global``: the mean over the training languages' means, for every row.

The recipes concerned (``seed-centered``: a linear layer on ``e - mu``; mean-centering) are
affine in the centring mean, so a row centred with ``sum_k w_k mu_k`` has the meaning
``sum_k w_k meaning(e, k)``: every variant is a mixture of the per-language meanings.

    python scripts/qe_notag_gap.py --split dev  --out runs/qegap   # validation: choose here
    python scripts/qe_notag_gap.py --split test --out runs/qegap   # once, to explain the gap

Embeddings come from the shared cache (e5-small); the model is the default job's (default
recipe, default training set of 12 languages x 500 pairs with English, seed 0), saved under
``OUT/model`` on the first run and loaded after. Writes ``OUT/qe_gap_<split>.json`` and
prints the tables as Markdown.
"""

from __future__ import annotations

import argparse
import json
import logging
from collections import Counter
from pathlib import Path

import numpy as np

from disembed.encoders import load_encoder
from disembed.encoders.cached import cached
from disembed.evaluation.qe import WMT20QETask
from disembed.experiment import DEFAULT_RECIPE, DEFAULT_RECIPE_PARAMS, TrainingData
from disembed.experiment.steps import embed_pairs, load_training_set
from disembed.experiment.validation import validation_options
from disembed.methods import load_disentangler, make_method

logger = logging.getLogger("qe_notag_gap")
PAIRS6 = ("en-de", "en-zh", "et-en", "ne-en", "ro-en", "si-en")
TEMPERATURES = (0.5, 2.0, 4.0)
#: confidence thresholds for "argmax when sure, soft (T=2) below": the grid chosen from
THRESHOLDS = (0.3, 0.4, 0.5, 0.6, 0.7)
#: the gold tag where the identifier is wrong, except MT outputs it takes for the source's
#: language (left as identified: an untranslated output *is* in that language)
UNTRANSLATED = "gold where wrong, except MT taken for the source language"


def default_model(enc, folder: Path, recipe: str = "default"):
    """The default job's model (``recipe="default"``: its recipe; or another recipe on the
    same training set): loaded from ``folder`` if saved there, else fitted and saved."""
    if (folder / "config.json").exists():
        return load_disentangler(folder)
    pairs = load_training_set(TrainingData(), ("tatoeba", "sts17", "wmt20-qe")).pairs
    src, tgt = embed_pairs(enc, pairs)
    name, params = ((DEFAULT_RECIPE, DEFAULT_RECIPE_PARAMS) if recipe == "default"
                    else (recipe, {}))
    model = make_method(name, **params)
    model.fit(src, tgt, pairs.src_lang, pairs.tgt_lang, **validation_options(model, enc))
    model.save(folder)
    return model


def posterior(model, X: np.ndarray) -> np.ndarray:
    """``(n, L)`` the identifier's softmax over its languages (``language_id_.languages_``)."""
    lid = model.language_id_
    Z = X - lid.center_
    Z = Z / np.maximum(np.linalg.norm(Z, axis=1, keepdims=True), 1e-12)
    logits = Z @ lid.W_.T + lid.b_
    logits -= logits.max(axis=1, keepdims=True)
    p = np.exp(logits)
    return p / p.sum(axis=1, keepdims=True)


def mixtures(model, X: np.ndarray, gold: str) -> dict[str, np.ndarray]:
    """Each variant's meaning of ``X (n, d)``; see the module docstring."""
    langs = list(model.language_id_.languages_)
    per = np.stack([model.meaning(X, k) for k in langs])  # (L, n, d_m)
    P = posterior(model, X)  # (n, L)
    best = P.argmax(axis=1)
    g = langs.index(gold)
    wrong = best != g
    onehot = np.eye(len(langs))[best]
    fixed = onehot.copy()
    fixed[wrong] = np.eye(len(langs))[g]

    def mix(w: np.ndarray) -> np.ndarray:
        return np.einsum("nl,lnd->nd", w, per)

    out = {"gold": per[g], "argmax": mix(onehot), "argmax, gold where wrong": mix(fixed),
           "soft": mix(P), "global": per.mean(axis=0)}
    for t in TEMPERATURES:
        w = P ** (1.0 / t)
        out[f"soft T={t:g}"] = mix(w / w.sum(axis=1, keepdims=True))
    for tau in THRESHOLDS:
        out[f"argmax if p >= {tau:g}, else soft T=2"] = mix(hybrid_weights(P, tau))
    far = np.asarray(model.predict_language(X).codes == "unknown")
    w = onehot.copy()
    w[far] = 1.0 / len(langs)  # the mean over the training languages' means
    out["argmax, global mean for 'unknown' rows"] = mix(w)
    out["meaning(X)"] = model.meaning(X)  # the library itself: must equal argmax
    return out


def untranslated_kept(model, Ea: np.ndarray, Eb: np.ndarray, sub) -> np.ndarray:
    """The MT side's meaning with the gold tag where the identifier is wrong, except rows
    it takes for the source's language (those keep the identified language)."""
    langs = np.asarray(model.language_id_.languages_, dtype=object)
    pred = langs[posterior(model, Eb).argmax(axis=1)]
    use = np.where((pred != sub.lang_b) & (pred != sub.lang_a), sub.lang_b, pred)
    return model.meaning(Eb, list(use))


def hybrid_weights(P: np.ndarray, tau: float, t: float = 2.0) -> np.ndarray:
    """``(n, L)``: one-hot on the identifier's language where its probability is at least
    ``tau``, else the posterior tempered by ``t`` (``p_k ~ p_k^(1/t)``)."""
    w = P ** (1.0 / t)
    w /= w.sum(axis=1, keepdims=True)
    sure = P.max(axis=1) >= tau
    w[sure] = np.eye(P.shape[1])[P.argmax(axis=1)[sure]]
    return w


def pearson(a: np.ndarray, b: np.ndarray, gold: np.ndarray) -> float:
    cos = (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    return float(100 * np.corrcoef(cos, gold)[0, 1])


def side_report(model, X: np.ndarray, gold: str) -> dict:
    langs = np.asarray(model.language_id_.languages_, dtype=object)
    P = posterior(model, X)
    pred = langs[P.argmax(axis=1)]
    wrong = pred != gold
    codes = model.predict_language(X).codes
    return {"lang": gold, "wrong": float(100 * wrong.mean()), "n_wrong": int(wrong.sum()),
            "instead": dict(Counter(pred[wrong].tolist()).most_common(3)),
            "unknown": float(100 * (codes == "unknown").mean()),
            "confidence": float(P.max(axis=1).mean()),
            "gold_prob": float(P[:, list(langs).index(gold)].mean())}


def wrong_rows(model, sub, Ea, Eb, ma, mb) -> list[dict]:
    """The rows the identifier gets wrong on either side: text, what it says, the gold
    z_mean (its rank among the pair's items), the cosine with gold tags and with none, and
    whether the MT output is a verbatim copy of the source."""
    langs = np.asarray(model.language_id_.languages_, dtype=object)
    pa, pb = posterior(model, Ea), posterior(model, Eb)
    la, lb = langs[pa.argmax(1)], langs[pb.argmax(1)]
    rank = sub.gold.argsort().argsort()

    def cos(a, b, i):
        return float(a[i] @ b[i] / (np.linalg.norm(a[i]) * np.linalg.norm(b[i])))

    out = []
    for i in np.flatnonzero((la != sub.lang_a) | (lb != sub.lang_b)):
        out.append({"item": int(i), "source": sub.texts_a[i][:80], "mt": sub.texts_b[i][:80],
                    "identified": [str(la[i]), str(lb[i])],
                    "p_identified": [float(pa[i].max()), float(pb[i].max())],
                    "copy": sub.texts_a[i].strip() == sub.texts_b[i].strip(),
                    "z_mean": float(sub.gold[i]), "z_rank": int(rank[i]),
                    "cos_gold": cos(ma["gold"], mb["gold"], i),
                    "cos_argmax": cos(ma["argmax"], mb["argmax"], i)})
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--split", default="dev", choices=("dev", "test"))
    ap.add_argument("--out", default="runs/qegap")
    ap.add_argument("--max-items", type=int, default=300)
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s",
                        datefmt="%H:%M:%S")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    enc = cached(load_encoder("e5-small"))
    model = default_model(enc, out / "model")
    task = WMT20QETask(args.split, max_items=args.max_items, seed=0)
    report: dict = {"split": args.split, "max_items": args.max_items, "pairs": {}}
    for subset in task.load_subsets():  # ru-en: unseen language, not in the average
        sub = task.subsample(subset)
        if not {sub.lang_a, sub.lang_b} <= set(model.language_id_.languages_):
            logger.info("%s: a language outside training (not in the average); skipped", sub.name)
            continue
        Ea, Eb = enc.encode(sub.texts_a), enc.encode(sub.texts_b)
        ma, mb = mixtures(model, Ea, sub.lang_a), mixtures(model, Eb, sub.lang_b)
        ma[UNTRANSLATED] = ma["argmax, gold where wrong"]
        mb[UNTRANSLATED] = untranslated_kept(model, Ea, Eb, sub)
        report["pairs"][sub.name] = {
            "n": len(sub), "source": side_report(model, Ea, sub.lang_a),
            "mt": side_report(model, Eb, sub.lang_b),
            "pearson": {k: pearson(ma[k], mb[k], sub.gold) for k in ma},
            "wrong_rows": wrong_rows(model, sub, Ea, Eb, ma, mb)}
    variants = list(next(iter(report["pairs"].values()))["pearson"])
    report["avg6"] = {k: float(np.mean([report["pairs"][p]["pearson"][k] for p in PAIRS6
                                        if p in report["pairs"]])) for k in variants}
    path = out / f"qe_gap_{args.split}.json"
    path.write_text(json.dumps(report, indent=2))
    print(markdown(report, variants))
    logger.info("wrote %s", path)


def markdown(report: dict, variants: list[str]) -> str:
    pairs = list(report["pairs"])
    lines = [f"WMT20 QE {report['split']}, {report['max_items']} items per pair",
             "", "| pair | side | gold lang | identified wrongly % | instead | 'unknown' % "
             "| mean confidence | mean p(gold) |", "|---|---|---|---:|---|---:|---:|---:|"]
    for p in pairs:
        for side in ("source", "mt"):
            r = report["pairs"][p][side]
            inst = ", ".join(f"{k} {v}" for k, v in r["instead"].items()) or "-"
            lines.append(f"| {p} | {side} | {r['lang']} | {r['wrong']:.1f} | {inst} | "
                         f"{r['unknown']:.1f} | {r['confidence']:.2f} | {r['gold_prob']:.2f} |")
    lines += ["", "| centring | " + " | ".join(pairs) + " | avg (6) |",
              "|---|" + "---:|" * (len(pairs) + 1)]
    for v in variants:
        vals = " | ".join(f"{report['pairs'][p]['pearson'][v]:.2f}" for p in pairs)
        lines.append(f"| {v} | {vals} | {report['avg6'][v]:.2f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
