#!/bin/bash
# On the GPU machine: the XB (correlator + beams in one kernel) tuning runs.
# Builds the tree and the beamform tests (dev/device-all.sh), then for
# each variant in XB_VARIANTS ("NAME:EDIT,EDIT ..."; EDIT: a patch of
# dev/variants, e.g. xb-no-dither, or a tuning value, e.g. XB_MIN_UNIT=16;
# "base" = as shipped) recompiles correlator_sm90.cu from a copy of kernels/
# with those edits (dev/variant-src.sh), relinks cbf-bench, prints
# ptxas's registers and spills for xb_wgmma and runs `cbf-bench beam
# $XB_BENCH` (default N = 64, 8 beams, 128- and 1024-channel buffers).
source "$(dirname "$0")/device-variant-lib.sh"
for v in ${XB_VARIANTS:-base}; do
  name=${v%%:*}; defs=""
  [ "$name" != "$v" ] && defs=$(echo "${v#*:}" | tr ',' ' ')
  variant_build correlator_sm90.cu "$defs" xb_wgmma || { echo "build $v failed"; continue; }
  echo; echo "== $name ($defs)"
  eval "tools/bench/cbf-bench beam ${XB_BENCH:---ants 64 --beams 8 --xb-channels 128,1024 --reps 7}" | grep "^| [0-9]"
done
