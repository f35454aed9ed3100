/* The staging (stage/staging.h) on the host path: appending chunks, the gap
 * policy (a short gap becomes zeroed missing heaps with drains in between,
 * a backward or long jump restarts), and dropping what is no longer needed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "stage/staging.h"

#define HEAP 8
#define CHUNK 16
#define CAP 64

/* Input buffers: two antennas x two pols of CHUNK one-byte samples; the
 * staging reads antenna 1. Sample i of a pol holds (ts + i) & 0x7f, plus
 * 0x80 for pol 1. */
typedef struct chunk {
    uint8_t data[4 * CHUNK];
    uint8_t present[4 * CHUNK / HEAP];
    cbf_buffer buf;
} chunk;

static cbf_buffer *make_chunk(chunk *c, int64_t ts)
{
    memset(c, 0, sizeof *c);
    for (int slab = 0; slab < 4; slab++)
        for (int i = 0; i < CHUNK; i++)
            c->data[slab * CHUNK + i] = (uint8_t)(((ts + i) & 0x7f) | (slab & 1 ? 0x80 : 0));
    memset(c->present, 1, sizeof c->present);
    c->buf.data = c->data;
    c->buf.size = sizeof c->data;
    c->buf.kind = CBF_MEM_HOST;
    c->buf.timestamp = ts;
    c->buf.present = c->present;
    c->buf.n_present = sizeof c->present;
    return &c->buf;
}

static void setup(cbf_staging *st)
{
    cbf_staging_config c = {
        .kind = CBF_MEM_HOST, .bits = 8, .heap = HEAP, .chunk = CHUNK, .cap = CAP,
        .pol_bytes = CAP, .slab = {2, 3}, .flag_row = {2, 3}, .max_gap = 2 * CHUNK,
    };
    cbf_error err = {0};
    assert_int_equal(cbf_staging_init(st, &c, &err), 0);
}

/* The drain: counts its calls and drops everything before the last heap. */
static int drains;

static int drain(void *ctx, cbf_error *err)
{
    cbf_staging *st = ctx;
    drains++;
    return cbf_staging_keep(st, cbf_staging_end(st) - HEAP, err);
}

static void place_and_append(cbf_staging *st, int64_t ts, int want_how)
{
    chunk c;
    cbf_error err = {0};
    int how = -1;
    assert_int_equal(cbf_staging_place(st, ts, drain, st, &how, &err), 0);
    assert_int_equal(how, want_how);
    assert_int_equal(cbf_staging_append(st, make_chunk(&c, ts), &err), 0);
}

static void expect_sample(const cbf_staging *st, int64_t t, int present)
{
    const size_t i = (size_t)(t - st->first), heaps = CAP / HEAP;
    for (int q = 0; q < 2; q++) {
        assert_int_equal(st->present[(size_t)q * heaps + i / HEAP], present);
        uint8_t want = present ? (uint8_t)((t & 0x7f) | (q ? 0x80 : 0)) : 0;
        assert_int_equal(st->data[q][i], want);
    }
}

static void contiguous_chunks_append(void **state)
{
    (void)state;
    cbf_staging st;
    setup(&st);
    place_and_append(&st, 32, CBF_STAGING_RESTARTED);
    place_and_append(&st, 48, CBF_STAGING_CONTINUES);
    assert_int_equal(st.first, 32);
    assert_int_equal(st.len, 2 * CHUNK);
    for (int64_t t = 32; t < 64; t++)
        expect_sample(&st, t, 1);
    cbf_staging_fini(&st);
}

static void short_gap_fills_missing_heaps(void **state)
{
    (void)state;
    cbf_staging st;
    setup(&st);
    place_and_append(&st, 0, CBF_STAGING_RESTARTED);
    /* Dirty the spare stage so the zeros below come from the fill. */
    memset(st.spare[0], 0x55, CAP);
    memset(st.spare[1], 0x55, CAP);
    drains = 0;
    place_and_append(&st, CHUNK + 2 * HEAP, CBF_STAGING_FILLED);
    assert_int_equal(drains, 2); /* one before each missing heap */
    assert_int_equal(cbf_staging_end(&st), 2 * CHUNK + 2 * HEAP);
    for (int64_t t = st.first; t < CHUNK + 2 * HEAP; t++)
        expect_sample(&st, t, t < CHUNK);
    for (int64_t t = CHUNK + 2 * HEAP; t < cbf_staging_end(&st); t++)
        expect_sample(&st, t, 1);
    cbf_staging_fini(&st);
}

static void backward_or_long_jump_restarts(void **state)
{
    (void)state;
    cbf_staging st;
    setup(&st);
    place_and_append(&st, 64, CBF_STAGING_RESTARTED);
    place_and_append(&st, 16, CBF_STAGING_RESTARTED);
    assert_int_equal(st.first, 16);
    assert_int_equal(st.len, CHUNK);
    /* max_gap is 2 chunks: a gap of one more heap restarts. */
    drains = 0;
    place_and_append(&st, 32 + 2 * CHUNK + HEAP, CBF_STAGING_RESTARTED);
    assert_int_equal(drains, 0);
    assert_int_equal(st.first, 32 + 2 * CHUNK + HEAP);
    expect_sample(&st, st.first, 1);
    cbf_staging_fini(&st);
}

static void keep_moves_the_tail(void **state)
{
    (void)state;
    cbf_staging st;
    setup(&st);
    place_and_append(&st, 0, CBF_STAGING_RESTARTED);
    place_and_append(&st, CHUNK, CBF_STAGING_CONTINUES);
    chunk c;
    make_chunk(&c, 0);
    c.present[2 * (CHUNK / HEAP) + 1] = 0; /* antenna 1 pol 0, heap 1 */
    cbf_error err = {0};
    int how;
    assert_int_equal(cbf_staging_place(&st, 2 * CHUNK, drain, &st, &how, &err), 0);
    c.buf.timestamp = 2 * CHUNK;
    assert_int_equal(cbf_staging_append(&st, &c.buf, &err), 0);
    assert_int_equal(cbf_staging_keep(&st, 2 * CHUNK, &err), 0);
    assert_int_equal(st.first, 2 * CHUNK);
    assert_int_equal(st.len, CHUNK);
    assert_int_equal(st.present[1], 0);
    assert_int_equal(st.present[CAP / HEAP + 1], 1);
    /* Before the start: nothing; past the end: everything. */
    assert_int_equal(cbf_staging_keep(&st, 0, &err), 0);
    assert_int_equal(st.len, CHUNK);
    assert_int_equal(cbf_staging_keep(&st, 1000, &err), 0);
    assert_int_equal(st.len, 0);
    assert_int_equal(st.first, 3 * CHUNK);
    cbf_staging_fini(&st);
}

static void refuses_to_overflow(void **state)
{
    (void)state;
    cbf_staging st;
    setup(&st);
    for (int64_t t = 0; t < CAP; t += CHUNK)
        place_and_append(&st, t, t ? CBF_STAGING_CONTINUES : CBF_STAGING_RESTARTED);
    chunk c;
    cbf_error err = {0};
    assert_int_equal(cbf_staging_append(&st, make_chunk(&c, CAP), &err), CBF_EINTERNAL);
    assert_non_null(strstr(err.msg, "do not fit"));
    assert_int_equal(st.len, CAP);
    cbf_staging_fini(&st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(contiguous_chunks_append),
        cmocka_unit_test(short_gap_fills_missing_heaps),
        cmocka_unit_test(backward_or_long_jump_restarts),
        cmocka_unit_test(keep_moves_the_tail),
        cmocka_unit_test(refuses_to_overflow),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
