#!/usr/bin/env bash
# On the lent GPU machine (through the device tool, carrying .devdeps):
# builds libcbf, the runtime tests and cbf-run with the nvcc there, then
# checks on a real GPU: pinned and device pools with their events
# (test_pool, also under compute-sanitizer), the engine's GPU decision
# (test_engine: auto takes the GPU, required starts), and cbf-run with
# gpu: required and a SIGINT drain. Logs and a summary go to $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
source dev/device-env.sh
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
# Build from a minimal copy (core, the runtime tests, cbf-run): other areas'
# work in progress in the same tree cannot break this run.
SRC=/tmp/cbf-runtime-src
rm -rf "$SRC" && mkdir -p "$SRC/kernels" "$SRC/plugins" "$SRC/tools" "$SRC/tests"
cp -a meson.build meson_options.txt core scripts "$SRC/"
cp kernels/meson.build "$SRC/kernels/"
cp plugins/meson.build "$SRC/plugins/"
cp tools/meson.build "$SRC/tools/"
[ -f tools/cbf-run.c ] && cp tools/cbf-run.c "$SRC/tools/"
cp tests/meson.build "$SRC/tests/" && cp -a tests/runtime "$SRC/tests/"
cd "$SRC"
B=build-device-runtime
GPU=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1)
echo "GPU: $GPU"
targets="tests/runtime/test_pool tests/runtime/test_engine"
for p in rt_count rt_pass rt_sink rt_leak rt_merge; do targets+=" tests/runtime/plugins/cbf_$p.so"; done
{
    meson setup "$B" -Dtests=true && ninja -C "$B" $targets &&
        { [ ! -f tools/cbf-run.c ] || ninja -C "$B" tools/cbf-run tests/runtime/test_cbf_run; }
} >"$OUT/build.log" 2>&1 || { tail -40 "$OUT/build.log"; exit 1; }
echo "== build ok"
export CBF_RT_PLUGIN_DIR=$PWD/$B/tests/runtime/plugins CBF_BUILD_ROOT=$PWD/$B CBF_SOURCE_ROOT=$PWD
rc=0
summary() { printf '| %s | %s |\n' "$1" "$2" >>"$OUT/summary.md"; }
printf '%s, %s\n\n| check | result |\n| --- | --- |\n' "$(date -u +%F)" "$GPU" >"$OUT/summary.md"
for t in test_pool test_engine test_cbf_run; do
    [ -x "$B/tests/runtime/$t" ] || { summary "$t" "not built"; continue; }
    "$B/tests/runtime/$t" >"$OUT/$t.log" 2>&1
    r=$?
    echo "== $t: exit $r"
    grep -E "OK|FAILED|SKIPPED|ERROR|LINE|GPU" "$OUT/$t.log" | head -30
    n() { grep -E "^\[ *$1 *\] test" "$OUT/$t.log" | sort -u | wc -l; }
    summary "$t" "exit $r, $(n OK) ok, $(n FAILED) failed, $(n SKIPPED) skipped"
    [ $r -eq 0 ] || rc=1
done
if command -v compute-sanitizer >/dev/null; then
    for t in test_pool test_engine; do
        timeout 150 compute-sanitizer --tool memcheck --leak-check full --error-exitcode 9 \
            "$B/tests/runtime/$t" >"$OUT/memcheck_$t.log" 2>&1
        r=$?
        echo "== memcheck $t: exit $r"
        tail -3 "$OUT/memcheck_$t.log"
        summary "compute-sanitizer memcheck $t" "exit $r"
        [ $r -eq 0 ] || rc=1
    done
fi
if [ -x "$B/tools/cbf-run" ]; then
    "$B/tools/cbf-run" tests/runtime/gpu_required.yaml --plugin-path "$CBF_RT_PLUGIN_DIR" \
        >"$OUT/cbf-run.log" 2>&1
    r=$?
    echo "== cbf-run gpu: required on a GPU: exit $r"
    cat "$OUT/cbf-run.log"
    summary "cbf-run gpu: required" "exit $r; $(grep -o 'using GPU.*' "$OUT/cbf-run.log" | head -1)"
    [ $r -eq 0 ] || rc=1
    # Hand-off cost of the runtime: 64-byte buffers through source -> pass
    # -> sink for 5 s, stopped by SIGINT (the figure is buffers per second).
    timeout --preserve-status -s INT 5 "$B/tools/cbf-run" tests/runtime/endless.yaml --plugin-path "$CBF_RT_PLUGIN_DIR" \
        --set src.size=64 --set snk.delay_us=0 >"$OUT/rate.txt" 2>>"$OUT/cbf-run.log"
    r=$?
    cat "$OUT/rate.txt" >>"$OUT/cbf-run.log"
    cat "$OUT/rate.txt"
    sent=$(grep -o 'sent=[0-9]*' "$OUT/rate.txt" | cut -d= -f2)
    secs=$(grep -o 'after [0-9.]* s' "$OUT/rate.txt" | cut -d' ' -f2)
    summary "cbf-run SIGINT drain, 64 B buffers, 3 nodes" "exit $r; $sent buffers in $secs s"
    rm -f "$OUT/rate.txt"
fi
cat "$OUT/summary.md"
exit $rc
