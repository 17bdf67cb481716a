"""Issue 31, point 2: erase the routing error instead of avoiding it (docs/language_free.md,
"Other continuous routes, tried").

An untagged row's meaning is a mixture of routes; for mean-centering and a linear
``*-centered`` head the mixture's error against the right route,
``sum_k w_k route_k(x) - route_true(x)``, lies in ``D = span{route_k(x) - route_j(x)}``,
which does not depend on ``x`` (mean-centering: ``span{mu_k - mu_j}``; a linear head ``W``:
``span{W (mu_k - mu_j)}``), of rank ``L - 1`` (12 of 384 dimensions in the default job).
Projecting every meaning vector, tagged or not, onto the orthogonal complement of ``D``'s
top-``r`` principal directions (``P = I - Q Q^T``) removes the error's component there; at
``r = L - 1`` the untagged meaning no longer depends on the weights at all (and equals the
tagged one).

A *setting* is ``;``-separated; each is ``argmax``, ``T=t`` (the mixture, no projection) or
``proj=r`` with optional ``,T=t`` (default 1) and ``,at=after|before|retrain``:

* ``after`` (default): ``P m(x)``, ``Q`` from the SVD of the routes of one input
  (``meaning(0, k)`` over the model's languages ``k``, centred across languages);
* ``before`` (a ``*-centered`` head, ``r = L - 1`` only): ``head(P (x - mu_bar))``, ``Q`` from
  the centred language means (``P (x - mu_k)`` is the same for every ``k``);
* ``retrain``: the recipe fitted on ``P x`` (both sides), ``Q`` from the training means,
  applied to ``P x`` at inference.

``lib``: the library's own erasure as fitted with the model (``route_erasure_``, rank 4 at
T = 1; it equals ``proj=4``): only at commit 5e41567, where the library had it (it failed
on the test sets and was taken out: docs/language_free.md, "Erasing the routing error").

``--part validation`` as ``route_alternatives.py --part validation`` (held-out pairs of the
default job's pool, 300 per language; WMT20 QE dev, 6 pairs, every item; x100), untagged and
gold-tag: per recipe (mean-centering; seed-centered lr 3e-3 from 0.9 x identity, per seed).
``--part continuity``: as that script's, on the 18-script set, through ``P``.

    python scripts/route_projection.py --part validation --recipe seed-centered --seeds 0,1,2 \
        --settings "argmax;T=1;proj=12;proj=12,at=before;proj=12,at=retrain;proj=4"
"""

from __future__ import annotations

import argparse
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

logger = logging.getLogger("route_projection")
PARAMS = {"seed-centered": {"lr": 3e-3, "init_scale": 0.9}, "mean-centering": {}}


def complement(vectors: np.ndarray, rank: int) -> np.ndarray:
    """``P = I - Q Q^T (d, d) float64``, ``Q`` the top-``rank`` left singular vectors of
    ``vectors (L, d)`` centred across rows."""
    centred = np.asarray(vectors, np.float64) - np.mean(vectors, axis=0, dtype=np.float64)
    u = np.linalg.svd(centred.T, full_matrices=False)[0][:, :rank]  # (d, rank)
    return np.eye(centred.shape[1]) - u @ u.T


def route_outputs(model) -> np.ndarray:
    """``(L, d)`` the meaning of the zero vector by each of the model's languages' routes."""
    zero = np.zeros((1, model.dim_), np.float32)
    return np.concatenate([model.meaning(zero, code) for code in model.language_id_.languages_])


class Projected:
    """``model`` with every meaning vector projected by ``P`` (``at="after"``), or the
    head fed ``P (x - mu_bar)`` (``at="before"``), or ``P x`` fed to a model fitted on it."""

    def __init__(self, model, P: np.ndarray, at: str, mu_bar=None) -> None:
        self.model, self.P, self.at, self.mu_bar = model, P, at, mu_bar
        self.language_id_ = model.language_id_

    def meaning(self, X, languages=None):
        X = np.asarray(X, np.float32)
        if self.at == "after":
            return (self.model.meaning(X, languages).astype(np.float64) @ self.P
                    ).astype(np.float32)
        if self.at == "retrain":
            return self.model.meaning((X.astype(np.float64) @ self.P).astype(np.float32),
                                      languages)
        import torch

        Z = ((X.astype(np.float64) - self.mu_bar) @ self.P).astype(np.float32)
        with torch.no_grad():
            return self.model.head_(torch.from_numpy(Z))[0].numpy()


def parse(text: str) -> dict:
    if text == "argmax":
        return {"T": 1e-4}
    if text == "lib":
        return {"lib": 1.0}
    out: dict = {}
    for part in text.split(","):
        k, v = part.split("=")
        out[k] = v if k == "at" else float(v)
    return out


def build(base, pairs, setting: dict, recipe: str, seed: int):
    """The setting's model (``base`` fitted on ``pairs``, or refitted on ``P x``)."""
    model = msr.with_temperature(base, setting.get("T", 1.0))
    if "lib" in setting:  # the library's own erasure (commit 5e41567 only)
        model.route_erasure_ = base.route_erasure_
        return model
    if "proj" not in setting:
        return model
    rank, at = int(setting["proj"]), setting.get("at", "after")
    src, tgt, s_lang, t_lang = pairs
    means = _means(base)
    if at == "after":
        return Projected(model, complement(route_outputs(base), rank), at)
    P = complement(means, rank)
    if at == "before":
        return Projected(model, P, at, means.mean(axis=0))
    refit = build_method(recipe, PARAMS[recipe], seed=seed).fit(
        (src @ P).astype(np.float32), (tgt @ P).astype(np.float32), s_lang, t_lang)
    return Projected(msr.with_temperature(refit, setting.get("T", 1.0)), P, at)


def _means(model) -> np.ndarray:
    centering = getattr(model, "centering_", None)
    return (centering if centering is not None else model).means_


def validation(enc, settings, recipe, seeds) -> dict:
    built = load_training_set(TrainingData(holdout_per_language=300), msr.TASKS)
    src, tgt = embed_pairs(enc, built.pairs)
    H, qe = embed_pairs(enc, built.heldout), msr.qe_dev(enc)
    pairs = (src, tgt, built.pairs.src_lang, built.pairs.tgt_lang)
    out = {}
    for seed in seeds:
        base = build_method(recipe, PARAMS[recipe], seed=seed).fit(*pairs)
        for text in settings:
            model = build(base, pairs, parse(text), recipe, seed)
            row = {tags: msr.scores(model, built.heldout, H, qe, tags)
                   for tags in ("none", "gold")}
            row["qe_dev_pairs"] = {sub.name: msr.pearson(model.meaning(Ea), model.meaning(Eb),
                                                         sub.gold) for sub, Ea, Eb in qe}
            key = text if recipe == "mean-centering" else f"seed {seed}: {text}"
            out[key] = row
            logger.info("%s: %s", key, row)
    return out


def continuity(bf16, fp32, settings, recipe) -> dict:
    import torch

    texts, _ = msr.script_set(150)
    Eb, Ef = bf16.encode(texts), fp32.encode(texts)
    built = load_training_set(TrainingData(), msr.TASKS)
    src, tgt = embed_pairs(bf16, built.pairs)
    pairs = (src, tgt, built.pairs.src_lang, built.pairs.tgt_lang)
    base = build_method(recipe, PARAMS[recipe], seed=0).fit(*pairs)
    out = {}
    for text in settings:
        setting = parse(text)
        model = build(base, pairs, setting, recipe, 0)
        if setting.get("at", "after") != "after":
            raise SystemExit("continuity: only at=after is measured through the torch map")
        inner = model.model if isinstance(model, Projected) else model
        P = torch.from_numpy(model.P) if isinstance(model, Projected) else None
        f0 = msr.torch_meaning(inner)

        def f(x, f0=f0, P=P):
            y = f0(x)
            return y if P is None else (y.double() @ P).float()

        out[text] = msr.continuity_minima(model, f, Eb, Ef, identifier_of=inner)
        logger.info("%s: %s", text, out[text])
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--part", choices=("validation", "continuity"), required=True)
    ap.add_argument("--settings", required=True)
    ap.add_argument("--recipe", choices=tuple(PARAMS), default="mean-centering")
    ap.add_argument("--seeds", default="0")
    ap.add_argument("--out", default="runs/route-projection")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s",
                        datefmt="%H:%M:%S")
    settings = [s for s in args.settings.split(";") if s]
    bf16 = cached(load_encoder("e5-small-torch", dtype="bfloat16"))
    if args.part == "validation":
        report = validation(bf16, settings, args.recipe,
                            [int(s) for s in args.seeds.split(",")])
        lines = ["| setting | untagged: held-out retrieval / QE dev | gold tag | "
                 + " | ".join(msr.PAIRS6) + " |", "|---|---:|---:|" + "---:|" * 6]
        lines += [f"| {k} | {v['none']['heldout_retrieval']:.2f} / {v['none']['qe_dev']:.2f} | "
                  f"{v['gold']['heldout_retrieval']:.2f} / {v['gold']['qe_dev']:.2f} | "
                  + " | ".join(f"{v['qe_dev_pairs'][p]:.2f}" for p in msr.PAIRS6) + " |"
                  for k, v in report.items()]
    else:
        report = continuity(bf16, cached(load_encoder("e5-small-torch", dtype="float32")),
                            settings, args.recipe)
        lines = ["| setting | x + random d | x + worst d found | bfloat16 vs float32 |",
                 "|---|---:|---:|---:|"]
        lines += [f"| {k} | " + " | ".join(f"{v[p]['min']:.5f} ({v[p]['rows_below_0.999']})"
                                            for p in ("random", "worst", "bf16_vs_fp32"))
                  + " |" for k, v in report.items()]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{args.part}-{args.recipe}.json"
    old = json.loads(path.read_text()) if path.exists() else {}
    path.write_text(json.dumps({**old, **report}, indent=2))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
