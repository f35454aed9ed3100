/* correlator_sm90_tuning.h: the tuning values of xb_wgmma, the one kernel
 * that correlates and forms the beams (correlator_sm90.cu). Each was
 * chosen by timing the alternatives on an H100 with `cbf-bench beam --ants
 * 64 --beams 8 --xb-channels ...` (dev/device-xb-par.sh, which builds a
 * variant with NAME=VALUE for any of these); the runs are in
 * docs/notes/performance-history.md, "Correlation and beams in one
 * kernel". Plain constants: the shipped kernel is the one these give. */
#ifndef CBF_KERNEL_CORRELATOR_SM90_TUNING_H
#define CBF_KERNEL_CORRELATOR_SM90_TUNING_H

/* Registers per thread after setmaxnreg: the two correlating warpgroups
 * take 200, the beams' warpgroup gives back to 104, so that 200 x 256 +
 * 104 x 128 is the 168 x 384 of the launch. 208 / 88 before 2026-11-25;
 * 192 / 120 spilled in the correlator and was 2-10 points worse. */
#define XB_REGS_CORR 200
#define XB_REGS_BEAM 104

/* Stages per piece where channels are few (pick_unit's least): 8, shorter
 * than corr_wgmma's 16, gives more blocks; 16 and 4 were within 1.5
 * points at 4-heap buffers and inside the run-to-run spread at 32. */
#define XB_MIN_UNIT 8

#endif
