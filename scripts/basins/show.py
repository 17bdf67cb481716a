"""Print the tables of the seed-basin study's JSON files (runs/basins/*.json) as Markdown.

    python scripts/basins/show.py runs/basins/seeds-main.json [--trajectory]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

KEYS = ("tatoeba", "tatoeba_notag", "sts17", "sts17_notag", "wmt20-qe", "wmt20-qe_notag")


def seeds_table(data: dict, trajectory: bool) -> str:
    lines = ["| seed | best/epochs | " + " | ".join(KEYS) + " | QE dev | QE dev notag | "
             "held-out retr. |", "|---|---|" + "---:|" * (len(KEYS) + 3)]
    for seed, row in sorted(data["runs"].items(), key=lambda kv: int(kv[0])):
        h, t, v = row["history"], row["test"], row["validation"]
        cells = [f"{t[k]:.2f}" if k in t else "-" for k in KEYS]
        lines.append(f"| {seed} | {h['best_epoch']}/{h['epochs']} | " + " | ".join(cells)
                     + f" | {v['qe_dev']:.2f} | {v['qe_dev_notag']:.2f} | "
                     f"{v.get('heldout_retrieval', float('nan')):.2f} |")
    out = "\n".join(lines)
    if trajectory:
        for seed, row in sorted(data["runs"].items(), key=lambda kv: int(kv[0])):
            out += f"\n\nseed {seed} (best epoch {row['history']['best_epoch']}):\n\n"
            out += "| epoch | val loss | QE dev | STS17 | QE | QE notag | |W-I| |\n"
            out += "|---:|---:|---:|---:|---:|---:|---:|\n"
            for e, vl in zip(row["trajectory"], row["history"]["val_loss"], strict=False):
                out += (f"| {e['epoch']} | {vl:.4f} | {e['qe_dev']:.2f} | {e['sts17']:.2f} | "
                        f"{e['wmt20-qe']:.2f} | {e['wmt20-qe_notag']:.2f} | "
                        f"{e['dist_identity']:.2f} |\n")
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("files", nargs="+", type=Path)
    ap.add_argument("--trajectory", action="store_true")
    args = ap.parse_args()
    for path in args.files:
        data = json.loads(path.read_text())
        print(f"## {path}\n\n{json.dumps(data.get('config'))}\n")  # noqa: T201
        if "runs" in data:
            print(seeds_table(data, args.trajectory))  # noqa: T201


if __name__ == "__main__":
    main()
