#!/bin/bash
# On the GPU machine: the XB (correlator + beams in one kernel) tuning runs.
# Builds the tree and the beamform tests (scripts/device-all.sh), then for
# each variant in XB_VARIANTS ("NAME:-DX=1,-DY=2 ..."; "base" = as shipped)
# recompiles correlator_sm90.cu with those defines, relinks cbf-bench, prints
# ptxas's registers and spills for xb_wgmma and runs `cbf-bench beam
# $XB_BENCH` (default N = 64, 8 beams, 128- and 1024-channel buffers).
cd "$(dirname "$0")/.." && source scripts/device-env.sh
ALL_TESTS="--suite beamform" ALL_BENCH="" bash scripts/device-all.sh 2>&1 | grep -E "== tests|== build"
cd build-device-all
CMDS=$(ninja -t commands tools/bench/cbf-bench)
CC=$(echo "$CMDS" | grep "correlator_sm90.cu.o -c")
AR=$(echo "$CMDS" | grep "libcbf_kernel_correlator_sm90.a &&")
AR2=$(echo "$CMDS" | grep "libcbf_kernel_correlator.a &&")
LINK=$(echo "$CMDS" | tail -1)
for v in ${XB_VARIANTS:-base}; do
  name=${v%%:*}; defs=""
  [ "$name" != "$v" ] && defs=$(echo "${v#*:}" | tr ',' ' ')
  eval "${CC/ -o / -Xptxas -v $defs -o } 2>&1" | grep -A2 "entry function '_Z8xb_wgmma" |
    grep -oE "[0-9]+ bytes spill stores|Used [0-9]+ registers" | tr '\n' ' '
  eval "$AR" && eval "$AR2" && eval "$LINK" || { echo "build $v failed"; continue; }
  echo; echo "== $name ($defs)"
  eval "tools/bench/cbf-bench beam ${XB_BENCH:---ants 64 --beams 8 --xb-channels 128,1024 --reps 7}" | grep "^| [0-9]"
done
