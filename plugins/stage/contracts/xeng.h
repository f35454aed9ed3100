/* stage/contracts/xeng.h: the X-engine's streams.
 *
 * "cbf.xeng.batch": F-engine spectra of every antenna for one channel range
 * (receiver, fsim or gather to the correlator), one presence flag per
 * [batch][antenna].
 * "cbf.xeng.accum": the correlator's int64 accumulators (to the reducer).
 * "cbf.xeng.vis": dumped visibilities (reducer to the sender or a sink). */
#ifndef CBF_CONTRACTS_XENG_H
#define CBF_CONTRACTS_XENG_H

#include "stage/contracts/common.h"

#define CBF_TYPE_XENG_BATCH "cbf.xeng.batch"
#define CBF_TYPE_XENG_ACCUM "cbf.xeng.accum"
#define CBF_TYPE_XENG_VIS "cbf.xeng.vis"

#define CBF_ATTR_N_BASELINES "n_baselines"
#define CBF_ATTR_HEAP_ACCUMULATION_THRESHOLD "heap_accumulation_threshold"
#define CBF_ATTR_BITS "bits"

#endif
