#!/usr/bin/env bash
# The quiet-machine benchmark session of record (docs/benchmarks.md), in one run and in
# order, so that every ratio is taken under the same conditions. Stop every other job
# first (load < 2.5); each step's start time and load go into $OUT/session.log.
#   OUT=/tmp/bench BEFORE_SRC=/tmp/before/src TRAIN_ARGS="--preset full" bash benchmarks/run_all.sh
# BEFORE_SRC: src/ of a checkout of the commit before issue 12 (git worktree add /tmp/before
# a7a906c); without it the "before" mining step is skipped.
set -u
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
OUT=${OUT:-/tmp/disembed-bench}
mkdir -p "$OUT"
export PYTHONPATH=$PWD/src
log() { echo "### $(date +%T) load $(cut -d' ' -f1-3 /proc/loadavg) :: $*" | tee -a "$OUT/session.log"; }
lscpu | grep -E "Model name|Flags" > "$OUT/lscpu.txt"
log "info"
$PY -m disembed info --refresh --json > "$OUT/info.json" 2>>"$OUT/session.log"
log "encoders"
$PY benchmarks/bench_encoders.py --n 400 --encoder e5-small-c,e5-small,use-m3 --rounds 3 \
    > "$OUT/encoders.txt" 2>>"$OUT/session.log"
log "fast_e5"
$PY benchmarks/bench_fast_e5.py --n 2000 --subset 400 --interleaved 3 --batch-size 64 \
    --out "$OUT/fast_e5.json" > /dev/null 2>>"$OUT/session.log"
log "train_speed"
# shellcheck disable=SC2086
$PY benchmarks/bench_train_speed.py ${TRAIN_ARGS:-} --out "$OUT/train_speed.json" \
    > "$OUT/train_speed.txt" 2>>"$OUT/session.log"
log "mining 100k after"
$PY benchmarks/bench_mining.py --preset 100k --refresh-probe --workdir /tmp/bench_mining \
    --out "$OUT/mining_100k.json" > "$OUT/mining_100k.txt" 2>>"$OUT/session.log"
if [ -n "${BEFORE_SRC:-}" ]; then
    log "mining 100k before"
    PYTHONPATH=$BEFORE_SRC $PY "$BEFORE_SRC/../benchmarks/bench_mining.py" --n 100000 \
        --workdir /tmp/bench_mining_before --out "$OUT/mining_100k_before.json" \
        > "$OUT/mining_100k_before.txt" 2>>"$OUT/session.log"
fi
log "serve"
$PY benchmarks/bench_serve.py --encoder e5-small --out "$OUT/serve.json" \
    > "$OUT/serve.txt" 2>>"$OUT/session.log"
log "done"
