/* dsim_replay.c: see dsim_replay.h. Heaps are dealt out in contiguous
 * ranges of the flattened [input][heap] index, one per worker. */
#include "dsim_replay.h"

#include <stdlib.h>

#include "pack.h"

#define HEAP CBF_DSIM_HEAP_SAMPLES

typedef struct {
    cbf_dsim_period *p;
    const cbf_dsim_model *m;
    int bits;
    int16_t *scratch;    /* one heap per worker */
} period_job;

static void period_share(void *arg, int k, int n)
{
    period_job *j = arg;
    cbf_dsim_period *p = j->p;
    const size_t total = (size_t)p->inputs * p->heaps;
    int16_t *v = j->scratch + (size_t)k * HEAP;
    for (size_t i = total * (size_t)k / (size_t)n; i < total * (size_t)(k + 1) / (size_t)n; i++) {
        const int input = (int)(i / p->heaps);
        const int64_t t = (int64_t)(i % p->heaps) * HEAP;
        p->saturated[i] = (uint32_t)cbf_dsim_model_generate(j->m, input / 2, input % 2, t, HEAP, v);
        /* Cannot fail: the width is checked and values are saturated. */
        cbf_pack(v, HEAP, j->bits, p->data + i * p->heap_bytes, NULL, 0);
    }
}

int cbf_dsim_period_build(cbf_dsim_period *p, const cbf_dsim_model *m, int inputs,
                          int64_t period, int bits, cbf_dsim_workers *w)
{
    *p = (cbf_dsim_period){.inputs = inputs, .heaps = (size_t)period / HEAP,
                           .heap_bytes = cbf_pack_bytes(HEAP, bits)};
    const size_t total = (size_t)inputs * p->heaps;
    p->data = malloc(total * p->heap_bytes);
    p->saturated = malloc(total * sizeof *p->saturated);
    period_job j = {.p = p, .m = m, .bits = bits,
                    .scratch = malloc((size_t)cbf_dsim_workers_size(w) * HEAP * sizeof(int16_t))};
    if (!p->data || !p->saturated || !j.scratch) {
        free(j.scratch);
        cbf_dsim_period_free(p);
        return -2;
    }
    cbf_dsim_workers_run(w, period_share, &j);
    free(j.scratch);
    return 0;
}

void cbf_dsim_period_free(cbf_dsim_period *p)
{
    free(p->data);
    free(p->saturated);
    p->data = NULL;
    p->saturated = NULL;
}
