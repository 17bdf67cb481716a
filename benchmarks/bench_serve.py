"""Load test of ``disembed serve`` on loopback against the library's offline encoding rate.

Starts ``disembed serve`` in a subprocess on 127.0.0.1 (a free port; the embedding cache
in a new temporary folder), then for every number of clients (``--clients``, default 8 and
32) and texts per request (``--texts``, default 1 and 32) runs that many clients in a
closed loop, each sending ``POST /v1/embeddings``, until ``--requests`` requests are done or
``--seconds`` have passed. The clients run in this one process, on one asyncio loop, each
over its own keep-alive HTTP/1.1 connection written and read with asyncio's streams (lean,
as TEI's benchmark client is: they share the machine's CPUs with the server;
``--client httpx`` uses httpx instead). Every phase sends sentences the server has never seen (real
Tatoeba sentences of every language, shuffled with a fixed seed), so every one is encoded;
``--warm`` repeats each phase with the same sentences (cache hits). Before the server starts,
after every level and after the server stops, the library encodes ``--offline`` other
sentences in this process with the same encoder (and model, loaded once): each level is
compared with the mean of the library's rates just before and just after it, since the
machine's own rate can drift by a quarter within minutes.

Prints p50 / p99 latency, requests/s, sentences/s, 429s, the load average at the end of each
phase, the requests per encoder call, the encoder's time a call and its share of the level
(the rest of a cycle is the service's own: answers and new requests), the service's rate
over the library's, and the CPU flags that decide the encoder's precision. Nothing leaves
the machine.

    python benchmarks/bench_serve.py                                   # e5-small, 8/32 x 1/32
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
    """``n`` distinct real sentences (every Tatoeba file, shuffled with seed 0) when the data
    is there; synthetic ones make up any shortfall."""
    root = Path(os.environ.get("DISEMBED_DATA_DIR", "../shared/data")) / "tatoeba"
    out: list[str] = []
    for path in sorted(root.glob("tatoeba.*-eng.*")) if root.is_dir() else []:
        out += [s for s in path.read_text(encoding="utf-8").splitlines() if s.strip()]
    out = list(dict.fromkeys(out))
    np.random.default_rng(0).shuffle(out)
    out += [f"synthetic sentence number {i} for the load test" for i in range(n - len(out))]
    return out[:n]


def cpu_flags() -> list[str]:
    info = Path("/proc/cpuinfo")
    text = info.read_text(encoding="utf-8") if info.exists() else ""
    return sorted({f for f in ("avx512_bf16", "amx_bf16", "avx2") if f" {f}" in text})


def load_library(args) -> tuple:
    """``(encoder, model or None)`` as the server loads them, loaded once for every offline
    run, as a user's process does."""
    from disembed import load_encoder
    from disembed.saved_model import SavedModel

    return SavedModel.load(args.model) if args.model else (load_encoder(args.encoder), None)


def offline_rate(args, library: tuple, texts: list[str]) -> float:
    """Sentences/s of the library on ``texts`` (no cache): the model's meaning part of the
    model's encoder, or the bare encoder, as the server serves them."""
    encoder, model = library
    if model is not None and args.view == "meaning":
        run = lambda: model.meaning(encoder.encode(texts), args.language)  # noqa: E731
    else:
        run = lambda: encoder.encode(texts)  # noqa: E731
    encoder.encode(texts[:16])  # warm-up
    t0, cpu = time.perf_counter(), time.process_time()
    run()
    args.library_cpu_ms = 1000 * (time.process_time() - cpu) / len(texts)
    return len(texts) / (time.perf_counter() - t0)


def process_cpu(pid: int | None) -> float:
    """CPU seconds (user + system, every thread) process ``pid`` has used; 0 off Linux."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(args, port: int) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "disembed", "serve", "--host", "127.0.0.1", "--port", str(port),
           "--max-batch", str(args.max_batch), "--batch-window-ms", str(args.window_ms),
           "--max-concurrent-requests", str(args.max_concurrent),
           "--encode-workers", str(args.encode_workers), "-q"]
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


class RawClient:
    """One keep-alive HTTP/1.1 connection that POSTs JSON and reads the whole response (the
    status is checked, the body is read, not parsed): a lean client, as TEI's own benchmark
    has, so that the clients, which share the server's CPUs here, take little of them
    (httpx costs about a millisecond of CPU a request on a busy core: ``--client httpx``)."""

    def __init__(self, reader, writer, host: str, path: str) -> None:
        self.reader, self.writer = reader, writer
        self.head = (f"POST {path} HTTP/1.1\r\nHost: {host}\r\n"
                     "Content-Type: application/json\r\nContent-Length: ")

    @classmethod
    async def open(cls, url: str, path: str) -> "RawClient":
        host, port = url.split("://", 1)[1].rsplit(":", 1)
        reader, writer = await asyncio.open_connection(host, int(port))
        return cls(reader, writer, f"{host}:{port}", path)

    async def __call__(self, body: bytes) -> int:
        self.writer.write(f"{self.head}{len(body)}\r\n\r\n".encode() + body)
        head = await self.reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        length = next(int(line.split(":", 1)[1]) for line in lines[1:]
                      if line.lower().startswith("content-length:"))
        await self.reader.readexactly(length)
        return status

    def close(self) -> None:
        self.writer.close()


async def level(url: str, clients: int, pool: list[str], args, phase: str = "cold",
                k: int = 1, requests: int | None = None) -> dict:
    """Closed-loop load with ``clients`` concurrent clients sending ``k`` texts a request;
    bounded in requests (``requests``, default ``--requests``) and time."""
    latencies: list[float] = []
    errors = refused = 0
    sent = 0
    stop_at = time.monotonic() + args.seconds
    limit = requests or args.requests

    async def client(cid: int, post) -> None:
        nonlocal errors, refused, sent
        while sent < limit and time.monotonic() < stop_at:
            i = sent
            sent += 1
            texts = [pool[(i * k + j) % len(pool)] for j in range(k)]  # no repeats in a phase
            body = json.dumps({"input": texts, "model": args.view, **args.extra}).encode()
            t0 = time.perf_counter()
            status = await post(body)
            latencies.append(time.perf_counter() - t0)
            refused += status == 429
            errors += status not in (200, 429)

    async with httpx.AsyncClient(timeout=120, limits=httpx.Limits(max_connections=clients)
                                 ) as http:
        async def with_httpx(body: bytes) -> int:
            return (await http.post(url + "/v1/embeddings", content=body,
                                    headers={"content-type": "application/json"})).status_code

        posts = [with_httpx] * clients
        if args.client == "raw":
            posts = [await RawClient.open(url, "/v1/embeddings") for _ in range(clients)]
        before = (await http.get(url + "/info")).json()["batching"]
        cpu0 = process_cpu(getattr(args, "server_pid", None)), time.process_time()
        t0 = time.perf_counter()
        await asyncio.gather(*(client(c, post) for c, post in enumerate(posts)))
        wall = time.perf_counter() - t0
        cpu1 = process_cpu(getattr(args, "server_pid", None)), time.process_time()
        after = (await http.get(url + "/info")).json()["batching"]
        for post in posts:
            if isinstance(post, RawClient):
                post.close()
    lat = np.array(latencies) * 1000
    batches = max(after["batches"] - before["batches"], 1)
    encoding = after.get("encode_seconds", 0.0) - before.get("encode_seconds", 0.0)
    served = len(lat) - refused
    return {"phase": phase, "clients": clients, "texts_per_request": k, "requests": len(lat),
            "errors": errors, "refused_429": refused, "seconds": round(wall, 2),
            "load_1min": round(os.getloadavg()[0], 2),
            "p50_ms": round(float(np.percentile(lat, 50)), 1),
            "p95_ms": round(float(np.percentile(lat, 95)), 1),
            "p99_ms": round(float(np.percentile(lat, 99)), 1),
            "requests_per_batch": round((after["requests"] - before["requests"]) / batches, 1),
            # the encoder's share of the level (over 1 with several workers) and its time a
            # call: what is left of a cycle is the service's own (answers, new requests)
            "encode_ms_per_call": round(1000 * encoding / batches, 1),
            "encoder_busy": round(encoding / wall, 2),
            "requests_per_s": round(served / wall, 1),
            "sentences_per_s": round(served * k / wall, 1),
            # CPU a request, of the server (all its threads) and of the clients: what the
            # load takes of the machine, less sensitive to other work on it than time
            "server_cpu_ms": round(1000 * (cpu1[0] - cpu0[0]) / max(len(lat), 1), 2),
            "client_cpu_ms": round(1000 * (cpu1[1] - cpu0[1]) / max(len(lat), 1), 2)}


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    which = ap.add_mutually_exclusive_group()
    which.add_argument("--model", default=None, help="a trained model directory")
    which.add_argument("--encoder", default="e5-small", help="a bare encoder (default e5-small)")
    ap.add_argument("--view", default="meaning")
    ap.add_argument("--language", default=None, help="sent with every request (routed methods)")
    ap.add_argument("--clients", default="8,32", help="concurrent clients per level")
    ap.add_argument("--texts", default="1,32", help="texts per request, each level")
    ap.add_argument("--requests", type=int, default=400, help="most requests per level")
    ap.add_argument("--seconds", type=float, default=40.0, help="most seconds per level")
    ap.add_argument("--offline", type=int, default=1000,
                    help="sentences the library encodes offline, before and after")
    ap.add_argument("--client", choices=("raw", "httpx"), default="raw",
                    help="raw: one lean keep-alive HTTP/1.1 connection per client (default); "
                         "httpx: httpx.AsyncClient (about 1 ms of CPU a request more)")
    ap.add_argument("--max-batch", type=int, default=64)
    ap.add_argument("--window-ms", type=float, default=5.0)
    ap.add_argument("--max-concurrent", type=int, default=64)
    ap.add_argument("--encode-workers", type=int, default=1,
                    help="the server's --encode-workers (batches encoded at once)")
    ap.add_argument("--warm", action="store_true",
                    help="repeat every level with the same sentences (cache hits)")
    ap.add_argument("--no-cache", dest="cache", action="store_false",
                    help="embedding cache off")
    ap.add_argument("--startup-timeout", type=float, default=180.0)
    ap.add_argument("--short", action="store_true",
                    help="quick check: at most 60 requests and 8 s per level")
    ap.add_argument("--out", default=None, help="write the results as JSON")
    args = ap.parse_args()
    if args.short:
        args.requests, args.seconds = min(args.requests, 60), min(args.seconds, 8.0)
        args.offline = min(args.offline, 200)
    args.extra = {"language": args.language} if args.language else {}
    args.cache_dir = tempfile.mkdtemp(prefix="bench-serve-cache-")
    return args


def run_levels(url: str, pool: list[str], args, library) -> list[dict]:
    """Every level cold (unseen sentences), then, with ``--warm``, the same ones again.
    ``library()`` measures the library's offline rate; it runs after every level, so each
    level is compared with the library's rate just before and just after it (the machine's
    own rate drifts by a quarter within minutes)."""
    rows, start = [], 0
    for clients in map(int, args.clients.split(",")):
        for k in map(int, args.texts.split(",")):
            n = args.requests * k
            fresh = pool[start : start + n]
            start += n
            phases = ["cold"] + (["warm"] if args.warm and args.cache else [])
            for phase in phases:
                rows.append(asyncio.run(level(url, clients, fresh, args, phase, k)))
                rows[-1]["library_after"] = library()
    return rows


def main() -> int:
    args = parse_args()
    levels = len(args.clients.split(",")) * len(args.texts.split(",")) * (
        2 if args.warm and args.cache else 1)
    need = sum(args.requests * int(k) for k in args.texts.split(",")) * len(
        args.clients.split(","))
    runs = levels + 2  # before the server, after every level, after the server
    pool = sentences(need + runs * args.offline + 50)
    offline_texts, pool = pool[: runs * args.offline], pool[runs * args.offline :]
    rates: list[float] = []
    loaded = load_library(args)

    def library() -> float:  # the next offline sentences, never seen by the library before
        chunk = offline_texts[len(rates) * args.offline : (len(rates) + 1) * args.offline]
        rates.append(offline_rate(args, loaded, chunk))
        return rates[-1]

    load_before = os.getloadavg()
    library()
    port = free_port()
    proc = start_server(args, port)
    args.server_pid = proc.pid
    try:
        url = f"http://127.0.0.1:{port}"
        asyncio.run(level(url, 1, pool[-50:], args, "warm-up", requests=50))
        rows = run_levels(url, pool[:-50], args, library)
        info = httpx.get(url + "/info", timeout=10).json()
    finally:
        proc.terminate()
        proc.wait(30)
    library()
    for before, r in zip(rates, rows, strict=False):  # the library's rate around each level
        r["library_rate"] = round((before + r.pop("library_after")) / 2, 1)
    library_rate = float(np.mean(rates))
    load = os.getloadavg()
    print(f"# disembed serve, {args.model or args.encoder}, view {args.view}, max batch "
          f"{args.max_batch}, window {args.window_ms} ms, {args.encode_workers} encode "
          f"worker(s), cache "
          f"{'on (new folder)' if args.cache else 'off'}; encoder dtype {info.get('model_dtype')}")
    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, flags "
          f"{' '.join(cpu_flags()) or 'none of avx2/avx512_bf16/amx_bf16'}; load "
          f"{load_before[0]:.2f} before, {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} after; "
          f"server threads {info.get('threads')}")
    print(f"# library offline ({args.offline} new sentences each time, no cache), before the "
          f"server, after each level and after the server: "
          f"{' / '.join(f'{x:.1f}' for x in rates)} sentences/s (mean {library_rate:.1f}); "
          f"{args.library_cpu_ms:.2f} ms of CPU a sentence (the last run)")
    print("| phase | clients | texts/request | requests | 429 | p50 ms | p99 ms | requests/s | "
          "sentences/s | library sentences/s | x library | requests per encoder call | "
          "encoder ms/call | encoder busy | server CPU ms/request | client CPU ms/request | "
          "load (1 min) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:  # each level against the library's rate just before and after it
        r["over_library"] = round(r["sentences_per_s"] / r["library_rate"], 2)
        print(f"| {r['phase']} | {r['clients']} | {r['texts_per_request']} | {r['requests']} | "
              f"{r['refused_429']} | {r['p50_ms']} | {r['p99_ms']} | {r['requests_per_s']} | "
              f"{r['sentences_per_s']} | {r['library_rate']} | {r['over_library']} | "
              f"{r['requests_per_batch']} | {r['encode_ms_per_call']} | {r['encoder_busy']} | "
              f"{r['server_cpu_ms']} | {r['client_cpu_ms']} | "
              f"{r['load_1min']} |")
    print(f"# batching over the run: {info['batching']}")
    if args.out:
        Path(args.out).write_text(json.dumps({
            "rows": rows, "batching": info["batching"], "library_rates": rates,
            "cpu_flags": cpu_flags(), "load_before": load_before, "load_after": load,
            "args": {k: v for k, v in vars(args).items() if k != "extra"}},
            indent=2))
    return 0 if all(r["errors"] == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
