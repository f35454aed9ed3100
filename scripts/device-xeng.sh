#!/usr/bin/env bash
# On the lent GPU machine (through the device tool, carrying .devdeps):
# builds the X-engine targets with the nvcc there, runs the xeng kernel
# tests on CPU and GPU (also under compute-sanitizer), then
# `cbf-bench xeng`. Logs and the benchmark table go to $OUT (./out by hand).
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/device-env.sh
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
B=build-device-xeng
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.total --format=csv \
    >"$OUT/gpu.txt" 2>&1
cat "$OUT/gpu.txt"
{
    meson setup "$B" >/dev/null && ninja -C "$B" tests/xeng/test_xeng tools/bench/cbf-bench \
        ${XENG_EXTRA_TARGETS:-}
} >"$OUT/build.log" 2>&1 || { tail -40 "$OUT/build.log"; exit 1; }
echo "== build ok"
cuobjdump -sass "$B/kernels/correlator/libcbf_kernel_correlator.a" 2>/dev/null |
    grep -oE "\b(IMMA|HMMA|IGMMA|HGMMA)[.A-Z0-9]*" | sort | uniq -c >"$OUT/sass.txt"
echo "== tensor instructions in SASS:"; cat "$OUT/sass.txt"
rc=0
for mode in "" --gpu; do
    timeout 200 "$B/tests/xeng/test_xeng" $mode >"$OUT/test${mode:-_cpu}.log" 2>&1
    r=$?
    echo "== test_xeng ${mode:---cpu}: exit $r"
    grep -E "seed|FAILED|PASSED|ERROR|differ|got" "$OUT/test${mode:-_cpu}.log" | head -20
    [ $r -eq 0 ] || rc=1
done
if [ -z "${XENG_NO_SANITIZE:-}" ] && command -v compute-sanitizer >/dev/null; then
    timeout 120 compute-sanitizer --tool memcheck --leak-check no \
        "$B/tests/xeng/test_xeng" --gpu >"$OUT/memcheck.log" 2>&1
    echo "== memcheck: exit $? ($(grep -c 'Invalid\|out of bounds' "$OUT/memcheck.log") invalid accesses)"
    tail -3 "$OUT/memcheck.log"
fi
{
    timeout ${XENG_BENCH_TIMEOUT:-180} "$B/tools/bench/cbf-bench" xeng ${XENG_BENCH_ARGS:-}
    echo
    timeout 60 "$B/tools/bench/cbf-bench" xeng --bits 4 --block 64 --ants 256,1024
} >"$OUT/bench.md" 2>"$OUT/bench.err"
echo "== cbf-bench xeng: exit $?"
cat "$OUT/bench.md" "$OUT/bench.err"
if [ -n "${XENG_AFTER:-}" ]; then
    eval "$XENG_AFTER"
fi
exit $rc
