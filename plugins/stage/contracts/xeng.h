/* stage/contracts/xeng.h: the X-engine's streams.
 *
 * "cbf.xeng.batch": F-engine spectra of every antenna for one channel range
 * (receiver, fsim or gather to the correlator), CI8 or CI4
 * [batch][antenna][channel][spectrum][pol], one presence flag per
 * [batch][antenna].
 * "cbf.xeng.accum": the correlator's int64 accumulators (to the reducer),
 * CI64 [slice][channel][baseline][product], one presence flag per
 * [batch of the dump][antenna]; the reducer sums the slices.
 * "cbf.xeng.vis": dumped visibilities (reducer to the sender or a sink),
 * CI32 [channel][baseline_product] in the order of docs/formats.md, one
 * presence flag per antenna.
 * Accumulators and visibilities carry every attribute of the batches they
 * came from: the sender labels heaps with CBF_ATTR_FIRST_CHANNEL (the
 * X-engine's first channel, 0 when absent) and numbers them within
 * CBF_ATTR_CHANNELS (the whole band).
 *
 * The structs below are the two layouts that producer and consumer both
 * derive from a descriptor: the producer builds its descriptor from one,
 * the consumer reads one back, so neither counts axes by hand. */
#ifndef CBF_CONTRACTS_XENG_H
#define CBF_CONTRACTS_XENG_H

#include <stddef.h>
#include "cbf/port.h"
#include "stage/contracts/common.h"

#define CBF_TYPE_XENG_BATCH "cbf.xeng.batch"
#define CBF_TYPE_XENG_ACCUM "cbf.xeng.accum"
#define CBF_TYPE_XENG_VIS "cbf.xeng.vis"

#define CBF_ATTR_N_BASELINES "n_baselines"
#define CBF_ATTR_HEAP_ACCUMULATION_THRESHOLD "heap_accumulation_threshold"  /* batches per dump */

/* Polarisation products per baseline (xx, xy, yx, yy). */
#define CBF_XENG_PRODUCTS 4

/* "cbf.xeng.batch". */
typedef struct cbf_xeng_batch {
    cbf_dtype dtype;              /* CBF_DTYPE_CI8 or CBF_DTYPE_CI4 */
    size_t batches, n_ants, channels, spectra;
} cbf_xeng_batch;

/* Axes and presence flags of b (timestamp step and attributes are the
 * producer's). */
static inline void cbf_xeng_batch_desc(cbf_port_desc *d, const cbf_xeng_batch *b,
                                       cbf_mem_kind mem)
{
    cbf_port_desc_init(d, b->dtype, mem);
    cbf_port_desc_add_axis(d, "batch", b->batches);
    cbf_port_desc_add_axis(d, "antenna", b->n_ants);
    cbf_port_desc_add_axis(d, "channel", b->channels);
    cbf_port_desc_add_axis(d, "spectrum", b->spectra);
    cbf_port_desc_add_axis(d, "pol", 2);
    d->n_present = b->batches * b->n_ants;
    d->present_axis = "batch_antenna";
}

/* 0 and *b when d has this layout, else -1. */
static inline int cbf_xeng_batch_of(const cbf_port_desc *d, cbf_xeng_batch *b)
{
    if (d->ndim != 5 || (d->dtype != CBF_DTYPE_CI8 && d->dtype != CBF_DTYPE_CI4) ||
        d->shape[4] != 2)
        return -1;
    *b = (cbf_xeng_batch){d->dtype, d->shape[0], d->shape[1], d->shape[2], d->shape[3]};
    return 0;
}

/* "cbf.xeng.accum". */
typedef struct cbf_xeng_accum {
    size_t slices, channels, baselines;
    int n_ants, dump_batches;
} cbf_xeng_accum;

/* int64 values in one slice: re and im of every product. */
static inline size_t cbf_xeng_accum_slice_len(const cbf_xeng_accum *a)
{
    return a->channels * a->baselines * CBF_XENG_PRODUCTS * 2;
}

/* The descriptor of a: axes, flags, the attributes of `from` (the
 * correlator's input) and the three the reducer reads (n_ants,
 * heap_accumulation_threshold, n_baselines). */
static inline void cbf_xeng_accum_desc(cbf_port_desc *d, const cbf_xeng_accum *a,
                                       cbf_mem_kind mem, const cbf_port_desc *from)
{
    cbf_port_desc_init(d, CBF_DTYPE_CI64, mem);
    cbf_port_desc_add_axis(d, "slice", a->slices);
    cbf_port_desc_add_axis(d, "channel", a->channels);
    cbf_port_desc_add_axis(d, "baseline", a->baselines);
    cbf_port_desc_add_axis(d, "product", CBF_XENG_PRODUCTS);
    d->n_present = (size_t)a->dump_batches * (size_t)a->n_ants;
    d->present_axis = "batch_antenna";
    for (int i = 0; i < from->n_attrs; i++)
        cbf_port_desc_set_attr(d, from->attr_names[i], from->attr_values[i]);
    cbf_port_desc_set_attr(d, CBF_ATTR_HEAP_ACCUMULATION_THRESHOLD, a->dump_batches);
    cbf_port_desc_set_attr(d, CBF_ATTR_N_BASELINES, (double)a->baselines);
    cbf_port_desc_set_attr(d, CBF_ATTR_N_ANTS, a->n_ants);
}

/* 0 and *a when d has this layout, else -1. */
static inline int cbf_xeng_accum_of(const cbf_port_desc *d, cbf_xeng_accum *a)
{
    double n_ants, dump;
    if (cbf_port_desc_get_attr(d, CBF_ATTR_N_ANTS, &n_ants) ||
        cbf_port_desc_get_attr(d, CBF_ATTR_HEAP_ACCUMULATION_THRESHOLD, &dump) ||
        d->ndim != 4 || d->dtype != CBF_DTYPE_CI64 || d->shape[3] != CBF_XENG_PRODUCTS ||
        d->shape[2] != (size_t)n_ants * ((size_t)n_ants + 1) / 2)
        return -1;
    *a = (cbf_xeng_accum){d->shape[0], d->shape[1], d->shape[2], (int)n_ants, (int)dump};
    return 0;
}

#endif
