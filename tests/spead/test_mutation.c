/* Deterministic mutation test of the packet parsers (runs everywhere, unlike
 * the libFuzzer harness): every seed packet of the corpus, and packets from
 * our encoder, mutated many times by a seeded generator; each result goes
 * through decode, descriptor decode and assembly, which must keep their
 * promises (fuzz_target.c) and never read outside the input (run the suite
 * under -Db_sanitize=address to have that checked too). */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fuzz_target.h"

#define MAX_LEN 9000
#define MUTATIONS 20000

static uint64_t state = 0x5eed;

static uint32_t next(void)
{
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return (uint32_t)(state >> 16);
}

/* One of: flip a bit, set a byte to an edge value, cut, extend, or copy a
 * header field's bytes over another's (which makes duplicates and swaps). */
static size_t mutate(uint8_t *b, size_t len)
{
    static const uint8_t edge[] = {0x00, 0x01, 0x02, 0x04, 0x06, 0x53, 0x7f, 0x80, 0xff};
    int rounds = 1 + (int)(next() % 4);
    for (int r = 0; r < rounds && len; r++) {
        size_t at = next() % len;
        switch (next() % 5) {
        case 0: b[at] ^= (uint8_t)(1u << (next() % 8)); break;
        case 1: b[at] = edge[next() % sizeof edge]; break;
        case 2: len = at; break;
        case 3: if (len < MAX_LEN) b[len++] = (uint8_t)next(); break;
        default: {
            size_t from = 8 + 8 * (next() % 8), to = 8 + 8 * (next() % 8);
            if (from + 8 <= len && to + 8 <= len)
                memmove(b + to, b + from, 8);
        }
        }
    }
    return len;
}

static int load_corpus(const char *dir, uint8_t seeds[][MAX_LEN], size_t *lens, int cap)
{
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)) && n < cap) {
        if (e->d_name[0] == '.')
            continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        FILE *f = fopen(path, "rb");
        if (!f)
            continue;
        lens[n] = fread(seeds[n], 1, MAX_LEN, f);
        fclose(f);
        n++;
    }
    if (d)
        closedir(d);
    return n;
}

int main(void)
{
    static uint8_t seeds[32][MAX_LEN], buf[MAX_LEN];
    size_t lens[32];
    const char *root = getenv("CBF_SOURCE_ROOT");
    char dir[900];
    snprintf(dir, sizeof dir, "%s/tests/spead/corpus", root ? root : ".");
    int n = load_corpus(dir, seeds, lens, 28);
    if (n == 0) {
        fprintf(stderr, "test_mutation: no seed packets in %s\n", dir);
        return 1;
    }
    /* Our own packets too: a two-packet heap and a stop. */
    uint8_t payload[300];
    for (size_t i = 0; i < sizeof payload; i++)
        payload[i] = (uint8_t)(i * 7 + 1);
    cbf_spead_item_out items[] = {{.id = 0x1600, .immediate = true, .value = 42},
                                  {.id = 0x4300, .data = payload, .len = sizeof payload}};
    cbf_spead_encoder enc;
    if (cbf_spead_encoder_init(&enc, 5, items, 2, 256, false, NULL))
        return 1;
    size_t l;
    while (n < 31 && (l = cbf_spead_encoder_next(&enc, seeds[n])) > 0)
        lens[n++] = l;
    lens[n] = cbf_spead_encode_stop(6, seeds[n]);
    n++;

    cbf_spead_assembler *a;
    if (spead_fuzz_assembler(&a))
        return 1;
    uint64_t total = 0;
    for (int s = 0; s < n; s++) {
        for (int m = 0; m < MUTATIONS; m++) {
            memcpy(buf, seeds[s], lens[s]);
            size_t len = mutate(buf, lens[s]);
            const char *why;
            if (spead_fuzz_one(a, buf, len, &why)) {
                fprintf(stderr, "test_mutation: seed %d mutation %d (%zu bytes): %s\n", s, m, len, why);
                return 1;
            }
            total++;
        }
    }
    const cbf_spead_counters *k = cbf_spead_assembler_counters(a);
    uint64_t bad = cbf_spead_counters_malformed(k);
    printf("%llu mutated packets: %llu malformed, %llu heaps, %llu incomplete, %llu late, %llu duplicate\n",
           (unsigned long long)total, (unsigned long long)bad, (unsigned long long)k->heaps,
           (unsigned long long)k->incomplete, (unsigned long long)k->late,
           (unsigned long long)k->duplicate);
    /* The mutations must have reached both sides of the parser. */
    int rc = (k->packets == total && bad > 0 && bad < total) ? 0 : 1;
    for (int r = 1; r < CBF_SPEAD_N_REASONS && !rc; r++)
        if (r != CBF_SPEAD_ERR_HEAP_SIZE && k->malformed[r] == 0) {
            fprintf(stderr, "test_mutation: no mutation hit reason %s\n",
                    cbf_spead_reason_name((cbf_spead_reason)r));
            rc = 1;
        }
    cbf_spead_assembler_destroy(a);
    return rc;
}
