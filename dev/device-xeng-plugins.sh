#!/usr/bin/env bash
# On the lent GPU machine (through the device tool, carrying .devdeps): the
# X-engine plugins on the GPU. Builds cbf-run, the plugins the X-engine
# graphs use and the xeng tests; runs the kernel tests (CPU and --gpu), the
# pipeline tests (gpu: none and gpu: required, bit for bit against the int64
# reference), compute-sanitizer memcheck on one GPU run of
# pipelines/xeng.yaml, and pipelines/xeng.yaml with gpu: required; a short
# table last. No benchmark here (cbf-bench xeng: dev/device-xeng.sh).
# Everything the tests print goes to $OUT/xeng-plugins.log (./out by hand).
set -uo pipefail
cd "$(dirname "$0")/.."
source dev/device-env.sh
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
B=${XENG_BUILD:-build-device-xeng-plugins}
L="$OUT/xeng-plugins.log"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >"$L" 2>&1
cat "$L"
targets=(tests/xeng/test_xeng tests/xeng/test_xeng_pipeline tests/xeng/cbf_xeng_to_device.so tools/cbf-run)
for p in fsim correlator reducer filesink dsim pfb fft_post gather; do
    targets+=("plugins/$p/cbf_$p.so")
done
t0=$SECONDS
{ { [ -f "$B/build.ninja" ] || meson setup "$B" >/dev/null; } && ninja -C "$B" "${targets[@]}"; } >"$OUT/build.log" 2>&1 ||
    { tail -40 "$OUT/build.log"; exit 1; }
echo "== build ok ($((SECONDS - t0)) s)"
export CBF_PLUGIN_PATH="$PWD/$B/plugins" CBF_BUILD_ROOT="$PWD/$B" CBF_SOURCE_ROOT="$PWD"
names=() codes=() secs=()
step() { # step NAME COMMAND...: runs it into the log, remembers exit code and seconds
    local name=$1 t=$SECONDS r
    shift
    echo "==== $name" >>"$L"
    timeout 200 "$@" >>"$L" 2>&1
    r=$?
    names+=("$name") codes+=("$r") secs+=("$((SECONDS - t))")
    echo "== $name: exit $r"
}
step "test_xeng (CPU kernels)" "$B/tests/xeng/test_xeng"
step "test_xeng --gpu (CUDA kernels)" "$B/tests/xeng/test_xeng" --gpu
step "test_xeng_pipeline (gpu: none)" "$B/tests/xeng/test_xeng_pipeline"
step "test_xeng_pipeline --gpu (gpu: required)" "$B/tests/xeng/test_xeng_pipeline" --gpu
if command -v compute-sanitizer >/dev/null; then
    step "memcheck: cbf-run xeng.yaml, gpu: required" compute-sanitizer --tool memcheck \
        --leak-check no --error-exitcode 9 "$B/tools/cbf-run" pipelines/xeng.yaml --quiet \
        --set engine.gpu=required --set sink.path=/tmp/xeng-memcheck.h5
    grep -E "ERROR SUMMARY" "$L" | tail -1
fi
step "cbf-run pipelines/xeng.yaml, gpu: required" "$B/tools/cbf-run" pipelines/xeng.yaml \
    --set engine.gpu=required --set sink.path=/tmp/xeng.h5
sed -n '/^==== cbf-run pipelines/,$p' "$L" | tail -25
step "cbf-run pipelines/demo.yaml, gpu: required" "$B/tools/cbf-run" pipelines/demo.yaml \
    --quiet --set engine.gpu=required --set sink.path=/tmp/demo.h5
grep -E "FAILED|ERROR|error" "$L" | grep -v "ERROR SUMMARY: 0" | head -20
echo
echo "| step | exit | seconds |"
echo "| --- | --- | --- |"
rc=0
for i in "${!names[@]}"; do
    echo "| ${names[$i]} | ${codes[$i]} | ${secs[$i]} |"
    [ "${codes[$i]}" = 0 ] || rc=1
done
exit $rc
