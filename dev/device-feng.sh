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
set -uo pipefail
cd "$(dirname "$0")/.."
source dev/device-env.sh
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
for mode in "" --gpu; do
    echo "==== test_feng ${mode:---cpu}" >>"$T"
    "$B/tests/feng/test_feng" $mode >"$OUT/last.log" 2>&1
    r=$?
    cat "$OUT/last.log" >>"$T"
    echo "== test_feng ${mode:---cpu}: exit $r"
    grep -E "seed|FAILED|PASSED|ERROR" "$OUT/last.log" | head -20
    [ $r -eq 0 ] || rc=1
done
if ninja -C "$B" tests/feng/test_feng_pipeline tests/feng/cbf_feng_capture.so \
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
else
    echo "== pipeline tests not built (libcbf runtime not in this tree?)"
    tail -5 "$OUT/build.log"
fi
if command -v compute-sanitizer >/dev/null; then
    timeout 150 compute-sanitizer --tool memcheck --leak-check no \
        "$B/tests/feng/test_feng" --gpu >"$OUT/memcheck.log" 2>&1
    echo "== memcheck: exit $? ($(grep -c 'Invalid\|out of bounds' "$OUT/memcheck.log") invalid accesses)"
    tail -3 "$OUT/memcheck.log"
fi
rm -f "$OUT/last.log"
"$B/tools/bench/cbf-bench" feng ${FENG_BENCH_ARGS:-} >"$OUT/bench.md" 2>&1
echo "== cbf-bench feng: exit $?"
cat "$OUT/bench.md"
if [ -n "${FENG_AFTER:-}" ]; then
    eval "$FENG_AFTER"
fi
exit $rc
