#!/usr/bin/env bash
# On the lent GPU machine (device tool, carrying .devdeps): fft_post's fused
# cuFFTDx FFT + post kernel (issue 17 item 1, docs/performance.md "Fused FFT
# + post"). Unpacks the nvidia-mathdx headers (MATHDX_TAR, default
# .devdeps/mathdx.tar.xz, made by scripts/fetch-mathdx.sh), builds cbf-bench
# and the F-engine kernel test with them, then, within DX_DEADLINE seconds:
#   - test_feng --gpu --dx (the fused kernel against the float64 model) and
#     test_feng --gpu (the four-pass path and the pfb, as before);
#   - cbf-bench feng at DX_CHANNELS (4096,8192): the four-pass chain, the
#     fused chain and the four-pass bound of the same run;
#   - compute-sanitizer memcheck on test_feng --gpu --dx (every template of
#     the kernel) and racecheck on a small cbf-bench run;
#   - with DX_SCOPING=1, cbf-bench feng --dx (the cuFFTDx measurement kernels);
#   - Nsight Compute on the fused kernel and post_kernel (--clock-control none).
# Output under $OUT (./out by hand): bench.md, test and sanitizer logs, ncu.csv.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/device-env.sh
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
DEADLINE=${DX_DEADLINE:-225}
left() { echo $((DEADLINE - SECONDS)); }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
tar=${MATHDX_TAR:-.devdeps/mathdx.tar.xz}
rm -rf /tmp/mathdx && mkdir -p /tmp/mathdx && tar -xJf "$tar" -C /tmp/mathdx || exit 1
B=build-device-dx
{
    meson setup "$B" -Dcufftdx=enabled -Dmathdx_dir=/tmp/mathdx/nvidia/mathdx &&
        ninja -C "$B" tools/bench/cbf-bench tests/feng/test_feng
} >"$OUT/build.log" 2>&1 || { tail -40 "$OUT/build.log"; exit 1; }
echo "== build ok (${SECONDS}s)"
test=$B/tests/feng/test_feng
bench=$B/tools/bench/cbf-bench
# At most 8 files come back from $OUT: one per step.
run() { # file under $OUT, seconds, command...
    local name=$1 t=$2
    shift 2
    [ "$(left)" -gt "$t" ] || { echo "== $name: skipped, $(left)s left"; return; }
    timeout "$t" "$@" >"$OUT/$name" 2>&1
    echo "== $name: exit $? (${SECONDS}s)"
}
run test-dx.log 60 $test --gpu --dx
grep -E "PASSED|FAILED|SKIP|fail|\[  ERROR" "$OUT/test-dx.log" | head -12
run bench.md 60 $bench feng --channels "${DX_CHANNELS:-4096,8192}" ${DX_BENCH_ARGS:-}
cat "$OUT/bench.md"
run memcheck.log 50 compute-sanitizer --tool memcheck $test --gpu --dx
grep -E "ERROR SUMMARY|PASSED|FAILED" "$OUT/memcheck.log" | head -4
small="feng --channels ${DX_CHANNELS:-4096,8192} --samples 1048576 --reps 1"
run racecheck.log 40 compute-sanitizer --tool racecheck $bench $small
grep -E "RACECHECK SUMMARY|ERROR SUMMARY" "$OUT/racecheck.log" | head -4
run test-gpu.log 40 $test --gpu
grep -E "PASSED|FAILED|\[  ERROR" "$OUT/test-gpu.log" | head -6
if [ "${DX_SCOPING:-0}" = 1 ]; then
    run scoping.log 60 $bench feng --dx
    cat "$OUT/scoping.log"
fi
if [ "${DX_NCU:-1}" = 1 ] && command -v ncu >/dev/null; then
    run ncu.csv 40 ncu --clock-control none --kernel-name-base mangled \
        --kernel-id '::regex:dxp_kernel|post_kernel:2' --csv --print-units base \
        --metrics gpu__time_duration.sum,smsp__inst_executed.sum,sm__inst_executed.avg.per_cycle_active,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,launch__grid_size,launch__block_size,launch__occupancy_limit_shared_mem,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,smsp__thread_inst_executed.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_op_write.sum,lts__t_bytes.sum,lts__throughput.avg.pct_of_peak_sustained_elapsed,smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_wait_per_issue_active.ratio \
        $bench feng --channels "${DX_CHANNELS:-4096,8192}" --samples 16777216 --reps 1
    echo "$(grep -c '"gpu__time_duration.sum"' "$OUT/ncu.csv") kernels profiled"
fi
exit 0
