/* dsim: a digitiser simulator. Tones, combs, impulse trains, constants,
 * per-antenna noise and an optional common (correlated) noise signal,
 * delayed per antenna, quantised to `bits` and packed as the MeerKAT
 * digitiser payload, with each heap's clip count in the chunk's aux; see
 * dsim_model.h for the signal and README.md for parameters. A CPU source;
 * its buffers are pinned when the engine uses the GPU (memory: auto).
 *
 * The signal may instead be written in katgpucbf's signal language
 * (dsim_lang.h: cw, multicw, comb, wgn, delay, nodither, + - *,
 * variables; one expression per polarisation), with katgpucbf's meaning
 * (dsim_eval.h) and quantiser (dither, clipping to +-FS): the YAML's
 * `signals`, or the `signals` request's argument of that name.
 *
 * The `signals` request replaces the signal from a timestamp on, exactly
 * to the sample: the new signal is built (and in replay mode its period
 * packed) when the request comes, queued, and the chunk that holds the
 * timestamp is generated piecewise, each sample by the signal in force.
 * The `time` request answers the dsim's clock, as katgpucbf's ?time.
 *
 * mode: compute makes every sample from the model; mode: replay makes one
 * period of every stream at init and copies it at the right offset, which
 * is memcpy speed. Either way a persistent team of `threads` workers cuts
 * each chunk's (stream, heap) list into contiguous ranges. */
#include <cbf/cbf.h>

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dsim_lang.h"
#include "dsim_model.h"
#include "dsim_replay.h"
#include "dsim_signal.h"
#include "dsim_workers.h"
#include "pack.h"
#include "stage/contracts/adc.h"
#include "stage/timed.h"

#define HEAP CBF_DSIM_HEAP_SAMPLES
#define MAX_THREADS 64
#define MAX_PENDING 8      /* signal changes queued at once (each may hold a period) */

static const cbf_param_decl dsim_params[] = {
    {.name = "antennas", .type = CBF_PARAM_INT, .def = "1", .has_range = 1, .min = 1, .max = 4096,
     .doc = "antennas (each with pols x and y)"},
    {.name = CBF_ATTR_ADC_SAMPLE_RATE, .type = CBF_PARAM_FLOAT, .def = "1712e6", .has_range = 1,
     .min = 1, .max = 1e12,
     .doc = "digitiser sample rate in Hz"},
    {.name = "bits", .type = CBF_PARAM_INT, .def = "10", .has_range = 1, .min = 2, .max = 16,
     .doc = "bits per sample"},
    {.name = "samples_per_chunk", .type = CBF_PARAM_INT, .def = "1048576", .has_range = 1,
     .min = 4096, .max = 1 << 30,
     .doc = "samples per antenna and pol in one output buffer; a multiple of 4096 (one heap)"},
    {.name = "tones", .type = CBF_PARAM_RECORDS, .def = "[{frequency: 284.5e6, amplitude: 0.1}]",
     .choices = "frequency,amplitude,phase_x=0,phase_y=0",
     .doc = "sinusoids: frequency in Hz, amplitude as a fraction of full scale, phases in radians"},
    {.name = "combs", .type = CBF_PARAM_RECORDS, .def = "[]",
     .choices = "frequency,amplitude,harmonics=0,phase_x=0,phase_y=0",
     .doc = "harmonic combs: fundamental in Hz, amplitude of each harmonic, harmonics (0 = all "
            "up to fs / 2), phases in radians"},
    {.name = "impulses", .type = CBF_PARAM_RECORDS, .def = "[]",
     .choices = "period,amplitude,offset=0",
     .doc = "impulse trains: one-sample pulses every `period` samples, from sample `offset`, "
            "amplitude a fraction of full scale"},
    {.name = "constants", .type = CBF_PARAM_FLOAT_LIST, .def = "[]", .has_range = 1,
     .min = -100, .max = 100,
     .doc = "constant added per input (2 x antenna + pol), fraction of full scale: [] none, one "
            "value for all, or one per input"},
    {.name = "noise", .type = CBF_PARAM_FLOAT, .def = "0.05", .has_range = 1, .min = 0, .max = 100,
     .doc = "independent Gaussian noise RMS per antenna and pol, fraction of full scale"},
    {.name = "common_noise", .type = CBF_PARAM_FLOAT, .def = "0", .has_range = 1, .min = 0,
     .max = 100,
     .doc = "Gaussian noise RMS shared by all antennas (delayed per antenna), fraction of full scale"},
    {.name = "delays", .type = CBF_PARAM_FLOAT_LIST, .def = "[]",
     .doc = "per-antenna delay in samples (fractional for tones, rounded for common noise); [] = 0"},
    {.name = "seed", .type = CBF_PARAM_INT, .def = "1", .has_range = 1, .min = 0, .max = 9.2e18,
     .doc = "noise generator seed"},
    {.name = "start", .type = CBF_PARAM_INT, .def = "0", .has_range = 1, .min = 0, .max = 4.6e18,
     .doc = "timestamp of the first sample; a multiple of 4096"},
    {.name = "length", .type = CBF_PARAM_INT, .def = "0", .has_range = 1, .min = 0, .max = 4.6e18,
     .doc = "samples per antenna and pol to produce, a multiple of samples_per_chunk; 0 = endless"},
    {.name = "missing", .type = CBF_PARAM_INT_LIST, .def = "[]", .has_range = 1, .min = 0,
     .max = 4.6e18,
     .doc = "heap indices (sample index / 4096, counted from sample 0) to flag missing"},
    {.name = "missing_inputs", .type = CBF_PARAM_INT_LIST, .def = "[]", .has_range = 1, .min = 0,
     .max = 8191,
     .doc = "inputs (2 x antenna + pol) the missing heaps apply to; [] = all"},
    {.name = "buffers", .type = CBF_PARAM_INT, .def = "4", .has_range = 1, .min = 2, .max = 64,
     .doc = "output buffers in the pool"},
    {.name = "threads", .type = CBF_PARAM_INT, .def = "1", .has_range = 1, .min = 1, .max = 64,
     .doc = "threads filling a chunk (its heaps are split between them, whatever the antenna count)"},
    {.name = "mode", .type = CBF_PARAM_CHOICE, .def = "compute", .choices = "compute|replay",
     .doc = "compute: every sample from the model; replay: one period computed at init, then copied"},
    {.name = "period", .type = CBF_PARAM_INT, .def = "1048576", .has_range = 1, .min = 4096,
     .max = 1 << 30,
     .doc = "samples per repeat, a power of two: of the replay (tones are rounded to multiples of "
            "adc_sample_rate / period), and of a `signals` signal in either mode"},
    {.name = "signals", .type = CBF_PARAM_STRING, .def = "",
     .doc = "the signal in katgpucbf's language, one expression per pol (or one for both, or one "
            "per input), e.g. \"cw(0.1, 400e6); wgn(0.05);\"; instead of tones ... common_noise"},
    {.name = "max_period", .type = CBF_PARAM_INT, .def = "0", .has_range = 1, .min = 0,
     .max = 1 << 30,
     .doc = "the longest period a signals request may ask, a power of two that `period` divides "
            "(katgpucbf's max-period); 0: period"},
    {.name = "dither_seed", .type = CBF_PARAM_INT, .def = "-1", .has_range = 1, .min = -1,
     .max = 9.2e18,
     .doc = "seed of the dither of signals in katgpucbf's language; -1: random (as katgpucbf), "
            "shown by the dither_seed text"},
    {.name = "realtime", .type = CBF_PARAM_BOOL, .def = "false",
     .doc = "pace to the wall clock, counting late chunks: with the engine's sync_time, timestamps "
            "are (now - sync_time) x adc_sample_rate and each chunk leaves once its last sample's "
            "time has come; without, each chunk leaves timestamp / adc_sample_rate after the first"},
    {.name = "memory", .type = CBF_PARAM_CHOICE, .def = "auto", .choices = "auto|host|pinned",
     .doc = "output pool: auto = pinned when the engine uses the GPU, else host; pinned needs a GPU"},
};

static const cbf_port_decl dsim_ports[] = {
    {.name = "out", .dir = CBF_PORT_OUT, .type = CBF_TYPE_ADC_PACKED,
     .doc = "packed samples [antenna][pol][byte]"},
};

/* Not given: as in force (the latest queued change, else the current
 * signal); given: replaced, [] meaning none. Lists are flat, one group of
 * the YAML record's fields per entry. */
static const cbf_param_decl dsim_signal_args[] = {
    {.name = "signals", .type = CBF_PARAM_STRING, .def = "",
     .doc = "the signal in katgpucbf's language (one expression per pol, or per input); instead "
            "of tones ... common_noise"},
    {.name = "antenna", .type = CBF_PARAM_INT, .def = "-1", .has_range = 1, .min = -1,
     .max = 4095, .doc = "with signals: the antenna it is for (the others keep theirs); -1: all"},
    {.name = "at", .type = CBF_PARAM_INT, .def = "-1", .has_range = 1, .min = -1, .max = 9.2e18,
     .doc = "timestamp (sample) of the first sample of the new signal; -1: the next chunk",
     .flags = CBF_PARAM_TIMESTAMP},
    {.name = "tones", .type = CBF_PARAM_FLOAT_LIST, .def = "[]",
     .doc = "[frequency, amplitude, phase_x, phase_y] per tone"},
    {.name = "combs", .type = CBF_PARAM_FLOAT_LIST, .def = "[]",
     .doc = "[frequency, amplitude, harmonics, phase_x, phase_y] per comb"},
    {.name = "impulses", .type = CBF_PARAM_FLOAT_LIST, .def = "[]",
     .doc = "[period, amplitude, offset] per impulse train"},
    {.name = "constants", .type = CBF_PARAM_FLOAT_LIST, .def = "[]", .has_range = 1, .min = -100,
     .max = 100, .doc = "one for every input or one per input; [] none"},
    {.name = "noise", .type = CBF_PARAM_FLOAT, .def = "0", .has_range = 1, .min = 0, .max = 100,
     .doc = "independent Gaussian noise RMS"},
    {.name = "common_noise", .type = CBF_PARAM_FLOAT, .def = "0", .has_range = 1, .min = 0,
     .max = 100, .doc = "shared Gaussian noise RMS"},
    {.name = "period", .type = CBF_PARAM_INT, .def = "1048576", .has_range = 1, .min = 1,
     .max = 1 << 30,
     .doc = "samples per repeat of the new signal: with signals a divisor of max_period (default "
            "max_period); cbf's form in replay mode a power of two of at least 4096"},
};

static const cbf_request_decl dsim_requests[] = {
    {.name = "signals", .args = dsim_signal_args, .n_args = CBF_COUNT_OF(dsim_signal_args),
     .doc = "replace the signal from a timestamp on, exact to the sample"},
    {.name = "time", .args = NULL, .n_args = 0, .flags = CBF_REQUEST_READS,
     .doc = "the dsim's clock: UNIX seconds of now (time) and its sample (timestamp)"},
};

typedef struct dsim {
    cbf_dsim_config fixed;  /* what no request changes: antennas, rate, bits, delays, seed */
    double *delays;
    cbf_dsim_signal sig;    /* in force from the current chunk's start */
    cbf_timed *pend;        /* cbf_dsim_signal * from their timestamps on */
    uint64_t gen;           /* which signal replay's slots hold (one per change) */
    cbf_pool *pool;
    cbf_port *out;
    int antennas, bits;
    size_t spc, heaps, heap_bytes;
    int64_t start, length;
    size_t n_missing, n_missing_inputs;
    int64_t *missing;       /* sorted heap indices */
    uint8_t *input_missing; /* [2 x antennas]: whether `missing` applies */
    int threads;
    int16_t *scratch;       /* one heap of samples per thread */
    bool replay, realtime, late_said;
    cbf_dsim_workers *workers;
    double rate;
    /* realtime: chunk ts leaves at t0 + (ts + lag - pos0) / rate. From the
     * engine's sync_time (wall): pos0 is the sample of the UNIX time read
     * with t0 and lag one chunk; else t0 is the first chunk's release, pos0
     * its timestamp and lag 0. */
    bool wall;
    struct timespec t0;
    int64_t pos0, lag;
    cbf_counter *c_samples, *c_saturated, *c_missing, *c_late, *c_reused, *c_changes;
    cbf_gauge *g_period;
    cbf_text *t_signals, *t_orig;   /* the signal in force, and the text it came from */
    cbf_dsim_lang_ctx lang;         /* max_period and mode, for the language */
    /* Replay: which phase of the period each pool buffer holds, so a buffer
     * that comes back unchanged to be filled with the same phase is not
     * copied into again (one slot per pool buffer, claimed on first use). */
    struct dsim_slot {
        const void *data;
        int64_t phase;     /* heap of the period at the buffer's start; -1: unknown */
        uint64_t gen;      /* of the signal it holds */
    } *slots;
    size_t n_slots;
} dsim;

static int dsim_cmp_i64(const void *a, const void *b)
{
    const int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static int dsim_heap_missing(const dsim *s, int input, int64_t heap)
{
    if (!s->input_missing[input] || !s->n_missing)
        return 0;
    return bsearch(&heap, s->missing, s->n_missing, sizeof *s->missing, dsim_cmp_i64) != NULL;
}

static cbf_dsim_signal *dsim_pending(const dsim *s, int i)
{
    return *(cbf_dsim_signal **)cbf_timed_payload(s->pend, i);
}

static void dsim_signal_drop(cbf_dsim_signal *sig)
{
    if (sig) {
        cbf_dsim_signal_free(sig);
        free(sig);
    }
}

static void dsim_fini(cbf_node *node)
{
    dsim *s = cbf_node_state(node);
    if (!s)
        return;
    for (int i = 0; s->pend && i < cbf_timed_count(s->pend); i++)
        dsim_signal_drop(dsim_pending(s, i));
    cbf_timed_destroy(s->pend);
    cbf_dsim_workers_free(s->workers);
    free(s->slots);
    cbf_dsim_signal_free(&s->sig);
    free(s->delays);
    free(s->missing);
    free(s->input_missing);
    free(s->scratch);
    free(s);
    cbf_node_set_state(node, NULL);
}

static int dsim_read_params(const cbf_node *node, dsim *s, const cbf_params *p, cbf_error *err)
{
    s->antennas = (int)cbf_params_int(p, "antennas");
    s->bits = (int)cbf_params_int(p, "bits");
    s->spc = (size_t)cbf_params_int(p, "samples_per_chunk");
    s->start = cbf_params_int(p, "start");
    s->length = cbf_params_int(p, "length");
    s->replay = strcmp(cbf_params_string(p, "mode"), "replay") == 0;
    const int64_t period = cbf_params_int(p, "period");
    s->realtime = cbf_params_bool(p, "realtime");
    s->wall = s->realtime && cbf_node_time_ref(node, NULL, NULL);
    if (s->wall && cbf_params_given(p, "start"))
        return cbf_error_set(err, CBF_ECONFIG, "%s: start: with realtime: true and the engine's "
                             "sync_time, the wall clock sets the first timestamp; leave start out",
                             cbf_params_where(p, "start"));
    const bool lang = cbf_params_string(p, "signals")[0] != '\0';
    if ((s->replay || lang) && (period & (period - 1)))
        return cbf_error_set(err, CBF_ECONFIG, "%s: period = %lld is not a power of two",
                             cbf_params_where(p, "period"), (long long)period);
    /* Left out: period (its largest power-of-two divisor in compute mode
     * with cbf's form, where period itself means nothing). */
    const int64_t max_period = cbf_params_int(p, "max_period") ? cbf_params_int(p, "max_period")
                                                               : period & -period;
    if ((max_period & (max_period - 1)) ||
        ((s->replay || lang || cbf_params_given(p, "max_period")) && max_period % period))
        return cbf_error_set(err, CBF_ECONFIG, "%s: max_period = %lld: a power of two that period "
                             "(%lld) divides", cbf_params_where(p, "max_period"),
                             (long long)max_period, (long long)period);
    s->lang = (cbf_dsim_lang_ctx){.replay = s->replay, .max_period = max_period};
    if (s->spc % HEAP)
        return cbf_error_set(err, CBF_ECONFIG,
                             "%s: samples_per_chunk = %zu is not a multiple of the heap (%d)",
                             cbf_params_where(p, "samples_per_chunk"), s->spc, HEAP);
    if (s->start % HEAP)
        return cbf_error_set(err, CBF_ECONFIG, "%s: start = %lld is not a multiple of %d",
                             cbf_params_where(p, "start"), (long long)s->start, HEAP);
    if (s->length % (int64_t)s->spc)
        return cbf_error_set(err, CBF_ECONFIG,
                             "%s: length = %lld is not a multiple of samples_per_chunk (%zu)",
                             cbf_params_where(p, "length"), (long long)s->length, s->spc);
    const size_t nd = cbf_params_len(p, "delays");
    if (nd != 0 && nd != (size_t)s->antennas)
        return cbf_error_set(err, CBF_ECONFIG, "%s: delays has %zu values for %d antennas",
                             cbf_params_where(p, "delays"), nd, s->antennas);
    s->delays = calloc((size_t)s->antennas, sizeof *s->delays);
    s->n_missing = cbf_params_len(p, "missing");
    s->missing = calloc(s->n_missing + 1, sizeof *s->missing);
    s->input_missing = calloc(2 * (size_t)s->antennas, 1);
    s->threads = (int)cbf_params_int(p, "threads");
    s->scratch = malloc((size_t)s->threads * HEAP * sizeof *s->scratch);
    if (!s->delays || !s->missing || !s->input_missing || !s->scratch)
        return cbf_error_set(err, CBF_ENOMEM, "out of memory");
    for (size_t a = 0; a < nd; a++)
        s->delays[a] = cbf_params_float_at(p, "delays", a);
    for (size_t i = 0; i < s->n_missing; i++)
        s->missing[i] = cbf_params_int_at(p, "missing", i);
    qsort(s->missing, s->n_missing, sizeof *s->missing, dsim_cmp_i64);
    const size_t ni = cbf_params_len(p, "missing_inputs");
    for (size_t i = 0; i < ni; i++) {
        const int64_t in = cbf_params_int_at(p, "missing_inputs", i);
        if (in >= 2 * (int64_t)s->antennas)
            return cbf_error_set(err, CBF_ECONFIG,
                                 "%s: missing_inputs names input %lld of %d (2 x antennas)",
                                 cbf_params_where(p, "missing_inputs"), (long long)in,
                                 2 * s->antennas);
        s->input_missing[in] = 1;
    }
    if (ni == 0)
        memset(s->input_missing, 1, 2 * (size_t)s->antennas);
    s->fixed = (cbf_dsim_config){
        .antennas = s->antennas,
        .adc_sample_rate = cbf_params_float(p, CBF_ATTR_ADC_SAMPLE_RATE),
        .bits = s->bits,
        .delays = s->delays,
        .seed = (uint64_t)cbf_params_int(p, "seed"),
        .dither_seed = cbf_params_int(p, "dither_seed") < 0 ? cbf_dsim_system_entropy(NULL)
                                                            : (uint64_t)cbf_params_int(p, "dither_seed"),
    };
    return 0;
}

/* The signal in force on its sensors: its period, every input as
 * katgpucbf writes it, and the language text it came from. */
static void dsim_show_signal(dsim *s)
{
    cbf_gauge_set(s->g_period, (double)s->sig.repeat);
    cbf_text_set(s->t_signals, s->sig.text, CBF_STATUS_NOMINAL);
    cbf_text_set(s->t_orig, s->sig.spec.lang_text ? s->sig.spec.lang_text : "", CBF_STATUS_NOMINAL);
}

/* katgpucbf's dsim sensors, at the engine's level as its dsim has them
 * (max-period, sample-bits, dither-seed, signals, signals-orig, period:
 * the qualification suite reads SIM_TASK.max-period) and as dsim.NAME:
 * what requests may ask, fixed at init, and the signal. */
static void dsim_describe_signal(cbf_node *node, dsim *s)
{
    cbf_counter *c = cbf_node_counter(node, "max_period");
    cbf_counter_set(c, (uint64_t)s->lang.max_period);
    cbf_counter_describe(c, "samples", "longest period a signals request may ask (max-period)");
    cbf_counter_katcp(c, "max-period", CBF_SENSOR_ENGINE);
    c = cbf_node_counter(node, "sample_bits");
    cbf_counter_set(c, (uint64_t)s->bits);
    cbf_counter_describe(c, "", "bits in each output sample");
    cbf_counter_katcp(c, "sample-bits", CBF_SENSOR_ENGINE);
    /* katgpucbf's sync-time and adc-sample-rate (floats) would be gauges,
     * and every gauge needs its Prometheus help in the core's table
     * (metrics_names.c): left to it; the engine's sync_time is the same. */
    char seed[24];
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)s->fixed.dither_seed);
    cbf_text *t = cbf_node_text(node, "dither_seed");
    cbf_text_set(t, seed, CBF_STATUS_NOMINAL);
    cbf_text_katcp(t, "dither-seed", CBF_SENSOR_ENGINE | CBF_SENSOR_INTEGER);
    s->t_signals = cbf_node_text(node, "signals");
    s->t_orig = cbf_node_text(node, "signals_orig");
    cbf_text_katcp(s->t_signals, "signals", CBF_SENSOR_ENGINE);
    cbf_text_katcp(s->t_orig, "signals-orig", CBF_SENSOR_ENGINE);
    dsim_show_signal(s);
}

static int dsim_init(cbf_node *node, cbf_error *err)
{
    dsim *s = calloc(1, sizeof *s);
    if (!s)
        return cbf_error_set(err, CBF_ENOMEM, "out of memory");
    cbf_node_set_state(node, s);
    const cbf_params *p = cbf_node_params(node);
    int rc = dsim_read_params(node, s, p, err);
    if (rc)
        return rc;
    if (cbf_dsim_workers_create(node, s->threads, &s->workers))
        return cbf_error_set(err, CBF_ENOMEM, "out of memory");
    cbf_dsim_spec spec;
    if ((rc = cbf_dsim_spec_from_params(p, 2 * s->antennas, cbf_params_int(p, "period"), &s->lang,
                                        &spec, err)))
        return rc;
    if ((rc = cbf_dsim_signal_build(&s->sig, &spec, &s->fixed, s->workers, err)))
        return rc == CBF_EINVAL ? CBF_ECONFIG : rc;
    const cbf_timed_config tc = {.noun = "signal change", .payload = sizeof(cbf_dsim_signal *),
                                 .max_pending = MAX_PENDING};
    if ((rc = cbf_timed_create(&tc, &s->pend, err)))
        return rc;
    cbf_timed_processed(s->pend, s->start);
    s->rate = s->fixed.adc_sample_rate;
    const char *memory = cbf_params_string(p, "memory");
    const bool pinned = strcmp(memory, "pinned") == 0 ||
                        (strcmp(memory, "auto") == 0 && cbf_node_use_gpu(node));
    if (pinned && !cbf_node_use_gpu(node))
        return cbf_error_set(err, CBF_ECONFIG,
                             "%s: memory: pinned needs the GPU, and this engine runs without one",
                             cbf_params_where(p, "memory"));
    const cbf_mem_kind kind = pinned ? CBF_MEM_PINNED : CBF_MEM_HOST;

    s->heaps = s->spc / HEAP;
    s->heap_bytes = cbf_pack_bytes(HEAP, s->bits);
    cbf_port_desc d;
    cbf_port_desc_init(&d, CBF_DTYPE_PACKED, kind);
    d.bits = s->bits;
    cbf_port_desc_add_axis(&d, "antenna", (size_t)s->antennas);
    cbf_port_desc_add_axis(&d, "pol", 2);
    cbf_port_desc_add_axis(&d, "byte", s->heaps * s->heap_bytes);
    d.n_present = (size_t)s->antennas * 2 * s->heaps;
    d.present_axis = "heap";
    d.timestamp_step = (int64_t)s->spc;
    cbf_port_desc_set_attr(&d, CBF_ATTR_ADC_SAMPLE_RATE, s->rate);
    cbf_port_desc_set_attr(&d, CBF_ATTR_SAMPLES_PER_CHUNK, (double)s->spc);
    cbf_port_desc_set_attr(&d, CBF_ATTR_HEAP_SAMPLES, HEAP);
    d.aux_size = cbf_adc_clip_aux_size(d.n_present);
    d.aux_layout = CBF_ADC_CLIP_AUX_LAYOUT;
    s->out = cbf_node_port(node, "out", 0);
    if ((rc = cbf_port_set_desc(s->out, &d, err)) != 0)
        return rc;
    cbf_pool_config pc = {
        .name = "out",
        .kind = kind,
        .count = (size_t)cbf_params_int(p, "buffers"),
        .size = cbf_port_desc_bytes(&d),
        .n_present = d.n_present,
        .aux_size = d.aux_size,
    };
    if ((rc = cbf_node_pool_create(node, &pc, &s->pool, err)) != 0)
        return rc;
    s->c_samples = cbf_node_counter(node, "samples");
    s->c_saturated = cbf_node_counter(node, "saturated");
    cbf_counter_warn_on_rise(s->c_saturated);
    s->c_missing = cbf_node_counter(node, "missing_heaps");
    s->c_changes = cbf_node_counter(node, "signal_changes");
    /* Samples after which the signal in force repeats; 0: never (compute). */
    s->g_period = cbf_node_gauge(node, "period");
    cbf_gauge_describe(s->g_period, "samples", "samples after which the signal in force repeats (0: never)");
    cbf_gauge_katcp(s->g_period, "period", CBF_SENSOR_ENGINE | CBF_SENSOR_INTEGER);   /* katgpucbf's int */
    dsim_describe_signal(node, s);
    cbf_counter_describe(s->c_samples, "", "samples generated, per input");
    cbf_counter_describe(s->c_saturated, "", "samples clipped to the digitiser's range");
    cbf_counter_describe(s->c_missing, "", "heaps flagged missing in the generated data (as the signal asks)");
    cbf_counter_describe(s->c_changes, "", "signal changes made by the signals request");
    /* Only paced runs show it, so other runs' tables stay as they were. */
    if (s->realtime)
        s->c_late = cbf_node_counter(node, "late_chunks");
    if (s->replay) {
        s->n_slots = cbf_pool_count(s->pool);
        if (!(s->slots = calloc(s->n_slots, sizeof *s->slots)))
            return cbf_error_set(err, CBF_ENOMEM, "out of memory");
        s->c_reused = cbf_node_counter(node, "replay_reused_chunks");
    }
    return 0;
}

/* One chunk being filled: each worker k adds to its own totals. The
 * chunk is cut where queued signal changes fall in it: segment g runs
 * from at[g] (the chunk's start for g = 0) to at[g + 1]. */
typedef struct dsim_job {
    dsim *s;
    cbf_buffer *buf;
    bool copy;              /* replay: false when the buffer already holds these samples */
    int n_segs;
    int64_t at[MAX_PENDING + 1];
    const cbf_dsim_model *model[MAX_PENDING + 1];
    uint64_t saturated[MAX_THREADS], missing[MAX_THREADS];
} dsim_job;

/* Samples [t, t + HEAP) of an input, each from the signal in force at its
 * time; returns how many clipped. */
static uint64_t dsim_generate(const dsim_job *j, int input, int64_t t, int16_t *out)
{
    uint64_t clipped = 0;
    for (int g = 0; g < j->n_segs; g++) {
        const int64_t from = g ? j->at[g] : t, to = g + 1 < j->n_segs ? j->at[g + 1] : t + HEAP;
        const int64_t lo = from > t ? from : t, hi = to < t + HEAP ? to : t + HEAP;
        if (lo < hi)
            clipped += cbf_dsim_model_generate(j->model[g], input / 2, input % 2, lo,
                                               (size_t)(hi - lo), out + (lo - t));
    }
    return clipped;
}

/* Flags a heap missing (zero bytes: no data arrived) or present. */
static bool dsim_take_missing(dsim_job *j, int k, int input, size_t h, uint8_t *dst)
{
    dsim *s = j->s;
    const size_t flag = (size_t)input * s->heaps + h;
    if (!dsim_heap_missing(s, input, j->buf->timestamp / HEAP + (int64_t)h)) {
        j->buf->present[flag] = 1;
        return false;
    }
    memset(dst, 0, s->heap_bytes);
    j->buf->present[flag] = 0;
    ((uint32_t *)j->buf->aux)[flag] = 0;
    j->missing[k]++;
    return true;
}

/* Compute mode (and replay for a chunk that a signal change cuts), share
 * k of n: heap by heap from the model, so a missing heap costs nothing.
 * Every sample is a function of its time alone, so the output does not
 * depend on how the heaps are shared out; a periodic model gives what its
 * packed period holds, bit for bit. */
static void dsim_compute_share(void *arg, int k, int n)
{
    dsim_job *j = arg;
    dsim *s = j->s;
    int16_t *scratch = s->scratch + (size_t)k * HEAP;
    const size_t total = 2 * (size_t)s->antennas * s->heaps;
    for (size_t i = total * (size_t)k / (size_t)n; i < total * (size_t)(k + 1) / (size_t)n; i++) {
        const int input = (int)(i / s->heaps);
        const size_t h = i % s->heaps;
        uint8_t *dst = j->buf->data + i * s->heap_bytes;
        if (dsim_take_missing(j, k, input, h, dst))
            continue;
        const uint64_t clipped =
            dsim_generate(j, input, j->buf->timestamp + (int64_t)(h * HEAP), scratch);
        ((uint32_t *)j->buf->aux)[i] = (uint32_t)clipped;
        j->saturated[k] += clipped;
        /* Cannot fail: the width is checked and values are saturated. */
        cbf_pack(scratch, HEAP, s->bits, dst, NULL, 0);
    }
}

/* Replay mode, share k of n: one memcpy per run of present heaps that
 * neither leaves the share or the stream nor wraps round the period. */
static void dsim_replay_share(void *arg, int k, int n)
{
    dsim_job *j = arg;
    dsim *s = j->s;
    const cbf_dsim_period *per = &s->sig.per;
    const size_t total = 2 * (size_t)s->antennas * s->heaps, end = total * (size_t)(k + 1) / (size_t)n;
    const size_t heap0 = (size_t)(j->buf->timestamp / HEAP);
    for (size_t i = total * (size_t)k / (size_t)n; i < end;) {
        const int input = (int)(i / s->heaps);
        const size_t h = i % s->heaps;
        uint8_t *dst = j->buf->data + i * s->heap_bytes;
        if (dsim_take_missing(j, k, input, h, dst)) {
            i++;
            continue;
        }
        const size_t ph = (heap0 + h) % per->heaps;
        size_t len = end - i;
        len = len < s->heaps - h ? len : s->heaps - h;
        len = len < per->heaps - ph ? len : per->heaps - ph;
        const size_t src = (size_t)input * per->heaps + ph;
        uint32_t *clipped = (uint32_t *)j->buf->aux + i;
        size_t m = 1;
        clipped[0] = per->saturated[src];
        j->saturated[k] += per->saturated[src];
        while (m < len && !dsim_take_missing(j, k, input, h + m, dst + m * s->heap_bytes)) {
            clipped[m] = per->saturated[src + m];
            j->saturated[k] += per->saturated[src + m];
            m++;
        }
        /* A run that stopped at a missing heap has already zeroed it. */
        if (j->copy)
            memcpy(dst, per->data + src * per->heap_bytes, m * s->heap_bytes);
        i += m < len ? m + 1 : m;
    }
}

/* The slot of a pool buffer, claimed the first time it is seen; NULL when
 * every slot is taken (a pool that grew: the test harness). */
static struct dsim_slot *dsim_slot_of(dsim *s, const cbf_buffer *buf)
{
    for (size_t i = 0; i < s->n_slots; i++) {
        if (s->slots[i].data == buf->data)
            return &s->slots[i];
        if (!s->slots[i].data) {
            s->slots[i] = (struct dsim_slot){buf->data, -1, 0};
            return &s->slots[i];
        }
    }
    return NULL;
}

/* Replay skips the copy when the buffer holds this phase already: it comes
 * back unchanged only if the pool does not poison returned buffers, no
 * consumer writes its input, and no heap of the run is flagged missing
 * (those are zeroed in the buffer). Flags and counts are made as always. */
static void dsim_fill(dsim *s, cbf_buffer *buf)
{
    dsim_job j = {.s = s, .buf = buf, .copy = true, .n_segs = 1,
                  .at = {buf->timestamp}, .model = {s->sig.model}};
    const int64_t end = buf->timestamp + (int64_t)s->spc;
    for (int i = 0; i < cbf_timed_count(s->pend) && cbf_timed_at(s->pend, i) < end; i++) {
        j.at[j.n_segs] = cbf_timed_at(s->pend, i);
        j.model[j.n_segs++] = dsim_pending(s, i)->model;
    }
    struct dsim_slot *slot = s->replay ? dsim_slot_of(s, buf) : NULL;
    const int64_t phase = s->replay ? buf->timestamp / HEAP % (int64_t)s->sig.per.heaps : -1;
    const bool unchanged = slot && !s->n_missing && cbf_pool_keeps_payload(s->pool) &&
                           !cbf_port_feeds_writer(s->out) && j.n_segs == 1;
    if (unchanged && slot->phase == phase && slot->gen == s->gen) {
        j.copy = false;
        cbf_counter_add(s->c_reused, 1);
    }
    if (slot)
        *slot = (struct dsim_slot){buf->data, unchanged ? phase : -1, s->gen};
    const bool replay = s->replay && j.n_segs == 1;
    cbf_dsim_workers_run(s->workers, replay ? dsim_replay_share : dsim_compute_share, &j);
    for (int k = 0; k < MAX_THREADS; k++) {
        buf->saturated += j.saturated[k];
        buf->missing += j.missing[k];
    }
}

/* Changes due by the chunk at ts take over: the last becomes the signal
 * in force (its period the one replay copies from). */
static void dsim_take_changes(dsim *s, int64_t ts)
{
    while (cbf_timed_count(s->pend) && cbf_timed_at(s->pend, 0) <= ts) {
        cbf_dsim_signal *sig = dsim_pending(s, 0);
        cbf_dsim_signal_free(&s->sig);
        s->sig = *sig;
        free(sig);
        cbf_timed_pop(s->pend, 1);
        s->gen++;
        dsim_show_signal(s);
    }
}

/* ?time: the dsim's clock. With timestamps from the wall clock, now and
 * its sample; else, with the engine's sync_time, the UNIX time of the
 * next sample to be made (where the dsim's output stands), else now. */
static int dsim_time(cbf_node *node, dsim *s, cbf_reply *reply)
{
    struct timespec wall;
    clock_gettime(CLOCK_REALTIME, &wall);
    double now = (double)wall.tv_sec + 1e-9 * (double)wall.tv_nsec;
    int64_t ts = cbf_timed_resolve(s->pend, -1);
    if (s->wall)
        cbf_node_timestamp_of(node, now, &ts);
    else if (cbf_node_time_ref(node, NULL, NULL))
        now = cbf_node_unix_time(node, ts);
    int rc = cbf_reply_float(reply, "time", now);
    return rc ? rc : cbf_reply_int(reply, "timestamp", ts);
}

/* On the node's thread, between chunks (cbf/control.h): builds the new
 * signal now (its period too, in replay mode), so taking it costs nothing
 * later, and queues it. Refusals change nothing. */
static int dsim_request(cbf_node *node, const cbf_request *req, cbf_reply *reply, cbf_error *err)
{
    dsim *s = cbf_node_state(node);
    if (!strcmp(cbf_request_name(req), "time"))
        return dsim_time(node, s, reply);
    const cbf_params *a = cbf_request_args(req);
    const int64_t at = cbf_timed_resolve(s->pend, cbf_params_int(a, "at"));
    int rc = cbf_timed_check(s->pend, at, err);
    if (rc)
        return cbf_error_prefix(err, "signals");
    /* Unchanged parts come from the signal in force just before `at`. */
    const int k = cbf_timed_find(s->pend, at);
    const cbf_dsim_spec *base = k >= 0 ? &dsim_pending(s, k)->spec : &s->sig.spec;
    cbf_dsim_spec spec;
    if ((rc = cbf_dsim_spec_from_request(a, base, 2 * s->antennas, &s->lang, &spec, err)))
        return rc;
    cbf_dsim_signal *sig = malloc(sizeof *sig);
    if (!sig) {
        cbf_dsim_spec_free(&spec);
        return cbf_error_set(err, CBF_ENOMEM, "out of memory");
    }
    if ((rc = cbf_dsim_signal_build(sig, &spec, &s->fixed, s->workers, err))) {
        free(sig);
        return cbf_error_prefix(err, "signals");
    }
    int merged;
    cbf_dsim_signal **slot = cbf_timed_push(s->pend, at, &merged);
    if (merged)
        dsim_signal_drop(*slot);
    *slot = sig;
    cbf_counter_add(s->c_changes, 1);
    cbf_log_info("signals: new signal from timestamp %lld (period %lld)", (long long)at,
                 (long long)sig->repeat);
    cbf_reply_int(reply, "at", at);
    cbf_reply_int(reply, "period", sig->repeat);
    cbf_reply_int(reply, "pending", cbf_timed_count(s->pend));
    return 0;
}

static int64_t dsim_ns(const struct timespec *t)
{
    return (int64_t)t->tv_sec * 1000000000 + t->tv_nsec;
}

/* realtime with the engine's sync_time: the first timestamp is now's
 * sample, rounded up to a heap (the first sample is never in the past),
 * read with the monotonic instant the pacing counts from. */
static void dsim_wall_start(const cbf_node *node, dsim *s)
{
    struct timespec wall;
    clock_gettime(CLOCK_REALTIME, &wall);
    clock_gettime(CLOCK_MONOTONIC, &s->t0);
    int64_t now_ts = 0;
    cbf_node_timestamp_of(node, (double)wall.tv_sec + 1e-9 * (double)wall.tv_nsec, &now_ts);
    if (now_ts < 0)
        cbf_log_warn("realtime: the engine's sync_time is in the future; timestamps start at 0");
    s->start = now_ts > 0 ? (now_ts + HEAP - 1) / HEAP * HEAP : 0;
    s->pos0 = now_ts;
    s->lag = (int64_t)s->spc;
    cbf_timed_processed(s->pend, s->start);
    cbf_log_info("realtime: first timestamp %lld (UNIX %.6f)", (long long)s->start,
                 cbf_node_unix_time(node, s->start));
}

/* realtime: holds chunk `timestamp` until its time (see dsim.t0), measured
 * from one instant so rounding never accumulates. A chunk ready after its
 * time goes at once and is counted late; sleeps are cut into slices so a
 * stop request is never kept waiting long. */
static void dsim_pace(cbf_node *node, dsim *s, int64_t timestamp)
{
    if (!s->wall && timestamp == s->start) {
        clock_gettime(CLOCK_MONOTONIC, &s->t0);
        s->pos0 = s->start;
        return;
    }
    const int64_t due = dsim_ns(&s->t0) +
                        (int64_t)llround((double)(timestamp + s->lag - s->pos0) * 1e9 / s->rate);
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (dsim_ns(&now) > due) {
        cbf_counter_add(s->c_late, 1);
        if (!s->late_said)
            cbf_log_warn("realtime: chunk at %lld ready %.3f ms after its time; cannot keep "
                         "up (late chunks are counted in late_chunks and sent at once)",
                         (long long)timestamp, (double)(dsim_ns(&now) - due) / 1e6);
        s->late_said = true;
        return;
    }
    while (dsim_ns(&now) < due && !cbf_node_stopping(node)) {
        const int64_t until = due - dsim_ns(&now) > 100000000 ? dsim_ns(&now) + 100000000 : due;
        const struct timespec ts = {.tv_sec = until / 1000000000, .tv_nsec = until % 1000000000};
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
        clock_gettime(CLOCK_MONOTONIC, &now);
    }
}

static int dsim_run(cbf_node *node, cbf_error *err)
{
    (void)err;
    dsim *s = cbf_node_state(node);
    if (s->wall)
        dsim_wall_start(node, s);
    for (uint64_t seq = 0;; seq++) {
        const int64_t offset = (int64_t)(seq * s->spc);
        if ((s->length && offset >= s->length) || cbf_node_stopping(node))
            return 0;
        cbf_buffer *buf;
        int rc = cbf_pool_get(s->pool, &buf);
        if (rc == CBF_ESTOPPED)
            return 0;
        if (rc)
            return cbf_error_set(err, rc, "no output buffer");
        buf->timestamp = s->start + offset;
        buf->seq = seq;
        buf->n_present = (size_t)s->antennas * 2 * s->heaps;
        buf->saturated = 0;
        buf->missing = 0;
        dsim_take_changes(s, buf->timestamp);
        dsim_fill(s, buf);
        cbf_timed_processed(s->pend, buf->timestamp + (int64_t)s->spc);
        cbf_counter_add(s->c_samples, (uint64_t)s->spc);
        cbf_counter_add(s->c_saturated, buf->saturated);
        cbf_counter_add(s->c_missing, buf->missing);
        if (s->realtime)
            dsim_pace(node, s, buf->timestamp);
        if (seq == (uint64_t)cbf_pool_count(s->pool))
            cbf_log_info("%llu buffers sent, every pool buffer reused: running at rate",
                         (unsigned long long)seq);
        if (cbf_port_send(s->out, buf) == CBF_ESTOPPED)
            return 0;
    }
}

static const cbf_plugin_desc dsim_desc = {
    .abi = CBF_PLUGIN_ABI,
    .name = "dsim",
    .version = "0.1.0",
    .summary = "digitiser simulator: tones, combs, impulses, constants, noise and correlated "
               "noise as packed samples; signals changed at a timestamp",
    .params = dsim_params,
    .n_params = CBF_COUNT_OF(dsim_params),
    .ports = dsim_ports,
    .n_ports = CBF_COUNT_OF(dsim_ports),
    .init = dsim_init,
    .run = dsim_run,
    .fini = dsim_fini,
    .requests = dsim_requests,
    .n_requests = CBF_COUNT_OF(dsim_requests),
    .request = dsim_request,
};

CBF_PLUGIN_DEFINE(dsim_desc)
