"""Issue 46, point 6: untagged text in a language the model never saw, with and without the
script prior, and what an untagged row should fall back to where the restricted posterior
is weak.

For an untagged row with text ``t`` and raw embedding ``x``, ``P = softmax(logits(x) / T)``
(the identifier's whole posterior over the training languages), ``A`` the training
languages that write ``script(t)`` (all of them where none does) and ``s = sum_{k in A} P_k``
(how much of the whole posterior the prior keeps). Weights over the routes:

* ``whole``: ``P`` (no prior);
* ``prior``: ``P [k in A] / s`` (the library's route before this change; checked equal to
  ``model.meaning(X, tags_with_scripts(texts))``);
* ``to-whole t``: ``g prior + (1 - g) whole`` with ``g = min(1, s / t)``: the prior where it
  keeps at least ``t`` of the posterior, sliding to the whole posterior below (continuous
  in ``x``: ``s`` and ``prior`` are);
* ``to-global t``: the same with the uniform weights over the training languages (their
  mean route: for mean-centering the mean of the language means) in place of ``whole``;
* ``to-whole s^k``: ``g = s^k``;
* ``sure lo-hi``: ``g = clip((max prior - lo) / (hi - lo), 0, 1)`` (the library's rule at
  :data:`~disembed.util.routing_rule.PRIOR_CONFIDENCE`); ``sure+s t``: the smaller of that
  and ``min(1, s / t)`` (a one-writer script's prior is one-hot, always sure);
* ``... -> sharp T=t``: the same, giving way to ``softmax(logits / t)`` instead;
* ``gap a-b``: ``g`` from 1 to 0 as the cosine gap between the nearest centroid and the
  nearest allowed one grows from ``a`` to ``b``.

Score: untagged xx<->en retrieval (mean of both directions, x100) with the English side
untagged too (the library's route; English is a training language); per language, then per
script (the script of most of a language's sentences) and overall (languages weighted
equally).

``--part validation``: the Tatoeba-Challenge languages outside the training set and outside
Tatoeba-14, the pairs that overlap the LASER Tatoeba test dropped, ``--pairs`` per language
(a seeded sample). The fallback and ``t`` are chosen here. ``--part test``: the LASER
Tatoeba test languages outside the training set (every pair), measured once with the choice.

``--part validation`` also scores every variant on the training languages' own text: the
held-out pairs (300 per language, both sides untagged) and WMT20 QE dev (six pairs, both
sides untagged), where the prior was chosen (issue 31) and must not lose.

Models: the default job's training set (or ``--languages``), 300 pairs per language held
out, fitted on the rest of the pool and saved
under ``OUT/models``: the learned head (the default recipe with ``reference_check=0``: the
head ``train`` keeps when it wins its check) and mean-centering. e5-small from the cache.

    python scripts/unseen_script_prior.py --part validation --out runs/unseen-prior
    python scripts/unseen_script_prior.py --part test --out runs/unseen-prior
    python scripts/unseen_script_prior.py --part validation --languages de,fr,ru,zh \\
        --out runs/unseen-prior-4
"""

from __future__ import annotations

import argparse
import copy
import json
import logging
import sys
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from qe_notag_gap import pearson  # noqa: E402
from unseen_centring_validation import load_pairs, retrieval, validation_languages  # noqa: E402

from disembed.data.io import read_lines  # noqa: E402
from disembed.data.languages import normalize_language  # noqa: E402
from disembed.data.paths import resolve_data_dir  # noqa: E402
from disembed.encoders import load_encoder  # noqa: E402
from disembed.encoders.cached import cached  # noqa: E402
from disembed.evaluation.qe import WMT20QETask  # noqa: E402
from disembed.exceptions import ConfigError  # noqa: E402
from disembed.experiment import DEFAULT_RECIPE, DEFAULT_RECIPE_PARAMS, TrainingData  # noqa: E402
from disembed.experiment.steps import embed_pairs, load_training_set  # noqa: E402
from disembed.experiment.validation import validation_options  # noqa: E402
from disembed.methods import load_disentangler, make_method  # noqa: E402
from disembed.methods.routing import tags_with_scripts  # noqa: E402
from disembed.util.routing_rule import PRIOR_CONFIDENCE, allowed, mapped  # noqa: E402
from disembed.util.scripts import script_of  # noqa: E402

logger = logging.getLogger("unseen_script_prior")
RECIPES = {"learned head": (DEFAULT_RECIPE, {**DEFAULT_RECIPE_PARAMS, "reference_check": None}),
           "mean-centering": ("mean-centering", {})}
PAIRS6 = ("en-de", "en-zh", "et-en", "ne-en", "ro-en", "si-en")
GAPS = ((0.01, 0.03), (0.02, 0.05), (0.03, 0.08), (0.05, 0.1), (0.05, 0.15), (0.1, 0.2))
CONFIDENCES = ((0.3, 0.6), (0.4, 0.7), (0.5, 0.8), (0.5, 0.9), (0.7, 0.9), (0.8, 0.9),
               (0.8, 0.95))
THRESHOLDS = (0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 1.0)


def training_set(languages: tuple[str, ...] | None):
    """The pool of ``languages`` (default: the default job's) with 300 pairs of each held out
    (as ``disembed tune`` does), the evaluation sets kept out."""
    extra = {} if languages is None else {"languages": languages}
    return load_training_set(TrainingData(holdout_per_language=300, **extra),
                             ("tatoeba", "sts17", "wmt20-qe"))


def fitted(enc, languages: tuple[str, ...] | None, folder: Path, recipe: str):
    """The model of ``recipe`` on the pool of ``languages`` (default: the default job's),
    loaded from ``folder`` or fitted and saved there."""
    if (folder / "config.json").exists():
        return load_disentangler(folder)
    pairs = training_set(languages).pairs
    src, tgt = embed_pairs(enc, pairs)
    name, params = RECIPES[recipe]
    model = make_method(name, **params)
    model.fit(src, tgt, pairs.src_lang, pairs.tgt_lang, **validation_options(model, enc))
    model.save(folder)
    return model


def validation_sets(model, pairs: int, seed: int) -> dict[str, tuple[list, list]]:
    """``{code: (xx texts, en texts)}``: Tatoeba-Challenge languages neither trained on nor in
    Tatoeba-14, LASER-test overlaps dropped (:func:`validation_languages`)."""
    return {code: load_pairs(path, code3, pairs, seed)
            for code, code3, path in validation_languages(model)}


def test_sets(known: set[str]) -> dict[str, tuple[list, list]]:
    """``{code: (xx texts, en texts)}``: every LASER Tatoeba test language the model never saw."""
    folder = resolve_data_dir(None) / "tatoeba"
    out = {}
    for path in sorted(folder.glob("tatoeba.*-eng.eng")):
        code3 = path.name.split(".")[1].split("-")[0]
        try:
            code = normalize_language(code3)
        except ConfigError:
            code = code3
        if code in known:
            continue
        xx = read_lines(folder / f"tatoeba.{code3}-eng.{code3}")
        out[code3] = (list(xx), list(read_lines(path)))
    return out


def weight_variants(model, X: np.ndarray, texts: list[str]) -> tuple[dict, np.ndarray]:
    """``({variant: (n, L) weights}, s (n,))``; see the module docstring."""
    lid = model.language_id_
    z = lid.logits(X).astype(np.float64) / lid.route_temperature
    P = mapped(z)  # the whole posterior, softmax
    mask = allowed([script_of(t) for t in texts], lid.languages_, lid.language_scripts())
    s = (P * mask).sum(axis=1)
    prior = P * mask / s[:, None]
    uniform = np.full_like(P, 1.0 / P.shape[1])
    out = {"whole": P, "prior": prior}
    for t in THRESHOLDS:
        g = np.minimum(1.0, s / t)[:, None]
        out[f"to-whole {t:g}"] = g * prior + (1 - g) * P
        out[f"to-global {t:g}"] = g * prior + (1 - g) * uniform
    for k in (2, 4, 8):
        g = (s ** k)[:, None]
        out[f"to-whole s^{k}"] = g * prior + (1 - g) * P
    top = prior.max(axis=1)  # how sure the restricted posterior is
    for a, b in CONFIDENCES:
        g = np.clip((top - a) / (b - a), 0.0, 1.0)[:, None]
        out[f"sure {a:g}-{b:g}"] = g * prior + (1 - g) * P
    lo, hi = PRIOR_CONFIDENCE
    sure = np.clip((top - lo) / (hi - lo), 0.0, 1.0)
    for t in (0.1, 0.2, 0.3, 0.5):
        g = np.minimum(sure, np.minimum(1.0, s / t))[:, None]
        out[f"sure+s {t:g}"] = g * prior + (1 - g) * P
    for temp in (0.5, 0.25):
        Q = mapped(z / temp)
        g = sure[:, None]
        out[f"sure -> sharp T={temp:g}"] = g * prior + (1 - g) * Q
        g = np.minimum(sure, np.minimum(1.0, s / 0.2))[:, None]
        out[f"sure+s 0.2 -> sharp T={temp:g}"] = g * prior + (1 - g) * Q
    Z, _ = lid._logits(X)
    cos = Z @ lid.centroids_.T  # (n, L): each row's cosine to each language's centroid
    gap = cos.max(axis=1) - np.where(mask, cos, -np.inf).max(axis=1)
    for a, b in GAPS:
        g = np.clip((b - gap) / (b - a), 0.0, 1.0)[:, None]
        out[f"gap {a:g}-{b:g}"] = g * prior + (1 - g) * P
    return out, s


def variant_meanings(model, X: np.ndarray, texts: list[str]) -> tuple[dict, np.ndarray]:
    """``({variant: (n, d) meaning}, s (n,))`` of untagged rows ``X`` with ``texts``;
    ``prior`` and the library's rule (``sure lo-hi`` at
    :data:`~disembed.util.routing_rule.PRIOR_CONFIDENCE`) are checked equal to the library's
    own route with that confidence."""
    langs = list(model.language_id_.languages_)
    per = np.stack([model.meaning(X, k) for k in langs])  # (L, n, d)
    variants, s = weight_variants(model, X, texts)
    out = {name: np.einsum("nl,lnd->nd", w, per) for name, w in variants.items()}
    lo, hi = PRIOR_CONFIDENCE
    for name, confidence in (("prior", None), (f"sure {lo:g}-{hi:g}", PRIOR_CONFIDENCE)):
        same = copy.deepcopy(model)
        same.language_id_.prior_confidence = confidence
        library, mixed = same.meaning(X, tags_with_scripts(texts)), out[name]
        cos = (library * mixed).sum(1) / (np.linalg.norm(library, axis=1)
                                          * np.linalg.norm(mixed, axis=1))
        if cos.min() < 0.999:
            raise AssertionError(f"{name!r} is not the library's route with prior_confidence "
                                 f"{confidence} (min cosine {cos.min():.4f})")
    return out, s


def score_language(model, enc, xx: list[str], en: list[str]) -> dict:
    """Every variant's retrieval for one language, its script and how weak its prior is."""
    X, E = enc.encode(xx), enc.encode(en)
    langs = list(model.language_id_.languages_)
    men = model.meaning(E, tags_with_scripts(en))
    meanings, s = variant_meanings(model, X, xx)
    row = {name: retrieval(m, men) for name, m in meanings.items()}
    scripts = Counter(script_of(t) for t in xx)
    top = Counter(np.asarray(langs)[model.language_id_.logits(X).argmax(1)].tolist()
                  ).most_common(1)[0]
    return {"n": len(xx), "script": scripts.most_common(1)[0][0] or "none",
            "s_median": float(np.median(s)), "s_below_0.5": float((s < 0.5).mean()),
            "whole_top": f"{top[0]} ({top[1] / len(xx):.0%})", "scores": row}


def trained_languages(model, enc, languages) -> dict:
    """Every variant on the training languages' own untagged text (both sides untagged):
    held-out xx<->en retrieval (mean over languages) and WMT20 QE dev Pearson (mean of the
    six pairs), x100, and the share of rows whose prior keeps under half the posterior."""
    held = training_set(languages).heldout
    src_lang = np.asarray(held.src_lang, dtype=object)
    A, sa = variant_meanings(model, enc.encode(held.src), list(held.src))
    B, sb = variant_meanings(model, enc.encode(held.tgt), list(held.tgt))
    out = {v: {"heldout": float(np.mean([retrieval(A[v][src_lang == x], B[v][src_lang == x])
                                         for x in dict.fromkeys(held.src_lang)])),
               "qe_dev": []} for v in A}
    weak = [float((sa < 0.5).mean()), float((sb < 0.5).mean())]
    for sub in WMT20QETask("dev", seed=0).load_subsets():
        if sub.name not in PAIRS6:
            continue
        Qa, qa = variant_meanings(model, enc.encode(sub.texts_a), list(sub.texts_a))
        Qb, qb = variant_meanings(model, enc.encode(sub.texts_b), list(sub.texts_b))
        weak += [float((qa < 0.5).mean()), float((qb < 0.5).mean())]
        for v in out:
            out[v]["qe_dev"].append(pearson(Qa[v], Qb[v], sub.gold))
    for v in out:
        out[v]["qe_dev"] = float(np.mean(out[v]["qe_dev"]))
    return {"variants": out, "weak_share_max": max(weak)}


def summarise(rows: dict) -> dict:
    """Per script and overall means (languages weighted equally), and each variant's delta
    against ``prior``."""
    groups = defaultdict(list)
    for code, r in rows.items():
        groups[r["script"]].append(code)
        groups["all"].append(code)
    variants = list(next(iter(rows.values()))["scores"])
    return {g: {"languages": len(codes), **{v: float(np.mean([rows[c]["scores"][v]
                                                                 for c in codes]))
                                              for v in variants}}
            for g, codes in sorted(groups.items(), key=lambda kv: (kv[0] == "all", kv[0]))}


def table(summary: dict, variants: list[str]) -> str:
    head = "| variant | " + " | ".join(f"{g} ({s['languages']})" for g, s in summary.items())
    lines = [head + " |", "|---|" + "---:|" * len(summary)]
    for v in variants:
        lines.append(f"| {v} | " + " | ".join(
            f"{s[v]:.2f}" if v == "prior" else f"{s[v]:.2f} ({s[v] - s['prior']:+.2f})"
            for s in summary.values()) + " |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--part", choices=("validation", "test"), required=True)
    ap.add_argument("--out", default="runs/unseen-prior")
    ap.add_argument("--languages", default=None, help="training languages (default: the "
                    "default job's)")
    ap.add_argument("--pairs", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s",
                        datefmt="%H:%M:%S")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    enc = cached(load_encoder("e5-small"))
    languages = tuple(args.languages.split(",")) if args.languages else None
    report = {}
    for recipe in RECIPES:
        model = fitted(enc, languages, out / "models" / recipe.replace(" ", "-"), recipe)
        known = set(model.known_languages())
        sets = (validation_sets(model, args.pairs, args.seed) if args.part == "validation"
                else test_sets(known))
        rows = {}
        for code, (xx, en) in sets.items():
            rows[code] = score_language(model, enc, xx, en)
            r = rows[code]
            logger.info("%s %s (%s, n %d, s median %.2f, whole top %s): prior %.1f whole %.1f",
                        recipe, code, r["script"], r["n"], r["s_median"], r["whole_top"],
                        r["scores"]["prior"], r["scores"]["whole"])
        report[recipe] = {"rows": rows, "summary": summarise(rows)}
        if args.part == "validation":
            report[recipe]["trained"] = trained_languages(model, enc, languages)
        (out / f"{args.part}.json").write_text(json.dumps(report, indent=1))
    for recipe, rep in report.items():
        variants = list(next(iter(rep["rows"].values()))["scores"])
        print(f"\n### {recipe}, {args.part}\n\n" + table(rep["summary"], variants))
        if "trained" in rep:
            tr = rep["trained"]
            print(f"\ntraining languages (rows with s < 0.5: at most {tr['weak_share_max']:.1%}"
                  " of a side)\n\n| variant | held-out retrieval | QE dev |\n|---|---:|---:|")
            for v, r in tr["variants"].items():
                print(f"| {v} | {r['heldout']:.2f} | {r['qe_dev']:.2f} |")


if __name__ == "__main__":
    main()
