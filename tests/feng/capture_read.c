/* capture_read.c: see capture_read.h. */
#include "capture_read.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

void read_capture(const char *path, capture *c)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("no capture %s", path);
    memset(c, 0, sizeof *c);
    capbuf x;
    while (c->n < 128 && fread(&x.ts, 8, 1, f) == 1) {
        assert_int_equal(fread(&x.np, 8, 1, f), 1);
        x.present = malloc(x.np + 1);
        assert_int_equal(fread(x.present, 1, x.np, f), x.np);
        assert_int_equal(fread(&x.as, 8, 1, f), 1);
        x.aux = malloc(x.as + 1);
        assert_int_equal(fread(x.aux, 1, x.as, f), x.as);
        assert_int_equal(fread(&x.bytes, 8, 1, f), 1);
        x.data = malloc(x.bytes);
        assert_int_equal(fread(x.data, 1, x.bytes, f), x.bytes);
        c->b[c->n++] = x;
    }
    fclose(f);
}

const capbuf *capture_find(const capture *c, int64_t ts)
{
    for (size_t i = 0; i < c->n; i++)
        if (c->b[i].ts == ts)
            return &c->b[i];
    fail_msg("no captured buffer at %lld", (long long)ts);
    return NULL;
}

void free_capture(capture *c)
{
    for (size_t i = 0; i < c->n; i++) {
        free(c->b[i].present);
        free(c->b[i].aux);
        free(c->b[i].data);
    }
}
