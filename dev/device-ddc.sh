#!/usr/bin/env bash
# On the lent GPU machine (through the device tool, carrying .devdeps): one
# build of the DDC and narrowband targets with the nvcc there; the ddc
# kernel tests on the GPU for the default kernel (tensor cores) and the FMA
# kernel (DDC_MODES, default "0 4 8 16"), the narrowband chain test,
# `cbf-bench ddc` (the DDC table and the narrowband chain table),
# compute-sanitizer (DDC_CHECK, below), then Nsight Compute on the kernels
# named by DDC_PROF ("S:per_thread" pairs, default "16:0 8:0 16:8"; "" for
# none).
# Steps past DDC_BUDGET seconds (default 225) are skipped so that one call
# of the device tool fits its limit. The table (bench.md), a summary and an
# archive of the logs and profiles go to $OUT (./out when run by hand); the
# table and the summary are printed last.
set -uo pipefail
cd "$(dirname "$0")/.."
source dev/device-run.sh
device_start build-device-ddc
BUDGET=${DDC_BUDGET:-225}
SUM="$OUT/summary.txt"
: >"$SUM"
say() { echo "$*" | tee -a "$SUM"; }
left() { [ $SECONDS -lt $((BUDGET - ${1:-0})) ] || { say "== skipped: $2 (at ${SECONDS}s)"; return 1; }; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.total --format=csv \
    >"$OUT/gpu.txt" 2>&1
cat "$OUT/gpu.txt" >>"$SUM"
TARGETS="tests/ddc/test_ddc tests/ddc/test_narrowband tools/bench/cbf-bench"
# DDC_PIPE=1 adds the plugin and engine tests on the GPU (ddc plugin
# against the kernel, one engine with wide and narrow outputs).
PIPE_TARGETS="tools/cbf-run plugins/dsim/cbf_dsim.so plugins/filesink/cbf_filesink.so
 plugins/ddc/cbf_ddc.so plugins/pfb/cbf_pfb.so plugins/fft_post/cbf_fft_post.so
 plugins/upload/cbf_upload.so tests/ddc/test_ddc_plugin tests/ddc/test_wide_narrow
 tests/ddc/cbf_test_gap.so"
[ -n "${DDC_PIPE:-}" ] && TARGETS="$TARGETS $PIPE_TARGETS"
{ meson setup "$B" >/dev/null && ninja -C "$B" $TARGETS; } >"$OUT/build.log" 2>&1 ||
    { tail -40 "$OUT/build.log"; exit 1; }
say "== build ok (${SECONDS}s)"
rc=0
T="$OUT/tests.log"
: >"$T"
run() {
    run_logged "$1" 100 "${@:2}"
    local r=$?
    say "== $1: exit $r ($(grep -c '\[       OK \]' "$OUT/one.log") OK, $(grep -c 'FAILED \]' "$OUT/one.log") failed)"
    grep -E "FAILED|ERROR|worst error [1-9]" "$OUT/one.log" | head -6 | tee -a "$SUM"
}
for mode in ${DDC_MODES:-0 4 8 16}; do
    run "test_ddc --gpu --per-thread $mode" "$B/tests/ddc/test_ddc" --gpu --per-thread "$mode"
done
grep -E "^# .*S (8|16|32), taps" "$T" | sort -t' ' -k5 -gr | head -3 >>"$SUM"
left 60 "test_narrowband" && run "test_narrowband --gpu" "$B/tests/ddc/test_narrowband" --gpu
if [ -n "${DDC_PIPE:-}" ]; then
    export CBF_PLUGIN_PATH="$PWD/$B/plugins" CBF_BUILD_ROOT="$PWD/$B"
    left 80 "test_ddc_plugin" && run "test_ddc_plugin --gpu" "$B/tests/ddc/test_ddc_plugin" --gpu
    left 70 "test_wide_narrow" && run "test_wide_narrow --gpu" "$B/tests/ddc/test_wide_narrow" --gpu
fi
rm -f "$OUT/one.log"
BENCH="$B/tools/bench/cbf-bench"
if left 40 "cbf-bench ddc"; then
    timeout 100 "$BENCH" ddc ${DDC_BENCH_ARGS:-} >"$OUT/bench.md" 2>"$OUT/bench.err"
    say "== cbf-bench ddc ${DDC_BENCH_ARGS:-}: exit $?"
fi
# compute-sanitizer memcheck on the items of DDC_CHECK (default "0 16"): a
# number is test_ddc with that per_thread, "chain" the narrowband chain test.
if command -v compute-sanitizer >/dev/null; then
    for m in ${DDC_CHECK-0 16}; do
        left 50 "memcheck $m" || break
        if [ "$m" = chain ]; then t=("$B/tests/ddc/test_narrowband" --gpu); else
            t=("$B/tests/ddc/test_ddc" --gpu --per-thread "$m"); fi
        timeout 60 compute-sanitizer --tool memcheck --leak-check no "${t[@]}" \
            >"$OUT/memcheck-$m.log" 2>&1
        say "== memcheck ${t[*]##*/}: exit $? ($(grep -c 'Invalid\|out of bounds' "$OUT/memcheck-$m.log") invalid accesses)"
        tail -1 "$OUT/memcheck-$m.log" >>"$SUM"
    done
fi
# Nsight Compute, clocks left alone: the third launch of the kernel (two
# warm-ups first) on 2^26 samples per pol.
NCU="ncu --clock-control none --set full --import-source no"
for p in ${DDC_PROF-16:0 8:0 16:8}; do
    left 25 "ncu $p" || break
    s=${p%%:*} c=${p##*:}
    timeout 60 $NCU -k regex:ddc_ --launch-skip 2 --launch-count 1 -o "$OUT/prof" -f \
        "$BENCH" ddc --decimation "$s" --ratio 8 --per-thread "$c" --samples 67108864 --reps 1 \
        --chain "" >"$OUT/ncu.log" 2>&1
    say "== ncu S $s per_thread $c: exit $?"
    if [ -f "$OUT/prof.ncu-rep" ]; then
        ncu --import "$OUT/prof.ncu-rep" --page details >"$OUT/ncu-s$s-c$c.txt" 2>&1
        grep -E "Duration|Memory Throughput|DRAM Throughput|L1/TEX Cache Throughput|Compute \(SM\) Throughput|Achieved Occupancy|Theoretical Occupancy|Block Limit|Registers Per|Issue Slots Busy|Executed Ipc A|No Eligible|Warp Cycles Per Issued|L1/TEX Hit|Bank Conflicts|excessive" \
            "$OUT/ncu-s$s-c$c.txt" | head -28 | sed 's/^ */    /' >>"$SUM"
        ncu --import "$OUT/prof.ncu-rep" --page raw --csv >"$OUT/ncu-s$s-c$c.csv" 2>&1
        gzip -f "$OUT/ncu-s$s-c$c.csv"
        rm -f "$OUT/prof.ncu-rep"
    else
        tail -5 "$OUT/ncu.log" >>"$SUM"
    fi
done
rm -f "$OUT/ncu.log"
# The device tool brings back 8 files: the summary, the table, the rest in one archive.
(cd "$OUT" && tar czf logs.tar.gz --remove-files $(ls | grep -vxE 'summary.txt|bench.md|logs.tar.gz'))
echo
cat "$OUT/bench.md" 2>/dev/null
echo
cat "$SUM"
exit $rc
