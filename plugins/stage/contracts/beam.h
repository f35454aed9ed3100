/* stage/contracts/beam.h: the beamformer's stream.
 *
 * "cbf.beam.batch": tied-array beams from the beamformer (to a sink, later
 * to the sender), CI8 [batch][beam][channel][spectrum] (katgpucbf's
 * beamformer output: one batch of one beam is one heap of its stream, and
 * contiguous), one presence flag per [batch][antenna] copied from the
 * input; an output heap's beam_ants (katgpucbf's item 0x5004) is the
 * number of antennas present in its batch, the same for every beam
 * (cbf_beam_ants). aux is u64[beam]: the values saturated in this buffer,
 * per beam; the buffer's `saturated` is their sum. The descriptor carries
 * every attribute of the input and n_beams. docs/formats.md ("Beam
 * stream") has the numbers.
 *
 * A beam stream from the network (the receiver's) cannot say which
 * antennas were summed, only how many, and loses heaps one beam at a time:
 * its buffers have the same data layout with one presence flag per
 * [batch][beam] (present_axis "batch_beam") and aux u32[batch][beam][range],
 * each heap's beam_ants as received (0 for a heap that did not come), where
 * the channels are cut into `ranges` heaps of equal size (one per X-engine
 * whose stream is merged; usually one). Consumers (sender, filesink) read
 * either form through cbf_beam_heap. */
#ifndef CBF_CONTRACTS_BEAM_H
#define CBF_CONTRACTS_BEAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "cbf/port.h"
#include "stage/contracts/common.h"

#define CBF_TYPE_BEAM_BATCH "cbf.beam.batch"

#define CBF_ATTR_N_BEAMS "n_beams"

#define CBF_BEAM_AUX_LAYOUT "u64[beam] saturated"
#define CBF_BEAM_HEAP_AUX_LAYOUT "u32[batch][beam][range] beam_ants"

/* katgpucbf's beam stream items (docs/formats.md, "Beam stream"). */
#define CBF_BEAM_ITEM_BF_RAW 0x5000
#define CBF_BEAM_ITEM_BEAM_ANTS 0x5004

/* "cbf.beam.batch". per_heap: the network form (flags per [batch][beam],
 * beam_ants of each of `ranges` heaps in aux); otherwise flags per
 * [batch][antenna] and saturation counts in aux. */
typedef struct cbf_beam_batch {
    size_t batches, n_beams, channels, spectra, n_ants;
    bool per_heap;
    size_t ranges;   /* per_heap: heaps (channel ranges) per batch and beam; 0 reads as 1 */
} cbf_beam_batch;

/* Bytes of one heap (one batch of one beam): channels x spectra x (re, im). */
static inline size_t cbf_beam_heap_bytes(const cbf_beam_batch *b)
{
    return b->channels * b->spectra * 2;
}

/* Axes, flags, aux and attributes of b: those of `from` (the input), then
 * n_beams and n_ants. */
static inline void cbf_beam_batch_desc(cbf_port_desc *d, const cbf_beam_batch *b,
                                       cbf_mem_kind mem, const cbf_port_desc *from)
{
    cbf_port_desc_init(d, CBF_DTYPE_CI8, mem);
    cbf_port_desc_add_axis(d, "batch", b->batches);
    cbf_port_desc_add_axis(d, "beam", b->n_beams);
    cbf_port_desc_add_axis(d, "channel", b->channels);
    cbf_port_desc_add_axis(d, "spectrum", b->spectra);
    if (b->per_heap) {
        d->n_present = b->batches * b->n_beams;
        d->present_axis = "batch_beam";
        d->aux_size = b->batches * b->n_beams * (b->ranges ? b->ranges : 1) * sizeof(uint32_t);
        d->aux_layout = CBF_BEAM_HEAP_AUX_LAYOUT;
    } else {
        d->n_present = b->batches * b->n_ants;
        d->present_axis = "batch_antenna";
        d->aux_size = b->n_beams * sizeof(uint64_t);
        d->aux_layout = CBF_BEAM_AUX_LAYOUT;
    }
    for (int i = 0; i < from->n_attrs; i++)
        cbf_port_desc_set_attr(d, from->attr_names[i], from->attr_values[i]);
    cbf_port_desc_set_attr(d, CBF_ATTR_N_BEAMS, (double)b->n_beams);
    cbf_port_desc_set_attr(d, CBF_ATTR_N_ANTS, (double)b->n_ants);
}

/* 0 and *b when d has one of the two layouts, else -1. */
static inline int cbf_beam_batch_of(const cbf_port_desc *d, cbf_beam_batch *b)
{
    double n_ants;
    if (cbf_port_desc_get_attr(d, CBF_ATTR_N_ANTS, &n_ants) || d->ndim != 4 ||
        d->dtype != CBF_DTYPE_CI8 || n_ants < 1)
        return -1;
    *b = (cbf_beam_batch){d->shape[0], d->shape[1], d->shape[2], d->shape[3], (size_t)n_ants,
                          d->aux_layout && !strcmp(d->aux_layout, CBF_BEAM_HEAP_AUX_LAYOUT)};
    const size_t flags = b->per_heap ? b->batches * b->n_beams : b->batches * b->n_ants;
    const size_t heap_words = b->batches * b->n_beams * sizeof(uint32_t);
    b->ranges = b->per_heap ? d->aux_size / heap_words : 1;
    if (b->per_heap && (d->aux_size % heap_words || !b->ranges || b->channels % b->ranges))
        return -1;
    const size_t aux = b->per_heap ? d->aux_size : b->n_beams * sizeof(uint64_t);
    return d->n_present == flags && d->aux_size == aux ? 0 : -1;
}

/* beam_ants of every heap of batch `batch`: its antennas present. */
static inline uint64_t cbf_beam_ants(const uint8_t *present, size_t n_ants, size_t batch)
{
    uint64_t n = 0;
    for (size_t a = 0; a < n_ants; a++)
        n += present[batch * n_ants + a] != 0;
    return n;
}

/* Heap (batch, beam) of a buffer of layout b, with flags `present` and
 * side data `aux`: whether it holds data, and its beam_ants (of several
 * ranges, the least: antennas in every channel's sum). A batch with no
 * antenna present is no heap (katgpucbf does not send it). */
static inline bool cbf_beam_heap(const cbf_beam_batch *b, const uint8_t *present, const void *aux,
                                 size_t batch, size_t beam, uint64_t *ants)
{
    if (b->per_heap) {
        const size_t h = batch * b->n_beams + beam, n = b->ranges ? b->ranges : 1;
        const uint32_t *words = (const uint32_t *)aux + h * n;
        *ants = UINT32_MAX;
        for (size_t r = 0; r < n; r++)
            *ants = words[r] < *ants ? words[r] : *ants;
        *ants = present[h] ? *ants : 0;
        return present[h] != 0;
    }
    *ants = cbf_beam_ants(present, b->n_ants, batch);
    return *ants != 0;
}

/* Every heap's beam_ants, [batch][beam][range] (ranges 1 unless
 * per_heap), as a file keeps them: received, or counted from the flags. */
static inline void cbf_beam_ants_table(const cbf_beam_batch *b, const uint8_t *present,
                                       const void *aux, uint32_t *out)
{
    const size_t n = b->per_heap && b->ranges ? b->ranges : 1, words = b->batches * b->n_beams * n;
    if (b->per_heap) {
        memcpy(out, aux, words * sizeof *out);
        return;
    }
    for (size_t bt = 0; bt < b->batches; bt++)
        for (size_t k = 0; k < b->n_beams; k++)
            out[bt * b->n_beams + k] = (uint32_t)cbf_beam_ants(present, b->n_ants, bt);
}

#endif
