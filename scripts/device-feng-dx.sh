#!/usr/bin/env bash
# On the lent GPU machine (device tool, carrying .devdeps): the cuFFTDx
# measurement of issue 17 item 1 (`cbf-bench feng --dx`, docs/performance.md
# "Fusing passes"). Unpacks the nvidia-mathdx headers (MATHDX_TAR, default
# .devdeps/mathdx.tar.xz, made by scripts/fetch-mathdx.sh), builds
# cbf-bench with them, runs the benchmark (which checks every kernel against
# a float64 DFT), compute-sanitizer memcheck and racecheck on a small run,
# and Nsight Compute on one launch of each kernel (--clock-control none).
# Output under $OUT (./out by hand): bench.md, sanitizer logs, ncu.csv.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/device-env.sh
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
DEADLINE=${DX_DEADLINE:-190}
left() { echo $((DEADLINE - SECONDS)); }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
tar=${MATHDX_TAR:-.devdeps/mathdx.tar.xz}
rm -rf /tmp/mathdx && mkdir -p /tmp/mathdx && tar -xJf "$tar" -C /tmp/mathdx || exit 1
B=build-device-dx
{
    meson setup "$B" -Dcufftdx=enabled -Dmathdx_dir=/tmp/mathdx/nvidia/mathdx &&
        ninja -C "$B" tools/bench/cbf-bench
} >"$OUT/build.log" 2>&1 || { tail -40 "$OUT/build.log"; exit 1; }
echo "== build ok (${SECONDS}s)"
bench="$B/tools/bench/cbf-bench feng --dx"
timeout "$(left)" $bench ${DX_BENCH_ARGS:-} >"$OUT/bench.md" 2>&1
echo "== cbf-bench feng --dx: exit $? (${SECONDS}s)"
cat "$OUT/bench.md"
small="--samples 1048576 --reps 1"
for tool in memcheck racecheck; do
    [ "$(left)" -gt 30 ] || break
    timeout $(($(left) - 25)) compute-sanitizer --tool $tool $bench $small >"$OUT/$tool.log" 2>&1
    echo "== $tool: exit $? (${SECONDS}s)"
    grep -E "ERROR SUMMARY|RACECHECK SUMMARY|FAIL" "$OUT/$tool.log" | head -5
done
if [ "${DX_NCU:-1}" = 1 ] && [ "$(left)" -gt 20 ] && command -v ncu >/dev/null; then
    timeout $(($(left) - 5)) ncu --clock-control none --kernel-name-base mangled \
        --kernel-id '::regex:dx_kernel|fft:2' --csv --print-units base \
        --metrics gpu__time_duration.sum,smsp__inst_executed.sum,sm__inst_executed.avg.per_cycle_active,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,launch__grid_size,launch__block_size,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,smsp__thread_inst_executed.sum \
        $bench --samples 16777216 --reps 1 >"$OUT/ncu.csv" 2>"$OUT/ncu.err"
    echo "== ncu: exit $? (${SECONDS}s), $(grep -c '"gpu__time_duration.sum"' "$OUT/ncu.csv") kernels"
fi
