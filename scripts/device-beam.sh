#!/usr/bin/env bash
# On the lent GPU machine (carrying .devdeps): the beamformer's GPU tests
# (kernels against the float64 reference and bit for bit against the CPU,
# the plugin and pipeline tests), the kernel test under compute-sanitizer,
# then `cbf-bench beam` (BEAM_BENCH, default: the floors' cases and the
# beside-the-correlator table). Logs go to $OUT (./out by hand).
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/device-env.sh
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
B=build-device-all
{
    [ -f "$B/build.ninja" ] || meson setup "$B" -Dcuda=enabled -Dtest_python="$(command -v python3)" >/dev/null
    ninja -C "$B"
} >"$OUT/build.log" 2>&1 || { tail -40 "$OUT/build.log"; echo "== build FAILED"; exit 1; }
echo "== build ok"
meson test -C "$B" --suite beamform --num-processes 8 --print-errorlogs >"$OUT/tests.log" 2>&1
echo "== beamform tests: exit $?"; grep -E "^ *[0-9]+/[0-9]+ " "$OUT/tests.log"
timeout 300 compute-sanitizer --error-exitcode 9 "$B/tests/beamform/test_beamform" --gpu >"$OUT/memcheck.log" 2>&1
echo "== compute-sanitizer test_beamform --gpu: exit $?"; tail -3 "$OUT/memcheck.log"
"$B/tools/bench/cbf-bench" beam ${BEAM_BENCH:---ants 64,256,1024 --beams 8,64} | tee "$OUT/bench.md"
