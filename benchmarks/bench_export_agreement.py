"""How closely an exported sentence-transformers model reproduces disembed's meaning part.

Fits SEED and mean-centering on Tatoeba de-en pairs with each e5-small backend, exports
each model, and compares the exported model's output (plain sentence-transformers, in
this process) with ``model.meaning(encoder.encode(texts), lang)`` on held-out Tatoeba
sentences in German and English: min and mean cosine per backend and method.

    python benchmarks/bench_export_agreement.py [--pairs 300] [--probe 100]
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

import numpy as np
from sentence_transformers import SentenceTransformer

from disembed import load_encoder, make_method
from disembed.data.tatoeba import load_tatoeba
from disembed.serving import export_model


def cosines(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pairs", type=int, default=300)
    ap.add_argument("--probe", type=int, default=100)
    ap.add_argument("--encoder", default="e5-small-torch,e5-small-c")
    args = ap.parse_args()
    data = load_tatoeba("de", os.environ.get("DISEMBED_DATA_DIR"))
    n, k = args.pairs, args.probe
    probe = {"de": data.source[n : n + k], "en": data.english[n : n + k]}
    print(f"# {n} training pairs (Tatoeba de-en), {k} held-out sentences per language")
    print("| encoder | method | language | min cosine | mean cosine |")
    print("|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for spec in args.encoder.split(","):
            enc = load_encoder(spec)
            X, Y = enc.encode(data.source[:n]), enc.encode(data.english[:n])
            for method, params in (("seed", {"max_epochs": 20}), ("mean-centering", {})):
                model = make_method(method, **params).fit(X, Y, "de", "en")
                saved = Path(tmp) / f"{spec}-{method}"
                model.save(saved, metadata={"encoder": enc.identity.to_dict()})
                exported = export_model(saved, Path(tmp) / f"{spec}-{method}-st")
                st = SentenceTransformer(str(exported.path), device="cpu")
                for lang, texts in probe.items():
                    kwargs = {"task": lang} if exported.by_language else {}
                    got = st.encode(texts, **kwargs)
                    c = cosines(got, model.meaning(enc.encode(texts), lang))
                    print(f"| {spec} | {method} | {lang} | {c.min():.6f} | {c.mean():.6f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
