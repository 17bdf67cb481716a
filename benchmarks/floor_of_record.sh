#!/usr/bin/env bash
# Issue 36's figures of record in one command: exact mining k-NN against both product floors
# and faiss flat at 40k x 40k and 100k x 100k x 384 (k=4, both directions, seeded random unit
# vectors), the code before issue 36 timed stage by stage in the same runs, then the tables
# of docs/benchmarks.md (render_floor.py) with the 1M x 1M re-projection. Run it alone on a
# quiet machine (check `uptime` first), from the repository root:
#
#     THREADS=2 PY=/work/main/.venv/bin/python bash benchmarks/floor_of_record.sh
#
# Env: OUT (runs/floor-of-record), BEFORE (the last commit before issue 36: 61e23ce),
# PY (python), REPEATS_40K (3), REPEATS_100K (2), THREADS (default: disembed's choice
# from the load, made once per size; THREADS=2 pins it on a 2-core machine), WORKDIR
# (/tmp/bench_mining: the random matrices, written once). Writes $OUT/floor-40k.json,
# $OUT/floor-100k.json, their logs and $OUT/tables.md.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-runs/floor-of-record}
BEFORE=${BEFORE:-61e23ce}
PY=${PY:-python}
WORKDIR=${WORKDIR:-/tmp/bench_mining}
mkdir -p "$OUT"
rm -rf "$OUT/before-src"
mkdir -p "$OUT/before-src"
git archive "$BEFORE" src | tar -x -C "$OUT/before-src"
echo "start: $(uptime)"
lscpu | grep -o -E 'avx512_bf16|amx_bf16|avx2' | sort -u | tr '\n' ' '; echo
for spec in "40000 ${REPEATS_40K:-3} 40k" "100000 ${REPEATS_100K:-2} 100k"; do
    read -r n repeats tag <<<"$spec"
    PYTHONPATH=src "$PY" benchmarks/bench_mining_floor.py --n "$n" --repeats "$repeats" \
        --phases floor-bf16,floor-fp32,exact,exact-fp32,faiss-flat \
        --before-src "$OUT/before-src/src" --workdir "$WORKDIR" ${THREADS:+--threads "$THREADS"} \
        --out "$OUT/floor-$tag.json" 2>&1 | tee "$OUT/floor-$tag.log"
done
"$PY" benchmarks/render_floor.py "$OUT/floor-40k.json" "$OUT/floor-100k.json" \
    --project 1000000 | tee "$OUT/tables.md"
# the 1M x 1M x 512 use-m3 run of docs/mining.md (2,707 s before issue 36), re-projected:
"$PY" benchmarks/render_floor.py "$OUT/floor-100k.json" --project 1000000 \
    --project-dim 512 --measured 2707 | sed -n '/Re-projected/,$p' | tee -a "$OUT/tables.md"
echo "end: $(uptime)"
