/* SPEAD codec: round trips, every malformed-packet reason, reordering,
 * duplicates, eviction, stop, descriptors (against bytes spead2 wrote). */
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "spead.h"

#define MAX_PKTS 4096
#define PKT_CAP 9000

typedef struct captured {
    int n;
    uint64_t cnt[64];
    bool complete[64];
    uint64_t size[64];
    uint8_t *payload[64];
    int n_items[64];
    cbf_spead_item items[64][16];
} captured;

static void on_heap(const cbf_spead_heap *h, void *user)
{
    captured *c = user;
    assert_true(c->n < 64);
    int i = c->n++;
    c->cnt[i] = h->cnt;
    c->complete[i] = h->complete;
    c->size[i] = h->size;
    c->payload[i] = malloc(h->size ? h->size : 1);
    memcpy(c->payload[i], h->payload, h->size);
    c->n_items[i] = h->n_items < 16 ? h->n_items : 16;
    memcpy(c->items[i], h->items, (size_t)c->n_items[i] * sizeof(cbf_spead_item));
}

static void captured_free(captured *c)
{
    for (int i = 0; i < c->n; i++)
        free(c->payload[i]);
    c->n = 0;
}

typedef struct packets {
    int n;
    size_t len[MAX_PKTS];
    uint8_t *buf;
} packets;

static packets *packets_new(void)
{
    packets *p = calloc(1, sizeof(*p));
    p->buf = malloc((size_t)MAX_PKTS * PKT_CAP);
    return p;
}

static void packets_free(packets *p)
{
    free(p->buf);
    free(p);
}

static uint8_t *pkt(packets *p, int i) { return p->buf + (size_t)i * PKT_CAP; }

static void encode_heap(packets *p, uint64_t cnt, const cbf_spead_item_out *items, int n,
                        size_t max_packet, bool repeat)
{
    cbf_spead_encoder e;
    cbf_error err;
    assert_int_equal(cbf_spead_encoder_init(&e, cnt, items, n, max_packet, repeat, &err), 0);
    size_t expect = cbf_spead_encoder_count(&e);
    size_t len, got = 0;
    while ((len = cbf_spead_encoder_next(&e, pkt(p, p->n))) > 0) {
        assert_true(len <= max_packet);
        p->len[p->n++] = len;
        got++;
    }
    assert_int_equal(got, expect);
}

static void fill_random(uint8_t *b, size_t n, unsigned seed)
{
    srand(seed);
    for (size_t i = 0; i < n; i++)
        b[i] = (uint8_t)(rand() >> 7);
}

static cbf_spead_assembler *make_asm(captured *c, int window, size_t max_heap, bool incomplete)
{
    cbf_spead_assembler_config cfg = {
        .max_heap_size = max_heap, .window = window, .deliver_incomplete = incomplete,
        .on_heap = on_heap, .user = c,
    };
    cbf_spead_assembler *a;
    cbf_error err;
    assert_int_equal(cbf_spead_assembler_create(&cfg, &a, &err), 0);
    return a;
}

/* A heap like the F-engine's: immediates, then two addressed items. */
typedef struct test_heap {
    uint8_t *a, *b;
    size_t na, nb;
    cbf_spead_item_out items[4];
} test_heap;

static void test_heap_make(test_heap *t, size_t na, size_t nb, unsigned seed)
{
    t->na = na;
    t->nb = nb;
    t->a = malloc(na ? na : 1);
    t->b = malloc(nb ? nb : 1);
    fill_random(t->a, na, seed);
    fill_random(t->b, nb, seed + 1);
    t->items[0] = (cbf_spead_item_out){.id = 0x1600, .immediate = true, .value = 0x123456789abcull + seed};
    t->items[1] = (cbf_spead_item_out){.id = 0x4101, .immediate = true, .value = seed & 0xff};
    t->items[2] = (cbf_spead_item_out){.id = 0x4300, .data = t->a, .len = na};
    t->items[3] = (cbf_spead_item_out){.id = 0x4301, .data = t->b, .len = nb};
}

static void test_heap_free(test_heap *t)
{
    free(t->a);
    free(t->b);
}

/* The delivered heap i of c must be exactly t. */
static void check_heap(const captured *c, int i, const test_heap *t)
{
    assert_true(c->complete[i]);
    assert_int_equal(c->size[i], t->na + t->nb);
    cbf_spead_heap h = {.size = c->size[i], .received = c->size[i], .complete = true,
                        .n_items = c->n_items[i], .items = c->items[i], .payload = c->payload[i]};
    const cbf_spead_item *ts = cbf_spead_heap_find(&h, 0x1600);
    assert_non_null(ts);
    assert_true(ts->immediate);
    assert_int_equal(ts->value, t->items[0].value);
    const uint8_t *d;
    size_t n;
    assert_int_equal(cbf_spead_heap_item_bytes(&h, cbf_spead_heap_find(&h, 0x4300), &d, &n), 0);
    assert_int_equal(n, t->na);
    assert_memory_equal(d, t->a, n);
    assert_int_equal(cbf_spead_heap_item_bytes(&h, cbf_spead_heap_find(&h, 0x4301), &d, &n), 0);
    assert_int_equal(n, t->nb);
    assert_memory_equal(d, t->b, n);
    assert_int_equal(cbf_spead_heap_item_bytes(&h, ts, &d, &n), CBF_EINVAL);
}

static void round_trip(size_t na, size_t nb, size_t max_packet, bool repeat, unsigned seed)
{
    packets *p = packets_new();
    test_heap t;
    test_heap_make(&t, na, nb, seed);
    encode_heap(p, 7, t.items, 4, max_packet, repeat);
    captured c = {0};
    cbf_spead_assembler *a = make_asm(&c, 2, na + nb + 1, false);
    for (int i = 0; i < p->n; i++) {
        cbf_spead_packet dp;
        assert_int_equal(cbf_spead_decode(pkt(p, i), p->len[i], &dp), CBF_SPEAD_OK);
        if (repeat)
            assert_int_equal(dp.n_items, 4);
        assert_int_equal(cbf_spead_assembler_add(a, pkt(p, i), p->len[i]), 0);
    }
    assert_int_equal(c.n, 1);
    assert_int_equal(c.cnt[0], 7);
    check_heap(&c, 0, &t);
    const cbf_spead_counters *k = cbf_spead_assembler_counters(a);
    assert_int_equal(k->heaps, 1);
    assert_int_equal(k->packets, (uint64_t)p->n);
    assert_int_equal(cbf_spead_counters_malformed(k), 0);
    captured_free(&c);
    cbf_spead_assembler_destroy(a);
    test_heap_free(&t);
    packets_free(p);
}

static void test_round_trip_one_packet(void **s)
{
    (void)s;
    round_trip(100, 28, CBF_SPEAD_DEFAULT_PACKET, false, 1);
}

static void test_round_trip_many_packets(void **s)
{
    (void)s;
    /* 1 MiB over 8872-byte packets: 119 packets, items split mid-packet. */
    round_trip(1 << 20, 3333, CBF_SPEAD_DEFAULT_PACKET, false, 2);
    round_trip(5000, 7000, 60, false, 3);      /* tiny packets: pointers spread over two */
    round_trip(5120, 0, 5192, true, 4);        /* MeerKAT digitiser shape, pointers repeated */
    round_trip(0, 0, 1500, false, 5);          /* a heap with no payload still gets a packet */
}

static void test_reorder_interleaved(void **s)
{
    (void)s;
    enum { H = 3 };
    packets *p = packets_new();
    test_heap t[H];
    for (int h = 0; h < H; h++) {
        test_heap_make(&t[h], 20000 + 1000 * h, 500, 10 + h);
        encode_heap(p, 100 + h, t[h].items, 4, 1024, false);
    }
    /* Fisher-Yates with a fixed seed: every heap's packets arrive in a
     * different order, interleaved with the others. */
    int order[MAX_PKTS];
    for (int i = 0; i < p->n; i++)
        order[i] = i;
    srand(99);
    for (int i = p->n - 1; i > 0; i--) {
        int j = rand() % (i + 1), x = order[i];
        order[i] = order[j];
        order[j] = x;
    }
    captured c = {0};
    cbf_spead_assembler *a = make_asm(&c, H, 1 << 16, false);
    for (int i = 0; i < p->n; i++)
        cbf_spead_assembler_add(a, pkt(p, order[i]), p->len[order[i]]);
    assert_int_equal(c.n, H);
    for (int i = 0; i < H; i++)
        check_heap(&c, i, &t[c.cnt[i] - 100]);
    assert_int_equal(cbf_spead_assembler_counters(a)->incomplete, 0);
    captured_free(&c);
    cbf_spead_assembler_destroy(a);
    for (int h = 0; h < H; h++)
        test_heap_free(&t[h]);
    packets_free(p);
}

static void test_duplicates_and_late(void **s)
{
    (void)s;
    packets *p = packets_new();
    test_heap t;
    test_heap_make(&t, 9000, 10, 20);
    encode_heap(p, 5, t.items, 4, 1000, false);
    assert_true(p->n >= 4);
    captured c = {0};
    cbf_spead_assembler *a = make_asm(&c, 2, 1 << 16, false);
    /* Packets 0 and 1 twice each before the rest: 2 duplicates, nothing doubled. */
    cbf_spead_assembler_add(a, pkt(p, 0), p->len[0]);
    cbf_spead_assembler_add(a, pkt(p, 1), p->len[1]);
    cbf_spead_assembler_add(a, pkt(p, 0), p->len[0]);
    cbf_spead_assembler_add(a, pkt(p, 1), p->len[1]);
    for (int i = 2; i < p->n; i++)
        cbf_spead_assembler_add(a, pkt(p, i), p->len[i]);
    assert_int_equal(c.n, 1);
    check_heap(&c, 0, &t);
    /* After completion, any packet of heap 5 is late. */
    cbf_spead_assembler_add(a, pkt(p, 2), p->len[2]);
    const cbf_spead_counters *k = cbf_spead_assembler_counters(a);
    assert_int_equal(k->duplicate, 2);
    assert_int_equal(k->late, 1);
    assert_int_equal(k->heaps, 1);
    assert_int_equal(c.n, 1);
    captured_free(&c);
    cbf_spead_assembler_destroy(a);
    test_heap_free(&t);
    packets_free(p);
}

static void test_eviction_and_stop(void **s)
{
    (void)s;
    packets *p = packets_new();
    test_heap t;
    test_heap_make(&t, 3000, 0, 30);
    for (uint64_t h = 0; h < 4; h++)
        encode_heap(p, h, t.items, 4, 1100, false); /* 3 packets per heap */
    assert_int_equal(p->n, 12);
    captured c = {0};
    cbf_spead_assembler *a = make_asm(&c, 2, 4096, true);
    cbf_spead_assembler_add(a, pkt(p, 0), p->len[0]);       /* heap 0, first third */
    for (int i = 3; i < 6; i++)                              /* heap 1 complete */
        cbf_spead_assembler_add(a, pkt(p, i), p->len[i]);
    cbf_spead_assembler_add(a, pkt(p, 6), p->len[6]);       /* heap 2 opens */
    cbf_spead_assembler_add(a, pkt(p, 9), p->len[9]);       /* heap 3 evicts heap 0 */
    assert_int_equal(c.n, 2);
    assert_int_equal(c.cnt[0], 1);
    assert_true(c.complete[0]);
    assert_int_equal(c.cnt[1], 0);
    assert_false(c.complete[1]);
    cbf_spead_assembler_add(a, pkt(p, 1), p->len[1]);       /* heap 0 again: late */
    uint8_t stop[64];
    size_t n = cbf_spead_encode_stop(77, stop);
    assert_int_equal(cbf_spead_assembler_add(a, stop, n), 1);
    assert_int_equal(c.n, 2);                /* a stop alone flushes nothing */
    cbf_spead_assembler_flush(a);
    const cbf_spead_counters *k = cbf_spead_assembler_counters(a);
    assert_int_equal(k->late, 1);
    assert_int_equal(k->heaps, 1);
    assert_int_equal(k->incomplete, 3);     /* 0 evicted, 2 and 3 flushed at the end */
    assert_int_equal(k->incomplete_packets, 3);   /* one packet each */
    assert_int_equal(k->stops, 1);
    /* Every packet offered under one reason, or in heap 1 (3 packets). */
    assert_int_equal(k->packets, 8);
    assert_int_equal(cbf_spead_counters_malformed(k) + k->late + k->duplicate + k->fragmented + k->stops +
                         k->incomplete_packets + 3, k->packets);
    assert_int_equal(c.n, 4);
    assert_int_equal(c.cnt[2], 2);           /* flushed oldest first */
    assert_int_equal(c.cnt[3], 3);
    captured_free(&c);
    cbf_spead_assembler_destroy(a);
    test_heap_free(&t);
    packets_free(p);
}

/* One well-formed packet to corrupt: 4 standard items, one immediate, one
 * addressed item at 0, 16 bytes of payload, offset 0 in a 64-byte heap. */
static size_t good_packet(uint8_t *b)
{
    static const uint8_t tmpl[] = {
        0x53, 0x04, 0x02, 0x06, 0x00, 0x00, 0x00, 0x06,
        0x80, 0x01, 0, 0, 0, 0, 0, 0x09,      /* heap cnt 9 */
        0x80, 0x02, 0, 0, 0, 0, 0, 0x40,      /* heap size 64 */
        0x80, 0x03, 0, 0, 0, 0, 0, 0x00,      /* heap offset 0 */
        0x80, 0x04, 0, 0, 0, 0, 0, 0x10,      /* payload length 16 */
        0x96, 0x00, 0, 0, 0, 0, 0x12, 0x34,   /* 0x1600 immediate */
        0x43, 0x00, 0, 0, 0, 0, 0, 0x00,      /* 0x4300 at address 0 */
    };
    memcpy(b, tmpl, sizeof tmpl);
    fill_random(b + sizeof tmpl, 16, 40);
    return sizeof tmpl + 16;
}

static void test_malformed_reasons(void **s)
{
    (void)s;
    uint8_t b[128];
    cbf_spead_packet p;
    captured c = {0};
    cbf_spead_assembler *a = make_asm(&c, 2, 64, false);
    size_t n = good_packet(b);
    assert_int_equal(cbf_spead_decode(b, n, &p), CBF_SPEAD_OK);
    assert_int_equal(p.heap_cnt, 9);
    assert_int_equal(p.n_items, 2);

    struct { int at; uint8_t v; int dlen; cbf_spead_reason want; } cases[] = {
        {-1, 0, -(int)n + 7, CBF_SPEAD_ERR_SHORT},
        {0, 0x54, 0, CBF_SPEAD_ERR_MAGIC},
        {1, 0x03, 0, CBF_SPEAD_ERR_VERSION},
        {2, 0x03, 0, CBF_SPEAD_ERR_FLAVOUR},
        {3, 0x05, 0, CBF_SPEAD_ERR_FLAVOUR},
        {7, 0x09, 0, CBF_SPEAD_ERR_ITEM_COUNT},          /* pointers past the end */
        {6, 0x01, 0, CBF_SPEAD_ERR_ITEM_COUNT},          /* 262 pointers: too many */
        {9, 0x07, 0, CBF_SPEAD_ERR_MISSING},             /* heap cnt renamed */
        {17, 0x07, 0, CBF_SPEAD_ERR_MISSING},            /* heap size renamed */
        {25, 0x07, 0, CBF_SPEAD_ERR_MISSING},            /* heap offset renamed */
        {33, 0x07, 0, CBF_SPEAD_ERR_MISSING},            /* payload length renamed */
        {24, 0x00, 0, CBF_SPEAD_ERR_NOT_IMMEDIATE},      /* offset as an address */
        {17, 0x01, 0, CBF_SPEAD_ERR_DUPLICATE},          /* two heap counters */
        {39, 0x11, 0, CBF_SPEAD_ERR_PAYLOAD_LEN},        /* says 17, 16 present */
        {-1, 0, -1, CBF_SPEAD_ERR_PAYLOAD_LEN},          /* one byte cut off */
        {31, 0x31, 0, CBF_SPEAD_ERR_OFFSET},             /* 49 + 16 > 64 */
        {23, 0x08, 0, CBF_SPEAD_ERR_OFFSET},             /* heap of 8 < 16 bytes */
        {55, 0x41, 0, CBF_SPEAD_ERR_ADDRESS},            /* address 65 > 64 */
        {23, 0x80, 0, CBF_SPEAD_ERR_HEAP_SIZE},          /* 128 > the assembler's 64 */
    };
    uint64_t expect[CBF_SPEAD_N_REASONS] = {0};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        n = good_packet(b);
        if (cases[i].at >= 0)
            b[cases[i].at] = cases[i].v;
        size_t len = n + (size_t)(ptrdiff_t)cases[i].dlen;
        cbf_spead_reason got = cbf_spead_decode(b, len, &p);
        if (cases[i].want == CBF_SPEAD_ERR_HEAP_SIZE)
            assert_int_equal(got, CBF_SPEAD_OK);   /* a limit of the assembler, not the packet */
        else
            assert_int_equal(got, cases[i].want);
        cbf_spead_assembler_add(a, b, len);
        expect[cases[i].want]++;
    }
    /* A heap size that changes within one heap. */
    n = good_packet(b);
    cbf_spead_assembler_add(a, b, n);
    b[23] = 0x30;
    cbf_spead_assembler_add(a, b, n);
    expect[CBF_SPEAD_ERR_SIZE_CHANGED]++;
    const cbf_spead_counters *k = cbf_spead_assembler_counters(a);
    for (int r = 1; r < CBF_SPEAD_N_REASONS; r++) {
        if (k->malformed[r] != expect[r])
            fail_msg("reason %s: counted %llu, expected %llu", cbf_spead_reason_name((cbf_spead_reason)r),
                     (unsigned long long)k->malformed[r], (unsigned long long)expect[r]);
        assert_true(expect[r] > 0);   /* every reason is exercised */
    }
    assert_int_equal(c.n, 0);
    captured_free(&c);
    cbf_spead_assembler_destroy(a);
}

static size_t unhex(const char *h, uint8_t *out)
{
    size_t n = strlen(h) / 2;
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        sscanf(h + 2 * i, "%2x", &v);
        out[i] = (uint8_t)v;
    }
    return n;
}

/* Raw descriptors written by spead2 4.5 (ItemGroup.add_item with
 * format=[('u', 48)] and with dtype '>i2', shape (3, 2)). */
static const char *spead2_ts =
    "530402060000000980010000000000018002000000000013800300000000000080040000000000138014000000001600"
    "001000000000000000110000000000090013000000000010001200000000001374696d657374616d7074732064657363"
    "750030";
static const char *spead2_raw =
    "530402060000000a8001000000000001800200000000005280030000000000008004000000000052801400000000330000"
    "100000000000000011000000000003001300000000000b001200000000000b0015000000000019726177726177206461"
    "746100000000000003000000000000027b276465736372273a20273e6932272c2027666f727472616e5f6f7264657227"
    "3a2046616c73652c20277368617065273a2028332c2032297d";

static void test_descriptors_match_spead2(void **s)
{
    (void)s;
    uint8_t ref[512], ours[512];
    cbf_spead_descriptor d;
    cbf_error err;

    size_t n = unhex(spead2_ts, ref);
    assert_int_equal(cbf_spead_descriptor_decode(ref, n, &d, &err), 0);
    assert_int_equal(d.id, 0x1600);
    assert_string_equal(d.name, "timestamp");
    assert_string_equal(d.description, "ts desc");
    assert_int_equal(d.ndim, 0);
    assert_int_equal(d.n_fields, 1);
    assert_int_equal(d.field_code[0], 'u');
    assert_int_equal(d.field_bits[0], 48);
    assert_int_equal(cbf_spead_descriptor_encode(&d, ours, sizeof ours), n);
    assert_memory_equal(ours, ref, n);

    n = unhex(spead2_raw, ref);
    assert_int_equal(cbf_spead_descriptor_decode(ref, n, &d, &err), 0);
    assert_int_equal(d.id, 0x3300);
    assert_string_equal(d.name, "raw");
    assert_string_equal(d.dtype, ">i2");
    assert_false(d.fortran_order);
    assert_int_equal(d.ndim, 2);
    assert_int_equal(d.shape[0], 3);
    assert_int_equal(d.shape[1], 2);
    assert_int_equal(cbf_spead_descriptor_encode(&d, ours, sizeof ours), n);
    assert_memory_equal(ours, ref, n);

    /* Cut anywhere, a descriptor is refused, never misread. */
    for (size_t cut = 0; cut < n; cut++)
        assert_int_equal(cbf_spead_descriptor_decode(ref, cut, &d, &err), CBF_EINVAL);
    /* One-element shapes need numpy's trailing comma. */
    assert_int_equal(cbf_spead_descriptor_decode(ref, n, &d, &err), 0);
    d.ndim = 1;
    d.shape[0] = 4096;
    size_t m = cbf_spead_descriptor_encode(&d, ours, sizeof ours);
    assert_true(m > 0);
    assert_non_null(memmem(ours, m, "(4096,)", 7));
    assert_int_equal(cbf_spead_descriptor_encode(&d, ours, 40), 0);   /* too small: refused */
}

/* Packet loss chosen by seed: exactly the heaps that lost a packet come out
 * incomplete, every other heap byte-exact. */
static void loss_run(double rate, unsigned seed)
{
    enum { H = 60 };
    packets *p = packets_new();
    test_heap t[H];
    int first[H + 1];
    for (int h = 0; h < H; h++) {
        first[h] = p->n;
        test_heap_make(&t[h], 20000, 1 + (size_t)h, 200 + (unsigned)h);
        encode_heap(p, 1000 + (uint64_t)h, t[h].items, 4, 1024, false);
    }
    first[H] = p->n;
    bool lost[H] = {0};
    captured c = {0};
    cbf_spead_assembler *a = make_asm(&c, 4, 1 << 16, true);
    srand(seed);
    int dropped = 0;
    for (int h = 0; h < H; h++)
        for (int i = first[h]; i < first[h + 1]; i++) {
            if (rand() < rate * ((double)RAND_MAX + 1)) {
                lost[h] = true;
                dropped++;
                continue;
            }
            cbf_spead_assembler_add(a, pkt(p, i), p->len[i]);
        }
    cbf_spead_assembler_flush(a);
    assert_true(dropped > 0);
    int n_lost = 0;
    for (int h = 0; h < H; h++)
        n_lost += lost[h];
    assert_int_equal(c.n, H);   /* a heap that lost every packet would be absent: not at these rates */
    for (int i = 0; i < c.n; i++) {
        int h = (int)(c.cnt[i] - 1000);
        assert_true(h >= 0 && h < H);
        if (lost[h])
            assert_false(c.complete[i]);
        else
            check_heap(&c, i, &t[h]);
    }
    const cbf_spead_counters *k = cbf_spead_assembler_counters(a);
    assert_int_equal(k->incomplete, (uint64_t)n_lost);
    assert_int_equal(k->heaps, (uint64_t)(H - n_lost));
    captured_free(&c);
    cbf_spead_assembler_destroy(a);
    for (int h = 0; h < H; h++)
        test_heap_free(&t[h]);
    packets_free(p);
}

static void test_packet_loss(void **s)
{
    (void)s;
    loss_run(0.01, 1);
    loss_run(0.10, 2);
}

static void test_encoder_refuses(void **s)
{
    (void)s;
    cbf_spead_encoder e;
    cbf_error err;
    cbf_spead_item_out it = {.id = 0x0003, .immediate = true, .value = 1};
    assert_int_equal(cbf_spead_encoder_init(&e, 0, &it, 1, 1500, false, &err), CBF_EINVAL);
    it = (cbf_spead_item_out){.id = 0x1600, .immediate = true, .value = 1ull << 48};
    assert_int_equal(cbf_spead_encoder_init(&e, 0, &it, 1, 1500, false, &err), CBF_EINVAL);
    it.value = 1;
    assert_int_equal(cbf_spead_encoder_init(&e, 0, &it, 1, 20, false, &err), CBF_EINVAL);
    assert_int_equal(cbf_spead_encoder_init(&e, 1ull << 48, &it, 1, 1500, false, &err), CBF_EINVAL);
    assert_int_equal(cbf_spead_encoder_init(&e, 0, &it, 1, 1500, false, &err), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_one_packet),
        cmocka_unit_test(test_round_trip_many_packets),
        cmocka_unit_test(test_reorder_interleaved),
        cmocka_unit_test(test_duplicates_and_late),
        cmocka_unit_test(test_eviction_and_stop),
        cmocka_unit_test(test_malformed_reasons),
        cmocka_unit_test(test_descriptors_match_spead2),
        cmocka_unit_test(test_encoder_refuses),
        cmocka_unit_test(test_packet_loss),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
