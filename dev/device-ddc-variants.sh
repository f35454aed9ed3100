#!/usr/bin/env bash
# On the lent GPU machine (through the device tool, carrying .devdeps): the
# DDC's compile-time variants measured in one call. Builds the DDC targets
# (build-device-ddc, as dev/device-ddc.sh), runs the ddc kernel test and
# the narrowband chain test on the GPU for the source's defaults, benchmarks
# them, then for each item of DDC_VARIANTS ("name:EDIT,EDIT ...": a patch
# of dev/variants or NAME=VALUE for a #define kernels/ holds once, as
# dev/variant-src.sh takes them) recompiles ddc.cu from a copy of kernels/
# with those edits (ptxas's registers for the S >= 32 kernel, 10 bits),
# relinks cbf-bench and benchmarks it the same way:
# `cbf-bench ddc` with DDC_VARIANT_ARGS (default: S = 32, taps 256, the
# tensor kernel and the S = 32, 1024-channel chain), DDC_VARIANT_REPS times.
# Steps past DDC_BUDGET seconds (default 185) are skipped. The DDC object is
# removed at the end, so that the next build compiles the defaults again.
set -uo pipefail
cd "$(dirname "$0")/.."
source dev/device-run.sh
device_start build-device-ddc
BENCH=$PWD/$B/tools/bench/cbf-bench
BUDGET=${DDC_BUDGET:-185}
left() { [ $SECONDS -lt $((BUDGET - $1)) ] || { echo "== skipped: $2 (at ${SECONDS}s)"; return 1; }; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
{ [ -f "$B/build.ninja" ] || meson setup "$B"; } >"$OUT/build.log" 2>&1
ninja -C "$B" tests/ddc/test_ddc tests/ddc/test_narrowband tools/bench/cbf-bench \
    >>"$OUT/build.log" 2>&1 || { tail -40 "$OUT/build.log"; exit 1; }
echo "== build ok (${SECONDS}s)"
rc=0
T="$OUT/tests.log"
: >"$T"
for t in "test_ddc --gpu --per-thread 0" "test_narrowband --gpu"; do
    run_logged "$t" 60 "$B/tests/ddc/${t%% *}" ${t#* }
    echo "== $t: exit $? ($(grep -c '\[       OK \]' "$OUT/one.log") OK, $(grep -c 'FAILED \]' "$OUT/one.log") failed, ${SECONDS}s)"
    grep -E "FAILED|ERROR" "$OUT/one.log" | head -4
done
ARGS=${DDC_VARIANT_ARGS:---decimation 32 --ratio 8 --per-thread 0 --chain 32:1024}
bench() {
    for r in $(seq "${DDC_VARIANT_REPS:-2}"); do
        left 10 "bench $1" || return
        timeout 60 "$BENCH" ddc $ARGS 2>&1 | grep -E "^\| [0-9]" |
            sed "s/^/$1 /"
    done
}
echo "== defaults"
bench default
VARIANT_DIR=$B
source dev/device-variant-lib.sh
for v in ${DDC_VARIANTS:-}; do
    name=${v%%:*} defs=${v#*:}
    left 25 "variant $name" || break
    echo "== $name ${defs//,/ } (${SECONDS}s): $(variant_build ddc.cu "${defs//,/ }" ddc_tc_kernelILi10ELi1ELb1E)"
    bench "$name"
done
rm -f kernels/ddc/libcbf_kernel_ddc.a.p/ddc.cu.o
echo "== done (${SECONDS}s)"
exit $rc
