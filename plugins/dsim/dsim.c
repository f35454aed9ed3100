/* dsim: a digitiser simulator. Tones, per-antenna noise and an optional
 * common (correlated) noise signal, delayed per antenna, quantised to
 * `bits` and packed as the MeerKAT digitiser payload; see dsim_model.h for
 * the signal and README.md for parameters. A CPU source; its buffers are
 * pinned when the engine uses the GPU (memory: auto).
 *
 * mode: compute makes every sample from the model; mode: replay makes one
 * period of every stream at init and copies it at the right offset, which
 * is memcpy speed. Either way a persistent team of `threads` workers cuts
 * each chunk's (stream, heap) list into contiguous ranges. */
#include <cbf/cbf.h>

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dsim_model.h"
#include "dsim_replay.h"
#include "dsim_workers.h"
#include "pack.h"
#include "stage/contracts/adc.h"

#define HEAP CBF_DSIM_HEAP_SAMPLES
#define MAX_THREADS 64

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
     .doc = "replay: samples per repeat, a power of two; tones are rounded to multiples of "
            "adc_sample_rate / period"},
    {.name = "realtime", .type = CBF_PARAM_BOOL, .def = "false",
     .doc = "release each chunk at its timestamp / adc_sample_rate after the first (wall clock); "
            "counts late chunks"},
    {.name = "memory", .type = CBF_PARAM_CHOICE, .def = "auto", .choices = "auto|host|pinned",
     .doc = "output pool: auto = pinned when the engine uses the GPU, else host; pinned needs a GPU"},
};

static const cbf_port_decl dsim_ports[] = {
    {.name = "out", .dir = CBF_PORT_OUT, .type = CBF_TYPE_ADC_PACKED,
     .doc = "packed samples [antenna][pol][byte]"},
};

typedef struct dsim {
    cbf_dsim_model *model;
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
    int64_t period;
    cbf_dsim_period per;
    cbf_dsim_workers *workers;
    double rate;
    struct timespec t0;     /* when the first chunk was released */
    cbf_counter *c_samples, *c_saturated, *c_missing, *c_late, *c_reused;
    /* Replay: which phase of the period each pool buffer holds, so a buffer
     * that comes back unchanged to be filled with the same phase is not
     * copied into again (one slot per pool buffer, claimed on first use). */
    struct dsim_slot {
        const void *data;
        int64_t phase;     /* heap of the period at the buffer's start; -1: unknown */
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

static void dsim_fini(cbf_node *node)
{
    dsim *s = cbf_node_state(node);
    if (!s)
        return;
    cbf_dsim_workers_free(s->workers);
    free(s->slots);
    cbf_dsim_period_free(&s->per);
    cbf_dsim_model_free(s->model);
    free(s->missing);
    free(s->input_missing);
    free(s->scratch);
    free(s);
    cbf_node_set_state(node, NULL);
}

static int dsim_read_params(dsim *s, const cbf_params *p, cbf_dsim_tone **tones, double **delays,
                       cbf_dsim_config *cfg, cbf_error *err)
{
    s->antennas = (int)cbf_params_int(p, "antennas");
    s->bits = (int)cbf_params_int(p, "bits");
    s->spc = (size_t)cbf_params_int(p, "samples_per_chunk");
    s->start = cbf_params_int(p, "start");
    s->length = cbf_params_int(p, "length");
    s->replay = strcmp(cbf_params_string(p, "mode"), "replay") == 0;
    s->period = cbf_params_int(p, "period");
    s->realtime = cbf_params_bool(p, "realtime");
    if (s->replay && (s->period & (s->period - 1)))
        return cbf_error_set(err, CBF_ECONFIG, "%s: period = %lld is not a power of two",
                             cbf_params_where(p, "period"), (long long)s->period);
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
    const size_t nt = cbf_params_len(p, "tones");
    *tones = calloc(nt + 1, sizeof **tones);
    *delays = calloc((size_t)s->antennas, sizeof **delays);
    s->n_missing = cbf_params_len(p, "missing");
    s->missing = calloc(s->n_missing + 1, sizeof *s->missing);
    s->input_missing = calloc(2 * (size_t)s->antennas, 1);
    s->threads = (int)cbf_params_int(p, "threads");
    s->scratch = malloc((size_t)s->threads * HEAP * sizeof *s->scratch);
    if (!*tones || !*delays || !s->missing || !s->input_missing || !s->scratch)
        return cbf_error_set(err, CBF_ENOMEM, "out of memory");
    for (size_t k = 0; k < nt; k++) {
        (*tones)[k].frequency = cbf_params_field(p, "tones", k, "frequency");
        (*tones)[k].amplitude = cbf_params_field(p, "tones", k, "amplitude");
        (*tones)[k].phase[0] = cbf_params_field(p, "tones", k, "phase_x");
        (*tones)[k].phase[1] = cbf_params_field(p, "tones", k, "phase_y");
    }
    for (size_t a = 0; a < nd; a++)
        (*delays)[a] = cbf_params_float_at(p, "delays", a);
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
    *cfg = (cbf_dsim_config){
        .antennas = s->antennas,
        .adc_sample_rate = cbf_params_float(p, CBF_ATTR_ADC_SAMPLE_RATE),
        .bits = s->bits,
        .n_tones = (int)nt,
        .tones = *tones,
        .noise = cbf_params_float(p, "noise"),
        .common_noise = cbf_params_float(p, "common_noise"),
        .delays = *delays,
        .seed = (uint64_t)cbf_params_int(p, "seed"),
        .period = s->replay ? s->period : 0,
    };
    return 0;
}

static int dsim_init(cbf_node *node, cbf_error *err)
{
    dsim *s = calloc(1, sizeof *s);
    if (!s)
        return cbf_error_set(err, CBF_ENOMEM, "out of memory");
    cbf_node_set_state(node, s);
    const cbf_params *p = cbf_node_params(node);
    cbf_dsim_tone *tones = NULL;
    double *delays = NULL;
    cbf_dsim_config cfg;
    char msg[256];
    int rc = dsim_read_params(s, p, &tones, &delays, &cfg, err);
    if (rc == 0 && (rc = cbf_dsim_model_create(&cfg, &s->model, msg, sizeof msg)) != 0)
        rc = cbf_error_set(err, rc == -2 ? CBF_ENOMEM : CBF_ECONFIG, "%s", msg);
    free(tones);
    free(delays);
    if (rc)
        return rc;
    if (cbf_dsim_workers_create(node, s->threads, &s->workers))
        return cbf_error_set(err, CBF_ENOMEM, "out of memory");
    if (s->replay && cbf_dsim_period_build(&s->per, s->model, 2 * s->antennas, s->period, s->bits,
                                           s->workers))
        return cbf_error_set(err, CBF_ENOMEM,
                             "out of memory for one period (%d streams of %lld samples)",
                             2 * s->antennas, (long long)s->period);
    s->rate = cfg.adc_sample_rate;
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
    cbf_port_desc_set_attr(&d, CBF_ATTR_ADC_SAMPLE_RATE, cfg.adc_sample_rate);
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
    s->c_missing = cbf_node_counter(node, "missing_heaps");
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

/* One chunk being filled: each worker k adds to its own totals. */
typedef struct dsim_job {
    dsim *s;
    cbf_buffer *buf;
    bool copy;              /* replay: false when the buffer already holds these samples */
    uint64_t saturated[MAX_THREADS], missing[MAX_THREADS];
} dsim_job;

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

/* Compute mode, share k of n: heap by heap from the model, so a missing
 * heap costs nothing. Every sample is a function of its time alone, so
 * the output does not depend on how the heaps are shared out. */
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
        const uint64_t clipped = cbf_dsim_model_generate(s->model, input / 2, input % 2,
                                                         j->buf->timestamp + (int64_t)(h * HEAP),
                                                         HEAP, scratch);
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
    const cbf_dsim_period *per = &s->per;
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
            s->slots[i] = (struct dsim_slot){buf->data, -1};
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
    dsim_job j = {.s = s, .buf = buf, .copy = true};
    struct dsim_slot *slot = s->replay ? dsim_slot_of(s, buf) : NULL;
    const int64_t phase = s->replay ? buf->timestamp / HEAP % (int64_t)s->per.heaps : -1;
    const bool unchanged = slot && !s->n_missing && cbf_pool_keeps_payload(s->pool) &&
                           !cbf_port_feeds_writer(s->out);
    if (unchanged && slot->phase == phase) {
        j.copy = false;
        cbf_counter_add(s->c_reused, 1);
    }
    if (slot)
        slot->phase = unchanged ? phase : -1;
    cbf_dsim_workers_run(s->workers, s->replay ? dsim_replay_share : dsim_compute_share, &j);
    for (int k = 0; k < MAX_THREADS; k++) {
        buf->saturated += j.saturated[k];
        buf->missing += j.missing[k];
    }
}

static int64_t dsim_ns(const struct timespec *t)
{
    return (int64_t)t->tv_sec * 1000000000 + t->tv_nsec;
}

/* realtime: holds chunk `timestamp` until its time after the first chunk's
 * release, measured from that one instant so rounding never accumulates.
 * A chunk ready after its time goes at once and is counted late; sleeps
 * are cut into slices so a stop request is never kept waiting long. */
static void dsim_pace(cbf_node *node, dsim *s, int64_t timestamp)
{
    if (timestamp == s->start) {
        clock_gettime(CLOCK_MONOTONIC, &s->t0);
        return;
    }
    const int64_t due = dsim_ns(&s->t0) +
                        (int64_t)llround((double)(timestamp - s->start) * 1e9 / s->rate);
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
        dsim_fill(s, buf);
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
    .summary = "digitiser simulator: tones, noise and correlated noise as packed samples",
    .params = dsim_params,
    .n_params = CBF_COUNT_OF(dsim_params),
    .ports = dsim_ports,
    .n_ports = CBF_COUNT_OF(dsim_ports),
    .init = dsim_init,
    .run = dsim_run,
    .fini = dsim_fini,
};

CBF_PLUGIN_DEFINE(dsim_desc)
