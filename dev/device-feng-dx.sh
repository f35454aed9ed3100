#!/usr/bin/env bash
# On the lent GPU machine (device tool, carrying .devdeps): fft_post's fused
# cuFFTDx FFT + post kernel (issue 17 item 1, docs/notes/performance-history.md "Fused FFT
# + post with cuFFTDx"). Unpacks the nvidia-mathdx headers (MATHDX_TAR,
# default .devdeps/mathdx.tar.xz, made by scripts/fetch-mathdx.sh), builds
# cbf-bench and the F-engine kernel test with them, then runs the steps of
# DX_STEPS in order within DX_DEADLINE seconds (each cut to what is left):
#   test_dx       test_feng --gpu --dx: the fused kernel against the float64 model
#   bench         cbf-bench feng at DX_CHANNELS (4096,8192): four-pass chain,
#                 fused chain, four-pass bound of the same run (DX_BENCH_ARGS:
#                 --dx-variants adds the measured layouts)
#   bench_dither  the same with dither (fft_post's default) at DX_DITHER_CHANNELS (4096)
#   memcheck      compute-sanitizer memcheck on test_feng --gpu --dx
#   racecheck     compute-sanitizer racecheck on a small cbf-bench run
#   test_gpu      test_feng --gpu: the four-pass path and the pfb
#   ncu           Nsight Compute on the FIR, the fused kernel and post_kernel
#                 (--clock-control none; DX_NCU_KERNELS, DX_NCU_ARGS,
#                 DX_NCU_CHANNELS, DX_NCU_SAMPLES)
#   memcheck_fir  compute-sanitizer memcheck on test_feng --gpu (the FIR at
#                 every width, unaligned input pointers)
#   scoping       cbf-bench feng --dx: the cuFFTDx measurement kernels
# Output under $OUT (./out by hand), one file per step (the device tool
# brings back 8): bench.md, test and sanitizer logs, ncu.csv.
set -uo pipefail
cd "$(dirname "$0")/.."
source dev/device-env.sh
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
run() { # file under $OUT, seconds (cut to what is left, 15 at least), command...
    local name=$1 t=$2
    shift 2
    [ "$(left)" -gt 20 ] || { echo "== $name: skipped, $(left)s left"; return; }
    [ "$(left)" -gt $((t + 5)) ] || t=$(($(left) - 5))
    timeout "$t" "$@" >"$OUT/$name" 2>&1
    echo "== $name: exit $? (${SECONDS}s)"
}
CH=${DX_CHANNELS:-4096,8192}
step_test_dx() {
    run test-dx.log 60 $test --gpu --dx
    grep -E "PASSED|FAILED|SKIP|fail|\[  ERROR" "$OUT/test-dx.log" | head -12
}
step_bench() {
    run bench.md 60 $bench feng --channels "$CH" ${DX_BENCH_ARGS:-}
    cat "$OUT/bench.md"
}
step_bench_dither() {
    run bench-dither.md 90 $bench feng --channels "${DX_DITHER_CHANNELS:-4096}" --dither
    tail -n +6 "$OUT/bench-dither.md"
}
step_memcheck() {
    run memcheck.log 55 compute-sanitizer --tool memcheck $test --gpu --dx
    grep -E "ERROR SUMMARY|PASSED|FAILED" "$OUT/memcheck.log" | head -4
}
step_memcheck_fir() {
    run memcheck-fir.log 70 compute-sanitizer --tool memcheck $test --gpu
    grep -E "ERROR SUMMARY|PASSED|FAILED" "$OUT/memcheck-fir.log" | head -4
}
step_racecheck() {
    run racecheck.log 60 compute-sanitizer --tool racecheck $bench feng --channels 4096 \
        --samples 65536 --reps 1 --dx-variants
    grep -E "RACECHECK SUMMARY|ERROR SUMMARY|hazard" "$OUT/racecheck.log" | head -4
}
step_test_gpu() {
    run test-gpu.log 45 $test --gpu
    grep -E "PASSED|FAILED|\[  ERROR" "$OUT/test-gpu.log" | head -6
}
step_scoping() {
    run scoping.log 60 $bench feng --dx
    cat "$OUT/scoping.log"
}
step_ncu() {
    command -v ncu >/dev/null || { echo "== ncu: not here"; return; }
    run ncu.csv 50 ncu --clock-control none --kernel-name-base mangled \
        --kernel-id "::regex:${DX_NCU_KERNELS:-fir_kernel|dxp_kernel|post_kernel}:2" --csv --print-units base \
        --metrics gpu__time_duration.sum,smsp__inst_executed.sum,sm__inst_executed.avg.per_cycle_active,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,launch__grid_size,launch__block_size,launch__occupancy_limit_shared_mem,launch__occupancy_limit_registers,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,smsp__thread_inst_executed.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_op_write.sum,lts__t_sectors_op_read.sum,l1tex__t_sector_hit_rate.pct,lts__throughput.avg.pct_of_peak_sustained_elapsed,l1tex__throughput.avg.pct_of_peak_sustained_active,smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_wait_per_issue_active.ratio,smsp__average_warps_issue_stalled_not_selected_per_issue_active.ratio,smsp__average_warps_issue_stalled_selected_per_issue_active.ratio \
        $bench feng --channels "${DX_NCU_CHANNELS:-4096}" --samples "${DX_NCU_SAMPLES:-16777216}" \
        --reps 1 ${DX_NCU_ARGS:-}
    echo "$(grep -c '"gpu__time_duration.sum"' "$OUT/ncu.csv") kernels profiled"
}
# Steps in order (DX_STEPS): test_dx bench bench_dither memcheck racecheck
# test_gpu ncu scoping memcheck_fir; one file under $OUT each.
for step in ${DX_STEPS:-test_dx bench bench_dither memcheck racecheck test_gpu ncu}; do
    "step_$step"
done
exit 0
