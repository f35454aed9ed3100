#!/usr/bin/env bash
# On the lent GPU machine (through the device tool, carrying .devdeps):
# builds the F-engine targets with the nvcc there, runs the feng kernel tests
# on CPU, GPU and GPU with fft_post's fused path, `cbf-bench feng` (both
# chains), the GPU tests under compute-sanitizer (four-pass and fused), the
# pipeline tests when libcbf's runtime is built (FENG_PIPELINE=0 leaves them
# out), and with FENG_NCU=1 an Nsight Compute summary of the fused kernel at
# each size of FENG_NCU_CHANNELS. FENG_MEMCHECK_MODES: the test_feng modes
# under compute-sanitizer, '+' for a space (default "--gpu --gpu+--fused");
# FENG_MEMCHECK=0 leaves compute-sanitizer out.
# Logs and the benchmark table go to $OUT (./out when run by hand).
#
# FENG_SRC: the source tree to build (default: this checkout). Pointing it
# at an export of the committed tree (git archive HEAD) keeps other people's
# half-written folders out of the build.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/device-env.sh
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
cd "${FENG_SRC:-.}"
B=build-device-feng
T="$OUT/tests.log"   # every test's output, one after another
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.total --format=csv \
    >"$T" 2>&1
cat "$T"
{
    meson setup "$B" >/dev/null && ninja -C "$B" tests/feng/test_feng tools/bench/cbf-bench
} >"$OUT/build.log" 2>&1 || { tail -40 "$OUT/build.log"; exit 1; }
echo "== build ok"
rc=0
for mode in "" --gpu "--gpu --fused"; do
    echo "==== test_feng ${mode:---cpu}" >>"$T"
    timeout 120 "$B/tests/feng/test_feng" $mode >"$OUT/last.log" 2>&1
    r=$?
    cat "$OUT/last.log" >>"$T"
    echo "== test_feng ${mode:---cpu}: exit $r"
    grep -E "seed|FAILED|PASSED|ERROR|SKIPPED  \]" "$OUT/last.log" | head -20
    [ $r -eq 0 ] || rc=1
done
"$B/tools/bench/cbf-bench" feng ${FENG_BENCH_ARGS:-} >"$OUT/bench.md" 2>&1
echo "== cbf-bench feng: exit $?"
cat "$OUT/bench.md"
if [ "${FENG_MEMCHECK:-1}" = 1 ] && command -v compute-sanitizer >/dev/null; then
    for mode in ${FENG_MEMCHECK_MODES:---gpu --gpu+--fused}; do
        mode=${mode//+/ }
        log="$OUT/memcheck${mode//[ -]/}.log"
        timeout ${FENG_MEMCHECK_S:-150} compute-sanitizer --tool memcheck --leak-check no \
            "$B/tests/feng/test_feng" $mode >"$log" 2>&1
        echo "== memcheck $mode: exit $? ($(grep -c 'Invalid\|out of bounds' "$log") invalid accesses)"
        tail -3 "$log"
    done
fi
if [ "${FENG_NCU:-0}" = 1 ] && command -v ncu >/dev/null; then
    for ch in ${FENG_NCU_CHANNELS:-4096 8192 32768}; do
        timeout 60 ncu --clock-control none -k regex:fused_kernel --launch-count 1 \
            --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy \
            --section LaunchStats --section WarpStateStats --section SourceCounters \
            --section InstructionStats --print-details all \
            "$B/tools/bench/cbf-bench" feng --path fused --channels $ch --reps 1 \
            >"$OUT/ncu-$ch.txt" 2>&1
        echo "== ncu fused $ch channels: exit $?"
        grep -E "Duration|DRAM Throughput|Memory Throughput|Compute \(SM\) Throughput|Achieved Occupancy|Registers Per|L2 Hit|Warp Cycles Per Issued|Stall" "$OUT/ncu-$ch.txt" | head -14
    done
fi
if [ "${FENG_PIPELINE:-1}" = 0 ]; then
    echo "== pipeline tests left out (FENG_PIPELINE=0)"
elif ninja -C "$B" tests/feng/test_feng_pipeline tests/feng/cbf_feng_capture.so \
        plugins/dsim/cbf_dsim.so plugins/pfb/cbf_pfb.so plugins/fft_post/cbf_fft_post.so \
        >>"$OUT/build.log" 2>&1; then
    for mode in "" --gpu "--gpu --fused"; do
        echo "==== test_feng_pipeline ${mode:---cpu}" >>"$T"
        CBF_PLUGIN_PATH="$PWD/$B/plugins" CBF_BUILD_ROOT="$PWD/$B" \
            timeout ${FENG_PIPELINE_S:-200} "$B/tests/feng/test_feng_pipeline" $mode >"$OUT/last.log" 2>&1
        r=$?
        cat "$OUT/last.log" >>"$T"
        echo "== test_feng_pipeline ${mode:---cpu}: exit $r"
        grep -E "FAILED|PASSED|ERROR|error" "$OUT/last.log" | head -10
        [ $r -eq 0 ] || rc=1
    done
else
    echo "== pipeline tests not built (libcbf runtime not in this tree?)"
    tail -5 "$OUT/build.log"
fi
rm -f "$OUT/last.log"
if [ -n "${FENG_AFTER:-}" ]; then
    eval "$FENG_AFTER"
fi
exit $rc
