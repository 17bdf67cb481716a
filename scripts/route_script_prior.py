"""Issue 31, point 2, on validation data only: the identifier's posterior restricted to the
languages that write the text's main script (a *script prior*), against the old argmax and
the default T = 1 mixture (docs/language_free.md, "A script prior").

For an untagged row with text ``t`` and raw embedding ``x``:

    w_k(x, t) = softmax(logits(x))_k [lang k writes script(t)] / sum_j (same)

renormalised; where no training language writes the script (Greek, Thai, ...) the
posterior is left as it is. ``script(t)`` is the Unicode script of most of the text's
letters; a language's scripts come from the CLDR's likely subtags (``langcodes``: zh
writes Han, ja Han and kana, ko Hangul and Han). The weights then mix the library's own
routes, ``m = sum_k w_k route_k(x)`` (each ``route_k`` is ``model.meaning(x, k)``), which is
the library's rule for any weights; ``argmax`` and ``T1`` are the same rule with one-hot
and unmasked weights. The weights use the text, not only ``x``: the library's
``meaning(X)`` has no text, so this is a measurement, not a route the library offers.

Validation exactly as ``measure_soft_routing.py --part validation``: the default job's pool
with 300 pairs of every language held out, the model fitted on the rest (seed-centered with
its defaults at the training seeds given, which keeps the mirror fit WMT20 QE dev
prefers; mean-centering), untagged held-out xx<->en retrieval and WMT20 QE **dev** Pearson
per pair, x100, e5-small torch bfloat16 from the cache.

``--part continuity``: on ``measure_soft_routing.py``'s 18-script Tatoeba set (150 sentences
of each script, 2,700 rows) with the default job's mean-centering model, each row's mask
fixed by its text: the lowest cosine between ``m(x)`` and ``m(x + d)``, ``|d| = 0.01 |x|``,
for a random ``d`` (lowest of 5) and the worst ``d`` found (that script's search, through
this map in torch, checked equal to the numpy mixture), and between the meanings of the
bfloat16 and the float32 embedding of the same text.

    python scripts/route_script_prior.py --part validation --seeds 0,1,2
    python scripts/route_script_prior.py --part continuity
"""

from __future__ import annotations

import argparse
import collections
import logging
import sys
import unicodedata
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import measure_soft_routing as msr  # noqa: E402

from disembed.data.languages import language_script  # noqa: E402
from disembed.encoders import load_encoder  # noqa: E402
from disembed.encoders.cached import cached  # noqa: E402
from disembed.evaluation.metrics import retrieval_accuracy  # noqa: E402
from disembed.experiment import DEFAULT_RECIPE, DEFAULT_RECIPE_PARAMS, TrainingData  # noqa: E402
from disembed.experiment.params import build_method  # noqa: E402
from disembed.experiment.steps import embed_pairs, load_training_set  # noqa: E402
from disembed.experiment.validation import qe_dev_validator  # noqa: E402

#: the first word of a letter's Unicode name -> its ISO 15924 script
UNICODE_SCRIPT = {
    "LATIN": "Latn", "CYRILLIC": "Cyrl", "CJK": "Hani", "HIRAGANA": "Kana", "KATAKANA": "Kana",
    "HANGUL": "Hang", "DEVANAGARI": "Deva", "SINHALA": "Sinh", "ARABIC": "Arab",
    "GREEK": "Grek", "HEBREW": "Hebr", "THAI": "Thai", "BENGALI": "Beng", "TAMIL": "Taml",
    "TELUGU": "Telu", "GEORGIAN": "Geor", "ARMENIAN": "Armn", "ETHIOPIC": "Ethi",
    "KHMER": "Khmr", "MALAYALAM": "Mlym", "GUJARATI": "Gujr", "GURMUKHI": "Guru",
    "KANNADA": "Knda"}
#: a CLDR script that stands for several Unicode ones
WRITES = {"Hans": {"Hani"}, "Hant": {"Hani"}, "Jpan": {"Hani", "Kana"},
          "Kore": {"Hang", "Hani"}}
MODES = ("argmax", "T1", "script")


def text_script(text: str) -> str | None:
    """The script of most of ``text``'s letters (None: no letter)."""
    counts = collections.Counter(
        UNICODE_SCRIPT.get(unicodedata.name(ch, "OTHER").split()[0], "other")
        for ch in text if ch.isalpha())
    return counts.most_common(1)[0][0] if counts else None


def language_scripts(code: str) -> set[str]:
    script = language_script(code).rsplit("-", 1)[1]  # the CLDR's likely script (MTEB's)
    return WRITES.get(script, {script})


def route_weights(model, X: np.ndarray, texts: list[str], mode: str) -> np.ndarray:
    """``(n, L)`` weights over ``model.language_id_.languages_``: the identifier's own
    (``T1``; the model's route temperature, 1), one-hot on its largest (``argmax``), or
    its own masked to the text's script and renormalised (``script``)."""
    lid = model.language_id_
    w = lid.route_weights(X)
    if mode == "argmax":
        return np.eye(len(lid.languages_))[w.argmax(axis=1)]
    if mode == "script":
        writes = [language_scripts(k) for k in lid.languages_]
        allowed = np.array([[text_script(t) in s for s in writes] for t in texts], float)
        masked = w * allowed
        some = masked.sum(axis=1) > 0  # else no training language writes it: unmasked
        w[some] = masked[some] / masked[some].sum(axis=1, keepdims=True)
    return w


def mixed_meaning(model, X: np.ndarray, texts: list[str], mode: str) -> np.ndarray:
    w = route_weights(model, X, texts, mode)
    out = None
    for k, code in enumerate(model.language_id_.languages_):
        rows = w[:, k] > 0
        if rows.any():
            part = model.meaning(X[rows], code)
            out = np.zeros((len(X), part.shape[1])) if out is None else out
            out[rows] += w[rows, k : k + 1] * part
    return out


def masked_torch_map(model, texts: list[str]):
    """The script-prior mixture as a torch function of ``e (n, d)`` for these ``texts``'
    rows (the export's own module, its weights masked row by row)."""
    import torch

    f = msr.torch_meaning(model)
    module = f.__self__
    writes = [language_scripts(k) for k in model.language_id_.languages_]
    allowed = torch.tensor([[text_script(t) in s for s in writes] for t in texts],
                           dtype=torch.float64)
    allowed[allowed.sum(dim=1) == 0] = 1.0  # no training language writes it: unmasked
    unmasked = module.route_weights

    def route_weights(e):
        w = unmasked(e) * allowed
        return w / w.sum(dim=1, keepdim=True)

    module.route_weights = route_weights
    return f


def continuity(enc) -> None:
    import torch

    texts, langs = msr.script_set(150)
    Eb = enc.encode(texts)
    Ef = cached(load_encoder("e5-small-torch", dtype="float32")).encode(texts)
    built = load_training_set(TrainingData(), msr.TASKS)
    src, tgt = embed_pairs(enc, built.pairs)
    model = build_method("mean-centering", {}).fit(src, tgt, built.pairs.src_lang,
                                                   built.pairs.tgt_lang)
    f = masked_torch_map(model, texts)
    with torch.no_grad():
        mb = f(torch.from_numpy(Eb)).double().numpy()
        mf = f(torch.from_numpy(Ef)).double().numpy()
    numpy_map = mixed_meaning(model, Eb, texts, "script")
    gap = float(np.abs(mb - numpy_map).max())
    assert gap < 1e-4, f"the torch map differs from the numpy mixture by {gap}"
    rng = np.random.default_rng(0)
    random = np.ones(len(Eb))
    for _ in range(5):
        d = rng.standard_normal(Eb.shape).astype(np.float32)
        d *= 0.01 * np.linalg.norm(Eb, axis=1, keepdims=True) / np.linalg.norm(
            d, axis=1, keepdims=True)
        with torch.no_grad():
            random = np.minimum(random, msr._cos(mb, f(torch.from_numpy(Eb + d)).numpy()))
    rows = {"x + random d": random, "x + worst d found": msr.worst_case(model, Eb, f=f),
            "bfloat16 vs float32": msr._cos(mb, mf)}
    first = dict(zip(langs, texts, strict=True))  # each script's last sentence
    masks = {msr.SCRIPTS[c]: [k for k in model.language_id_.languages_
                              if text_script(t) in language_scripts(k)] or "none"
             for c, t in first.items()}
    print(f"{len(texts)} rows, {len(msr.SCRIPTS)} scripts; mask of one sentence each: {masks}")
    print("| check | min | rows < 0.999 | lowest script |\n|---|---:|---:|---|")
    langs = np.asarray(langs)
    for name, cos in rows.items():
        worst = min(dict.fromkeys(langs.tolist()), key=lambda c: cos[langs == c].min())
        print(f"| {name} | {cos.min():.5f} | {int((cos < 0.999).sum())} | "
              f"{msr.SCRIPTS[worst]} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--part", choices=("validation", "continuity"), default="validation")
    ap.add_argument("--seeds", default="0,1,2", help="training seeds of seed-centered")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    enc = cached(load_encoder("e5-small-torch", dtype="bfloat16"))
    if args.part == "continuity":
        continuity(enc)
        return
    qe = msr.qe_dev(enc)
    built = load_training_set(TrainingData(holdout_per_language=300), msr.TASKS)
    src, tgt = embed_pairs(enc, built.pairs)
    held_src, held_tgt = embed_pairs(enc, built.heldout)
    held = built.heldout
    langs = np.asarray(held.src_lang, dtype=object)
    fits = [("mean-centering", {}, 0)] + [(DEFAULT_RECIPE, DEFAULT_RECIPE_PARAMS, int(s))
                                         for s in args.seeds.split(",")]
    print("| recipe | seed | weights | held-out retrieval | QE dev | "
          + " | ".join(sub.name for sub, _, _ in qe) + " |")
    print("|---|---|---|---:|---:|" + "---:|" * len(qe))
    for name, params, seed in fits:
        options = {} if name == "mean-centering" else {"validate": qe_dev_validator(enc)}
        model = build_method(name, params, seed=seed).fit(
            src, tgt, built.pairs.src_lang, built.pairs.tgt_lang, **options)
        for mode in MODES:
            a = mixed_meaning(model, held_src, list(held.src), mode)
            b = mixed_meaning(model, held_tgt, list(held.tgt), mode)
            retrieval = np.mean([100 * retrieval_accuracy(a[langs == x], b[langs == x]).acc_mean
                                 for x in dict.fromkeys(held.src_lang)])
            per = [msr.pearson(mixed_meaning(model, Ea, sub.texts_a, mode),
                               mixed_meaning(model, Eb, sub.texts_b, mode), sub.gold)
                   for sub, Ea, Eb in qe]
            print(f"| {name} | {'-' if name == 'mean-centering' else seed} | {mode} | "
                  f"{retrieval:.2f} | {np.mean(per):.2f} | "
                  + " | ".join(f"{p:.2f}" for p in per) + " |", flush=True)


if __name__ == "__main__":
    main()
