/* beams.h: a node's tied-array beams, the stage code the beamformer and
 * xbengine plugins share (built here as the static library
 * cbf_beam_stage). It holds the beams' shape and band, the control state
 * (beamctl.h), the coefficients on the host and, on the GPU, their device
 * copies with the presence flags and the per-beam saturation counts, all
 * written on one stream in order with the kernels that read them.
 *
 * A buffer is formed as
 *   cbf_beams_begin          the job, flags and counts queued
 *   cbf_beams_run            spectra in stretches of constant
 *                            coefficients, each's changes put into force
 *                            first (or, for a caller with its own kernel:
 *                            cbf_beams_coef_until, then cbf_beams_part's
 *                            job)
 *   cbf_beams_end            counts to out->aux, out's event recorded
 * inside the compute step of cbf_beams_buffer, which takes the output
 * buffer, puts it in flight (stage/flight.h) and, once its event has
 * passed, fills its metadata, the counters and the clip sensors and sends
 * it. */
#ifndef CBF_BEAMS_H
#define CBF_BEAMS_H

#include <cbf/cbf.h>

#include <stdint.h>

#include "beamctl.h"
#include "beamform.h"
#include "stage/flight.h"

/* The parameters of the beams, the same in both plugins. */
#define CBF_BEAMS_PARAMS                                                                          \
    {.name = "beams", .type = CBF_PARAM_RECORDS, .def = "[{pol: 0}, {pol: 1}]",                  \
     .choices = "pol,quant_gain=1",                                                             \
     .doc = "one record per single-pol beam: input pol (0 or 1) and quantisation gain"},         \
    {.name = "names", .type = CBF_PARAM_STRING, .def = "",                                       \
     .doc = "beam names for requests and sensors, comma separated (katgpucbf's stream names); " \
            "empty: beam0, beam1, ..."},                                                        \
    {.name = "weights", .type = CBF_PARAM_FLOAT_LIST, .def = "[]",                               \
     .doc = "real weight per antenna: [] = 1, n_ants values for every beam, or beams x n_ants "  \
            "(beam-major)"},                                                                    \
    {.name = "delays", .type = CBF_PARAM_FLOAT_LIST, .def = "[]",                                \
     .doc = "delay per antenna, seconds, shaped as weights ([] = 0)"},                          \
    {.name = "fringe_offsets", .type = CBF_PARAM_FLOAT_LIST, .def = "[]",                        \
     .doc = "phase per antenna at the band centre, radians, shaped as weights ([] = 0)"},       \
    {.name = "dither", .type = CBF_PARAM_BOOL, .def = "true",                                    \
     .doc = "add uniform dither in (-1/2, 1/2) before rounding (katgpucbf's default)"},          \
    /* At most 2^53, so the output's dither_key attribute (a double) holds it exactly, as     \
     * fft_post's. */                                                                           \
    {.name = "dither_key", .type = CBF_PARAM_INT, .def = "1", .has_range = 1, .min = 0,         \
     .max = 9007199254740992.0,                                                                 \
     .doc = "key of the counter-based dither generator (the same key repeats a run exactly)"}

typedef struct cbf_beams {
    cbf_beam_shape shape;
    size_t batches, in_bytes, out_bytes;
    int64_t sbs;                 /* digitiser samples between spectra */
    uint64_t first_channel, total_channels, key;
    int dither, gpu;
    cbf_beamctl ctl;             /* names, values in force, pending changes, sensors */
    cbf_beam_coef *coef;         /* host [beam][antenna], from ctl */
    uint8_t *pol;                /* host [beam] */
    uint64_t *sat;               /* host [beam]: counts out of (CPU) or back from aux (an
                                    aux is not always 8-byte aligned: a harness's extras) */
    void *stream;                /* GPU: the caller's; every copy and kernel here, in order */
    /* Read by the kernels in stream order: each is rewritten on `stream`
     * after the kernels that read it last, so one copy of each suffices. */
    uint8_t *d_present, *d_pol;
    cbf_beam_coef *d_coef;
    uint64_t coef_version;       /* GPU: changes with each copy to d_coef (cbf_beam_job's) */
    uint64_t *d_sat;
    cbf_counter *c_batches, *c_missing, *c_sat;
    cbf_port *out;
    cbf_pool *pool;
    /* Outputs whose work is queued, with their inputs, sent once complete:
     * on the GPU the next buffer is queued before the oldest is waited for. */
    cbf_stage_flight flight;
    /* GPU: a buffer's work on the GPU, from cbf_beams_begin to its
     * output's event, on one timer per place in the flight (n_queued % 2);
     * read when the output lands into the gpu_ms_per_buffer gauge. */
    cbf_gpu_timer *timer[2];
    uint64_t n_queued, n_landed;
    cbf_gauge *g_gpu_ms;
} cbf_beams;

/* From the node's parameters (CBF_BEAMS_PARAMS) and its CI8 X-engine input
 * `in`; on the GPU (gpu != 0) the device copies, written on `stream`. On
 * failure cbf_beams_fini frees what was made (b is zeroed first). */
int cbf_beams_init(cbf_beams *b, cbf_node *node, const cbf_port_desc *in, int gpu, void *stream,
                   cbf_error *err);
/* The caller has waited for the stream: drops what is in flight. */
void cbf_beams_fini(cbf_beams *b);
/* Opens the output port `out` (beams as the input's batches, in device
 * memory on the GPU) with `buffers` buffers. */
int cbf_beams_open(cbf_beams *b, cbf_node *node, cbf_port *out, const cbf_port_desc *in,
                   size_t buffers, cbf_error *err);

/* Queues one input buffer's work into an output buffer (the steps below),
 * reading the input through cbf_stage_path_put (stage/path.h: on the CPU
 * path it waits for a pinned buffer's event). */
typedef int (*cbf_beams_compute_fn)(void *user, cbf_buffer *in, cbf_buffer *out, cbf_error *err);
/* One input buffer: an output buffer from the pool, compute, the
 * buffer's spectra marked processed, the pair put in flight and the
 * outputs that have landed sent. After a failure the n `streams` (the
 * caller's, which may still touch in and out) are waited for and the
 * output dropped. */
int cbf_beams_buffer(cbf_beams *b, cbf_buffer *in, cbf_beams_compute_fn compute, void *user,
                     void *const *streams, int n, cbf_error *err);
/* The end of the stream: every output goes. */
int cbf_beams_drain(cbf_beams *b, cbf_error *err);

/* Starts `in` (its samples at `data`: device memory on the GPU) into `out`:
 * *job covers the whole buffer with the device (GPU) or host copies. The
 * buffer's GPU time counts from here, on the stream (queue it after the
 * wait for the upload, before the caller's first kernel). */
int cbf_beams_begin(cbf_beams *b, const cbf_buffer *in, const uint8_t *data, cbf_buffer *out,
                    cbf_beam_job *job, cbf_error *err);
/* From spectrum s0 of the buffer (timestamp ts; spectra counted across
 * its batches): puts the changes due by s0 into force, remakes and (on
 * the GPU, on the stream) copies the coefficients that changed, and sets
 * *s1 <= end to the first spectrum after s0 that the next change reaches. */
int cbf_beams_coef_until(cbf_beams *b, int64_t ts, size_t s0, size_t end, size_t *s1,
                         cbf_error *err);
/* Batches [n, n + count) of base's, spectra [t0, t1) of each (0, 0: all). */
cbf_beam_job cbf_beams_part(const cbf_beams *b, const cbf_beam_job *base, size_t n, size_t count,
                            int t0, int t1);
/* Spectra [s0, end) of base's buffer (timestamp ts), in stretches
 * between the timestamps of changes (cbf_beams_coef_until before each):
 * spectrum i uses every change at or before its timestamp. */
int cbf_beams_run(cbf_beams *b, const cbf_beam_job *base, int64_t ts, size_t s0, size_t end,
                  cbf_error *err);
/* The buffer's counts into out->aux and, on the GPU, out's event recorded
 * after every kernel queued on the stream. */
int cbf_beams_end(cbf_beams *b, cbf_buffer *out, cbf_error *err);

#define CBF_BEAMS_N_REQUESTS CBF_BEAMCTL_N_REQUESTS
/* The beam-* requests (cbf/control.h), on the node's thread between buffers. */
static inline int cbf_beams_request(cbf_beams *b, const cbf_request *req, cbf_reply *reply,
                                    cbf_error *err)
{
    return cbf_beamctl_request(&b->ctl, req, reply, err);
}

#endif
