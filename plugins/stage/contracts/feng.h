/* stage/contracts/feng.h: the F-engine's streams.
 *
 * "cbf.feng.fir": pfb to fft_post, FIR output [pol][spectrum][row floats]
 * (device memory on the GPU path), one presence flag per spectrum.
 * "cbf.feng.spectra": fft_post to the sender or a sink, [batch][channel]
 * [spectrum][pol] CI8 or CI4 of one antenna, one flag per batch (heap). */
#ifndef CBF_CONTRACTS_FENG_H
#define CBF_CONTRACTS_FENG_H

#include "stage/contracts/common.h"

#define CBF_TYPE_FENG_FIR "cbf.feng.fir"
#define CBF_TYPE_FENG_SPECTRA "cbf.feng.spectra"

#define CBF_ATTR_UNZIP "unzip"
#define CBF_ATTR_FIRST_CHANNEL "first_channel"
#define CBF_ATTR_COARSE_DELAY_POL0 "coarse_delay_pol0"
#define CBF_ATTR_COARSE_DELAY_POL1 "coarse_delay_pol1"

#endif
