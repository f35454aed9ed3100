/* rt_count: a counting source. Buffer seq carries words rt_word(seq, i);
 * it stops after `count` buffers, or when the engine asks (count 0). */
#include <stdlib.h>
#include "rt_common.h"

#define RT_SLOTS 16
#ifdef CBF_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

CBF_PLUGIN_EXPORT rt_knobs rt_test_knobs = {.count = 16, .size = 4096, .pool = 4};

typedef struct {
    cbf_pool *pool;
    int64_t count;
    cbf_counter *sent;
    int64_t max_out;    /* reported through the knobs in fini (one thread then) */
    /* Pinned/device pools: words are written into a ring of pinned staging
     * slots and uploaded asynchronously; a slot is reused only after its
     * own upload finished, so the consumer really does wait on the event. */
    uint64_t *staging;
    size_t n_slots;
    void *stream;
    void *slot_done[RT_SLOTS];
} state;

static int init(cbf_node *n, cbf_error *err)
{
    state *s = calloc(1, sizeof *s);
    if (!s)
        return cbf_error_set(err, CBF_ENOMEM, "rt_count: out of memory");
    cbf_node_set_state(n, s);
    s->count = rt_param(n, "count", rt_test_knobs.count);
    int64_t size = rt_param(n, "size", rt_test_knobs.size) / 8 * 8;
    cbf_mem_kind mem = (cbf_mem_kind)rt_param(n, "mem", rt_test_knobs.mem);
    cbf_pool_config pc = {.name = "out", .kind = mem, .count = (size_t)rt_param(n, "pool", rt_test_knobs.pool),
                          .size = (size_t)size, .n_present = 4};
    int rc = cbf_node_pool_create(n, &pc, &s->pool, err);
    if (rc)
        return rc;
    if (mem != CBF_MEM_HOST) {
#ifdef CBF_HAVE_CUDA
        s->n_slots = RT_SLOTS;
        if (cudaStreamCreateWithFlags((cudaStream_t *)&s->stream, cudaStreamNonBlocking) != cudaSuccess ||
            cudaMallocHost((void **)&s->staging, (size_t)size * s->n_slots) != cudaSuccess)
            return cbf_error_set(err, CBF_ECUDA, "rt_count: cannot create its stream or staging buffers");
        for (size_t k = 0; k < s->n_slots; k++)
            if (cudaEventCreateWithFlags((cudaEvent_t *)&s->slot_done[k], cudaEventDisableTiming) != cudaSuccess)
                return cbf_error_set(err, CBF_ECUDA, "rt_count: cannot create its events");
#else
        return cbf_error_set(err, CBF_ENOTSUP, "rt_count: %s memory without CUDA", cbf_mem_kind_name(mem));
#endif
    }
    cbf_port_desc d;
    cbf_port_desc_init(&d, CBF_DTYPE_U64, mem);
    cbf_port_desc_add_axis(&d, "word", (size_t)size / 8);
    d.timestamp_step = size / 8;
    s->sent = cbf_node_counter(n, "sent");
    rt_test_knobs.pool_max_out = 0;
    return cbf_port_set_desc(cbf_node_port(n, "out", 0), &d, err);
}

static int run(cbf_node *n, cbf_error *err)
{
    (void)err; /* used only with CUDA */
    state *s = cbf_node_state(n);
    cbf_port *out = cbf_node_port(n, "out", 0);
    for (uint64_t seq = 0; s->count == 0 || seq < (uint64_t)s->count; seq++) {
        if (cbf_node_stopping(n))
            break;
        cbf_buffer *b;
        int rc = cbf_pool_get(s->pool, &b);
        if (rc)
            return rc;
        int64_t in_use = (int64_t)(cbf_pool_count(s->pool) - cbf_pool_free_count(s->pool));
        if (in_use > s->max_out)
            s->max_out = in_use;
        size_t slot = seq % (s->n_slots ? s->n_slots : 1);
        uint64_t *w = b->data;
#ifdef CBF_HAVE_CUDA
        if (s->staging) {
            w = s->staging + slot * (b->size / 8);
            if (cudaEventSynchronize((cudaEvent_t)s->slot_done[slot]) != cudaSuccess) {
                cbf_buffer_unref(b);
                return cbf_error_set(err, CBF_ECUDA, "rt_count: staging event failed");
            }
        }
#endif
        for (size_t i = 0; i < b->size / 8; i++)
            w[i] = rt_word(seq, i);
#ifdef CBF_HAVE_CUDA
        if (s->staging) {
            /* Asynchronous upload, then the buffer's event: the consumer,
             * not this thread, waits for the data. */
            if (cudaMemcpyAsync(b->data, w, b->size, cudaMemcpyDefault, s->stream) != cudaSuccess ||
                cudaEventRecord((cudaEvent_t)s->slot_done[slot], s->stream) != cudaSuccess) {
                cbf_buffer_unref(b);
                return cbf_error_set(err, CBF_ECUDA, "rt_count: upload failed");
            }
            rc = cbf_buffer_record(b, s->stream, err);
            if (rc) {
                cbf_buffer_unref(b);
                return rc;
            }
        }
#else
        (void)slot;
#endif
        b->seq = seq;
        b->timestamp = (int64_t)(seq * (b->size / 8));
        rc = cbf_port_send(out, b);
        if (rc)
            return rc;
        cbf_counter_add(s->sent, 1);
        if (seq == 0)
            cbf_log_info("rt_count: first buffer sent");
    }
    return CBF_OK;
}

static void fini(cbf_node *n)
{
    state *s = cbf_node_state(n);
    rt_test_knobs.fini_calls++;
    if (s && s->pool)
        rt_test_knobs.pool_free_at_fini = (int64_t)cbf_pool_free_count(s->pool);
    if (s && s->max_out > rt_test_knobs.pool_max_out)
        rt_test_knobs.pool_max_out = s->max_out;
#ifdef CBF_HAVE_CUDA
    if (s && s->stream)
        cudaStreamSynchronize((cudaStream_t)s->stream);
    for (size_t k = 0; s && k < RT_SLOTS; k++)
        if (s->slot_done[k])
            cudaEventDestroy((cudaEvent_t)s->slot_done[k]);
    if (s && s->staging)
        cudaFreeHost(s->staging);
    if (s && s->stream)
        cudaStreamDestroy((cudaStream_t)s->stream);
#endif
    free(s);
}

static const cbf_param_decl params[] = {
    {"count", CBF_PARAM_INT, "16", CBF_RANGE(0, 1e15), NULL, "buffers to send; 0: until stopped"},
    {"size", CBF_PARAM_INT, "4096", CBF_RANGE(8, 1 << 30), NULL, "bytes per buffer"},
    {"pool", CBF_PARAM_INT, "4", CBF_RANGE(1, 1024), NULL, "buffers in the pool"},
    {"mem", CBF_PARAM_INT, "0", CBF_RANGE(0, 2), NULL, "pool memory: 0 host, 1 pinned, 2 device"},
};
static const cbf_port_decl ports[] = {{"out", CBF_PORT_OUT, RT_TYPE, 0, 0, "counting words"}};
static const cbf_plugin_desc desc = {CBF_PLUGIN_ABI, "rt_count", "1", "test: counting source",
                                     params, CBF_COUNT_OF(params), ports, CBF_COUNT_OF(ports),
                                     init, run, fini, NULL, 0, NULL};
CBF_PLUGIN_DEFINE(desc)
