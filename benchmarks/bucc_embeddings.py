"""The two pools of a BUCC 2018 sample pair as unit-row ``.npy`` matrices (real embeddings
for ``bench_mining_floor.py --x --y``).

    PYTHONPATH=src python benchmarks/bucc_embeddings.py de-en runs/bucc --encoder use-m3

Reads ``<data>/bucc2018/<pair>/<pair>.sample.{xx,en}`` (``id<TAB>sentence``), encodes the
sentences through the embedding cache and writes ``<out>/<xx>.npy`` and ``<out>/en.npy``
(float32, rows normalised), atomically.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import numpy as np

from disembed.data.paths import resolve_data_dir
from disembed.experiment import RunSpec, open_encoder
from disembed.retrieval import normalize_rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("pair", help="de-en, fr-en or zh-en")
    ap.add_argument("out", type=Path)
    ap.add_argument("--encoder", default="use-m3")
    ap.add_argument("--data-dir", default=None)
    args = ap.parse_args()
    folder = resolve_data_dir(args.data_dir) / "bucc2018" / args.pair
    encoder = open_encoder(RunSpec(encoder=args.encoder))
    args.out.mkdir(parents=True, exist_ok=True)
    for lang in args.pair.split("-"):
        lines = (folder / f"{args.pair}.sample.{lang}").read_text(encoding="utf-8").splitlines()
        rows = normalize_rows(np.asarray(encoder.encode([ln.split("\t", 1)[1] for ln in lines])))
        tmp = args.out / f"{lang}.tmp.npy"
        np.save(tmp, rows)
        os.replace(tmp, args.out / f"{lang}.npy")
        print(f"{lang}: {rows.shape}")  # noqa: T201


if __name__ == "__main__":
    main()
