#!/usr/bin/env bash
# On the lent GPU machine (carrying .devdeps): builds cbf-bench, times the
# beamformer for N = 64, B = 8, and profiles one launch of its kernel with
# Nsight Compute (--set full, clocks left alone): the details page and the
# per-SASS-instruction executions and stall samples (source page, CSV), to
# see which part of the kernel issues and which waits. Reports go to $OUT.
# BEAM_PROF_ARGS (default "--ants 64 --beams 8") picks the case profiled.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/device-env.sh
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
B=build-device-all
{
    [ -f "$B/build.ninja" ] || meson setup "$B" -Dcuda=enabled >/dev/null
    ninja -C "$B" tools/bench/cbf-bench
} >"$OUT/build.log" 2>&1 || { tail -40 "$OUT/build.log"; exit 1; }
BENCH="$B/tools/bench/cbf-bench"
ARGS=${BEAM_PROF_ARGS:---ants 64 --beams 8}
"$BENCH" beam $ARGS | tee "$OUT/bench.md"
timeout 200 ncu --clock-control none --set full --import-source no -k regex:bf_kernel \
    --launch-skip 3 --launch-count 1 -o "$OUT/bf" -f "$BENCH" beam $ARGS --reps 1 >"$OUT/ncu.log" 2>&1
echo "== ncu: exit $?"; tail -3 "$OUT/ncu.log"
if [ -f "$OUT/bf.ncu-rep" ]; then
    ncu --import "$OUT/bf.ncu-rep" --page details >"$OUT/bf-details.txt" 2>&1
    ncu --import "$OUT/bf.ncu-rep" --page source --csv --print-source sass >"$OUT/bf-sass.csv" 2>&1
    rm -f "$OUT/bf.ncu-rep"
fi
ls -la "$OUT"
