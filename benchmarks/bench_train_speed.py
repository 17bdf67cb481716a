"""Training throughput per step path at d=384, batch 512, against the float32 matmul peak,
and the loss curves of the paths, in one run.

    # quick check (about a minute on 2 loaded AVX2 cores; a cold torch.compile adds ~20 s):
    PYTHONPATH=src python benchmarks/bench_train_speed.py --preset quick --out /tmp/ts_quick.json
    # the figures of record, on a quiet machine (~10-15 minutes):
    PYTHONPATH=src python benchmarks/bench_train_speed.py --preset full --out /tmp/ts_full.json

**Speed.** Each path is the library's own training loop (``run_epoch`` of
``disembed.training.trainer``: batches, same-language negatives, the recipe's loss, Adam)
on one model per path: ``eager/float32`` (``deterministic=True``, the default),
``compiled/float32`` (``speed="compiled"``), and, where the hardware probe measures
bfloat16 products faster than float32 (or with ``--bf16``), ``eager/bfloat16`` and
``compiled/bfloat16``. Every path first runs one untimed round (the compile happens
there; its seconds are reported), then the paths and thread counts take turns, round
by round, so a change of load hits them all alike. A round is one epoch over
``round_batches`` full batches of random pairs. The float32 matmul peak is the best of
a few ``n x n`` products at each thread count, at the start and the end of the run. The
useful work of one pair is 8 d^2 FLOPs (forward and weight gradient of the d x d layer,
for both sentences). The 1-minute load is written beside every figure.

**Loss curves.** ``fit`` for a fixed number of epochs on a fixed random dataset (a
meaning vector per pair plus a per-language offset plus noise, 12 languages + English):
eager float32 with 3 seeds (their spread per epoch is the run-to-run noise), and the
fast paths with seed 0. A fast path is "within noise" when its per-epoch validation
loss differs from eager seed 0 by at most the spread of the three eager seeds.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import time

import numpy as np
import torch

from disembed.hardware import configure_threads, probe
from disembed.methods import make_method
from disembed.training.batches import PairData
from disembed.training.trainer import init_state, run_epoch

LANGS = ["de", "zh", "ro", "et", "ne", "si", "ar", "es", "tr", "fr", "it", "nl"]
PRESETS = {
    "quick": {"round_batches": 6, "rounds": 3, "threads": [1], "peak_n": 2048,
              "curve_pairs": 4000, "curve_epochs": 4},
    "full": {"round_batches": 40, "rounds": 5, "threads": [1, 2], "peak_n": 4096,
             "curve_pairs": 40000, "curve_epochs": 15},
}
PATH_SETTINGS = {
    "eager/float32": {"deterministic": True},
    "compiled/float32": {"deterministic": False, "speed": "compiled", "precision": "float32"},
    "eager/bfloat16": {"deterministic": False, "speed": "eager", "precision": "bfloat16"},
    "compiled/bfloat16": {"deterministic": False, "speed": "compiled", "precision": "bfloat16"},
}


def uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return f"loadavg {os.getloadavg()}"


def load() -> float:
    return round(os.getloadavg()[0], 2)


def pairs_data(n: int, dim: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(src, tgt, src_lang)``: meaning + language offset + noise, float32 (n, dim)."""
    rng = np.random.default_rng(seed)
    meaning = rng.standard_normal((n, dim))
    offsets = {lang: 2 * rng.standard_normal(dim) for lang in [*LANGS, "en"]}
    langs = np.array([LANGS[i] for i in rng.integers(0, len(LANGS), n)], dtype=object)
    src = meaning + np.stack([offsets[x] for x in langs]) + 0.3 * rng.standard_normal((n, dim))
    tgt = meaning + offsets["en"] + 0.3 * rng.standard_normal((n, dim))
    return src.astype(np.float32), tgt.astype(np.float32), langs


def rows_for(train_rows: int, val_fraction: float = 0.1) -> int:
    """A pair count whose seeded split leaves exactly ``train_rows`` training rows (full
    batches only), or about that many."""
    start = int(train_rows / (1 - val_fraction)) - 3
    for n in range(start, start + 10):
        if n - max(2, int(round(n * val_fraction))) == train_rows:
            return n
    return start + 3


def matmul_peak(n: int, repeats: int = 3) -> float:
    """Best float32 GFLOP/s of ``(n x n) @ (n x n)`` at the current thread count."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - t0)
    return 2 * n**3 / best / 1e9


class Trial:
    """One path's model, optimiser and data, trained one epoch (= one round) at a time."""

    def __init__(self, method: str, path: str, src, tgt, langs, batch: int) -> None:
        self.model = make_method(method, batch_size=batch, patience=10**6,
                                 **PATH_SETTINGS[path])
        model = self.model
        model.languages_ = sorted({*langs.tolist(), "en"})
        ids = {lang: i for i, lang in enumerate(model.languages_)}
        model._prepare()
        model.head_ = model._new_head(src.shape[1])
        adversary = model._new_adversary(src.shape[1])
        self.config = model.train_config
        self.data = PairData.split(src, tgt, np.array([ids[x] for x in langs]),
                                   np.full(len(src), ids["en"]), self.config)
        self.state = init_state(model.head_, self.config, train_pairs=len(self.data.train_idx),
                                val_pairs=len(self.data.val_idx), adversary=adversary)
        self.loss_fn = lambda b: model.loss(model.head_, b)

    def round(self) -> dict:
        return run_epoch(self.state, self.data, self.config, self.loss_fn)


def time_paths(args, paths: list[str], preset: dict) -> dict:
    """Interleaved rounds of every path at every thread count; peaks before and after."""
    src, tgt, langs = pairs_data(rows_for(preset["round_batches"] * args.batch), args.dim, 0)
    peaks = {t: [] for t in preset["threads"]}
    trials, warmup = {}, {}
    for threads in preset["threads"]:
        torch.set_num_threads(threads)
        peaks[threads].append({"gflops": matmul_peak(preset["peak_n"]), "load": load()})
        for path in paths:
            trial = Trial(args.method, path, src, tgt, langs, args.batch)
            t0 = time.perf_counter()
            trial.round()  # untimed: warm-up, and the compile of the compiled paths
            warmup[(path, threads)] = round(time.perf_counter() - t0, 2)
            trials[(path, threads)] = trial
    rounds = {key: [] for key in trials}
    for _ in range(preset["rounds"]):
        for (path, threads), trial in trials.items():
            torch.set_num_threads(threads)
            stats = trial.round()
            rounds[(path, threads)].append({"pairs_per_second": stats["pairs_per_second"],
                                            "load": load(), "ran": stats["path"]})
    for threads in preset["threads"]:
        torch.set_num_threads(threads)
        peaks[threads].append({"gflops": matmul_peak(preset["peak_n"]), "load": load()})
    return summarise(args, trials, rounds, warmup, peaks)


def summarise(args, trials, rounds, warmup, peaks) -> dict:
    flops_per_pair = 8 * args.dim**2
    rows = []
    for (path, threads), records in rounds.items():
        rate = float(np.median([r["pairs_per_second"] for r in records]))
        peak = max(p["gflops"] for p in peaks[threads])
        step_path = trials[(path, threads)].state.history.step_path
        rows.append({
            "path": path, "threads": threads, "pairs_per_second_median": round(rate),
            "rounds": [{**r, "pairs_per_second": round(r["pairs_per_second"])}
                       for r in records],
            "achieved_gflops": round(rate * flops_per_pair / 1e9, 1),
            "fp32_peak_gflops": round(peak, 1),
            "ratio_to_fp32_peak": round(rate * flops_per_pair / 1e9 / peak, 3),
            "warmup_round_seconds": warmup[(path, threads)],
            "compile_seconds": step_path.get("compile_seconds"),
            "ran": sorted({r["ran"] for r in records})})
    eager = {r["threads"]: r["pairs_per_second_median"] for r in rows
             if r["path"] == "eager/float32"}
    for row in rows:
        row["speedup_vs_eager_fp32"] = round(row["pairs_per_second_median"]
                                             / eager[row["threads"]], 2)
    return {"rows": rows, "peaks": {str(t): p for t, p in peaks.items()}}


def curve(args, path: str, seed: int, data, epochs: int) -> dict:
    src, tgt, langs = data
    model = make_method(args.method, batch_size=args.batch, max_epochs=epochs,
                        patience=10**6, seed=seed, **PATH_SETTINGS[path])
    t0 = time.perf_counter()
    model.fit(src, tgt, langs, "en")
    history = model.history_
    return {"path": path, "seed": seed, "seconds": round(time.perf_counter() - t0, 1),
            "load": load(), "train_loss": [e["train_loss"] for e in history.epochs],
            "val_loss": [e["val_loss"] for e in history.epochs],
            "ran": history.step_path.get("reason")}


def loss_curves(args, paths: list[str], preset: dict) -> dict:
    """Eager float32 with seeds 0..2 (the noise) and every other path with seed 0."""
    data = pairs_data(preset["curve_pairs"], args.dim, 1)
    epochs = preset["curve_epochs"]
    runs = [curve(args, "eager/float32", seed, data, epochs) for seed in range(3)]
    runs += [curve(args, path, 0, data, epochs) for path in paths if path != "eager/float32"]
    eager = np.array([r["val_loss"] for r in runs[:3]])
    noise = eager.max(0) - eager.min(0)  # (epochs,) spread of the three seeds
    verdicts = {}
    for run in runs[3:]:
        gap = np.abs(np.array(run["val_loss"]) - eager[0])
        verdicts[run["path"]] = {"max_gap": float(gap.max()),
                                 "max_gap_over_noise": float((gap / noise).max()),
                                 "within_noise": bool((gap <= noise).all())}
    return {"pairs": preset["curve_pairs"], "epochs": epochs, "runs": runs,
            "noise_val_loss": noise.tolist(), "verdicts": verdicts}


def print_report(result: dict) -> None:
    print(f"\n{result['method']} d={result['dim']} batch={result['batch']}; {result['uptime']}")
    caps = result["probe"]
    print(f"probe: {caps['cpu_model']}, flags {' '.join(caps['flags'])}, fp32 "
          f"{caps['fp32_gflops']} / bf16 {caps['bf16_gflops']} GFLOP/s, bf16 faster: "
          f"{caps['bf16_faster']}")
    print("\n| path | threads | pairs/s (median) | rounds (pairs/s @ load) | GFLOP/s | fp32 peak "
          "| % of peak | vs eager fp32 | compile s |")
    print("|---|---:|---:|---|---:|---:|---:|---:|---:|")
    for r in result["speed"]["rows"]:
        rounds = ", ".join(f"{x['pairs_per_second']:,} @ {x['load']}" for x in r["rounds"])
        print(f"| {r['path']} | {r['threads']} | {r['pairs_per_second_median']:,} | {rounds} | "
              f"{r['achieved_gflops']} | {r['fp32_peak_gflops']} | "
              f"{r['ratio_to_fp32_peak']:.1%} | {r['speedup_vs_eager_fp32']}x | "
              f"{r['compile_seconds']} |")
    curves = result["curves"]
    if curves is None:
        return
    print(f"\nvalidation loss per epoch ({curves['pairs']} pairs, {curves['epochs']} epochs):")
    print("| run | " + " | ".join(str(e + 1) for e in range(curves["epochs"])) + " |")
    print("|---|" + "---:|" * curves["epochs"])
    for run in curves["runs"]:
        print(f"| {run['path']} seed {run['seed']} | "
              + " | ".join(f"{v:.5f}" for v in run["val_loss"]) + " |")
    print("| noise (spread of 3 eager seeds) | "
          + " | ".join(f"{v:.5f}" for v in curves["noise_val_loss"]) + " |")
    for path, verdict in curves["verdicts"].items():
        print(f"{path}: max |gap to eager seed 0| {verdict['max_gap']:.2e}, "
              f"{verdict['max_gap_over_noise']:.2f}x the noise -> within noise: "
              f"{verdict['within_noise']}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--preset", choices=sorted(PRESETS), default="quick")
    ap.add_argument("--method", default="seed")
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--threads", default=None, help="comma-separated, e.g. 1,2")
    ap.add_argument("--bf16", action="store_true",
                    help="also time the bfloat16 paths where bfloat16 is not faster (emulated)")
    ap.add_argument("--no-curves", action="store_true")
    ap.add_argument("--curve-pairs", type=int, default=None, help="override the preset's")
    ap.add_argument("--curve-epochs", type=int, default=None, help="override the preset's")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    os.environ["DISEMBED_PROGRESS"] = "0"
    preset = dict(PRESETS[args.preset])
    if args.threads:
        preset["threads"] = [int(t) for t in args.threads.split(",")]
    for key in ("curve_pairs", "curve_epochs"):
        if getattr(args, key) is not None:
            preset[key] = getattr(args, key)
    caps = probe()
    paths = ["eager/float32", "compiled/float32"]
    if caps.bf16_faster or args.bf16:
        paths += ["eager/bfloat16", "compiled/bfloat16"]
    result = {"method": args.method, "dim": args.dim, "batch": args.batch,
              "preset": {"name": args.preset, **preset}, "uptime": uptime(),
              "probe": caps.to_dict(), "thread_settings": configure_threads().to_dict(),
              "torch": torch.__version__}
    result["speed"] = time_paths(args, paths, preset)
    # the bfloat16 curve always: emulated bfloat16 rounds like native (only slower)
    curve_paths = paths if "eager/bfloat16" in paths else [*paths, "eager/bfloat16"]
    result["curves"] = None if args.no_curves else loss_curves(args, curve_paths, preset)
    result["uptime_end"] = uptime()
    print_report(result)
    print(json.dumps(result))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
