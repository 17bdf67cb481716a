"""Load test of ``disembed serve`` on loopback: p50/p95/p99 latency and throughput at 1, 4, 16,
64 clients, cold and warm.

Starts ``disembed serve`` in a subprocess on 127.0.0.1 (a free port; the embedding cache
in a new temporary folder), then for each concurrency level runs that many clients in a
closed loop, each sending ``POST /v1/embeddings`` with ``--texts-per-request`` real
sentences, until ``--requests`` requests are done or ``--seconds`` have passed (both bound
every level). **Cold**: sentences this server has never seen (every one is encoded);
**warm**: the same sentences again (every one is a cache hit). With ``--no-cache`` only the
cold phase runs. The mean requests per encoder call (micro-batching) is read from
``/health`` around each phase. Nothing leaves the machine.

    python benchmarks/bench_serve.py                                   # e5-small, full
    python benchmarks/bench_serve.py --encoder hash:384 --short        # < 1 minute
    python benchmarks/bench_serve.py --model models/seed-e5 --out serve.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np


def sentences(n: int) -> list[str]:
    """Real sentences (Tatoeba German and English) when the data is there, else synthetic."""
    root = Path(os.environ.get("DISEMBED_DATA_DIR", "../shared/data")) / "tatoeba"
    out: list[str] = []
    for name in ("tatoeba.deu-eng.deu", "tatoeba.deu-eng.eng"):
        if (root / name).is_file():
            out += [s for s in (root / name).read_text(encoding="utf-8").splitlines() if s.strip()]
    return out[:n] if len(out) >= n else [f"synthetic sentence number {i} for the load test"
                                          for i in range(n)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(args, port: int) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "disembed", "serve", "--host", "127.0.0.1", "--port", str(port),
           "--max-batch", str(args.max_batch), "--batch-window-ms", str(args.window_ms), "-q"]
    cmd += ["--model", args.model] if args.model else ["--encoder", args.encoder]
    if not args.cache:
        cmd.append("--no-cache")
    else:
        cmd += ["--cache-dir", args.cache_dir]
    proc = subprocess.Popen(cmd)
    deadline = time.monotonic() + args.startup_timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the server exited with {proc.returncode}: {' '.join(cmd)}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.5)
    proc.kill()
    raise SystemExit(f"the server did not answer /health within {args.startup_timeout}s")


async def level(url: str, clients: int, pool: list[str], args, phase: str = "cold") -> dict:
    """Closed-loop load with ``clients`` concurrent clients; bounded in requests and time."""
    latencies: list[float] = []
    errors = 0
    sent = 0
    stop_at = time.monotonic() + args.seconds
    k = args.texts_per_request

    async def client(cid: int, http: httpx.AsyncClient) -> None:
        nonlocal errors, sent
        while sent < args.requests and time.monotonic() < stop_at:
            i = sent
            sent += 1
            texts = [pool[(i * k + j) % len(pool)] for j in range(k)]  # no repeats in a phase
            t0 = time.perf_counter()
            r = await http.post(url + "/v1/embeddings", json={"input": texts, "model": args.view,
                                                             **args.extra})
            latencies.append(time.perf_counter() - t0)
            errors += r.status_code != 200

    limits = httpx.Limits(max_connections=clients)
    async with httpx.AsyncClient(timeout=120, limits=limits) as http:
        before = (await http.get(url + "/health")).json()["batching"]
        t0 = time.perf_counter()
        await asyncio.gather(*(client(c, http) for c in range(clients)))
        wall = time.perf_counter() - t0
        after = (await http.get(url + "/health")).json()["batching"]
    lat = np.array(latencies) * 1000
    batches = max(after["batches"] - before["batches"], 1)
    return {"phase": phase, "clients": clients, "requests": len(lat), "errors": errors,
            "seconds": round(wall, 2),
            "p50_ms": round(float(np.percentile(lat, 50)), 1),
            "p95_ms": round(float(np.percentile(lat, 95)), 1),
            "p99_ms": round(float(np.percentile(lat, 99)), 1),
            "requests_per_batch": round((after["requests"] - before["requests"]) / batches, 1),
            "requests_per_s": round(len(lat) / wall, 1),
            "sentences_per_s": round(len(lat) * k / wall, 1)}


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    which = ap.add_mutually_exclusive_group()
    which.add_argument("--model", default=None, help="a trained model directory")
    which.add_argument("--encoder", default="e5-small", help="a bare encoder (default e5-small)")
    ap.add_argument("--view", default="meaning")
    ap.add_argument("--language", default=None, help="sent with every request (routed methods)")
    ap.add_argument("--levels", default="1,4,16,64", help="concurrent clients per level")
    ap.add_argument("--requests", type=int, default=400, help="most requests per level")
    ap.add_argument("--seconds", type=float, default=60.0, help="most seconds per level")
    ap.add_argument("--texts-per-request", type=int, default=1)
    ap.add_argument("--max-batch", type=int, default=64)
    ap.add_argument("--window-ms", type=float, default=5.0)
    ap.add_argument("--no-cache", dest="cache", action="store_false",
                    help="embedding cache off (cold phase only)")
    ap.add_argument("--startup-timeout", type=float, default=180.0)
    ap.add_argument("--short", action="store_true",
                    help="quick check: at most 60 requests and 8 s per level")
    ap.add_argument("--out", default=None, help="write the results as JSON")
    args = ap.parse_args()
    if args.short:
        args.requests, args.seconds = min(args.requests, 60), min(args.seconds, 8.0)
    args.extra = {"language": args.language} if args.language else {}
    args.cache_dir = tempfile.mkdtemp(prefix="bench-serve-cache-")
    return args


def run_levels(url: str, pool: list[str], args) -> list[dict]:
    """Every level cold (unseen sentences), then warm (the same ones again) with the cache."""
    rows, start = [], 0
    for clients in map(int, args.levels.split(",")):
        n = args.requests * args.texts_per_request
        fresh = pool[start : start + n]
        start += n
        rows.append(asyncio.run(level(url, clients, fresh, args, "cold")))
        if args.cache:
            rows.append(asyncio.run(level(url, clients, fresh, args, "warm")))
    return rows


def main() -> int:
    args = parse_args()
    port = free_port()
    proc = start_server(args, port)
    try:
        pool = sentences(6000)
        url = f"http://127.0.0.1:{port}"
        asyncio.run(level(url, 1, pool[-50:], args, "warm-up"))
        rows = run_levels(url, pool[:-50], args)
        batching = httpx.get(url + "/health", timeout=10).json()["batching"]
    finally:
        proc.terminate()
        proc.wait(30)
    load = os.getloadavg()
    print(f"# disembed serve, {args.model or args.encoder}, view {args.view}, "
          f"{args.texts_per_request} sentence(s)/request, max batch {args.max_batch}, window "
          f"{args.window_ms} ms, cache {'on (new folder)' if args.cache else 'off'}")
    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
          f"load after the run {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print("| phase | clients | requests | errors | p50 ms | p95 ms | p99 ms | requests/s | "
          "requests per encoder call |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['phase']} | {r['clients']} | {r['requests']} | {r['errors']} | "
              f"{r['p50_ms']} | {r['p95_ms']} | {r['p99_ms']} | {r['requests_per_s']} | "
              f"{r['requests_per_batch']} |")
    print(f"# batching over the run: {batching}")
    if args.out:
        Path(args.out).write_text(json.dumps({"rows": rows, "batching": batching,
                                              "args": {k: v for k, v in vars(args).items()
                                                       if k != "extra"},
                                              "load": load}, indent=2))
    return 0 if all(r["errors"] == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
