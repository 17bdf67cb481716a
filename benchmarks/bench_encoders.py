"""Encoding speed of the bundled encoders on real sentences (no cache involved).

Run:  .venv/bin/python benchmarks/bench_encoders.py [--n 500] [--encoders e5-small-c,use-m3]

Sentences: the first n//4 sources and translations of WMT20 QE test en-de and ro-en
(from --data-dir / $DISEMBED_DATA_DIR / ../shared/data), mixed scripts and lengths.
Each encoder is warmed up on 16 sentences, then timed once over all n.
"""

from __future__ import annotations

import argparse
import json
import os
import time

from disembed.data.paths import resolve_data_dir
from disembed.data.wmt20_qe import load_wmt20_qe
from disembed.encoders import load_encoder


def sentences(n: int, data_dir) -> list[str]:
    out: list[str] = []
    for pair in ("en-de", "ro-en"):
        qe = load_wmt20_qe(pair, "test", data_dir)
        out += qe.sources[: n // 4] + qe.translations[: n // 4]
    return out[:n]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=500)
    ap.add_argument("--encoders", default="e5-small-c,e5-small,use-m3")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    texts = sentences(args.n, resolve_data_dir(args.data_dir))
    rows = []
    for spec in args.encoders.split(","):
        encoder = load_encoder(spec)
        encoder.encode(texts[:16], batch_size=args.batch_size)
        t0 = time.perf_counter()
        encoder.encode(texts, batch_size=args.batch_size)
        seconds = time.perf_counter() - t0
        rows.append({"encoder": spec, "backend": encoder.identity.backend, "n": len(texts),
                     "seconds": round(seconds, 2),
                     "sentences_per_second": round(len(texts) / seconds, 1),
                     "loadavg": os.getloadavg()[0]})
    print("| encoder | backend | sentences | seconds | sentences/s |")
    print("|---|---|---:|---:|---:|")
    for r in rows:
        print(f"| {r['encoder']} | {r['backend']} | {r['n']} | {r['seconds']} | "
              f"{r['sentences_per_second']} |")
    print(json.dumps(rows))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(rows, f, indent=2)


if __name__ == "__main__":
    main()
