/* beamform_tuning.h: the shape of the beamformer's own kernel (beamform.cu).
 * Each value was chosen by timing the alternatives on an H100 with
 * `cbf-bench beam` over N = 64-1024 (dev/device-beam-variants.sh, which
 * builds a variant with other values of these); the runs are in
 * docs/notes/performance-history.md, "How the beamformer kernel got
 * there". Plain constants: the shipped kernel is the one these give. */
#ifndef CBF_KERNEL_BEAMFORM_TUNING_H
#define CBF_KERNEL_BEAMFORM_TUNING_H

/* Warps per block (each with its own 32 spectra and k-step ring), and the
 * blocks per SM the registers are budgeted for (__launch_bounds__): 8 and
 * 2 against 4 and 4 (with 8 buffers) in the same runs. */
#define BF_WARPS 8
/* k-step buffers per warp: copies run BF_NS - 1 ahead. 6 was best over
 * N = 64-1024 of 4, 6, 8 and 10 (10: 0.86 of the bound at N = 64 but 0.71
 * at 256). */
#define BF_NS 6
#define BF_MINB 2
/* Blocks per SM the grid aims for (so batches per block): 2 against 8
 * took N = 512 from 0.73 to 0.80 of the bound and N = 1024 from 0.76 to
 * 0.81 (each block's coefficient digits serve more batches); 1 and 4 were
 * within 1% of 2 or worse. */
#define BF_FILL 2

#endif
