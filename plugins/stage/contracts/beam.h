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
 * stream") has the numbers. */
#ifndef CBF_CONTRACTS_BEAM_H
#define CBF_CONTRACTS_BEAM_H

#include <stddef.h>
#include <stdint.h>
#include "cbf/port.h"
#include "stage/contracts/common.h"

#define CBF_TYPE_BEAM_BATCH "cbf.beam.batch"

#define CBF_ATTR_N_BEAMS "n_beams"

#define CBF_BEAM_AUX_LAYOUT "u64[beam] saturated"

/* "cbf.beam.batch". */
typedef struct cbf_beam_batch {
    size_t batches, n_beams, channels, spectra, n_ants;
} cbf_beam_batch;

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
    d->n_present = b->batches * b->n_ants;
    d->present_axis = "batch_antenna";
    d->aux_size = b->n_beams * sizeof(uint64_t);
    d->aux_layout = CBF_BEAM_AUX_LAYOUT;
    for (int i = 0; i < from->n_attrs; i++)
        cbf_port_desc_set_attr(d, from->attr_names[i], from->attr_values[i]);
    cbf_port_desc_set_attr(d, CBF_ATTR_N_BEAMS, (double)b->n_beams);
    cbf_port_desc_set_attr(d, CBF_ATTR_N_ANTS, (double)b->n_ants);
}

/* 0 and *b when d has this layout, else -1. */
static inline int cbf_beam_batch_of(const cbf_port_desc *d, cbf_beam_batch *b)
{
    double n_ants;
    if (cbf_port_desc_get_attr(d, CBF_ATTR_N_ANTS, &n_ants) || d->ndim != 4 ||
        d->dtype != CBF_DTYPE_CI8 || n_ants < 1 || d->n_present != d->shape[0] * (size_t)n_ants ||
        d->aux_size != d->shape[1] * sizeof(uint64_t))
        return -1;
    *b = (cbf_beam_batch){d->shape[0], d->shape[1], d->shape[2], d->shape[3], (size_t)n_ants};
    return 0;
}

/* beam_ants of every heap of batch `batch`: its antennas present. */
static inline uint64_t cbf_beam_ants(const uint8_t *present, size_t n_ants, size_t batch)
{
    uint64_t n = 0;
    for (size_t a = 0; a < n_ants; a++)
        n += present[batch * n_ants + a] != 0;
    return n;
}

#endif
