#!/usr/bin/env bash
# On the lent GPU machine (through the device tool, carrying .devdeps):
# builds the DDC targets with the nvcc there, runs the ddc tests on CPU and
# GPU for every outputs-per-thread setting (and once under compute-sanitizer),
# then `cbf-bench ddc`. Logs and the benchmark table go to $OUT (./out when
# run by hand).
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/device-env.sh
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
B=build-device-ddc
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.total --format=csv \
    >"$OUT/gpu.txt" 2>&1
cat "$OUT/gpu.txt"
{
    meson setup "$B" >/dev/null && ninja -C "$B" tests/ddc/test_ddc tests/ddc/test_filter_design
} >"$OUT/build.log" 2>&1 || { tail -40 "$OUT/build.log"; exit 1; }
echo "== build ok"
BENCH="$B/tools/bench/cbf-bench"
if ! ninja -C "$B" tools/bench/cbf-bench >>"$OUT/build.log" 2>&1; then
    # cbf-bench links libcbf; if another area's work in progress breaks it,
    # build the dispatcher with the ddc area alone (it needs no libcbf).
    echo "== cbf-bench target failed; building the ddc bench alone"
    BENCH="$B/cbf-bench-ddc"
    gcc -O2 -std=c11 -D_GNU_SOURCE -DCBF_HAVE_CUDA=1 -DCBF_BENCH_DDC -Ikernels/ddc \
        -Ikernels/filter_design -I/usr/local/cuda/include tools/bench/main.c tools/bench/ddc.c \
        "$B/kernels/ddc/libcbf_kernel_ddc.a" "$B/kernels/filter_design/libcbf_kernel_filter_design.a" \
        -L/usr/local/cuda/lib64 -lcudart -lstdc++ -lm -o "$BENCH" >>"$OUT/build.log" 2>&1 ||
        { tail -20 "$OUT/build.log"; BENCH=""; }
fi
PLUGIN_TARGETS="tools/cbf-run plugins/dsim/cbf_dsim.so plugins/filesink/cbf_filesink.so plugins/ddc/cbf_ddc.so tests/ddc/test_ddc_plugin"
ninja -C "$B" $PLUGIN_TARGETS >>"$OUT/build.log" 2>&1 && HAVE_PLUGIN=1 || HAVE_PLUGIN=0
rc=0
T="$OUT/tests.log"
"$B/tests/ddc/test_filter_design" >"$T" 2>&1
r=$?
echo "== test_filter_design: exit $r ($(grep -c '  OK ' "$T") OK)"
[ $r -eq 0 ] || rc=1
for mode in cpu 4 8 16; do
    args=""
    [ "$mode" = cpu ] || args="--gpu --per-thread $mode"
    echo "==== test_ddc $args" >>"$T"
    "$B/tests/ddc/test_ddc" $args >"$OUT/one.log" 2>&1
    r=$?
    cat "$OUT/one.log" >>"$T"
    echo "== test_ddc ${args:---cpu}: exit $r"
    grep -E "seed|FAILED|PASSED|ERROR|skipped" "$OUT/one.log" | head -4
    [ $r -eq 0 ] || rc=1
done
if [ $HAVE_PLUGIN = 1 ]; then
    for mode in "" --gpu; do
        echo "==== test_ddc_plugin $mode" >>"$T"
        CBF_BUILD_ROOT=$PWD/$B CBF_PLUGIN_PATH=$PWD/$B/plugins "$B/tests/ddc/test_ddc_plugin" $mode \
            >"$OUT/one.log" 2>&1
        r=$?
        cat "$OUT/one.log" >>"$T"
        echo "== test_ddc_plugin ${mode:---cpu}: exit $r"
        grep -E "FAILED|PASSED|ERROR|skipped" "$OUT/one.log" | head -5
        [ $r -eq 0 ] || rc=1
    done
else
    echo "== plugin targets did not build (see build.log)"
fi
if command -v compute-sanitizer >/dev/null; then
    timeout 120 compute-sanitizer --tool memcheck --leak-check no "$B/tests/ddc/test_ddc" --gpu \
        --per-thread 16 >"$OUT/memcheck.log" 2>&1
    echo "== memcheck: exit $? ($(grep -c 'Invalid\|out of bounds' "$OUT/memcheck.log") invalid accesses)"
    tail -2 "$OUT/memcheck.log"
fi
rm -f "$OUT/one.log"
# Instruction mix of the C = 8, W = 8 kernels (general and aligned paths).
if command -v cuobjdump >/dev/null; then
    cuobjdump -sass "$B"/kernels/ddc/libcbf_kernel_ddc.a.p/ddc.cu.o >"$OUT/sass.txt" 2>&1
    for k in ILi8ELi8ELb0E ILi8ELi8ELb1E; do
        echo "== SASS $k:"
        awk -v k="$k" '/Function :/{f = index($0, k) > 0} f' "$OUT/sass.txt" |
            grep -oE '^ +/\*[0-9a-f]{4}\*/ +(@!?P[0-9T] +)?[A-Z0-9]+' | awk '{print $NF}' |
            sort | uniq -c | sort -rn | head -12 | tr '\n' ' '
        echo
    done | tee "$OUT/sass_mix.txt"
    gzip -f "$OUT/sass.txt"
fi
if [ -n "$BENCH" ]; then
    "$BENCH" ddc ${DDC_BENCH_ARGS:-} >"$OUT/bench.md" 2>"$OUT/bench.err"
    echo "== cbf-bench ddc: exit $?"
    cat "$OUT/bench.md" "$OUT/bench.err"
fi
exit $rc
