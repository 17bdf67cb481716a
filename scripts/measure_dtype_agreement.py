"""Cosine between e5-small torch bfloat16 and float32 embeddings of the same sentences
(docs/saved_models.md): 30 sentences and 10 English ones from each of ten Tatoeba files.

    PYTHONPATH=src python scripts/measure_dtype_agreement.py [DATA_DIR]
"""

import sys
import time
from pathlib import Path

import numpy as np

from disembed.encoders import load_encoder

root = Path(sys.argv[1] if len(sys.argv) > 1 else "/work/shared/data") / "tatoeba"
langs = ["deu", "cmn", "fra", "rus", "ara", "hin", "jpn", "spa", "tur", "swh"]
texts = []
for code in langs:
    texts += (root / f"tatoeba.{code}-eng.{code}").read_text(encoding="utf-8").splitlines()[:30]
    texts += (root / f"tatoeba.{code}-eng.eng").read_text(encoding="utf-8").splitlines()[:10]
t0 = time.time()
a = load_encoder("e5-small-torch", dtype="float32").encode(texts)
t1 = time.time()
b = load_encoder("e5-small-torch", dtype="bfloat16").encode(texts)
t2 = time.time()
cos = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
print(f"n={len(texts)} langs={len(langs)} median={np.median(cos):.5f} "  # noqa: T201
      f"p1={np.percentile(cos, 1):.5f} min={cos.min():.5f} mean={cos.mean():.5f} "
      f"fp32 {t1 - t0:.1f}s bf16 {t2 - t1:.1f}s")
