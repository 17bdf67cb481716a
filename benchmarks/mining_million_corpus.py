"""Build the two sides of the million-sentence mining benchmark from the project's data.

    python benchmarks/mining_million_corpus.py ../shared/data runs/million --rows 1000000

Writes ``OUT/src.tsv`` (non-English sentences) and ``OUT/tgt.tsv`` (English sentences),
``id<TAB>sentence``, ``--rows`` lines each, and ``OUT/corpus.json`` (counts per source).
Every distinct sentence of the data folder goes in (parallel training sets, WMT20 QE,
Tatoeba, BUCC pools): translations of each other land on opposite sides, as in a crawl.
The data holds fewer than a million distinct sentences per side, so each side is filled
up to ``--rows`` with lines that join two of its own sentences (``a b``, drawn with a
fixed seed): real text, distinct lines, never a translation of anything on the other
side. Rows are shuffled with a fixed seed; the files are written atomically. The data
folder is read in place and never written.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
from pathlib import Path

import numpy as np

csv.field_size_limit(1 << 24)
_CODE = re.compile(r"^[a-z]{2,3}(_postedit)?$")


def _tsv_columns(path: Path) -> tuple[list[str], list[list[str]]]:
    with open(path, encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    return rows[0], rows[1:]


def sentences(data: Path):
    """``(side, source, sentence)`` for every text cell of the data folder."""
    for path in sorted((data / "parallel").glob("*/*.tsv")):
        header, rows = _tsv_columns(path)
        for j, name in enumerate(header):
            if _CODE.match(name):
                side = "tgt" if name.split("_")[0] in ("en", "eng") else "src"
                yield from ((side, path.parent.name, r[j]) for r in rows if len(r) > j)
    for path in sorted((data / "wmt20_mlqe").glob("*/*.tsv")):
        header, rows = _tsv_columns(path)
        src_lang, tgt_lang = path.stem.split("-")
        for name, lang in (("original", src_lang), ("translation", tgt_lang)):
            j = header.index(name)
            side = "tgt" if lang == "en" else "src"
            yield from ((side, "wmt20_mlqe", r[j]) for r in rows if len(r) > j)
    for path in sorted((data / "tatoeba").glob("tatoeba.*-eng.*")):
        side = "tgt" if path.suffix == ".eng" else "src"
        yield from ((side, "tatoeba", line) for line in path.read_text("utf-8").splitlines())
    for path in sorted((data / "bucc2018").glob("*-en/*.sample.??")):
        side = "tgt" if path.suffix == ".en" else "src"
        for line in path.read_text("utf-8").splitlines():
            yield side, "bucc2018", line.partition("\t")[2]


def _clean(text: str) -> str:
    return " ".join(text.replace("\t", " ").split())


def build(data: Path, out: Path, rows: int, seed: int = 0) -> dict:
    pools: dict[str, dict[str, str]] = {"src": {}, "tgt": {}}
    for side, source, text in sentences(data):
        text = _clean(text)
        if text:
            pools[side].setdefault(text, source)
    summary = {"rows": rows, "seed": seed, "data": str(data)}
    rng = np.random.default_rng(seed)
    for side, pool in pools.items():
        texts = sorted(pool)
        counts: dict[str, int] = {}
        for source in pool.values():
            counts[source] = counts.get(source, 0) + 1
        lines = [f"{side}-{i:07d}\t{t}" for i, t in enumerate(texts[:rows])]
        joined, seen = 0, set(pool)
        while len(lines) < rows:
            a, b = rng.integers(len(texts), size=2)
            text = f"{texts[a]} {texts[b]}"
            if text not in seen:
                seen.add(text)
                lines.append(f"{side}-{len(lines):07d}\t{text}")
                joined += 1
        order = rng.permutation(len(lines))
        tmp = out / f".{side}.tsv.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.writelines(lines[i] + "\n" for i in order)
        os.replace(tmp, out / f"{side}.tsv")
        summary[side] = {"distinct": len(texts), "joined": joined, "by_source": counts}
    return summary


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("data", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    summary = build(args.data, args.out, args.rows, args.seed)
    (args.out / "corpus.json").write_text(json.dumps(summary, indent=1) + "\n")
    print(json.dumps({s: {k: v for k, v in summary[s].items() if k != "by_source"}
                      for s in ("src", "tgt")}))


if __name__ == "__main__":
    main()
