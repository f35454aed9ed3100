#!/bin/bash
# On the GPU machine: the beamformer kernel's GPU tests, then cbf-bench beam for each
# variant of its compile-time shape (VARIANTS="WARPSxNSxMINBxFILL ...": warps per block,
# k-step buffers per warp, blocks per SM the registers are budgeted for, blocks per
# SM the grid aims for; a field left empty or off, as in 8x6 or 8x6xx4, keeps the
# tree's value in kernels/beamform/beamform_tuning.h), each built by recompiling
# beamform.cu from a copy of kernels/ with those values (dev/variant-src.sh) and
# relinking cbf-bench, with ptxas's register and spill counts; then (VARIANT_NCU
# set) ncu's stall reasons for the last variant.
source "$(dirname "$0")/device-variant-lib.sh"
for v in $VARIANTS; do
  IFS=x read -r warps ns minb fill <<<"$v"
  edits=""
  for kv in BF_WARPS="$warps" BF_NS="$ns" BF_MINB="$minb" BF_FILL="$fill"; do
    [ -n "${kv#*=}" ] && edits="$edits $kv"
  done
  variant_build beamform.cu "$edits" bf_kernelILb1ELb0 || { echo "build $v failed"; continue; }
  echo; echo "== $v:$edits"
  tools/bench/cbf-bench beam --ants ${VARIANT_ANTS:-64,256,1024} --beams 8 --reps 5 | grep "^| [0-9]" | head -6
done
[ -n "${VARIANT_NCU:-}" ] && ncu --clock-control none -k regex:bf_kernel -c 1 --metrics regex:smsp__average_warps_issue_stalled_.*_per_issue_active.ratio tools/bench/cbf-bench beam --ants 64 --beams 8 --reps 1 2>&1 | grep -E "stalled" | sort -k3 -n -r | head -12
