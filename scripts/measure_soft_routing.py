"""Issue 31, point 2: the untagged meaning without a hard argmax route. Two parts:

``--part validation`` chooses the route temperature ``T`` on validation data only: for each
training seed, the default recipe (and mean-centering) fitted on the default job's pool with
300 pairs of every language held out (as ``disembed tune`` does), then, for every ``T`` of
the grid (and the old argmax), untagged (both sides) xx<->en retrieval of the held-out pairs
and untagged WMT20 QE **dev** (every item, the six pairs), beside the gold-tag figures.
Writes ``OUT/validation.json`` and prints a Markdown table.

``--part continuity`` measures, on a set of Tatoeba sentences in many scripts (not a score:
no label is used), for the default job's model (default training set, seed 0) at the
chosen ``T`` (or ``--temperatures``): the cosine between the meaning of ``x`` and of
``x + d`` with ``|d| = 0.01 |x|`` for a random ``d`` (5 draws per row) and for the worst
direction found (the gradient of the top-2 logit difference, both signs, refined by
projected gradient ascent on ``1 - cos``), and the cosine between the meanings of the
bfloat16 and float32 embeddings of the same text. Writes ``OUT/continuity-RECIPE.json``.

    python scripts/measure_soft_routing.py --part validation --out runs/softroute
    python scripts/measure_soft_routing.py --part continuity --out runs/softroute
"""

from __future__ import annotations

import argparse
import copy
import json
import logging
from pathlib import Path

import numpy as np

from disembed.data.paths import resolve_data_dir
from disembed.encoders import load_encoder
from disembed.encoders.cached import cached
from disembed.evaluation.metrics import retrieval_accuracy
from disembed.evaluation.qe import WMT20QETask
from disembed.experiment import DEFAULT_RECIPE, DEFAULT_RECIPE_PARAMS, TrainingData
from disembed.experiment.params import build_method
from disembed.experiment.steps import embed_pairs, load_training_set
from disembed.experiment.validation import validation_options
from disembed.methods import make_method

logger = logging.getLogger("measure_soft_routing")
TASKS = ("tatoeba", "sts17", "wmt20-qe")
PAIRS6 = ("en-de", "en-zh", "et-en", "ne-en", "ro-en", "si-en")
#: ``None``: the old hard argmax (the identifier's most likely language)
GRID = (None, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 4.0)
#: one Tatoeba language per script (ISO 639-3 file names)
SCRIPTS = {"deu": "Latin", "rus": "Cyrillic", "ell": "Greek", "ara": "Arabic", "heb": "Hebrew",
           "hin": "Devanagari", "ben": "Bengali", "tam": "Tamil", "tel": "Telugu",
           "mal": "Malayalam", "tha": "Thai", "khm": "Khmer", "kat": "Georgian",
           "hye": "Armenian", "cmn": "Han", "jpn": "Japanese kana", "kor": "Hangul",
           "amh": "Ethiopic"}


def with_temperature(model, t):
    """A copy of ``model`` whose untagged rows mix with temperature ``t`` (``None``: argmax,
    as a temperature so small that the weights are one-hot; ``"sparse:s"``: sparsemax of
    the logits over ``s``)."""
    m = copy.deepcopy(model)
    if isinstance(t, str) and t.startswith("sparse:"):
        m.language_id_.route_map, t = "sparsemax", float(t.split(":")[1])
    else:
        m.language_id_.route_map = "softmax"
    m.language_id_.route_temperature = 1e-4 if t is None else float(t)
    return m


def label(t) -> str:
    if isinstance(t, str):
        return f"sparsemax s={t.split(':')[1]}"
    return "argmax (before)" if t is None else f"T={t:g}"


# --- validation ---------------------------------------------------------------------------
def qe_dev(enc) -> list:
    task = WMT20QETask("dev", seed=0)
    subs = []
    for subset in task.load_subsets():
        if subset.name in PAIRS6:
            subs.append((subset, enc.encode(subset.texts_a), enc.encode(subset.texts_b)))
    return subs


def pearson(a, b, gold) -> float:
    cos = (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    return float(100 * np.corrcoef(cos, gold)[0, 1])


def scores(model, heldout, H, qe, tags: str) -> dict[str, float]:
    """Held-out xx<->en retrieval (mean over languages) and QE dev (mean of six), x100."""
    src, tgt = H
    langs = np.asarray(heldout.src_lang, dtype=object)
    if tags == "gold":
        a, b = model.meaning(src, list(heldout.src_lang)), model.meaning(tgt, "en")
    else:
        a, b = model.meaning(src), model.meaning(tgt)
    ret = [100 * retrieval_accuracy(a[langs == x], b[langs == x]).acc_mean
           for x in dict.fromkeys(heldout.src_lang)]
    qes = []
    for sub, Ea, Eb in qe:
        if tags == "gold":
            ma, mb = model.meaning(Ea, sub.lang_a), model.meaning(Eb, sub.lang_b)
        else:
            ma, mb = model.meaning(Ea), model.meaning(Eb)
        qes.append(pearson(ma, mb, sub.gold))
    return {"heldout_retrieval": float(np.mean(ret)), "qe_dev": float(np.mean(qes))}


def validation(enc, seeds, out: Path, grid=GRID, suffix: str = "") -> dict:
    qe = qe_dev(enc)
    report: dict = {"grid": [label(t) for t in grid], "seeds": {}}
    built = load_training_set(TrainingData(holdout_per_language=300), TASKS)
    src, tgt = embed_pairs(enc, built.pairs)
    H = embed_pairs(enc, built.heldout)
    for seed in seeds:  # the training seed, as `disembed scale` uses it (same pairs)
        for name, params in ((DEFAULT_RECIPE, DEFAULT_RECIPE_PARAMS), ("mean-centering", {})):
            if name == "mean-centering" and seed != seeds[0]:
                continue  # no training seed
            model = build_method(name, params, seed=seed)
            model.fit(src, tgt, built.pairs.src_lang, built.pairs.tgt_lang,
                      **validation_options(model, enc))
            row = {"gold": scores(model, built.heldout, H, qe, "gold")}
            for t in grid:
                row[label(t)] = scores(with_temperature(model, t), built.heldout, H, qe, "none")
            report["seeds"].setdefault(str(seed), {})[name] = row
            logger.info("seed %s %s: %s", seed, name, row)
            (out / f"validation{suffix}.json").write_text(json.dumps(report, indent=2))
    return report


def validation_table(report: dict) -> str:
    lines = ["| recipe | seed | setting | held-out retrieval | QE dev | mean |",
             "|---|---|---|---:|---:|---:|"]
    for seed, per in report["seeds"].items():
        for name, row in per.items():
            for key in ["gold", *report["grid"]]:
                s = row[key]
                mean = (s["heldout_retrieval"] + s["qe_dev"]) / 2
                lines.append(f"| {name} | {seed} | {key} | {s['heldout_retrieval']:.2f} | "
                             f"{s['qe_dev']:.2f} | {mean:.2f} |")
    return "\n".join(lines)


# --- continuity ---------------------------------------------------------------------------
def script_set(per_language: int) -> tuple[list[str], list[str]]:
    """``per_language`` non-English sentences of each :data:`SCRIPTS` language (seeded)."""
    folder = resolve_data_dir(None) / "tatoeba"
    texts, langs = [], []
    for code in SCRIPTS:
        lines = [t for t in (folder / f"tatoeba.{code}-eng.{code}").read_text(
            encoding="utf-8").splitlines() if t.strip()]
        pick = np.random.default_rng(0).permutation(len(lines))[:per_language]
        texts += [lines[i] for i in sorted(pick)]
        langs += [code] * len(pick)
    return texts, langs


def _cos(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def torch_meaning(model):
    """The model's untagged meaning as a differentiable torch function (the export's own
    module, which the tests hold equal to ``model.meaning``)."""
    from disembed.serving import meaning_map
    from disembed.serving.st_pipeline import identifying_module

    module = identifying_module(meaning_map(model), model.language_id_, {},
                                model.unseen_route())
    module.min_route_weight = 0.0  # differentiable everywhere (the drop changes < 1e-4)
    return module.mixture


def worst_case(model, X: np.ndarray, eps: float = 0.01, steps: int = 15, f=None
               ) -> np.ndarray:
    """``(n,)`` the lowest cosine found between ``m(x)`` and ``m(x + d)``, ``|d| = eps |x|``:
    the gradient of the top-2 logit difference of ``model``'s identifier (both signs)
    refined by projected gradient ascent on ``1 - cos``. ``f``: the map ``m`` as a torch
    function (default: ``model``'s own, :func:`torch_meaning`)."""
    import torch

    f = torch_meaning(model) if f is None else f
    x = torch.from_numpy(np.asarray(X, np.float32))
    radius = eps * x.norm(dim=1, keepdim=True)
    with torch.no_grad():
        m0 = f(x)
    lid = model.language_id_

    def top2_gap(v):
        z = v - torch.from_numpy(lid.center_)
        z = z / z.norm(dim=1, keepdim=True)
        logits = z @ torch.from_numpy(lid.W_).T + torch.from_numpy(lid.b_)
        top = logits.topk(2, dim=1).values
        return (top[:, 0] - top[:, 1]).sum()

    v = x.clone().requires_grad_(True)
    (g,) = torch.autograd.grad(top2_gap(v), v)
    best = torch.ones(len(x), dtype=torch.float64)
    for start in (g, -g, torch.randn_like(x)):
        d = radius * start / start.norm(dim=1, keepdim=True).clamp_min(1e-12)
        for _ in range(steps):
            d = d.detach().requires_grad_(True)
            cos = torch.nn.functional.cosine_similarity(f(x + d).double(), m0.double(), dim=1)
            best = torch.minimum(best, cos.detach())
            (grad,) = torch.autograd.grad(cos.sum(), d)
            d = d - 0.5 * radius * grad / grad.norm(dim=1, keepdim=True).clamp_min(1e-12)
            d = radius * d / d.norm(dim=1, keepdim=True).clamp_min(1e-12)
        with torch.no_grad():
            cos = torch.nn.functional.cosine_similarity(f(x + d).double(), m0.double(), dim=1)
            best = torch.minimum(best, cos)
    return best.numpy()


def random_case(model, X: np.ndarray, eps: float = 0.01, draws: int = 5) -> np.ndarray:
    rng = np.random.default_rng(0)
    m0 = model.meaning(X)
    worst = np.ones(len(X))
    for _ in range(draws):
        d = rng.standard_normal(X.shape).astype(np.float32)
        d *= eps * np.linalg.norm(X, axis=1, keepdims=True) / np.linalg.norm(d, axis=1,
                                                                             keepdims=True)
        worst = np.minimum(worst, _cos(m0, model.meaning(X + d)))
    return worst


def continuity_minima(model, f, Eb: np.ndarray, Ef: np.ndarray, identifier_of=None) -> dict:
    """The three continuity checks of ``model``, whose untagged meaning is the torch map
    ``f`` (held equal to ``model.meaning`` first): for a random nudge, the worst nudge found
    (through ``f``, starting from the identifier of ``identifier_of``, default ``model``)
    and bfloat16 ``Eb`` against float32 ``Ef``, the lowest cosine and the rows under 0.999."""
    import torch

    assert np.allclose(f(torch.from_numpy(Eb[:64])).detach().numpy(), model.meaning(Eb[:64]),
                       atol=1e-4), "the torch map must equal model.meaning"
    row = {"random": random_case(model, Eb),
           "worst": worst_case(identifier_of or model, Eb, f=f),
           "bf16_vs_fp32": _cos(model.meaning(Eb), model.meaning(Ef))}
    return {k: {"min": float(v.min()), "rows_below_0.999": int((v < 0.999).sum())}
            for k, v in row.items()}


def continuity(enc_bf16, enc_fp32, temperatures, per_language, out: Path,
               recipes=(DEFAULT_RECIPE, "mean-centering")) -> dict:
    texts, langs = script_set(per_language)
    Eb, Ef = enc_bf16.encode(texts), enc_fp32.encode(texts)
    built = load_training_set(TrainingData(), TASKS)
    src, tgt = embed_pairs(enc_bf16, built.pairs)
    report: dict = {"sentences": len(texts), "scripts": len(SCRIPTS),
                    "raw_bf16_vs_fp32": _summary(_cos(Eb, Ef), langs), "models": {}}
    for name in recipes:
        params = DEFAULT_RECIPE_PARAMS if name == DEFAULT_RECIPE else {}
        model = make_method(name, **params)
        model.fit(src, tgt, built.pairs.src_lang, built.pairs.tgt_lang,
                  **validation_options(model, enc_bf16))
        for t in temperatures:
            m = with_temperature(model, t)
            row = {"random": _summary(random_case(m, Eb), langs),
                   "worst": _summary(worst_case(m, Eb), langs),
                   "bf16_vs_fp32": _summary(_cos(m.meaning(Eb), m.meaning(Ef)), langs)}
            report["models"].setdefault(name, {})[label(t)] = row
            logger.info("%s %s: %s", name, label(t), {k: v["min"] for k, v in row.items()})
            (out / f"continuity-{name}.json").write_text(json.dumps(report, indent=2))
    return report


def _summary(cos: np.ndarray, langs) -> dict:
    langs = np.asarray(langs)
    return {"min": float(cos.min()), "p01": float(np.quantile(cos, 0.01)),
            "median": float(np.median(cos)), "rows_below_0.999": int((cos < 0.999).sum()),
            "per_script_min": {SCRIPTS[c]: float(cos[langs == c].min())
                               for c in dict.fromkeys(langs.tolist())}}


def parse_setting(text: str):
    """``argmax``, a temperature (``0.5``) or ``sparse:S`` (sparsemax of logits / S)."""
    if text == "argmax":
        return None
    return text if text.startswith("sparse:") else float(text)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--part", choices=("validation", "continuity"), required=True)
    ap.add_argument("--out", default="runs/softroute")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--temperatures", default="",
                    help="continuity: comma-separated T ('argmax' for the old route); "
                    "default: the identifier's default")
    ap.add_argument("--per-language", type=int, default=150)
    ap.add_argument("--recipes", default=f"{DEFAULT_RECIPE},mean-centering",
                    help="continuity: the recipes measured")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s",
                        datefmt="%H:%M:%S")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    bf16 = cached(load_encoder("e5-small-torch", dtype="bfloat16"))
    if args.part == "validation":
        grid = [parse_setting(t) for t in args.temperatures.split(",") if t] or GRID
        report = validation(bf16, [int(s) for s in args.seeds.split(",")], out, grid,
                            "" if grid == GRID else "-" + args.temperatures.replace(":", "")
                            .replace(",", "_"))
        print(validation_table(report))
        return
    from disembed.methods.language_id import DEFAULT_ROUTE_TEMPERATURE

    temps = [parse_setting(t) for t in args.temperatures.split(",") if t] \
        or [DEFAULT_ROUTE_TEMPERATURE]
    fp32 = cached(load_encoder("e5-small-torch", dtype="float32"))
    report = continuity(bf16, fp32, temps, args.per_language, out,
                        tuple(args.recipes.split(",")))
    print(json.dumps({n: {t: {k: v["min"] for k, v in r.items()} for t, r in per.items()}
                      for n, per in report["models"].items()}, indent=1))


if __name__ == "__main__":
    main()
