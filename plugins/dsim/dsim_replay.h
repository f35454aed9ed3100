/* dsim_replay.h: one period of every stream, packed once, for replay. */
#ifndef CBF_DSIM_REPLAY_H
#define CBF_DSIM_REPLAY_H

#include <stddef.h>
#include <stdint.h>

#include "dsim_model.h"
#include "dsim_workers.h"

typedef struct cbf_dsim_period {
    int inputs;          /* 2 x antennas */
    size_t heaps;        /* heaps per stream in one period */
    size_t heap_bytes;
    uint8_t *data;       /* [input][heap][heap_bytes]: samples [0, period) */
    uint32_t *saturated; /* [input][heap]: clipped samples of that heap */
} cbf_dsim_period;

/* Generates and packs samples [0, period) of every stream of m (a model
 * made with that period) on the workers. 0 or -2 (out of memory). */
int cbf_dsim_period_build(cbf_dsim_period *p, const cbf_dsim_model *m, int inputs,
                          int64_t period, int bits, cbf_dsim_workers *w);
void cbf_dsim_period_free(cbf_dsim_period *p);

#endif
