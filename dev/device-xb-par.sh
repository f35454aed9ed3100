#!/bin/bash
# On the GPU machine, within one short device call: the one-kernel beams'
# (xb_wgmma) tuning runs. Builds only cbf-bench and the beam tests, runs
# test_xb (the tree as it is: bit for bit against the CPU), compiles every
# variant of XB_VARIANTS ("NAME:EDIT,EDIT ..."; EDIT: a patch of
# dev/variants, e.g. xb-no-output, or a tuning value, e.g.
# XB_REGS_CORR=192; "base": as the tree is; dev/variant-src.sh) at once,
# one nvcc per variant, prints ptxas's registers and spills for
# xb_wgmma, then runs `cbf-bench beam $XB_BENCH` for each, one after the
# other (dev/device-variant-lib.sh's steps). XB_NCU=NAME: then
# Nsight Compute (clocks left alone) on that variant's xb_wgmma and on
# corr_wgmma alone, each's third launch, of `cbf-bench beam ... $XB_NCU_ARGS`
# (default the single call, 2048 channels, and 1024-channel buffers of 4 heaps): the details pages and the per-SASS-instruction stall
# samples (CSV). Logs in $OUT.
cd "$(dirname "$0")/.." && source dev/device-env.sh
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
B=build-xb-par
t0=$SECONDS
{
    [ -f "$B/build.ninja" ] || meson setup "$B" -Dcuda=enabled -Dtest_python="$(command -v python3)"
    ninja -C "$B" tools/bench/cbf-bench tests/beamform/test_xb tests/beamform/test_beamform
} >"$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; echo "== build FAILED"; exit 1; }
echo "== build ok ($((SECONDS - t0)) s)"
VARIANT_DIR=$B source dev/device-variant-lib.sh # into $B
mkdir -p xbvar
for v in ${XB_VARIANTS:-base}; do
    name=${v%%:*} defs=""
    [ "$name" != "$v" ] && defs=$(echo "${v#*:}" | tr ',' ' ')
    variant_compile correlator_sm90.cu "$defs" "xbvar/$name.o" &
done
timeout 120 tests/beamform/test_xb >"$OUT/test_xb.log" 2>&1
echo "== test_xb: exit $? ($((SECONDS - t0)) s)"
grep -E "PASSED|FAILED|SKIPPED" "$OUT/test_xb.log" | tail -3
wait
echo "== variants compiled ($((SECONDS - t0)) s)"
: >"$OUT/bench.md"
for v in ${XB_VARIANTS:-base}; do
    name=${v%%:*}
    echo; echo "== $name (${v#*:}): $(variant_regs "xbvar/$name.o.log" xb_wgmma)"
    [ -f "xbvar/$name.o" ] || { tail -5 "xbvar/$name.o.log"; continue; }
    variant_link correlator_sm90.cu "xbvar/$name.o" >/dev/null 2>&1 &&
        cp tools/bench/cbf-bench "tools/bench/cbf-bench-$name" || continue
    eval "timeout ${XB_BENCH_TIMEOUT:-45} tools/bench/cbf-bench-$name beam ${XB_BENCH:---ants 64 --beams 8 --xb-channels 64,128,256,512,1024 --reps 7}" \
        >"$OUT/bench.log" 2>&1
    { echo "== $name ($v)"; cat "$OUT/bench.log"; } >>"$OUT/bench.md"
    grep -E "^\| [0-9s]|copy|ceiling" "$OUT/bench.log" | tail -12
    echo "($((SECONDS - t0)) s)"
done
if [ -n "${XB_NCU:-}" ] && [ $((SECONDS - t0)) -lt ${XB_NCU_BY:-150} ]; then
    rm -f "$OUT/bench.log"
    for k in ${XB_NCU_KERNELS:-xb_wgmma corr_wgmma}; do
        timeout 90 ncu --clock-control none --set full --import-source no -k regex:$k --launch-skip ${XB_NCU_SKIP:-2} \
            --launch-count 1 -o "$OUT/$k" -f "tools/bench/cbf-bench-$XB_NCU" beam --ants 64 --beams 8 \
            ${XB_NCU_ARGS:---xb-channels 1024 --xb-heaps 4} --reps 1 >"$OUT/ncu-$k.log" 2>&1
        echo "== ncu $k: exit $? ($((SECONDS - t0)) s)"; tail -2 "$OUT/ncu-$k.log"; rm -f "$OUT/ncu-$k.log"
        if [ -f "$OUT/$k.ncu-rep" ]; then
            ncu --import "$OUT/$k.ncu-rep" --page details >>"$OUT/ncu-details.txt" 2>&1
            ncu --import "$OUT/$k.ncu-rep" --page source --csv --print-source sass \
                >"$OUT/$k-sass.csv" 2>&1
            rm -f "$OUT/$k.ncu-rep"
        fi
    done
fi
