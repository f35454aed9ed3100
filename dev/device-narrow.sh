#!/usr/bin/env bash
# On the lent GPU machine (through the device tool, carrying .devdeps):
# builds the narrowband targets, runs the narrowband chain test (CPU, GPU
# against the float64 model and the CPU), the ddc kernel test (default
# kernel), the wide + narrow pipeline test on
# the GPU engine, the wideband kernel test (the pfb and fft_post kernels
# gained a complex mode beside the real one), compute-sanitizer on the chain,
# pipelines/feng-wide-narrow.yaml on the GPU, then `cbf-bench ddc` with the
# narrowband chain table. Logs go to $OUT (./out by hand).
# Order: the chain test, the benchmark and profiles first, then the other
# tests, memcheck and the pipeline while NARROW_BUDGET seconds (225) last.
# NARROW_PIPE=0 leaves out the pipeline run; NARROW_PROF ("S:channels[:unzip]:kernel-regex"
# items, e.g. "32:1024:post_complex 8:32768:4:cfir") adds Nsight Compute (full set,
# clocks left alone) on the third launch of that kernel in that chain, summarised
# into $OUT/prof.txt.
set -uo pipefail
cd "$(dirname "$0")/.."
source dev/device-run.sh
device_start build-device-narrow
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.total --format=csv \
    >"$OUT/gpu.txt" 2>&1
cat "$OUT/gpu.txt"
TARGETS="tests/ddc/test_narrowband tests/ddc/test_ddc tests/ddc/test_wide_narrow tests/feng/test_feng tools/cbf-run
 plugins/dsim/cbf_dsim.so plugins/filesink/cbf_filesink.so plugins/ddc/cbf_ddc.so
  plugins/pfb/cbf_pfb.so plugins/fft_post/cbf_fft_post.so plugins/upload/cbf_upload.so tools/bench/cbf-bench"
{ meson setup "$B" >/dev/null && ninja -C "$B" $TARGETS; } >"$OUT/build.log" 2>&1 ||
    { tail -40 "$OUT/build.log"; exit 1; }
echo "== build ok"
export CBF_PLUGIN_PATH="$PWD/$B/plugins" CBF_BUILD_ROOT="$PWD/$B"
rc=0
T="$OUT/tests.log"
: >"$T"
run() {
    run_logged "$1" 200 "${@:2}"
    local r=$?
    echo "== $1: exit $r"
    grep -E "^# |FAILED|PASSED|ERROR|skipped" "$OUT/one.log" | head -12
}
left() { [ $SECONDS -lt $((${NARROW_BUDGET:-225} - $1)) ] || { echo "== skipped: $2 (at ${SECONDS}s)"; return 1; }; }
run "test_narrowband --gpu" "$B/tests/ddc/test_narrowband" --gpu
run "test_ddc --gpu" "$B/tests/ddc/test_ddc" --gpu
"$B/tools/bench/cbf-bench" ddc --decimation 8 --ratio 8 --per-thread 0,8 ${NARROW_BENCH_ARGS:-} \
    >"$OUT/bench.md" 2>"$OUT/bench.err"
echo "== cbf-bench ddc: exit $?"
NCU="ncu --clock-control none --set full --import-source no"
for p in ${NARROW_PROF:-}; do
    left 40 "ncu $p" || break
    chain=${p%:*} k=${p##*:}
    timeout 60 $NCU -k "regex:$k" --launch-skip 2 --launch-count 1 -o "$OUT/prof" -f \
        "$B/tools/bench/cbf-bench" ddc --decimation "" --reps 1 --chain "$chain" \
        >"$OUT/ncu.log" 2>&1
    echo "== ncu $chain $k: exit $?" >>"$OUT/prof.txt"
    if [ -f "$OUT/prof.ncu-rep" ]; then
        ncu --import "$OUT/prof.ncu-rep" --page details >"$OUT/ncu.txt" 2>&1
        grep -E "^  [a-z_]|Duration|Memory Throughput|DRAM Throughput|L1/TEX Cache Throughput|L2 Cache Throughput|Compute \(SM\) Throughput|Achieved Occupancy|Theoretical Occupancy|Registers Per|Issue Slots Busy|No Eligible|Warp Cycles Per Issued|Bank Conflicts|Block Limit|uncoalesced|excessive" \
            "$OUT/ncu.txt" | head -30 | sed 's/^ */    /' >>"$OUT/prof.txt"
        rm -f "$OUT/prof.ncu-rep" "$OUT/ncu.txt"
    else
        tail -5 "$OUT/ncu.log" >>"$OUT/prof.txt"
    fi
done
rm -f "$OUT/ncu.log"
left 60 "test_wide_narrow" && run "test_wide_narrow --gpu" "$B/tests/ddc/test_wide_narrow" --gpu
left 60 "test_feng" && run "test_feng --gpu" "$B/tests/feng/test_feng" --gpu
if command -v compute-sanitizer >/dev/null && left 50 "memcheck"; then
    timeout 120 compute-sanitizer --tool memcheck --leak-check no "$B/tests/ddc/test_narrowband" \
        --gpu >"$OUT/memcheck.log" 2>&1
    echo "== memcheck test_narrowband --gpu: exit $? ($(grep -c 'Invalid\|out of bounds' "$OUT/memcheck.log") invalid accesses)"
    tail -2 "$OUT/memcheck.log"
    if left 40 "memcheck test_ddc"; then
        timeout 90 compute-sanitizer --tool memcheck --leak-check no "$B/tests/ddc/test_ddc" \
            --gpu >"$OUT/memcheck-ddc.log" 2>&1
        echo "== memcheck test_ddc --gpu: exit $? ($(grep -c 'Invalid\|out of bounds' "$OUT/memcheck-ddc.log") invalid accesses)"
        tail -1 "$OUT/memcheck-ddc.log"
    fi
fi
if [ "${NARROW_PIPE:-1}" != 0 ] && left 60 "pipeline"; then
    sed 's/gpu: auto/gpu: required/' pipelines/feng-wide-narrow.yaml >"$OUT/fwn.yaml"
    ( cd "$OUT" && timeout 60 "$OLDPWD/$B/tools/cbf-run" fwn.yaml >"$OUT/pipeline.log" 2>&1 )
    echo "== feng-wide-narrow.yaml on the GPU: exit $?"
    grep -E "wrote|drained|error" "$OUT/pipeline.log"
fi
rm -f "$OUT"/*.h5 "$OUT/one.log" "$OUT/fwn.yaml"
cat "$OUT/bench.md" "$OUT/bench.err"
[ -f "$OUT/prof.txt" ] && cat "$OUT/prof.txt"
exit $rc
