#!/bin/bash
# On the GPU machine: the beamformer kernel's GPU tests, then cbf-bench beam for each
# variant of its compile-time shape (VARIANTS="WARPSxMTxNBUF ...": warps per block, m16
# tiles per warp, k-steps of loads in flight), each built by recompiling beamform.cu
# with -D and relinking cbf-bench; then ncu's stall reasons for the last variant.
cd "$(dirname "$0")/.." && source scripts/device-env.sh
ALL_TESTS="beamform_kernels_gpu beamform_timing_gpu beamform_pipeline_gpu" ALL_BENCH="" bash scripts/device-all.sh 2>&1 | grep "== tests"
cd build-device-all
CMDS=$(ninja -t commands tools/bench/cbf-bench)
CC=$(echo "$CMDS" | grep "beamform.cu.o -c")
AR=$(echo "$CMDS" | grep "libcbf_kernel_beamform.a &&")
LINK=$(echo "$CMDS" | tail -1)
for v in $VARIANTS; do
  IFS=x read -r warps mt nbuf <<<"$v"
  eval "${CC/ -o / -DBF_WARPS=$warps -DBF_MT=$mt -DBF_NBUF=$nbuf -o } 2>/dev/null" && eval "$AR" && eval "$LINK" || { echo "build $v failed"; continue; }
  echo "== WARPS $warps MT $mt NBUF $nbuf"
  tools/bench/cbf-bench beam --ants 64,1024 --beams 8,64 --reps 5 | grep "^| [0-9]" | head -4
done
ncu --clock-control none -k regex:bf_kernel -c 1 --metrics regex:smsp__average_warps_issue_stalled_.*_per_issue_active.ratio tools/bench/cbf-bench beam --ants 64 --beams 8 --reps 1 2>&1 | grep -E "stalled" | sort -k3 -n -r | head -12
