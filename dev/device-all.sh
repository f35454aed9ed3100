#!/usr/bin/env bash
# On the lent GPU machine (through the device tool, carrying .devdeps): the
# whole tree built with the nvcc there, the whole test suite run with a GPU
# present (GPU tests included; spead2-peer tests skip, spead2 is not there),
# then the benchmarks, and a short table last. Logs go to $OUT (./out by hand).
#
# ALL_BENCH: the cbf-bench areas to run, with their arguments, separated by
# ';' (default below; empty: none; `all` runs cbf-bench all), each within
# ALL_BENCH_TIMEOUT seconds (240). ALL_TESTS: extra `meson test` arguments.
#
# The features the build linked in (pcap, ibverbs, HDF5, CUDA...) and the test
# peers found are printed after the build and again at the end: a library
# missing from .devdeps builds its feature out, and its tests skip unseen.
set -uo pipefail
cd "$(dirname "$0")/.."
source dev/device-run.sh
device_start build-device-all
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.total --format=csv \
    >"$OUT/gpu.txt" 2>&1
cat "$OUT/gpu.txt"
t0=$SECONDS
{
    [ -f "$B/build.ninja" ] || meson setup "$B" -Dcuda=enabled -Dtest_python="$(command -v python3)"
    ninja -C "$B"
} >"$OUT/build.log" 2>&1 || { tail -40 "$OUT/build.log"; echo "== build FAILED"; exit 1; }
echo "== build ok ($((SECONDS - t0)) s)"
python3 dev/devdeps.py features "$B" >"$OUT/features.txt" 2>&1
echo "== features built (NO: built out or absent, its tests skip)"
cat "$OUT/features.txt"
if grep -q "NOT FOUND" "$OUT/features.txt"; then
    echo "== a library the build links is not found: .devdeps is incomplete (dev/fetch-device-deps.sh)"
fi

t0=$SECONDS
meson test -C "$B" --num-processes 8 --print-errorlogs ${ALL_TESTS:-} >"$OUT/tests.log" 2>&1
test_rc=$?
python3 scripts/test-summary.py "$B/meson-logs/testlog.json" >"$OUT/summary.txt" 2>&1
cp "$B/meson-logs/testlog.txt" "$OUT/testlog.txt" 2>/dev/null
echo "== meson test: exit $test_rc ($((SECONDS - t0)) s)"
grep -E "^ *[0-9]+/[0-9]+ " "$OUT/tests.log" | grep -v " OK " | head -40
tail -25 "$OUT/summary.txt"

bench=${ALL_BENCH-"feng; xeng --ants 256,1024; ddc"}
: >"$OUT/bench.md"
IFS=';' read -ra runs <<<"$bench"
for run in "${runs[@]}"; do
    run=$(echo "$run" | xargs)
    [ -n "$run" ] || continue
    echo "## cbf-bench $run" >>"$OUT/bench.md"
    timeout "${ALL_BENCH_TIMEOUT:-240}" "$B/tools/bench/cbf-bench" $run >>"$OUT/bench.md" 2>&1
    echo "== cbf-bench $run: exit $?"
    echo >>"$OUT/bench.md"
done
cat "$OUT/bench.md"
echo "== features $(tail -1 "$OUT/features.txt")"
echo "== tests: $(tail -1 "$OUT/summary.txt")"
exit $test_rc
