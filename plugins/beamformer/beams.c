/* beams.c: see beams.h. Coefficients follow katgpucbf
 * (kernels/beamform/beamform.h): per beam a polarisation and a
 * quantisation gain, per beam and antenna a weight, a delay (seconds) and
 * a fringe offset (radians, at the band centre), from the YAML and then
 * from requests (beamctl.c), each change from the spectrum its timestamp
 * names on: a buffer runs as stretches of constant coefficients, a change
 * inside a heap splitting that heap between two kernel jobs (the kernel's
 * span of spectra). On the GPU a change copies the new coefficients on the
 * stream after the kernels that read the old ones: stream order keeps the
 * change exact to the spectrum without a host wait. */
#include "beams.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stage/contracts/beam.h"
#include "stage/contracts/feng.h"
#include "stage/contracts/xeng.h"
#include "stage/flow.h"
#include "stage/gpu.h"
#include "stage/input.h"
#include "stage/kern.h"

/* Per-beam pols from the parameters; the rest of each beam from beamctl,
 * with the input's band (katgpucbf: channel spacing bandwidth / channels,
 * centre channel channels / 2). */
static int beams_params(cbf_beams *b, cbf_node *node, const cbf_params *p,
                        const cbf_port_desc *in, cbf_error *err)
{
    const size_t B = (size_t)b->shape.n_beams;
    double ch, sbs, rate, bw, first = 0;
    int rc;
    if ((rc = cbf_stage_input_attr(in, CBF_ATTR_CHANNELS, &ch, err)) ||
        (rc = cbf_stage_input_attr(in, CBF_ATTR_SAMPLES_BETWEEN_SPECTRA, &sbs, err)) ||
        (rc = cbf_stage_input_attr(in, CBF_ATTR_ADC_SAMPLE_RATE, &rate, err)))
        return rc;
    cbf_port_desc_get_attr(in, CBF_ATTR_FIRST_CHANNEL, &first);
    const double spacing = cbf_port_desc_get_attr(in, CBF_ATTR_BANDWIDTH, &bw) ? rate / sbs
                                                                              : bw / ch;
    b->sbs = (int64_t)sbs;
    b->first_channel = (uint64_t)first;
    b->total_channels = (uint64_t)ch;
    for (size_t k = 0; k < B; k++) {
        const double pol = cbf_params_field(p, "beams", k, "pol");
        if (pol != 0 && pol != 1)
            return cbf_error_set(err, CBF_ECONFIG, "%s: beam %zu: pol %g is not 0 or 1",
                                 cbf_params_where(p, "beams"), k, pol);
        b->pol[k] = (uint8_t)pol;
    }
    if ((rc = cbf_beamctl_init(&b->ctl, node, p, b->shape.n_ants, b->shape.n_beams, b->sbs,
                               spacing, first, ch / 2, err)))
        return rc;
    /* katgpucbf's static per-beam sensors, BEAM.chan-range at engine level */
    for (size_t k = 0; k < B; k++) {
        char name[CBF_BEAM_NAME_MAX + 16];
        snprintf(name, sizeof name, "%s.chan-range", b->ctl.names[k]);
        /* the engine's own channels, not the band's (ch) */
        cbf_stage_chan_range(node, name, CBF_SENSOR_ENGINE, in, (int64_t)b->shape.channels);
    }
    rc = cbf_beamctl_coef(&b->ctl, b->coef, err);
    return rc < 0 ? rc : 0;
}

/* Device copies of the coefficients, pols, flags and counts. */
static int beams_gpu_setup(cbf_beams *b, cbf_error *err)
{
    const size_t A = (size_t)b->shape.n_ants, B = (size_t)b->shape.n_beams;
    int rc;
    if ((rc = cbf_stage_alloc(CBF_MEM_DEVICE, A * B * sizeof *b->coef, (void **)&b->d_coef,
                              "coefficients", err)) ||
        (rc = cbf_stage_alloc(CBF_MEM_DEVICE, B, (void **)&b->d_pol, "pols", err)) ||
        (rc = cbf_stage_alloc(CBF_MEM_DEVICE, B * sizeof(uint64_t), (void **)&b->d_sat,
                              "saturation counts", err)) ||
        (rc = cbf_stage_alloc(CBF_MEM_DEVICE, b->batches * A, (void **)&b->d_present,
                              "presence flags", err)) ||
        (rc = cbf_stage_copy(b->d_coef, CBF_MEM_DEVICE, b->coef, CBF_MEM_HOST,
                             A * B * sizeof *b->coef, NULL, "coefficients", err)))
        return rc;
    b->coef_version = 1;
    return cbf_stage_copy(b->d_pol, CBF_MEM_DEVICE, b->pol, CBF_MEM_HOST, B, NULL, "pols", err);
}

int cbf_beams_init(cbf_beams *b, cbf_node *node, const cbf_port_desc *in, int gpu, void *stream,
                   cbf_error *err)
{
    memset(b, 0, sizeof *b);
    const cbf_params *p = cbf_node_params(node);
    cbf_xeng_batch xb;
    if (cbf_xeng_batch_of(in, &xb) || xb.dtype != CBF_DTYPE_CI8)
        return cbf_error_set(err, CBF_ECONFIG,
                             "input must be CI8 [batch][antenna][channel][spectrum][pol]");
    const size_t B = cbf_params_len(p, "beams");
    b->batches = xb.batches;
    b->shape = (cbf_beam_shape){(int)xb.n_ants, (int)B, (int)xb.channels, (int)xb.spectra};
    char msg[CBF_STAGE_MSG];
    if (cbf_beam_shape_check(&b->shape, msg, sizeof msg))
        return cbf_error_set(err, CBF_ECONFIG, "%s", msg);
    b->in_bytes = b->batches * cbf_beam_in_batch_bytes(&b->shape);
    b->out_bytes = b->batches * cbf_beam_out_batch_bytes(&b->shape);
    b->coef = calloc(B * xb.n_ants, sizeof *b->coef);
    b->pol = calloc(B, 1);
    b->sat = calloc(B, sizeof *b->sat);
    if (!b->coef || !b->pol || !b->sat)
        return cbf_error_set(err, CBF_ENOMEM, "out of memory");
    int rc = beams_params(b, node, p, in, err);
    if (rc)
        return rc;
    b->dither = cbf_params_bool(p, "dither");
    b->key = (uint64_t)cbf_params_int(p, "dither_key");
    for (size_t k = 0; k < B; k++) {   /* katgpucbf's BEAM.dither-seed */
        char name[CBF_BEAM_NAME_MAX + 16], v[24];
        snprintf(name, sizeof name, "%s.dither-seed", b->ctl.names[k]);
        snprintf(v, sizeof v, "%llu", (unsigned long long)b->key);
        cbf_text *t = cbf_node_text(node, name);
        cbf_text_set(t, v, CBF_STATUS_NOMINAL);
        cbf_text_describe(t, "", "Random seed used in dithering for quantisation");
        cbf_text_katcp(t, name, CBF_SENSOR_ENGINE);
    }
    b->gpu = gpu;
    b->stream = stream;
    if (gpu && (rc = beams_gpu_setup(b, err)))
        return rc;
    for (int k = 0; k < 2 && gpu; k++)
        if ((rc = cbf_gpu_timer_create(&b->timer[k], err)))
            return rc;
    if (gpu)
        b->g_gpu_ms = cbf_node_gauge(node, "gpu_ms_per_buffer");
    b->c_batches = cbf_node_counter(node, "batches");
    b->c_missing = cbf_node_counter(node, "missing_heaps");
    b->c_sat = cbf_node_counter(node, "saturated");
    cbf_counter_warn_on_rise(b->c_sat);
    return 0;
}

void cbf_beams_fini(cbf_beams *b)
{
    cbf_stage_flight_fini(&b->flight);
    cbf_gpu_timer_destroy(b->timer[0]);
    cbf_gpu_timer_destroy(b->timer[1]);
    cbf_stage_free(CBF_MEM_DEVICE, b->d_present);
    cbf_stage_free(CBF_MEM_DEVICE, b->d_pol);
    cbf_stage_free(CBF_MEM_DEVICE, b->d_coef);
    cbf_stage_free(CBF_MEM_DEVICE, b->d_sat);
    cbf_beamctl_free(&b->ctl);
    free(b->coef);
    free(b->pol);
    free(b->sat);
    memset(b, 0, sizeof *b);
}

/* Output buffers queued at most (stage/flight.h): one running on the GPU
 * while the next is queued behind it (one timer each). */
#define BEAMS_IN_FLIGHT CBF_COUNT_OF(((cbf_beams *)0)->timer)

int cbf_beams_open(cbf_beams *b, cbf_node *node, cbf_port *out, const cbf_port_desc *in,
                   size_t buffers, cbf_error *err)
{
    const cbf_beam_batch ob = {b->batches, (size_t)b->shape.n_beams, (size_t)b->shape.channels,
                               (size_t)b->shape.spectra_per_heap, (size_t)b->shape.n_ants};
    cbf_port_desc d;
    cbf_beam_batch_desc(&d, &ob, b->gpu ? CBF_MEM_DEVICE : CBF_MEM_HOST, in);
    d.timestamp_step = in->timestamp_step;
    /* The beams' own dither, as fft_post states its own (a file then says
     * how each output was rounded); these replace any the input carried. */
    cbf_port_desc_set_attr(&d, CBF_ATTR_DITHER, b->dither);
    cbf_port_desc_set_attr(&d, CBF_ATTR_DITHER_KEY, (double)b->key);
    b->out = out;
    int rc = cbf_stage_flight_init(&b->flight, BEAMS_IN_FLIGHT, err);
    return rc ? rc : cbf_stage_out_open(node, out, &d, buffers, &b->pool, err);
}

static int beams_kern(cbf_beams *b, const cbf_beam_job *job, cbf_error *err)
{
    char msg[CBF_STAGE_MSG];
#ifdef CBF_HAVE_CUDA
    if (b->gpu)
        return cbf_stage_kern(cbf_beam_cuda_run(job, b->stream, msg, sizeof msg), msg, err);
#else
    (void)b;
#endif
    return cbf_stage_kern(cbf_beam_cpu(job, msg, sizeof msg), msg, err);
}

cbf_beam_job cbf_beams_part(const cbf_beams *b, const cbf_beam_job *base, size_t n, size_t count,
                            int t0, int t1)
{
    cbf_beam_job j = *base;
    j.in += n * cbf_beam_in_batch_bytes(&b->shape);
    j.present += n * (size_t)b->shape.n_ants;
    j.out += n * cbf_beam_out_batch_bytes(&b->shape);
    j.batches = count;
    j.first_spectrum += n * (uint64_t)b->shape.spectra_per_heap;
    j.spectrum_begin = t0;
    j.spectrum_end = t1;
    j.coef_version = b->coef_version; /* what d_coef holds now (0 on the CPU) */
    return j;
}

static int beams_part_run(cbf_beams *b, const cbf_beam_job *base, size_t n, size_t count, int t0,
                          int t1, cbf_error *err)
{
    const cbf_beam_job j = cbf_beams_part(b, base, n, count, t0, t1);
    return beams_kern(b, &j, err);
}

/* Spectra [s0, s1) of base's buffer, one stretch of constant
 * coefficients: a partial heap at each end, whole heaps between. */
static int beams_stretch(cbf_beams *b, const cbf_beam_job *base, size_t s0, size_t s1,
                         cbf_error *err)
{
    const size_t T = (size_t)b->shape.spectra_per_heap;
    size_t n0 = s0 / T, n1 = s1 / T;
    const int t0 = (int)(s0 % T), t1 = (int)(s1 % T);
    int rc;
    if (n0 == n1)
        return beams_part_run(b, base, n0, 1, t0, t1, err);
    if (t0) {
        if ((rc = beams_part_run(b, base, n0, 1, t0, (int)T, err)))
            return rc;
        n0++;
    }
    if (n1 > n0 && (rc = beams_part_run(b, base, n0, n1 - n0, 0, 0, err)))
        return rc;
    return t1 ? beams_part_run(b, base, n1, 1, 0, t1, err) : 0;
}

int cbf_beams_begin(cbf_beams *b, const cbf_buffer *in, const uint8_t *data, cbf_buffer *out,
                    cbf_beam_job *job, cbf_error *err)
{
    const size_t B = (size_t)b->shape.n_beams, A = (size_t)b->shape.n_ants;
    const int64_t ts = in->timestamp;
    if (ts < 0 || ts % b->sbs)
        return cbf_error_set(err, CBF_EINVAL, "buffer %llu: timestamp %lld is not a whole spectrum",
                             (unsigned long long)in->seq, (long long)ts);
    *job = (cbf_beam_job){b->shape, b->batches, data, in->present, b->coef, b->pol, out->data,
                          NULL, b->sat, b->dither, b->key, (uint64_t)(ts / b->sbs),
                          b->first_channel, b->total_channels, 0, 0};
    memset(b->sat, 0, B * sizeof(uint64_t));
    if (!b->gpu)
        return 0;
    int rc;
    if ((rc = cbf_gpu_timer_start(b->timer[b->n_queued % BEAMS_IN_FLIGHT], b->stream, err)) ||
        (rc = cbf_stage_copy(b->d_present, CBF_MEM_DEVICE, in->present, CBF_MEM_HOST,
                             b->batches * A, b->stream, "presence flags", err)) ||
        (rc = cbf_stage_fill(b->d_sat, CBF_MEM_DEVICE, 0, B * sizeof(uint64_t), b->stream,
                             "clearing counts", err)))
        return rc;
    job->present = b->d_present;
    job->coef = b->d_coef;
    job->coef_version = b->coef_version;
    job->pol = b->d_pol;
    job->saturated = b->d_sat;
    return 0;
}

/* The source of the copy is pageable host memory, which CUDA stages when
 * the copy is queued: b->coef may change again at once. */
int cbf_beams_coef_until(cbf_beams *b, int64_t ts, size_t s0, size_t end, size_t *s1,
                         cbf_error *err)
{
    cbf_beamctl_apply(&b->ctl, ts + (int64_t)s0 * b->sbs);
    const int64_t next = cbf_beamctl_next_change(&b->ctl);
    /* the first spectrum at or after the next change (after s0: the
     * changes up to s0's timestamp are in force) */
    *s1 = next < ts + (int64_t)end * b->sbs ? (size_t)((next - ts + b->sbs - 1) / b->sbs) : end;
    int rc = cbf_beamctl_coef(&b->ctl, b->coef, err);
    if (rc <= 0 || !b->gpu)
        return rc < 0 ? rc : 0;
    b->coef_version++; /* what a kernel made of the old ones is stale */
    return cbf_stage_copy(b->d_coef, CBF_MEM_DEVICE, b->coef, CBF_MEM_HOST,
                          (size_t)b->shape.n_ants * (size_t)b->shape.n_beams * sizeof *b->coef,
                          b->stream, "coefficients", err);
}

int cbf_beams_run(cbf_beams *b, const cbf_beam_job *base, int64_t ts, size_t s0, size_t end,
                  cbf_error *err)
{
    int rc = 0;
    for (size_t s1; s0 < end && !rc; s0 = s1)
        if (!(rc = cbf_beams_coef_until(b, ts, s0, end, &s1, err)))
            rc = beams_stretch(b, base, s0, s1, err);
    return rc;
}

int cbf_beams_end(cbf_beams *b, cbf_buffer *out, cbf_error *err)
{
    const size_t B = (size_t)b->shape.n_beams;
    if (!b->gpu) {
        memcpy(out->aux, b->sat, B * sizeof(uint64_t));
        return 0;
    }
    int rc = cbf_stage_copy(out->aux, CBF_MEM_PINNED, b->d_sat, CBF_MEM_DEVICE,
                            B * sizeof(uint64_t), b->stream, "saturation counts", err);
    if (!rc)
        rc = cbf_gpu_timer_stop(b->timer[b->n_queued % BEAMS_IN_FLIGHT], b->stream, err);
    return rc ? rc : cbf_buffer_record(out, b->stream, err);
}

/* A landed output (stage/flight.h): its counts are in aux; the rest of its
 * metadata, the counters and the clip sensors follow, and it goes out. */
static int beams_land(void *user, cbf_buffer *in, cbf_buffer *out, cbf_error *err)
{
    (void)err;
    cbf_beams *b = user;
    const size_t B = (size_t)b->shape.n_beams, n_flags = b->batches * (size_t)b->shape.n_ants;
    memcpy(b->sat, out->aux, B * sizeof(uint64_t));
    out->timestamp = in->timestamp;
    out->seq = in->seq;
    out->n_present = n_flags;
    memcpy(out->present, in->present, n_flags);
    out->missing = 0;
    for (size_t i = 0; i < n_flags; i++)
        out->missing += !in->present[i];
    out->saturated = 0;
    for (size_t k = 0; k < B; k++)
        out->saturated += b->sat[k];
    cbf_counter_add(b->c_batches, b->batches);
    cbf_counter_add(b->c_missing, out->missing);
    cbf_counter_add(b->c_sat, out->saturated);
    cbf_beamctl_clips(&b->ctl, b->sat);
    if (b->gpu) /* its timer stopped before out's event, which has passed */
        cbf_gauge_set(b->g_gpu_ms, cbf_gpu_timer_ms(b->timer[b->n_landed++ % BEAMS_IN_FLIGHT]));
    return cbf_port_send(b->out, out);
}

int cbf_beams_buffer(cbf_beams *b, cbf_buffer *in, cbf_beams_compute_fn compute, void *user,
                     void *const *streams, int n, cbf_error *err)
{
    cbf_buffer *out;
    int rc = cbf_pool_get(b->pool, &out);
    if (rc)
        return rc == CBF_ESTOPPED ? rc : cbf_error_set(err, rc, "no beam buffer");
    rc = compute(user, in, out, err);
    /* the coefficients of every spectrum up to here are chosen */
    const int64_t spectra = (int64_t)(b->batches * (size_t)b->shape.spectra_per_heap);
    cbf_beamctl_processed(&b->ctl, in->timestamp + spectra * b->sbs);
    if (!rc && !(rc = cbf_stage_flight_push(&b->flight, in, out, err)))
        b->n_queued++;
    if (rc) {
        /* work queued before the failure may still touch in and out */
        cbf_error ignored;
        for (int i = 0; i < n; i++)
            if (streams[i])
                cbf_stage_stream_sync(streams[i], "stream", &ignored);
        cbf_buffer_unref(out);
        return rc;
    }
    return cbf_stage_flight_land(&b->flight, BEAMS_IN_FLIGHT - 1, beams_land, b, err);
}

int cbf_beams_drain(cbf_beams *b, cbf_error *err)
{
    return cbf_stage_flight_land(&b->flight, 0, beams_land, b, err);
}
