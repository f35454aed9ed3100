#!/usr/bin/env bash
# On the lent GPU machine (device tool; carry .devdeps, .whl, .base and
# .h7dsim): the GPU I/O checks of one change in one call.
#   build     the tree with CUDA (build-device-all, as device-all.sh)
#   ceiling   pinned host<->device copies, each way alone and both at once
#   rate      pipelines/feng-4ant-gpu.yaml sustained: dsim in replay mode
#             (its plugin built from .h7dsim/plugins/dsim when present,
#             pinned output) -> upload -> 4 x (pfb -> fft_post) -> discard
#   sanitize  compute-sanitizer memcheck, racecheck and synccheck on
#             feng-wideband, feng-4ant-gpu and xeng.yaml, short
#   tests     the whole meson suite (pool poisoning on: tests/meson.build)
#   digest    dev/device-digest.sh against .base (bit-identical?)
#   ratebase  the rate again with the base tree's plugins (after digest)
#   rates     both, alternating, GPUIO_REPS times; xsync: synccheck on xeng, both trees
# GPUIO_PHASES picks some; a table of results comes last ($OUT/gpuio.txt).
set -uo pipefail
cd "$(dirname "$0")/.."
source dev/device-run.sh
device_start build-device-all
ROOT=$PWD
SUM=$OUT/gpuio.txt
: >"$SUM"
row() { printf '%-44s %s\n' "$1" "$2" >>"$SUM"; echo "== $1: $2"; }
phases=" ${GPUIO_PHASES:-build ceiling rate sanitize tests digest ratebase} "
has() { [[ $phases == *" $1 "* ]]; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,memory.total --format=csv,noheader >"$OUT/gpu.txt" 2>&1
row "gpu" "$(cat "$OUT/gpu.txt") / $(nproc) cores"

if has build; then
    t0=$SECONDS
    {
        [ -f "$B/build.ninja" ] || meson setup "$B" -Dcuda=enabled -Dtest_python="$(command -v python3)"
        ninja -C "$B"
    } >"$OUT/build.log" 2>&1 || { tail -40 "$OUT/build.log"; echo "== build FAILED"; exit 1; }
    row "build" "ok ($((SECONDS - t0)) s)"
fi

if has ceiling; then
    cat >/tmp/pcie.cu <<'CU'
// Pinned host <-> device copy rates: each way alone, then both at once on
// two streams (what an F-engine's upload and download do).
#include <cstdio>
#include <chrono>
#include <cuda_runtime.h>
#define CK(x) do { cudaError_t e = (x); if (e) { printf("%s: %s\n", #x, cudaGetErrorString(e)); return 1; } } while (0)
int main()
{
    const size_t n = 1ull << 30;
    const int reps = 8;
    void *h[2], *d[2];
    cudaStream_t s[2];
    for (int i = 0; i < 2; i++) {
        CK(cudaHostAlloc(&h[i], n, cudaHostAllocDefault));
        CK(cudaMalloc(&d[i], n));
        CK(cudaStreamCreateWithFlags(&s[i], cudaStreamNonBlocking));
        for (size_t k = 0; k < n; k += 4096) ((volatile char *)h[i])[k] = (char)(k >> 12);
    }
    auto run = [&](int up, int down) -> double {
        auto t0 = std::chrono::steady_clock::now();
        for (int r = 0; r < reps; r++) {
            if (up) cudaMemcpyAsync(d[0], h[0], n, cudaMemcpyHostToDevice, s[0]);
            if (down) cudaMemcpyAsync(h[1], d[1], n, cudaMemcpyDeviceToHost, s[1]);
        }
        cudaStreamSynchronize(s[0]);
        cudaStreamSynchronize(s[1]);
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    };
    run(1, 1);
    double tu = run(1, 0), td = run(0, 1), tb = run(1, 1);
    CK(cudaGetLastError());
    double gb = (double)n * reps / 1e9;
    printf("h2d_alone %.1f\nd2h_alone %.1f\nboth_each_way %.1f\n", gb / tu, gb / td, gb / tb);
    return 0;
}
CU
    if nvcc -O2 -arch=sm_90 -o /tmp/pcie /tmp/pcie.cu >"$OUT/pcie-build.log" 2>&1 && /tmp/pcie >"$OUT/pcie.txt" 2>&1; then
        both=$(awk '/both_each_way/ {print $2}' "$OUT/pcie.txt")
        row "pinned copies GB/s (h2d, d2h alone; both)" "$(awk '{printf "%s ", $2}' "$OUT/pcie.txt")"
        # One L-band antenna: 4.28 GB/s in, 3.42 GB/s out; in is the larger.
        row "PCIe bound (both at once / 4.28 GB/s)" "$(awk -v b="$both" 'BEGIN {printf "%.2f antennas = %.1f Gsample/s", b / 4.28, b / 4.28 * 3.424}')"
    else
        row "ceiling" "FAILED: $(tail -2 "$OUT/pcie-build.log" "$OUT/pcie.txt" | tr '\n' ' ')"
    fi
fi

# The replay dsim (another branch's plugin, built beside this tree, found
# first through CBF_PLUGIN_PATH); the rest are this build's.
h7_plugin() {
    [ -d .h7dsim/plugins/dsim ] || return 1
    [ -f /tmp/h7plug/cbf_dsim.so ] && return 0
    rm -rf /tmp/h7tree && mkdir -p /tmp/h7tree /tmp/h7plug
    cp -r core kernels net plugins tools tests docs scripts meson.build meson_options.txt /tmp/h7tree/
    cp -r .h7dsim/plugins/dsim/. /tmp/h7tree/plugins/dsim/
    ln -sfn "$ROOT/.devdeps" /tmp/h7tree/.devdeps
    { (cd /tmp/h7tree && meson setup b -Dcuda=enabled -Dtests=false && ninja -C b plugins/dsim/cbf_dsim.so); } \
        >"$OUT/h7-build.log" 2>&1 || { tail -5 "$OUT/h7-build.log"; return 1; }
    cp /tmp/h7tree/b/plugins/dsim/cbf_dsim.so /tmp/h7plug/
}

# rate <label> <cbf-run>: the 4-antenna engine on a replayed signal.
LEN=${GPUIO_LEN:-4294967296}
rate() {
    local label=$1 run=$2 log=$OUT/rate-$1.log
    if ! h7_plugin; then
        row "rate $label" "no replay dsim (.h7dsim): skipped"; return
    fi
    local t0 t1
    t0=$(date +%s.%N)
    (cd /tmp && CBF_PLUGIN_PATH=/tmp/h7plug timeout 300 "$run" "$ROOT/pipelines/feng-4ant-gpu.yaml" \
        --set dsim.mode=replay --set dsim.memory=pinned --set dsim.threads="${GPUIO_THREADS:-8}" \
        --set dsim.buffers=8 --set up.buffers=8 --set dsim.length="$LEN") >"$log" 2>&1
    local rc=$?
    t1=$(date +%s.%N)
    local samples
    samples=$(grep -oE '^dsim .*samples=[0-9]+' "$log" | grep -oE 'samples=[0-9]+' | cut -d= -f2)
    row "rate $label (4 ant, 32768 ch; exit $rc)" "$(awk -v s="${samples:-0}" -v a="$t0" -v b="$t1" -v dr="$(grep -oE 'drained after [0-9.]+' "$log" | grep -oE '[0-9.]+$')" \
        'BEGIN {printf "%.2f Gsample/s over %.1f s wall (%.2f over the run: %s s); %.2f antennas", s * 8 / (b - a) / 1e9, b - a, s * 8 / dr / 1e9, dr, s * 8 / dr / 1e9 / 3.424}')"
    grep -E '^(node|dsim|up|pfb0|post0|sink) ' "$log" >>"$SUM"
}
has rate && rate new "$ROOT/$B/tools/cbf-run"

# The suite runs beside the sanitizers and the digest (neither is timed);
# the rates are taken with the machine otherwise idle.
run_tests() {
    local t0=$SECONDS
    timeout 330 meson test -C "$B" --num-processes 8 --print-errorlogs >"$OUT/tests.log" 2>&1
    local test_rc=$?
    python3 scripts/test-summary.py "$B/meson-logs/testlog.json" >"$OUT/summary.txt" 2>&1
    grep -E "^ *[0-9]+/[0-9]+ " "$OUT/tests.log" | grep -v " OK \| SKIP " | head -20 >"$OUT/tests-bad.txt"
    echo "exit $test_rc ($((SECONDS - t0)) s): $(grep -E '^(Ok|Fail|Skipped|Timeout):' "$OUT/tests.log" | tr -s ' ' | tr '\n' ' ')" >"$OUT/tests-row.txt"
}
tests_pid=
if has tests; then
    run_tests &
    tests_pid=$!
fi

if has sanitize; then
    mkdir -p /tmp/san
    for tool in memcheck racecheck synccheck; do
        for y in feng-wideband feng-4ant-gpu xeng; do
            # Short, with small buffers: several in flight per node.
            extra=(--set dsim.length=4194304 --set pfb.spectra_per_buffer=64
                   --set fft_post.spectra_per_heap=64)
            [ $y = xeng ] && extra=()
            if [ $y = feng-4ant-gpu ]; then
                extra=(--set dsim.length=8388608 --set dsim.samples_per_chunk=2097152)
                for a in 0 1 2 3; do
                    extra+=(--set pfb$a.spectra_per_buffer=32 --set post$a.spectra_per_heap=32)
                done
            fi
            log=$OUT/san-$tool-$y.log
            rm -f /tmp/san/*.h5
            (cd /tmp/san && CBF_POOL_POISON=1 timeout 120 compute-sanitizer --tool $tool \
                "$ROOT/$B/tools/cbf-run" "$ROOT/pipelines/$y.yaml" "${extra[@]}") >"$log" 2>&1
            rc=$?
            row "sanitizer $tool $y" "exit $rc: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$log" | tail -1)"
        done
    done
fi

if has digest; then
    NEW_BUILD=$B timeout 300 bash dev/device-digest.sh >"$OUT/digest.log" 2>&1
    row "device-digest against .base" "exit $?: $(grep '^==' "$OUT/digest.log" | tr '\n' ' ')"
fi

if [ -n "$tests_pid" ]; then
    wait "$tests_pid"
    cat "$OUT/tests-bad.txt" >>"$SUM"
    row "meson test (CBF_POOL_POISON=1)" "$(cat "$OUT/tests-row.txt")"
fi

# The base tree (today's synchronous path) built as device-digest.sh does.
base_build() {
    [ -x /tmp/cbf-base/build/tools/cbf-run ] && return 0
    rm -rf /tmp/cbf-base && mkdir -p /tmp/cbf-base && tar -xf .base/base.tar -C /tmp/cbf-base &&
        ln -s "$ROOT/.devdeps" /tmp/cbf-base/.devdeps &&
        (cd /tmp/cbf-base && meson setup build -Dcuda=enabled -Dtests=false && ninja -C build) \
            >"$OUT/base-build.log" 2>&1
}
if has ratebase && base_build; then
    rate base /tmp/cbf-base/build/tools/cbf-run
fi

# rates: this tree and the base in turn, GPUIO_REPS times each (order
# effects show as a spread between repetitions).
if has rates && base_build; then
    for i in $(seq "${GPUIO_REPS:-2}"); do
        rate new$i "$ROOT/$B/tools/cbf-run"
        rate base$i /tmp/cbf-base/build/tools/cbf-run
    done
fi

# xsync: synccheck on xeng.yaml with this tree and the base, by kind of report.
if has xsync && base_build; then
    for t in new base; do
        run=$ROOT/$B/tools/cbf-run
        [ $t = base ] && run=/tmp/cbf-base/build/tools/cbf-run
        rm -f /tmp/san/*.h5; mkdir -p /tmp/san
        (cd /tmp/san && timeout 120 compute-sanitizer --tool synccheck --print-limit 100000 "$run" \
            "$ROOT/pipelines/xeng.yaml") >/tmp/xsync-$t.log 2>&1
        row "synccheck xeng $t" "exit $?: $(grep 'ERROR SUMMARY' /tmp/xsync-$t.log)"
        grep -E '^========= [A-Z]' /tmp/xsync-$t.log | grep -v SUMMARY | sed 's/(.*//' | sort | uniq -c | sort -rn | head -4 >>"$SUM"
        grep -m1 -A4 -E '^========= [A-Z].*(error|Error)' /tmp/xsync-$t.log >>"$SUM"
    done
fi

echo
echo "==== summary"
cat "$SUM"
