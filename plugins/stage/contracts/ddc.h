/* stage/contracts/ddc.h: narrowband complex samples ("cbf.ddc.complex"),
 * from ddc to a narrowband pfb: complex float32 [pol][sample] at the
 * digitiser rate / decimation, one presence flag per block. */
#ifndef CBF_CONTRACTS_DDC_H
#define CBF_CONTRACTS_DDC_H

#include "stage/contracts/common.h"

#define CBF_TYPE_DDC_COMPLEX "cbf.ddc.complex"

#define CBF_ATTR_TAPS "taps"
#define CBF_ATTR_GROUP_DELAY "group_delay"
#define CBF_ATTR_OUTPUTS_PER_BLOCK "outputs_per_block"
/* Set (Hz, > 0) when the output keeps the whole band the ddc makes (no
 * channels discarded, katgpucbf's narrowband "no discard" form): the width
 * over which its filter is flat. Absent: the inner half is kept. */
#define CBF_ATTR_PASS_BANDWIDTH "pass_bandwidth"

#endif
