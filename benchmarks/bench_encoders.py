"""Encoding speed of the bundled encoders on real sentences (no cache involved).

Run:  .venv/bin/python benchmarks/bench_encoders.py [--n 500] [--encoder e5-small-c,use-m3]

Sentences: the first n//4 sources and translations of WMT20 QE test en-de and ro-en
(from --data-dir / $DISEMBED_DATA_DIR / ../shared/data), mixed scripts and lengths.
Each encoder is warmed up on 16 sentences, then timed ``--rounds`` times, the encoders
alternating (on a shared machine the ratio of back-to-back timings is what to read).
The hardware probe, the thread count and the ``uptime`` load are recorded with the rows.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import time

from disembed.data.paths import resolve_data_dir
from disembed.data.wmt20_qe import load_wmt20_qe
from disembed.encoders import load_encoder
from disembed.hardware import configure_threads, probe


def sentences(n: int, data_dir) -> list[str]:
    out: list[str] = []
    for pair in ("en-de", "ro-en"):
        qe = load_wmt20_qe(pair, "test", data_dir)
        out += qe.sources[: n // 4] + qe.translations[: n // 4]
    return out[:n]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=500)
    ap.add_argument("--encoder", default="e5-small-c,e5-small,use-m3")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    texts = sentences(args.n, resolve_data_dir(args.data_dir))
    threads, caps = configure_threads(), probe()
    encoders = {spec: load_encoder(spec) for spec in args.encoder.split(",")}
    timings: dict[str, list[float]] = {spec: [] for spec in encoders}
    loads = []
    for _ in range(args.rounds):
        for spec, encoder in encoders.items():
            encoder.encode(texts[:16], batch_size=args.batch_size)
            t0 = time.perf_counter()
            encoder.encode(texts, batch_size=args.batch_size)
            timings[spec].append(time.perf_counter() - t0)
            loads.append(os.getloadavg()[0])
    rows = []
    for spec, encoder in encoders.items():
        seconds = min(timings[spec])
        backend = encoder.identity.backend + "".join(f" {k}={v}" for k, v in encoder.identity.extra)
        rows.append({"encoder": spec, "backend": backend, "n": len(texts),
                     "seconds": round(seconds, 2),
                     "sentences_per_second": round(len(texts) / seconds, 1),
                     "per_round": [round(len(texts) / t, 1) for t in timings[spec]]})
    print("| encoder | backend | sentences | best seconds | sentences/s (each round) |")
    print("|---|---|---:|---:|---:|")
    for r in rows:
        print(f"| {r['encoder']} | {r['backend']} | {r['n']} | {r['seconds']} | "
              f"{r['sentences_per_second']} ({', '.join(map(str, r['per_round']))}) |")
    uptime = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    report = {"rows": rows, "batch_size": args.batch_size, "threads": threads.to_dict(),
              "probe": caps.to_dict(), "loadavg_during": loads, "uptime_end": uptime}
    print(f"threads {threads.threads} ({threads.source}); {uptime}")
    print(json.dumps(report))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(report, f, indent=2)


if __name__ == "__main__":
    main()
