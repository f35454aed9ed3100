#!/usr/bin/env bash
# On the lent GPU machine (through the device tool, carrying .devdeps):
# builds the X-engine targets with the nvcc there, runs the xeng kernel
# tests on CPU and GPU (also under compute-sanitizer), then
# `cbf-bench xeng`. Logs and the benchmark table go to $OUT (./out by hand),
# at most 8 files (what the device tool brings back).
# test_xb (the one-kernel correlator with beams) runs on the GPU too.
# XENG_BENCH_ARGS: the 8-bit benchmark's options; XENG_BENCH4_ARGS: the 4-bit
# one's (default: wgmma and mma.sync at N = 80, 256, 1024); XENG_NO_BENCH4: skip the
# 4-bit benchmark; XENG_NO_SANITIZE: skip memcheck; XENG_SANITIZE_FILTER:
# memcheck only the tests whose names match (CBF_TEST_FILTER, e.g. 'test_4bit*');
# XENG_NCU_ANTS=N: also profile the wgmma correlator at N antennas with
# Nsight Compute (--set full, clocks left alone; details and per-SASS stall
# samples), as dev/device-xeng-prof.sh does for large N; XENG_NCU_BITS=4
# profiles 4-bit input instead.
set -uo pipefail
cd "$(dirname "$0")/.."
source dev/device-run.sh
device_start build-device-xeng
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.total --format=csv \
    >"$OUT/info.txt" 2>&1
cat "$OUT/info.txt"
# Only the kernel libraries and the test are needed; cbf-bench is linked by
# hand if the rest of the tree (libcbf, other areas) does not build there.
{
    meson setup "$B" ${XENG_MESON_ARGS:-} >/dev/null &&
        ninja -C "$B" tests/xeng/test_xeng kernels/correlator/libcbf_kernel_correlator.a
} >"$OUT/build.log" 2>&1 || { tail -40 "$OUT/build.log"; exit 1; }
# test_xb: the one-kernel correlator and beams (xb_wgmma, corr_run's 64 x 64
# tile with a third warpgroup) must stay bit-exact too
ninja -C "$B" tests/beamform/test_xb >>"$OUT/build.log" 2>&1 || echo "== test_xb did not build"
BENCH="$B/tools/bench/cbf-bench"
if ! ninja -C "$B" tools/bench/cbf-bench >>"$OUT/build.log" 2>&1; then
    BENCH="$B/cbf-bench-xeng"
    gcc -std=c11 -O2 -D_GNU_SOURCE -DCBF_HAVE_CUDA=1 -DCBF_BENCH_XENG -Ikernels/correlator \
        -I/usr/local/cuda/include tools/bench/main.c tools/bench/xeng.c \
        "$B/kernels/correlator/libcbf_kernel_correlator.a" -L/usr/local/cuda/lib64 -lcublas \
        -lcublasLt -lcudart -lstdc++ -lm -o "$BENCH" >>"$OUT/build.log" 2>&1 ||
        { tail -20 "$OUT/build.log"; exit 1; }
    echo "== cbf-bench linked by hand (the tree's cbf-bench target did not build)"
fi
echo "== build ok"
cuobjdump -sass "$B/kernels/correlator/libcbf_kernel_correlator.a" 2>/dev/null |
    grep -oE "\b(IMMA|HMMA|IGMMA|HGMMA|STL|LDL)[.A-Z0-9]*" | sort | uniq -c >"$B/sass.txt"
echo "== tensor instructions in SASS:"; cat "$B/sass.txt"
cat "$B/sass.txt" >>"$OUT/info.txt"
rc=0
for mode in "" --gpu; do
    timeout 200 "$B/tests/xeng/test_xeng" $mode >"$OUT/test${mode:-_cpu}.log" 2>&1
    r=$?
    echo "== test_xeng ${mode:---cpu}: exit $r"
    grep -E "seed|FAILED|PASSED|ERROR|differ|got" "$OUT/test${mode:-_cpu}.log" | head -20
    [ $r -eq 0 ] || rc=1
done
if [ -x "$B/tests/beamform/test_xb" ]; then
    timeout 120 "$B/tests/beamform/test_xb" >"$OUT/test_xb.log" 2>&1
    r=$?
    echo "== test_xb (GPU): exit $r"; grep -E "FAILED|PASSED|skipped" "$OUT/test_xb.log" | head -5
    [ $r -eq 0 ] || rc=1
else
    rc=1
fi
if [ -z "${XENG_NO_SANITIZE:-}" ] && command -v compute-sanitizer >/dev/null; then
    CBF_TEST_FILTER="${XENG_SANITIZE_FILTER:-}" timeout ${XENG_SANITIZE_TIMEOUT:-120} \
        compute-sanitizer --tool memcheck --leak-check no \
        "$B/tests/xeng/test_xeng" --gpu >"$OUT/memcheck.log" 2>&1
    echo "== memcheck: exit $? ($(grep -c 'Invalid\|out of bounds' "$OUT/memcheck.log") invalid accesses)"
    tail -3 "$OUT/memcheck.log"
fi
{
    timeout ${XENG_BENCH_TIMEOUT:-180} "$BENCH" xeng ${XENG_BENCH_ARGS:---block 0,64}
    echo
    [ -n "${XENG_NO_BENCH4:-}" ] || timeout ${XENG_BENCH4_TIMEOUT:-60} "$BENCH" xeng --bits 4 ${XENG_BENCH4_ARGS:---block 0,64 --ants 80,256,1024}
} >"$OUT/bench.md" 2>&1
echo "== cbf-bench xeng: exit $?"
cat "$OUT/bench.md"
if [ -n "${XENG_NCU_ANTS:-}" ]; then
    timeout ${XENG_NCU_TIMEOUT:-120} ncu --clock-control none --set full --import-source no \
        -k regex:corr_wgmma --launch-skip 2 --launch-count 1 -o "$B/corr" -f \
        "$BENCH" xeng --block 0 --bits ${XENG_NCU_BITS:-8} --ants "$XENG_NCU_ANTS" --reps 1 \
        >"$B/ncu.log" 2>&1
    echo "== ncu at N = $XENG_NCU_ANTS: exit $?"; tail -3 "$B/ncu.log"
    if [ -f "$B/corr.ncu-rep" ]; then
        ncu --import "$B/corr.ncu-rep" --page details >"$OUT/ncu-details.txt" 2>&1
        ncu --import "$B/corr.ncu-rep" --page source --csv --print-source sass \
            >"$OUT/ncu-sass.csv" 2>&1
    fi
fi
if [ -n "${XENG_AFTER:-}" ]; then
    eval "$XENG_AFTER"
fi
exit $rc
