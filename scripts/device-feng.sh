#!/usr/bin/env bash
# On the lent GPU machine (through the device tool, carrying .devdeps):
# builds the F-engine targets with the nvcc there, runs the feng kernel tests
# on CPU and GPU (also under compute-sanitizer), the pipeline tests when
# libcbf's runtime is built, then `cbf-bench feng`. Logs and the benchmark
# table go to $OUT (./out when run by hand).
#
# FENG_SRC: the source tree to build (default: this checkout). Pointing it
# at an export of the committed tree (git archive HEAD) keeps other people's
# half-written folders out of the build.
# FENG_TEST_MODES: test_feng's argument sets, separated by "|" (default
# "|--gpu": CPU, then GPU; add "--gpu --lto" for the FIR in cuFFT's load
# callback). FENG_PIPELINE=0 leaves the pipeline tests out.
# FENG_MEMCHECK_ARGS: test_feng's arguments under compute-sanitizer
# (default --gpu), run last as the slowest; FENG_MEMCHECK=0 leaves it out.
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
# cuFFT's LTO callbacks load libnvJitLink and libnvrtc when a plan is made.
export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}/usr/local/cuda/lib64"
echo "== loader: $( (ldconfig -p 2>/dev/null | grep -oE 'lib(nvJitLink|nvrtc)\.so\.[0-9]+' | sort -u | tr '\n' ' ') ) $(ls /usr/local/cuda/lib64 2>/dev/null | grep -E '^lib(nvJitLink|nvrtc)\.so\.[0-9]+$' | tr '\n' ' ')"
{
    meson setup "$B" && ninja -C "$B" tests/feng/test_feng tools/bench/cbf-bench
} >"$OUT/build.log" 2>&1 || { tail -40 "$OUT/build.log"; exit 1; }
echo "== build ok"
grep -E "LTO|CUDA kernels" "$OUT/build.log" | head -3
rc=0
IFS='|' read -r -a modes <<<"${FENG_TEST_MODES-|--gpu}"
for mode in "${modes[@]}"; do
    echo "==== test_feng ${mode:---cpu}" >>"$T"
    start=$SECONDS
    timeout "${FENG_TEST_TIMEOUT:-150}" "$B/tests/feng/test_feng" $mode >"$OUT/last.log" 2>&1
    r=$?
    cat "$OUT/last.log" >>"$T"
    echo "== test_feng ${mode:---cpu}: exit $r ($((SECONDS - start)) s)"
    grep -E "seed|FAILED|PASSED|ERROR|SKIP|differ|fail" "$OUT/last.log" | head -20
    [ $r -eq 0 ] || rc=1
done
if [ "${FENG_PIPELINE:-1}" != 0 ] && ninja -C "$B" tests/feng/test_feng_pipeline tests/feng/cbf_feng_capture.so \
        plugins/dsim/cbf_dsim.so plugins/pfb/cbf_pfb.so plugins/fft_post/cbf_fft_post.so \
        >>"$OUT/build.log" 2>&1; then
    for mode in "" --gpu; do
        echo "==== test_feng_pipeline ${mode:---cpu}" >>"$T"
        CBF_PLUGIN_PATH="$PWD/$B/plugins" CBF_BUILD_ROOT="$PWD/$B" \
            timeout 200 "$B/tests/feng/test_feng_pipeline" $mode >"$OUT/last.log" 2>&1
        r=$?
        cat "$OUT/last.log" >>"$T"
        echo "== test_feng_pipeline ${mode:---cpu}: exit $r"
        grep -E "FAILED|PASSED|ERROR|error" "$OUT/last.log" | head -10
        [ $r -eq 0 ] || rc=1
    done
elif [ "${FENG_PIPELINE:-1}" != 0 ]; then
    echo "== pipeline tests not built (libcbf runtime not in this tree?)"
    tail -5 "$OUT/build.log"
fi
rm -f "$OUT/last.log"
"$B/tools/bench/cbf-bench" feng ${FENG_BENCH_ARGS:-} >"$OUT/bench.md" 2>&1
echo "== cbf-bench feng: exit $?"
cat "$OUT/bench.md"
# FENG_NCU=1: Nsight Compute on cuFFT's kernel with the FIR load callback
# (the one kernel of `cbf-bench feng --path lto` that is neither post's nor
# the gain table's) at each size of FENG_NCU_CHANNELS.
if [ "${FENG_NCU:-0}" = 1 ] && command -v ncu >/dev/null; then
    for ch in ${FENG_NCU_CHANNELS:-4096 32768}; do
        timeout "${FENG_NCU_TIMEOUT:-60}" ncu --clock-control none \
            -k 'regex:^(?!post_kernel|eff_gain_kernel).*$' --launch-count 1 \
            --section SpeedOfLight --section MemoryWorkloadAnalysis \
            --section MemoryWorkloadAnalysis_Tables --section Occupancy --section LaunchStats \
            --section WarpStateStats --section InstructionStats --print-details all \
            "$B/tools/bench/cbf-bench" feng --path lto --channels "$ch" --reps 1 \
            --samples 67108864 >"$OUT/ncu-$ch.txt" 2>&1
        echo "== ncu lto $ch channels: exit $?"
        grep -E "^  [a-zA-Z_]|Duration|DRAM Throughput|Memory Throughput|L1/TEX Hit|L2 Hit|L1/TEX Cache Throughput|L2 Cache Throughput|Compute \(SM\) Throughput|Executed Ipc A|Achieved Occupancy|Theoretical Occupancy|Registers Per|Block Size|Grid Size|Local Memory|Executed Instructions  |Warp Cycles Per Issued|Stall Long|Stall LG|local_op_(ld|st).sum  |lts__t_sectors_srcunit_tex.sum  " "$OUT/ncu-$ch.txt" | head -24
    done
fi
# FENG_DEADLINE: seconds into the script by which memcheck must end (it
# gets what is left, up to FENG_MEMCHECK_TIMEOUT), for a device call's limit.
mc_limit=${FENG_MEMCHECK_TIMEOUT:-150}
if [ -n "${FENG_DEADLINE:-}" ] && [ $((FENG_DEADLINE - SECONDS)) -lt "$mc_limit" ]; then
    mc_limit=$((FENG_DEADLINE - SECONDS))
fi
if [ "${FENG_MEMCHECK:-1}" != 0 ] && [ "$mc_limit" -gt 5 ] && command -v compute-sanitizer >/dev/null; then
    start=$SECONDS
    timeout "$mc_limit" compute-sanitizer --tool memcheck --leak-check no \
        "$B/tests/feng/test_feng" ${FENG_MEMCHECK_ARGS:---gpu} >"$OUT/memcheck.log" 2>&1
    r=$?
    echo "== memcheck ${FENG_MEMCHECK_ARGS:---gpu}: exit $r, $((SECONDS - start)) s ($(grep -c 'Invalid\|out of bounds' "$OUT/memcheck.log") invalid accesses)"
    tail -3 "$OUT/memcheck.log"
fi
if [ -n "${FENG_AFTER:-}" ]; then
    eval "$FENG_AFTER"
fi
exit $rc
