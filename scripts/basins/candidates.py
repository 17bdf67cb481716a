"""Experiment 3 of the seed-basin study (issue 37): candidate recipes, per training seed,
on validation data (WMT20 QE dev; held-out pool pairs where the protocol has them) and on
every test item.

Candidates (prototypes here; the ones worth it become registered recipes):

* ``mc``: mean-centering (no seed).
* ``sc``: the default recipe, seed-centered at lr 3e-3 from 0.9 x identity.
* ``interp:A``: the default recipe's head pulled towards the identity, ``W' = A W + (1-A) I``,
  ``b' = A b``: between mean-centering (A = 0) and the trained head (A = 1).
* ``whiten:P:G``: centring, then the pooled within-language covariance ``C`` (shrunk
  towards its mean eigenvalue by G) raised to ``-P/2`` (P = 1: full whitening).
* ``coral:G``: per-language covariance alignment after centring,
  ``m = C^{1/2} C_lang^{-1/2} (e - mu_lang)`` (each shrunk by G).
* ``nobias``: the default recipe's head without its bias, ``m = W (e - mu_lang)``.
* ``offset:A``: the head's W with the bias replaced by ``A |b| b0``, ``b0`` the unit
  direction of seed 0's bias (A = 1: seed 0's orientation; -1: the other basin's).
* ``mcoff:A``: mean-centering plus the same common offset (W = I).
* ``eraser``: centring, then LEACE fitted on the unit-length centred rows.
* ``soup:K``: the weight average of K seeds' heads (seeds s, s+1, ..., s+K-1 mod range).
* ``swa:E``: the average of the head's weights over epochs E..best of one run.

    PYTHONPATH=src python scripts/basins/candidates.py --seeds 0-5 \
        --candidates mc sc interp:0.5 whiten:0.5:0.1 --out runs/basins/cand-main.json
"""

from __future__ import annotations

import argparse
import copy
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (  # noqa: E402
    fmt,
    history_summary,
    main_scores,
    open_study,
    save_json,  # noqa: E402
)
from seeds import seed_list, validation  # noqa: E402

from disembed.methods import make_method  # noqa: E402
from disembed.methods.mean_centering import MeanCentering  # noqa: E402

DEFAULT = {"lr": 3e-3, "init_scale": 0.9}
#: the reference orientation of the offset candidates: seed 0's final bias (main job)
REF_BIAS = Path("runs/basins/cand-main-seed0.npz")


def power(C: np.ndarray, p: float, shrink: float) -> np.ndarray:
    """``C_shrunk ** p`` of a symmetric PSD ``C (d, d)``, float64."""
    d = len(C)
    C = (1 - shrink) * C + shrink * np.trace(C) / d * np.eye(d)
    lam, V = np.linalg.eigh((C + C.T) / 2)
    lam = np.maximum(lam, lam.max() * 1e-9)
    return (V * lam**p) @ V.T


class Whiten(MeanCentering):
    """Prototype: centring, then a shared (or per-language) linear map of the centred row."""

    def __init__(self, p: float = 0.5, shrink: float = 0.1, per_language: bool = False):
        super().__init__()
        self.p, self.shrink, self.per_language = p, shrink, per_language

    def fit(self, src, tgt, src_lang, tgt_lang):
        super().fit(src, tgt, src_lang, tgt_lang)
        X = np.concatenate([src, tgt]).astype(np.float64)
        langs = np.concatenate([np.asarray(src_lang, object), np.asarray(tgt_lang, object)])
        Xc = X - self._means_for(X.astype(np.float32), langs)
        C = Xc.T @ Xc / len(Xc)
        if not self.per_language:
            self.maps_ = {None: power(C, -self.p / 2, self.shrink)}
            return self
        root = power(C, 0.5, self.shrink)
        self.maps_ = {None: np.eye(len(C))}
        for lang in self.languages_:
            R = Xc[langs == lang]
            self.maps_[lang] = root @ power(R.T @ R / len(R), -0.5, self.shrink)
        return self

    def meaning(self, X, languages):
        X = self._check(X)
        centred = X - self._means_for(X, languages)
        langs = np.asarray([languages] * len(X) if isinstance(languages, str) or
                           languages is None else languages, dtype=object)
        out = np.empty_like(centred)
        for lang in set(langs.tolist()):
            rows = langs == lang
            T = self.maps_.get(lang, self.maps_[None])
            out[rows] = (centred[rows].astype(np.float64) @ T).astype(np.float32)
        return out


class CentredEraser(MeanCentering):
    """Prototype: centring, then LEACE fitted on the unit-length centred rows (centring makes
    the class means equal, so LEACE on the centred rows themselves would erase nothing)."""

    def fit(self, src, tgt, src_lang, tgt_lang):
        from disembed.methods.leace import leace_factors

        super().fit(src, tgt, src_lang, tgt_lang)
        X = np.concatenate([src, tgt]).astype(np.float64)
        langs = np.concatenate([np.asarray(src_lang, object), np.asarray(tgt_lang, object)])
        U = X - self._means_for(X.astype(np.float32), langs)
        U /= np.linalg.norm(U, axis=1, keepdims=True)
        Z = (langs[:, None] == np.array(self.languages_, dtype=object)[None]).astype(float)
        self.mu_ = U.mean(0)
        Uc, Zc = U - self.mu_, Z - Z.mean(0)
        self.left_, self.right_ = leace_factors(Uc.T @ Uc / len(U), Uc.T @ Zc / len(U),
                                                max_rank=len(self.languages_) - 1)
        return self

    def meaning(self, X, languages):
        X = self._check(X)
        C = (X - self._means_for(X, languages)).astype(np.float64)
        U = C / np.linalg.norm(C, axis=1, keepdims=True)
        return (U - ((U - self.mu_) @ self.right_.T) @ self.left_.T).astype(np.float32)


def with_head(model, weight: np.ndarray, bias: np.ndarray):
    """A copy of a fitted seed-centered ``model`` with the meaning layer ``(weight, bias)``."""
    out = copy.deepcopy(model)
    with torch.no_grad():
        out.head_.meaning.weight.copy_(torch.as_tensor(weight, dtype=torch.float32))
        out.head_.meaning.bias.copy_(torch.as_tensor(bias, dtype=torch.float32))
    return out


def head_of(model) -> tuple[np.ndarray, np.ndarray]:
    layer = model.head_.meaning
    return (layer.weight.detach().numpy().astype(np.float64),
            layer.bias.detach().numpy().astype(np.float64))


class Fits:
    """The default recipe's fits per seed (and their per-epoch weights), made once."""

    def __init__(self, data, params=None, heads_file: Path | None = None) -> None:
        self.data, self.params = data, dict(params or DEFAULT)
        self.heads_file = heads_file
        self._shell = None
        self.models: dict[int, object] = {}
        self.states: dict[int, list] = {}

    def saved(self, seed: int):
        """The fit of ``seed`` rebuilt from the head saved by an earlier run of this script
        (the fit is deterministic: the same weights), or fitted now."""
        path = (None if self.heads_file is None else
                self.heads_file.with_name(f"{self.heads_file.stem}-seed{seed}.npz"))
        if seed in self.models or path is None or not path.is_file():
            return self.get(seed)
        if self._shell is None:  # centring means and identifier depend on the data only
            self._shell = make_method("seed-centered", **{**self.params, "max_steps": 1})
            self._shell.fit(self.data.src, self.data.tgt, self.data.src_lang,
                            self.data.tgt_lang)
        saved = np.load(path)
        return with_head(self._shell, saved["W"], saved["b"])

    def get(self, seed: int):
        if seed not in self.models:
            model = make_method("seed-centered", **{**self.params, "seed": seed})
            states: list = []
            model.fit(self.data.src, self.data.tgt, self.data.src_lang, self.data.tgt_lang,
                      on_epoch_end=lambda _r: states.append(head_of(model)))
            self.models[seed], self.states[seed] = model, states
            if self.heads_file is not None:  # the head and its trajectory, for analysis
                W, b = head_of(model)
                np.savez(self.heads_file.with_name(f"{self.heads_file.stem}-seed{seed}.npz"),
                         W=W, b=b, Ws=np.stack([s[0] for s in states]),
                         bs=np.stack([s[1] for s in states]),
                         mu=model.centering_.means_, langs=np.array(model.languages_))
        return self.models[seed]


def build(name: str, seed: int, seeds: list[int], fits: Fits, data):
    kind, *args = name.split(":")
    if kind == "mc":
        return make_method("mean-centering").fit(data.src, data.tgt, data.src_lang,
                                                 data.tgt_lang)
    if kind == "sc":
        return fits.get(seed)
    if kind == "interp":
        a = float(args[0])
        W, b = head_of(fits.saved(seed))
        return with_head(fits.saved(seed), a * W + (1 - a) * np.eye(len(W)), a * b)
    if kind in ("whiten", "coral"):
        p, shrink = (float(args[0]), float(args[1])) if kind == "whiten" else (0.5,
                                                                              float(args[0]))
        return Whiten(p, shrink, per_language=kind == "coral").fit(
            data.src, data.tgt, data.src_lang, data.tgt_lang)
    if kind == "eraser":
        return CentredEraser().fit(data.src, data.tgt, data.src_lang, data.tgt_lang)
    if kind == "nobias":  # the trained W without its bias: m = W (e - mu)
        W, _ = head_of(fits.saved(seed))
        return with_head(fits.saved(seed), W, np.zeros(len(W)))
    if kind in ("offset", "mcoff"):  # a common offset A |b| b0 (b0: seed 0's bias direction)
        ref = np.load(REF_BIAS)["b"]
        W, b = head_of(fits.saved(seed))
        c = float(args[0]) * np.linalg.norm(b) * ref / np.linalg.norm(ref)
        return with_head(fits.saved(seed), W if kind == "offset" else np.eye(len(W)), c)
    if kind == "soup":
        k = int(args[0])
        pos = seeds.index(seed)
        members = [seeds[(pos + i) % len(seeds)] for i in range(k)]
        heads = [head_of(fits.saved(s)) for s in members]
        return with_head(fits.saved(seed), np.mean([h[0] for h in heads], axis=0),
                         np.mean([h[1] for h in heads], axis=0))
    if kind == "swa":
        first = int(args[0])
        model = fits.get(seed)
        best = model.history_.best_epoch
        heads = fits.states[seed][first - 1:best]
        return with_head(model, np.mean([h[0] for h in heads], axis=0),
                         np.mean([h[1] for h in heads], axis=0))
    raise SystemExit(f"unknown candidate {name!r}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", default="0-5")
    ap.add_argument("--candidates", nargs="+", required=True)
    ap.add_argument("--pairs-per-language", type=int, default=500)
    ap.add_argument("--holdout", type=int, default=0)
    ap.add_argument("--no-test", action="store_true", help="validation scores only")
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--heads", type=Path, default=None,
                    help="where the fits' heads are saved and read (default: --out as .npz)")
    args = ap.parse_args()
    study, data, held, results = open_study(args)
    cands = results.setdefault("candidates", {})
    seeds = seed_list(args.seeds)
    fits = Fits(data, heads_file=args.heads or args.out.with_suffix(".npz"))
    for name in args.candidates:
        per_seed = cands.setdefault(name, {})
        closed_form = name.startswith(("mc", "whiten", "coral", "eraser"))
        for seed in seeds[:1] if closed_form else seeds:
            if str(seed) in per_seed and (args.no_test or "test" in per_seed[str(seed)]):
                continue
            model = build(name, seed, seeds, fits, data)
            row = {"validation": validation(study, model, held),
                   "history": history_summary(model)}
            if not args.no_test:
                row["test"] = main_scores(study.test_scores(model))
            per_seed[str(seed)] = row
            save_json(args.out, results)
            print(f"{name} seed {seed}: dev {row['validation']['qe_dev']:.2f}"  # noqa: T201
                  + (f"  test {fmt(row['test'])}" if "test" in row else ""), flush=True)


if __name__ == "__main__":
    main()
