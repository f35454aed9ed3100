#!/usr/bin/env bash
# On the lent GPU machine (through the device tool, carrying .devdeps):
# builds the F-engine kernel, pipeline and control tests, runs them on the
# GPU (the kernels under compute-sanitizer too).
# Logs go to $OUT (./out when run by hand).
set -uo pipefail
cd "$(dirname "$0")/.."
source dev/device-env.sh
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
B=build-device-ctl
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
{
    meson setup "$B" -Dtests=true &&
        ninja -C "$B" tests/feng/test_feng tests/feng/test_feng_pipeline tests/feng/cbf_feng_capture.so \
            tests/control/test_feng_control plugins/dsim/cbf_dsim.so plugins/pfb/cbf_pfb.so \
            plugins/fft_post/cbf_fft_post.so
} >"$OUT/build.log" 2>&1 || { echo "build failed"; tail -40 "$OUT/build.log"; exit 1; }
echo "== build ok"
ldd "$B/core/libcbf.so" | grep -E "not found|zmq|jansson"
rc=0
export CBF_PLUGIN_PATH="$PWD/$B/plugins" CBF_BUILD_ROOT="$PWD/$B"
for t in tests/feng/test_feng tests/feng/test_feng_pipeline tests/control/test_feng_control; do
    timeout 200 "$B/$t" --gpu >"$OUT/$(basename $t).log" 2>&1
    r=$?
    echo "== $t --gpu: exit $r"
    grep -E "FAILED|PASSED|ERROR|delay model:|gain:" "$OUT/$(basename $t).log" | head -8
    [ $r -eq 0 ] || rc=1
done
if command -v compute-sanitizer >/dev/null; then
    timeout 120 compute-sanitizer --tool memcheck --leak-check no "$B/tests/feng/test_feng" --gpu \
        >"$OUT/memcheck.log" 2>&1
    echo "== memcheck test_feng: exit $? ($(grep -c 'Invalid\|out of bounds' "$OUT/memcheck.log") invalid accesses)"
    tail -2 "$OUT/memcheck.log"
fi
exit $rc
