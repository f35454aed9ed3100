#!/usr/bin/env bash
# On the lent GPU machine (carrying .devdeps): builds cbf-bench's X-engine
# part, times the correlator, and profiles the wgmma correlator and cuBLAS's
# int8 GEMM with Nsight Compute (--set full, clocks left alone) so the two
# can be compared metric by metric. Reports go to $OUT (./out by hand).
# XENG_PROF_ANTS (default 1024) picks the array size profiled.
set -uo pipefail
cd "$(dirname "$0")/.."
source dev/device-run.sh
device_start build-device-xeng
{
    meson setup "$B" ${XENG_MESON_ARGS:-} >/dev/null &&
        ninja -C "$B" tools/bench/cbf-bench
} >"$OUT/build.log" 2>&1 || { tail -40 "$OUT/build.log"; exit 1; }
BENCH="$B/tools/bench/cbf-bench"
grep -E "corr_wgmma|registers|spill" "$OUT/build.log" | head -8
"$BENCH" xeng --block 0 --ants ${XENG_PROF_BENCH_ANTS:-256,1024,2048} --reps 5 | tee "$OUT/bench.md"
N=${XENG_PROF_ANTS:-1024}
NCU="ncu --clock-control none --set full --import-source no"
timeout 240 $NCU -k regex:corr_wgmma --launch-skip 2 --launch-count 1 -o "$OUT/corr" -f \
    "$BENCH" xeng --block 0 --ants "$N" --reps 1 >"$OUT/ncu-corr.log" 2>&1
echo "== ncu corr: exit $?"; tail -3 "$OUT/ncu-corr.log"
[ -n "${XENG_PROF_GEMM:-}" ] && timeout 120 $NCU -k regex:'gemm|xmma|cutlass' --launch-skip 1 --launch-count 1 -o "$OUT/gemm" -f \
    "$BENCH" xeng --block 0 --ants 64 --reps 1 --gib 0.05 >"$OUT/ncu-gemm.log" 2>&1
echo "== ncu gemm: exit $?"; tail -3 "$OUT/ncu-gemm.log"
for r in corr gemm; do
    [ -f "$OUT/$r.ncu-rep" ] || continue
    ncu --import "$OUT/$r.ncu-rep" --page details >"$OUT/$r-details.txt" 2>&1
    ncu --import "$OUT/$r.ncu-rep" --page raw --csv >"$OUT/$r-raw.csv" 2>&1
    # per-instruction stall samples (SASS), to see where the warps wait
    [ "$r" = corr ] && ncu --import "$OUT/$r.ncu-rep" --page source --csv --print-source sass \
        >"$OUT/$r-sass.csv" 2>&1
    rm -f "$OUT/$r.ncu-rep"
done
ls -la "$OUT"
