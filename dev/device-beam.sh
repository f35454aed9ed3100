#!/usr/bin/env bash
# On the lent GPU machine (carrying .devdeps): dev/device-all.sh for the
# beamformer (the tree built, the beamform test suite with the GPU, or
# BEAM_TESTS's `meson test` arguments ("": the whole suite), then
# `cbf-bench beam $BEAM_BENCH`, default the floors' cases and the
# beside-the-correlator table), the kernel test under compute-sanitizer
# (and test_xb, the correlator's one-kernel beams, under memcheck, racecheck
# and synccheck),
# and with BEAM_PROF=1 one launch of the kernel under Nsight Compute
# (--set full, clocks left alone; case BEAM_PROF_ARGS, default N = 64,
# B = 8): the details page and the per-SASS-instruction executions and
# stall samples (source page, CSV). Logs go to $OUT (./out by hand).
cd "$(dirname "$0")/.."
export OUT=${OUT:-$PWD/out}
ALL_TESTS="${BEAM_TESTS---suite beamform}" ALL_BENCH="beam ${BEAM_BENCH:---ants 64,256,1024 --beams 8,64}" \
    bash dev/device-all.sh
rc=$?
source dev/device-env.sh
B=build-device-all
timeout 300 compute-sanitizer --error-exitcode 9 "$B/tests/beamform/test_beamform" --gpu >"$OUT/memcheck.log" 2>&1
echo "== compute-sanitizer test_beamform --gpu: exit $?"; tail -3 "$OUT/memcheck.log"
for tool in memcheck racecheck synccheck; do
    timeout 300 compute-sanitizer --tool $tool --error-exitcode 9 "$B/tests/beamform/test_xb" >"$OUT/xb-$tool.log" 2>&1
    echo "== compute-sanitizer --tool $tool test_xb: exit $?"; tail -2 "$OUT/xb-$tool.log"
done
if [ -n "${BEAM_PROF:-}" ]; then
    ARGS=${BEAM_PROF_ARGS:---ants 64 --beams 8}
    timeout 200 ncu --clock-control none --set full --import-source no -k regex:bf_kernel \
        --launch-skip 3 --launch-count 1 -o "$OUT/bf" -f "$B/tools/bench/cbf-bench" beam $ARGS --reps 1 \
        >"$OUT/ncu.log" 2>&1
    echo "== ncu: exit $?"; tail -3 "$OUT/ncu.log"
    if [ -f "$OUT/bf.ncu-rep" ]; then
        ncu --import "$OUT/bf.ncu-rep" --page details >"$OUT/bf-details.txt" 2>&1
        ncu --import "$OUT/bf.ncu-rep" --page source --csv --print-source sass >"$OUT/bf-sass.csv" 2>&1
        rm -f "$OUT/bf.ncu-rep"
    fi
fi
exit $rc
