"""Issue 31, point 2: continuous untagged routes other than the tempered posterior, tried
against the old argmax on validation data, then for continuity (docs/language_free.md,
"Other continuous routes, tried").

A *setting* is a comma-separated list of ``key=value`` (or a bare ``argmax``):

* ``T=t``: the route temperature (``softmax(logits / t)``; ``argmax``: ``T=1e-4``);
* ``l2=c``: the identifier's L2 strength (default 1e-4; smaller: a larger-margin, sharper
  identifier that needs a larger ``T`` for the same continuity);
* ``balanced=1``: the identifier fitted with class-balanced cross-entropy (English has
  twelve times the rows of any other language in the default job);
* ``cut=tau``: the posterior's tail cut relative to its top weight,
  ``w_k <- relu(w_k - tau max_j w_j)``, renormalised (one-hot on confident rows);
* ``top2=a``: only the two leading languages, ``w_k <- relu(w_k - a w_(3))`` (``w_(3)`` the
  third largest weight), renormalised.

Every map is continuous. The recipe is mean-centering (no training seed; ``x - sum_k w_k
mu_k``, the stricter of the two recipes for continuity in the tempered-posterior table).

``--part validation``: untagged held-out xx<->en retrieval and WMT20 QE **dev** Pearson
(x100), exactly as ``measure_soft_routing.py --part validation`` (same held-out split,
same 6 QE pairs). ``--part continuity``: on that script's 18-script Tatoeba set, the default
job's model: the lowest cosine between ``m(x)`` and ``m(x + d)``, ``|d| = 0.01 |x|``, random
``d`` and the worst ``d`` found (that script's search), and bfloat16 vs float32.

    python scripts/route_alternatives.py --part validation --settings "argmax;T=1;l2=1e-5,T=2"
    python scripts/route_alternatives.py --part continuity --settings "l2=1e-5,T=2"
"""

from __future__ import annotations

import argparse
import copy
import json
import logging
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import measure_soft_routing as msr  # noqa: E402

from disembed.encoders import load_encoder  # noqa: E402
from disembed.encoders.cached import cached  # noqa: E402
from disembed.experiment import TrainingData  # noqa: E402
from disembed.experiment.params import build_method  # noqa: E402
from disembed.experiment.steps import embed_pairs, load_training_set  # noqa: E402
from disembed.methods import make_method  # noqa: E402
from disembed.methods.language_id import LanguageIdentifier, _unit  # noqa: E402

logger = logging.getLogger("route_alternatives")


def parse(text: str) -> dict[str, float]:
    if text == "argmax":
        return {"T": 1e-4}
    return {k: float(v) for k, v in (part.split("=") for part in text.split(","))}


def _tail(w, cut: float, top2: float, xp):
    """The tail cut of weights ``w (n, L)`` (numpy or torch as ``xp``), renormalised."""
    if cut:
        w = xp.maximum(w - cut * w.max(1, keepdims=True), 0 * w) if xp is np else \
            (w - cut * w.max(1, keepdim=True).values).clamp_min(0)
    elif top2:
        third = -np.sort(-w, axis=1)[:, 2:3] if xp is np else w.topk(3, dim=1).values[:, 2:3]
        w = xp.maximum(w - top2 * third, 0 * w) if xp is np else (w - top2 * third).clamp_min(0)
    return w / w.sum(1, keepdims=True) if xp is np else w / w.sum(1, keepdim=True)


class Variant(LanguageIdentifier):
    """The default identifier with the setting's fit and route map."""

    cut, top2, balanced = 0.0, 0.0, False

    def fit(self, X, languages):
        super().fit(X, languages)
        if self.balanced:
            Z = _unit(np.asarray(X, np.float32) - self.center_)
            y = np.array([self.languages_.index(x) for x in languages], dtype=np.int64)
            self.W_, self.b_ = _fit_balanced(Z, y, len(self.languages_), self.l2)
        return self

    def route_weights(self, X):
        logits = self._logits(X)[1].astype(np.float64) / self.route_temperature
        w = np.exp(logits - logits.max(axis=1, keepdims=True))
        w = _tail(w / w.sum(axis=1, keepdims=True), self.cut, self.top2, np)
        w[w < 1e-4] = 0.0
        return w / w.sum(axis=1, keepdims=True)


def _fit_balanced(Z, y, n_classes, l2):
    """``_fit_softmax`` with each class weighted by the inverse of its row count."""
    import torch

    counts = np.bincount(y, minlength=n_classes).astype(np.float32)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        Zt, yt = torch.from_numpy(np.ascontiguousarray(Z)), torch.from_numpy(y)
        cw = torch.from_numpy(counts.sum() / (n_classes * counts))
        W = torch.zeros(n_classes, Z.shape[1], requires_grad=True)
        b = torch.zeros(n_classes, requires_grad=True)
        opt = torch.optim.LBFGS([W, b], lr=1.0, max_iter=200, history_size=20,
                                line_search_fn="strong_wolfe")

        def closure():
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(Zt @ W.T + b, yt, weight=cw) \
                + l2 * (W * W).sum()
            loss.backward()
            return loss

        opt.step(closure)
    return W.detach().numpy(), b.detach().numpy()


def variant_identifier(src, tgt, src_lang, tgt_lang, setting: dict[str, float]) -> Variant:
    """The setting's identifier, fitted on both sides of the pairs."""
    lid = Variant(l2=setting.get("l2", 1e-4), route_temperature=setting.get("T", 1.0))
    lid.cut, lid.top2 = setting.get("cut", 0.0), setting.get("top2", 0.0)
    lid.balanced = bool(setting.get("balanced", 0))
    return lid.fit(np.concatenate([src, tgt]),
                   np.concatenate([np.asarray(src_lang), np.asarray(tgt_lang)]))


def variant_model(src, tgt, src_lang, tgt_lang, setting: dict[str, float], base=None):
    """``base`` (default: mean-centering fitted on the pairs) with the setting's identifier."""
    model = copy.deepcopy(base) if base is not None else \
        make_method("mean-centering").fit(src, tgt, src_lang, tgt_lang)
    model.language_id_ = variant_identifier(src, tgt, src_lang, tgt_lang, setting)
    return model


def torch_meaning(model):
    """``x - sum_k w_k(x) mu_k`` in torch (differentiable), the setting's map included."""
    import torch

    lid = model.language_id_
    c, W, b = (torch.from_numpy(np.asarray(a)) for a in (lid.center_, lid.W_, lid.b_))
    M = torch.from_numpy(model.means_).double()

    def f(x):
        z = x - c
        z = z / z.norm(dim=1, keepdim=True)
        w = torch.softmax((z @ W.T + b).double() / lid.route_temperature, 1)
        return (x.double() - _tail(w, lid.cut, lid.top2, torch) @ M).float()

    return f


def mean_distances(model) -> dict[str, float]:
    """``|mu_a - mu_b|`` for every pair of the model's languages (the scale of a mixture's
    move between two routes, which continuity bounds)."""
    langs, M = model.languages_, model.means_
    return {f"{a}-{b}": float(np.linalg.norm(M[i] - M[j]))
            for i, a in enumerate(langs) for j, b in enumerate(langs) if i < j}


def validation(enc, settings: list[str], recipe: str = "mean-centering",
               seeds: tuple[int, ...] = (0,)) -> dict:
    """``{setting: scores}`` (mean-centering), or ``{"seed S": {setting: scores}}`` for
    ``recipe="seed-centered"`` (lr 3e-3 from 0.9 x identity, the tables above) per seed."""
    built = load_training_set(TrainingData(holdout_per_language=300), msr.TASKS)
    src, tgt = embed_pairs(enc, built.pairs)
    H, qe = embed_pairs(enc, built.heldout), msr.qe_dev(enc)
    pairs = (src, tgt, built.pairs.src_lang, built.pairs.tgt_lang)
    if recipe == "mean-centering":
        return _validation_rows(None, pairs, built, H, qe, settings)
    params = {"lr": 3e-3, "init_scale": 0.9}
    return {f"seed {seed}": _validation_rows(build_method(recipe, params, seed=seed).fit(*pairs),
                                             pairs, built, H, qe, settings)
            for seed in seeds}


def _validation_rows(base, pairs, built, H, qe, settings: list[str]) -> dict:
    out = {}
    for text in settings:
        model = variant_model(*pairs, parse(text), base)
        out[text] = msr.scores(model, built.heldout, H, qe, "none")
        if hasattr(model, "means_"):
            out[text]["mean_distances"] = mean_distances(model)
        gold = np.concatenate([built.heldout.src_lang, built.heldout.tgt_lang])
        said = model.language_id_.predict(np.concatenate(H)).nearest
        out[text]["identifier_heldout_accuracy"] = {
            x: float(100 * np.mean(said[gold == x] == x)) for x in ("ne", "si", "et")} | {
            "all": float(100 * np.mean(said == gold))}
        out[text]["qe_dev_pairs"] = {sub.name: msr.pearson(model.meaning(Ea), model.meaning(Eb),
                                                           sub.gold) for sub, Ea, Eb in qe}
        logger.info("%s: %s", text, out[text])
    return out


def continuity(bf16, fp32, settings: list[str]) -> dict:
    texts, langs = msr.script_set(150)
    Eb, Ef = bf16.encode(texts), fp32.encode(texts)
    built = load_training_set(TrainingData(), msr.TASKS)
    src, tgt = embed_pairs(bf16, built.pairs)
    out = {}
    for text in settings:
        model = variant_model(src, tgt, built.pairs.src_lang, built.pairs.tgt_lang,
                              parse(text))
        out[text] = msr.continuity_minima(model, torch_meaning(model), Eb, Ef)
        logger.info("%s: %s", text, out[text])
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--part", choices=("validation", "continuity"), required=True)
    ap.add_argument("--settings", required=True, help="';'-separated settings")
    ap.add_argument("--out", default="runs/route-alternatives")
    ap.add_argument("--recipe", choices=("mean-centering", "seed-centered"),
                    default="mean-centering", help="validation: the recipe")
    ap.add_argument("--seeds", default="0,1,2", help="validation, seed-centered: seeds")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s",
                        datefmt="%H:%M:%S")
    settings = [s for s in args.settings.split(";") if s]
    bf16 = cached(load_encoder("e5-small-torch", dtype="bfloat16"))
    if args.part == "validation":
        report = validation(bf16, settings, args.recipe,
                            tuple(int(x) for x in args.seeds.split(",")))
        if args.recipe != "mean-centering":
            report = {f"{seed}: {k}": v for seed, rows in report.items() for k, v in rows.items()}
        pairs = msr.PAIRS6
        accs = ("ne", "si", "all")
        lines = ["| setting | held-out retrieval | QE dev | " + " | ".join(pairs)
                 + " | identifier held-out accuracy ne / si / all |",
                 "|---|---:|---:|" + "---:|" * (len(pairs) + 1)]
        lines += [f"| {k} | {v['heldout_retrieval']:.2f} | {v['qe_dev']:.2f} | "
                  + " | ".join(f"{v['qe_dev_pairs'][p]:.2f}" for p in pairs) + " | "
                  + " / ".join(f"{v['identifier_heldout_accuracy'][a]:.1f}" for a in accs)
                  + " |" for k, v in report.items()]
    else:
        report = continuity(bf16, cached(load_encoder("e5-small-torch", dtype="float32")),
                            settings)
        lines = ["| setting | x + random d | x + worst d found | bfloat16 vs float32 |",
                 "|---|---:|---:|---:|"]
        lines += [f"| {k} | " + " | ".join(f"{v[p]['min']:.5f} ({v[p]['rows_below_0.999']})"
                                            for p in ("random", "worst", "bf16_vs_fp32"))
                  + " |" for k, v in report.items()]
    if args.part == "validation" and "mean_distances" in next(iter(report.values())):
        dist = next(iter(report.values()))["mean_distances"]
        v = np.array(list(dist.values()))
        lines.append(f"\n|mu_a - mu_b| over {len(v)} language pairs: min {v.min():.3f} "
                     f"({min(dist, key=dist.get)}), median {np.median(v):.3f}, max {v.max():.3f} "
                     f"({max(dist, key=dist.get)}); ne-si {dist.get('ne-si', float('nan')):.3f}; "
                     "second smallest " + f"{np.sort(v)[1]:.3f}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / (f"{args.part}.json" if args.recipe == "mean-centering"
                  else f"{args.part}-{args.recipe}.json")
    old = json.loads(path.read_text()) if path.exists() else {}
    path.write_text(json.dumps({**old, **report}, indent=2))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
