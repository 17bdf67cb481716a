"""Encoding rate of an export (plain sentence-transformers) against the library, one machine.

Fits the default recipe (seed-centered) on Tatoeba pairs with the default encoder
(``e5-small``: torch bfloat16 where bf16 is native, else float32), exports it, and then,
interleaved round by round (the order alternates), encodes the same ``--n`` Tatoeba
sentences of 14 languages:

* library: ``model.meaning(encoder.encode(texts))`` with the model's own encoder and no
  embedding cache (what a disembed user pays for new texts);
* export: ``SentenceTransformer(folder, trust_remote_code=True).encode(texts)``.

Prints each round's sentences/s, the median ratio export / library, the vectors' agreement
(min cosine), the dtype each side ran in, the thread count, the CPU flags that decide the
precision (``avx512_bf16``, ``amx_bf16``, ``avx2``) and the load average before and after.
Ratios within one run are robust to a steady load; absolute rates are not.

    python benchmarks/bench_export_speed.py [--n 2000] [--rounds 3] [--batch-size 64]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from disembed import cached, load_encoder
from disembed.data.tatoeba import load_tatoeba
from disembed.experiment import DEFAULT_RECIPE, DEFAULT_RECIPE_PARAMS
from disembed.hardware import configure_threads
from disembed.methods import make_method
from disembed.saved_model import SavedModel
from disembed.serving import export_model

LANGUAGES = ("ar", "bg", "de", "el", "es", "fr", "hi", "ru", "sw", "th", "tr", "ur", "vi", "zh")


def cpu_flags() -> list[str]:
    text = Path("/proc/cpuinfo").read_text(encoding="utf-8") if Path("/proc/cpuinfo").exists() \
        else ""
    return sorted(set(re.findall(r"\b(avx512_bf16|amx_bf16|avx2)\b", text)))


def texts_and_pairs(n: int, data_dir: str | None):
    """``n`` probe sentences (every language in turn, English sides too) and training pairs
    from other rows of the same files."""
    sets = {lang: load_tatoeba(lang, data_dir) for lang in LANGUAGES}
    probe, per = [], n // (2 * len(LANGUAGES)) + 1
    for s in sets.values():
        probe += s.source[-per:] + s.english[-per:]
    train = {lang: (s.source[:150], s.english[:150]) for lang, s in sets.items()
             if lang in ("de", "fr", "zh", "ar")}
    return probe[:n], train


def fit_and_export(workdir: Path, train) -> tuple[Path, Path]:
    encoder = cached(load_encoder("e5-small"))
    X = np.vstack([encoder.encode(src) for src, _ in train.values()])
    Y = np.vstack([encoder.encode(eng) for _, eng in train.values()])
    langs = [lang for lang, (src, _) in train.items() for _ in src]
    # the default recipe's architecture and settings; which of mirror=True's two fits is kept
    # (a WMT20 QE dev choice) changes the weights, not the export's speed
    params = {**DEFAULT_RECIPE_PARAMS, "mirror": False}
    model = make_method(DEFAULT_RECIPE, **params).fit(X, Y, langs, "en")
    model.save(workdir / "model", metadata={"encoder": encoder.identity.to_dict(),
                                            "encoder_spec": "e5-small"})
    exported = export_model(workdir / "model", workdir / "export").path
    return workdir / "model", exported


def cosines(a, b) -> np.ndarray:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=2000, help="sentences per round (default 2000)")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    ap.add_argument("--batch-size", type=int, default=64, help="both sides (default 64)")
    ap.add_argument("--json", default=None, help="also write the figures to this file")
    args = ap.parse_args()
    os.environ.setdefault("DISEMBED_PROGRESS", "0")
    from sentence_transformers import SentenceTransformer

    threads = configure_threads()
    texts, train = texts_and_pairs(args.n, os.environ.get("DISEMBED_DATA_DIR"))
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        model_dir, folder = fit_and_export(Path(tmp), train)
        encoder, model = SavedModel.load(model_dir)  # bare encoder: no cache
        st = SentenceTransformer(str(folder), device="cpu", trust_remote_code=True)

        def library():
            return model.meaning(encoder.encode(texts, batch_size=args.batch_size))

        def export():
            return st.encode(texts, batch_size=args.batch_size)

        library(), export()  # warm-up: first calls allocate
        rates = {"library": [], "export": []}
        outputs = {}
        for r in range(args.rounds):
            order = ("library", "export") if r % 2 == 0 else ("export", "library")
            for name in order:
                t0 = time.perf_counter()
                outputs[name] = (library if name == "library" else export)()
                rates[name].append(len(texts) / (time.perf_counter() - t0))
        st_dtype = str(next(st.parameters()).dtype).replace("torch.", "")
    load_after = os.getloadavg()
    ratios = [e / lib for e, lib in zip(rates["export"], rates["library"], strict=True)]
    result = {
        "sentences": len(texts), "rounds": args.rounds, "batch_size": args.batch_size,
        "library_rate": [round(x, 1) for x in rates["library"]],
        "export_rate": [round(x, 1) for x in rates["export"]],
        "ratio_export_over_library": round(statistics.median(ratios), 3),
        "min_cosine": round(float(cosines(outputs["library"], outputs["export"]).min()), 6),
        "library_dtype": dict(encoder.identity.extra).get("dtype"), "export_dtype": st_dtype,
        "threads": threads.threads, "thread_source": threads.source,
        "cpu_flags": cpu_flags(), "load_before": [round(x, 2) for x in load_before],
        "load_after": [round(x, 2) for x in load_after],
    }
    print(json.dumps(result, indent=1))  # noqa: T201
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
