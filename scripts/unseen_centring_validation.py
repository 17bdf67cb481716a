"""Which centring an unseen language should get, chosen on validation data (issue 17 point 6):
languages outside the default job's training set *and* outside Tatoeba-14, from the
Tatoeba-Challenge parallel files (pairs that overlap the LASER Tatoeba test dropped), so
no test set is looked at.

Per language, a seeded sample of ``--pairs`` (xx, en) pairs; xx->en / en->xx retrieval
accuracy x100 (Tatoeba's acc_mean) of: the raw embedding; the default model's meaning with
the (unseen) tag and the ``nearest`` fallback (the default) or the ``global`` one; with no
tag (the identifier's language); and soft centring (the posterior-weighted mix of the
training languages, see scripts/qe_notag_gap.py), also tempered. English side: the gold
``en`` tag throughout.

    python scripts/unseen_centring_validation.py --out runs/qegap
    python scripts/unseen_centring_validation.py --out runs/qegap --recipe mean-centering
"""

from __future__ import annotations

import argparse
import copy
import json
import logging
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from qe_notag_gap import THRESHOLDS, default_model, hybrid_weights, posterior  # noqa: E402

from disembed.data.io import read_tsv  # noqa: E402
from disembed.data.languages import normalize_language  # noqa: E402
from disembed.data.paths import resolve_data_dir  # noqa: E402
from disembed.encoders import load_encoder  # noqa: E402
from disembed.encoders.cached import cached  # noqa: E402
from disembed.exceptions import ConfigError  # noqa: E402

logger = logging.getLogger("unseen_centring_validation")
#: Tatoeba-14's languages: their test items are the inductive test set, kept out here
TATOEBA14 = {"ar", "bg", "de", "el", "es", "fr", "hi", "ru", "sw", "th", "tr", "ur", "vi", "zh"}


def retrieval(a: np.ndarray, b: np.ndarray) -> float:
    a = a / np.linalg.norm(a, axis=1, keepdims=True)
    b = b / np.linalg.norm(b, axis=1, keepdims=True)
    sim = a @ b.T
    idx = np.arange(len(a))
    return float(50 * ((sim.argmax(1) == idx).mean() + (sim.argmax(0) == idx).mean()))


def load_pairs(path: Path, code3: str, n: int, seed: int) -> tuple[list[str], list[str]]:
    rows, _ = read_tsv(path, ["en", code3, "pair_in_laser_tatoeba_test",
                              "sent_in_laser_tatoeba_test"], skip_bad=True)
    rows = [r for r in rows if r["pair_in_laser_tatoeba_test"] == "0"
            and r["sent_in_laser_tatoeba_test"] == "0" and r["en"].strip() and r[code3].strip()]
    rng = np.random.default_rng([seed, len(rows)])
    pick = np.sort(rng.choice(len(rows), size=min(n, len(rows)), replace=False))
    return [rows[i][code3] for i in pick], [rows[i]["en"] for i in pick]


def validation_languages(model) -> list[tuple[str, str, Path]]:
    """(code, file code, path) of each Tatoeba-Challenge language that is neither a training
    language of ``model`` nor one of Tatoeba-14's."""
    known = set(model.known_languages())
    folder = resolve_data_dir(None) / "parallel" / "tatoeba_challenge_v2021-08-07"
    chosen = []
    for path in sorted(folder.glob("en-*.tsv")):
        code3 = path.stem.split("-")[1]
        try:
            code = normalize_language(code3)
        except ConfigError:
            continue
        if code not in known and code not in TATOEBA14:
            chosen.append((code, code3, path))
    return chosen


def unknown_global(model, X: np.ndarray, P: np.ndarray) -> np.ndarray:
    """``(n, L)``: one-hot on the identifier's language, uniform (the mean of the training
    languages' means) for a row it calls "unknown"."""
    w = np.eye(P.shape[1])[P.argmax(axis=1)]
    w[np.asarray(model.predict_language(X).codes == "unknown")] = 1.0 / P.shape[1]
    return w


def with_policy(model, policy: str):
    out = copy.deepcopy(model)
    out.unknown_language = policy
    return out


def score_language(model, Ea: np.ndarray, Eb: np.ndarray, code: str) -> dict[str, float]:
    """Every setting's retrieval for one language; see the module docstring."""
    near, glob = with_policy(model, "nearest"), with_policy(model, "global")
    men = model.meaning(Eb, "en")
    per = np.stack([model.meaning(Ea, k) for k in model.language_id_.languages_])  # (L, n, d)
    P = posterior(model, Ea)
    row = {"n": len(Ea), "raw": retrieval(Ea, Eb),
           "tag, nearest": retrieval(near.meaning(Ea, code), men),
           "tag, global": retrieval(glob.meaning(Ea, code), men),
           "no tag (meaning(X))": retrieval(model.meaning(Ea), men),
           "no tag, global mean for 'unknown' rows": retrieval(
               np.einsum("nl,lnd->nd", unknown_global(model, Ea, P), per), men),
           "soft": retrieval(np.einsum("nl,lnd->nd", P, per), men)}
    for t in (2.0, 4.0):
        w = P ** (1 / t)
        w /= w.sum(axis=1, keepdims=True)
        row[f"soft T={t:g}"] = retrieval(np.einsum("nl,lnd->nd", w, per), men)
    for tau in THRESHOLDS:
        row[f"no tag: argmax if p >= {tau:g}, else soft T=2"] = retrieval(
            np.einsum("nl,lnd->nd", hybrid_weights(P, tau), per), men)
    return row


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="runs/qegap")
    ap.add_argument("--pairs", type=int, default=200)
    ap.add_argument("--max-languages", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--recipe", default="default", help="'default' (the default job's recipe) "
                    "or a recipe name fitted on the same training set, e.g. mean-centering")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s",
                        datefmt="%H:%M:%S")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    enc = cached(load_encoder("e5-small"))
    model = default_model(enc, out / ("model" if args.recipe == "default" else
                                      f"model-{args.recipe}"), args.recipe)
    rows = {}
    for code, code3, path in validation_languages(model)[: args.max_languages]:
        xx, en = load_pairs(path, code3, args.pairs, args.seed)
        rows[code] = score_language(model, enc.encode(xx), enc.encode(en), code)
        logger.info("%s: %s", code, {k: round(v, 1) for k, v in rows[code].items()})
    variants = [k for k in next(iter(rows.values())) if k != "n"]
    mean = {k: float(np.mean([r[k] for r in rows.values()])) for k in variants}
    suffix = "" if args.recipe == "default" else f"_{args.recipe}"
    (out / f"unseen_validation{suffix}.json").write_text(
        json.dumps({"recipe": args.recipe, "rows": rows, "mean": mean}, indent=2))
    print("| setting | " + " | ".join(rows) + " | mean | vs raw |")
    print("|---|" + "---:|" * (len(rows) + 2))
    for k in variants:
        print(f"| {k} | " + " | ".join(f"{r[k]:.1f}" for r in rows.values())
              + f" | {mean[k]:.2f} | {mean[k] - mean['raw']:+.2f} |")


if __name__ == "__main__":
    main()
