"""Embeddings for the million-sentence mining benchmark: real encodings plus a stated top-up.

    python benchmarks/mining_million_embed.py runs/million --encoder use-m3 --real 400000

For each side (``src.tsv``, ``tgt.tsv`` from ``mining_million_corpus.py``) ``--real``
distinct sentences are encoded through the embedding cache (resumable; progress shown):
those the cache already holds first, then the others in the file's (shuffled) order.
The other rows, up to the file's length, are a *top-up*: each is the normalised sum of
two encoded rows of the same side drawn with a fixed seed (vectors of the kind a sentence
joining two others gets; they are not encodings of text). ``<side>.emb.npy`` (float32,
unit rows) and ``<side>.real.npy`` (bool, which rows are real encodings) are written
atomically; the report says how many rows are real. Use ``--real`` equal to the number
of distinct sentences for a run with no synthetic rows (1.5 million encodings with use-m3:
~35 minutes on an idle 2-core machine).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
from pathlib import Path

import numpy as np

from disembed.encoders import load_encoder
from disembed.encoders.cached import cached
from disembed.retrieval.knn import normalize_rows

logger = logging.getLogger("mining_million_embed")


def side_embeddings(folder: Path, side: str, encoder, real: int, seed: int) -> dict:
    ids, texts = [], []
    with open(folder / f"{side}.tsv", encoding="utf-8") as f:
        for line in f:
            ident, _, text = line.rstrip("\n").partition("\t")
            ids.append(ident)
            texts.append(text)
    distinct = json.loads((folder / "corpus.json").read_text())[side]["distinct"]
    is_distinct = np.array([int(i.split("-")[1]) < distinct for i in ids])
    # sentences the cache holds already come first (a rerun, or a loaded machine, encodes
    # only what it must), then the others in file order
    held = np.array([texts[i] in encoder.store for i in np.flatnonzero(is_distinct)])
    order = np.flatnonzero(is_distinct)
    rows = np.sort(np.concatenate([order[held], order[~held]])[:real])
    logger.info("%s: encoding %d of %d distinct sentences (%d rows in all)", side, len(rows),
                int(is_distinct.sum()), len(ids))
    enc = encoder.encode([texts[i] for i in rows.tolist()], batch_size=64)
    X = np.empty((len(ids), enc.shape[1]), dtype=np.float32)
    X[rows] = normalize_rows(enc)
    is_real = np.zeros(len(ids), dtype=bool)
    is_real[rows] = True
    rest = np.flatnonzero(~is_real)
    rng = np.random.default_rng(seed)
    a, b = rows[rng.integers(len(rows), size=len(rest))], rows[rng.integers(len(rows),
                                                                            size=len(rest))]
    X[rest] = normalize_rows(X[a] + X[b])
    for name, array in (("emb", X), ("real", is_real)):
        tmp = folder / f".{side}.{name}.tmp.npy"
        np.save(tmp, array)
        os.replace(tmp, folder / f"{side}.{name}.npy")
    return {"rows": len(ids), "real": int(is_real.sum()), "top_up": len(rest),
            "dim": int(X.shape[1])}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folder", type=Path)
    ap.add_argument("--encoder", default="use-m3")
    ap.add_argument("--real", type=int, default=400_000, help="encoded rows per side")
    ap.add_argument("--real-src", type=int, default=None, help="encoded source rows (default "
                    "--real)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    encoder = cached(load_encoder(args.encoder))
    real = {"tgt": args.real, "src": args.real_src or args.real}
    report = {side: side_embeddings(args.folder, side, encoder, real[side], args.seed)
              for side in ("tgt", "src")}
    report["encoder"] = args.encoder
    (args.folder / "embeddings.json").write_text(json.dumps(report, indent=1) + "\n")
    logger.info("%s", json.dumps(report))


if __name__ == "__main__":
    main()
