"""Issue 31, point 2: the script prior (the identifier's posterior restricted to the
languages that write the text's script, the library's route for an untagged text since
this change) against the old argmax and the unrestricted T = 1 mixture
(docs/language_free.md, "The script prior").

For an untagged row with text ``t`` and raw embedding ``x``:

    w_k(x, t) = softmax(logits(x))_k [lang k writes script(t)] / sum_j (same)

(the library masks the logits, then drops weights under ``MIN_ROUTE_WEIGHT``); where no
training language writes the script (Greek, Thai, ...) the posterior is left as it is.
``script(t)`` is :func:`disembed.util.scripts.script_of`; a language's scripts
:func:`disembed.data.languages.language_scripts`. ``script`` and ``T1`` are the library's
own ``model.meaning`` (with each text's ``und-<Script>`` tag, or none); ``argmax`` mixes
the library's routes with one-hot weights (the route before issue 31).

``--part validation``: exactly as ``measure_soft_routing.py --part validation``: the
default job's pool with 300 pairs of every language held out, the model fitted on the rest
(seed-centered with its defaults at the training seeds given, which keeps the mirror fit
WMT20 QE dev prefers; mean-centering), untagged held-out xx<->en retrieval and WMT20 QE
**dev** Pearson per pair, x100, e5-small torch bfloat16 from the cache.

``--part continuity``: on ``measure_soft_routing.py``'s 18-script Tatoeba set (150
sentences of each script, 2,700 rows) with the default job's mean-centering model, each
row's mask fixed by its text: the lowest cosine between ``m(x)`` and ``m(x + d)``,
``|d| = 0.01 |x|``, for a random ``d`` (lowest of 5) and the worst ``d`` found (that
script's search, through this map in torch, checked equal to the library's), and between
the meanings of the bfloat16 and the float32 embedding of the same text.

``--part test --runs DIR``: every model a ``disembed scale`` run saved, scored untagged on
its test tasks under the three weights (the same fits; ``script`` is checked equal to the
run's own untagged score). A measurement made once, after the choice.

    python scripts/route_script_prior.py --part validation --seeds 0,1,2
    python scripts/route_script_prior.py --part continuity
    python scripts/route_script_prior.py --part test --runs runs/scale-script
"""

from __future__ import annotations

import argparse
import functools
import logging
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import measure_soft_routing as msr  # noqa: E402

from disembed.data.languages import language_scripts  # noqa: E402
from disembed.encoders import load_encoder  # noqa: E402
from disembed.encoders.cached import cached  # noqa: E402
from disembed.evaluation import EvalOptions  # noqa: E402
from disembed.evaluation.metrics import retrieval_accuracy  # noqa: E402
from disembed.experiment import DEFAULT_RECIPE, DEFAULT_RECIPE_PARAMS, TrainingData  # noqa: E402
from disembed.experiment.params import build_method  # noqa: E402
from disembed.experiment.steps import embed_pairs, load_training_set  # noqa: E402
from disembed.experiment.tasks import build_tasks  # noqa: E402
from disembed.experiment.validation import qe_dev_validator  # noqa: E402
from disembed.methods.routing import tags_with_scripts  # noqa: E402
from disembed.saved_model import SavedModel  # noqa: E402
from disembed.util.scripts import script_of  # noqa: E402

MODES = ("argmax", "T1", "script")


def route_weights(model, X: np.ndarray, texts: list[str], mode: str) -> np.ndarray:
    """``(n, L)`` weights over ``model.language_id_.languages_``: the identifier's own
    (``T1``; the model's route temperature, 1), one-hot on its largest (``argmax``), or
    the library's script prior (``script``: the posterior restricted to the languages that
    write each text's script, :meth:`LanguageIdentifier.allowed_for_scripts`)."""
    lid = model.language_id_
    if mode == "script":
        return lid.route_weights(X, lid.allowed_for_scripts([script_of(t) for t in texts]))
    w = lid.route_weights(X)
    if mode == "argmax":
        return np.eye(len(lid.languages_))[w.argmax(axis=1)]
    return w


def mixed_meaning(model, X: np.ndarray, texts: list[str], mode: str) -> np.ndarray:
    """The untagged meaning under ``mode``: the library's own ``model.meaning`` with no tag
    (``T1``) or with each text's script (``script``, what every surface sends:
    :func:`tags_with_scripts`); ``argmax`` mixes the library's routes with one-hot weights."""
    if mode == "T1":
        return model.meaning(X, None)
    if mode == "script":
        return model.meaning(X, tags_with_scripts(texts))
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
    rows: the export's own module, its logits masked row by row as the library does."""
    import torch

    module = msr.torch_meaning(model).__self__
    lid = model.language_id_
    allowed = torch.from_numpy(lid.allowed_for_scripts([script_of(t) for t in texts]))
    return functools.partial(module.mixture, allowed=allowed)


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
                              if script_of(t) in language_scripts(k)] or "none"
             for c, t in first.items()}
    print(f"{len(texts)} rows, {len(msr.SCRIPTS)} scripts; mask of one sentence each: {masks}")
    print("| check | min | rows < 0.999 | lowest script |\n|---|---:|---:|---|")
    langs = np.asarray(langs)
    for name, cos in rows.items():
        worst = min(dict.fromkeys(langs.tolist()), key=lambda c: cos[langs == c].min())
        print(f"| {name} | {cos.min():.5f} | {int((cos < 0.999).sum())} | "
              f"{msr.SCRIPTS[worst]} |")


def test_rescore(enc, runs: Path) -> None:
    """Every saved model of a ``disembed scale`` output (``runs/SIZE/METHOD/seed-N/model``)
    scored untagged on the test tasks under the three weights: the same fits, so the only
    difference is the route. ``script`` must reproduce the run's own untagged score."""
    from disembed.results import RunResult

    options = EvalOptions(max_items=300, task_options={"tatoeba": {"languages": "tatoeba-14"}})
    tasks = build_tasks(["tatoeba", "sts17", "wmt20-qe"], options)
    print("| recipe | seed | task | argmax | T = 1 | script prior | script - argmax | "
          "script - T1 |\n|---|---|---|---:|---:|---:|---:|---:|")
    for run in sorted(runs.glob("*/*/seed-*")):
        model = SavedModel.load(run / "model").disentangler
        recorded = {t.task: t.main_score("untagged") for t in RunResult.load(run).scores}
        for task in tasks:
            got = {}
            for mode in MODES:
                scores = task.evaluate(
                    lambda texts: enc.encode(texts),
                    lambda X, _lang, texts, mode=mode, model=model: {"untagged": mixed_meaning(
                        model, X, list(texts), mode)})
                got[mode] = 100 * scores.main_score("untagged")
            assert abs(got["script"] - 100 * recorded[task.metadata.name]) < 1e-9, run
            seed = "-" if run.parent.name == "mean-centering" else run.name.split("-")[1]
            print(f"| {run.parent.name} | {seed} | {task.metadata.name} | "
                  + " | ".join(f"{got[m]:.2f}" for m in MODES)
                  + f" | {got['script'] - got['argmax']:+.2f} | "
                  f"{got['script'] - got['T1']:+.2f} |", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--part", choices=("validation", "continuity", "test"),
                    default="validation")
    ap.add_argument("--runs", type=Path, help="--part test: a disembed scale --out folder")
    ap.add_argument("--seeds", default="0,1,2", help="training seeds of seed-centered")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    enc = cached(load_encoder("e5-small-torch", dtype="bfloat16"))
    if args.part == "continuity":
        continuity(enc)
        return
    if args.part == "test":
        test_rescore(enc, args.runs)
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
