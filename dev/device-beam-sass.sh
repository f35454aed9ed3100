#!/bin/bash
# On the GPU machine: the beamformer kernel's SASS opcode histogram (8-beam
# instantiation) and ncu's executed instructions per pipe for N = 64, B = 8: how
# much of what it issues is the FFMAs of the sums.
cd "$(dirname "$0")/.." && source dev/device-env.sh
B=build-device-all
ninja -C $B >/dev/null 2>&1 || { meson setup $B >/dev/null && ninja -C $B >/dev/null; }
O=$B/kernels/beamform/libcbf_kernel_beamform.a.p/beamform.cu.o
cuobjdump -sass $O | awk '/Function : .*bf_kernelILi8/{f=1} /Function : .*bf_kernelILi16/{f=0} f' > /tmp/k8.sass
echo "SASS lines: $(wc -l </tmp/k8.sass)"
grep -oE '^\s+/\*[0-9a-f]+\*/\s+(@!?U?P[0-9T] )?[A-Z0-9]+(\.[A-Z0-9_]+)*' /tmp/k8.sass | awk '{print $NF}' | sed 's/\..*//' | sort | uniq -c | sort -rn | head -22
ncu --clock-control none -k regex:bf_kernel -c 1 --metrics sm__inst_executed.sum,smsp__inst_executed_pipe_fma.sum,smsp__inst_executed_pipe_alu.sum,smsp__inst_executed_pipe_lsu.sum,smsp__inst_executed_pipe_fmaheavy.sum,smsp__inst_executed_pipe_xu.sum,smsp__inst_executed_pipe_uniform.sum,sm__cycles_elapsed.avg,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__warps_active.avg.pct_of_peak_sustained_active $B/tools/bench/cbf-bench beam --ants 64 --beams 8 --reps 1 2>&1 | grep -E "sm__|smsp__"
