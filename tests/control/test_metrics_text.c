/* The Prometheus text format writer (core/src/frontends/metrics_text.c), compiled
 * alone, and the katgpucbf name table (core/src/frontends/metrics_names.c).
 *
 * Escaping is checked both on fixed strings and by a round trip: random
 * label values and help texts (every byte 1..255, weighted to the ones that
 * need escaping) are written, then read back by an unescaper written here
 * from the format's rules (not from the writer), and must come back equal.
 * Floats must read back as the same double (strtod), integers exactly. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "frontends/metrics.h"

static const cbf_metric_label node_labels[] = {{"engine", "e"}, {"node", "n"}, {"plugin", "p"}};

static char *page_of(cbf_metrics_text *t)
{
    size_t len = 0;
    char *page = cbf_metrics_text_render(t, &len);
    assert_non_null(page);
    assert_int_equal(len, strlen(page));
    return page;
}

/* The text between `after` and the end of its line. */
static char *line_after(const char *page, const char *after)
{
    const char *p = strstr(page, after);
    assert_non_null(p);
    p += strlen(after);
    size_t n = strcspn(p, "\n");
    char *out = malloc(n + 1);
    memcpy(out, p, n);
    out[n] = '\0';
    return out;
}

static void test_label_and_help_escaping(void **st)
{
    (void)st;
    cbf_metrics_text *t = cbf_metrics_text_new();
    cbf_metric_label l[] = {{"engine", "a\\b\"c\nd"}, {"node", "µ-node é"}};
    assert_int_equal(cbf_metrics_text_add_int(t, "x", CBF_METRIC_GAUGE, "help \\ with \"quotes\"\nand a line",
                                              l, 2, 7), 0);
    char *page = page_of(t);
    assert_string_equal(page, "# HELP x help \\\\ with \"quotes\"\\nand a line\n"
                              "# TYPE x gauge\n"
                              "x{engine=\"a\\\\b\\\"c\\nd\",node=\"µ-node é\"} 7\n");
    free(page);
    cbf_metrics_text_free(t);
}

/* Reads a label value starting after its opening quote; returns the
 * unescaped text and sets *end past the closing quote. */
static char *unescape_label(const char *s, const char **end)
{
    char *out = malloc(strlen(s) + 1);
    size_t n = 0;
    for (; *s != '"'; s++) {
        assert_true(*s != '\0' && *s != '\n');   /* a raw line feed would end the sample */
        if (*s == '\\') {
            s++;
            assert_true(*s == '\\' || *s == '"' || *s == 'n');
            out[n++] = *s == 'n' ? '\n' : *s;
        } else {
            out[n++] = *s;
        }
    }
    out[n] = '\0';
    *end = s + 1;
    return out;
}

static char *unescape_help(const char *s)
{
    char *out = malloc(strlen(s) + 1);
    size_t n = 0;
    for (; *s && *s != '\n'; s++) {
        if (*s == '\\') {
            s++;
            assert_true(*s == '\\' || *s == 'n');
            out[n++] = *s == 'n' ? '\n' : *s;
        } else {
            out[n++] = *s;
        }
    }
    out[n] = '\0';
    return out;
}

static void random_text(char *s, size_t n, unsigned *seed)
{
    static const char special[] = "\\\"\n{}=, #";
    for (size_t i = 0; i < n; i++) {
        /* Two draws: the choice and the character must not share residues. */
        bool plain = rand_r(seed) % 3;
        unsigned r = (unsigned)rand_r(seed);
        s[i] = plain ? (char)(1 + r % 255) : special[r % (sizeof special - 1)];
    }
    s[n] = '\0';
}

static void test_escaping_round_trip(void **st)
{
    (void)st;
    unsigned seed = 20261124u ^ (unsigned)(uintptr_t)&seed;   /* fresh each run */
    printf("seed %u\n", seed);
    for (int trial = 0; trial < 500; trial++) {
        char a[64], b[64], help[96];
        random_text(a, (size_t)rand_r(&seed) % 63, &seed);
        random_text(b, (size_t)rand_r(&seed) % 63, &seed);
        random_text(help, (size_t)rand_r(&seed) % 95, &seed);
        cbf_metrics_text *t = cbf_metrics_text_new();
        cbf_metric_label l[] = {{"engine", a}, {"node", b}};
        assert_int_equal(cbf_metrics_text_add_int(t, "m", CBF_METRIC_COUNTER, help, l, 2, 1), 0);
        char *page = page_of(t);
        /* Three lines exactly: HELP, TYPE, the sample. */
        int lines = 0;
        for (const char *p = page; *p; p++)
            lines += *p == '\n';
        assert_int_equal(lines, 3);
        char *h = unescape_help(page + strlen("# HELP m_total "));
        assert_string_equal(h, help);
        const char *p = strstr(page, "\nm_total{engine=\"");
        assert_non_null(p);
        const char *end;
        char *ra = unescape_label(p + strlen("\nm_total{engine=\""), &end);
        assert_memory_equal(end, ",node=\"", 7);
        char *rb = unescape_label(end + 7, &end);
        assert_string_equal(end, "} 1\n");
        assert_string_equal(ra, a);
        assert_string_equal(rb, b);
        free(ra);
        free(rb);
        free(h);
        free(page);
        cbf_metrics_text_free(t);
    }
}

static void test_families_grouped_and_counters_total(void **st)
{
    (void)st;
    cbf_metrics_text *t = cbf_metrics_text_new();
    cbf_metric_label n1[] = {{"node", "one"}}, n2[] = {{"node", "two"}};
    assert_int_equal(cbf_metrics_text_add_int(t, "heaps", CBF_METRIC_COUNTER, "h", n1, 1, 1), 0);
    assert_int_equal(cbf_metrics_text_add_float(t, "fill", CBF_METRIC_GAUGE, "f", n1, 1, 0.5), 0);
    assert_int_equal(cbf_metrics_text_add_int(t, "heaps", CBF_METRIC_COUNTER, "ignored", n2, 1, 2), 0);
    /* The same name as another type: a family of its own, still valid. */
    assert_int_equal(cbf_metrics_text_add_float(t, "heaps", CBF_METRIC_GAUGE, "g", n1, 1, 3), 0);
    /* Characters a metric name cannot hold. */
    assert_int_equal(cbf_metrics_text_add_int(t, "9rms.dbfs-pol0", CBF_METRIC_GAUGE, "r", NULL, 0, 4), 0);
    char *page = page_of(t);
    assert_string_equal(page, "# HELP heaps_total h\n# TYPE heaps_total counter\n"
                              "heaps_total{node=\"one\"} 1\nheaps_total{node=\"two\"} 2\n"
                              "# HELP fill f\n# TYPE fill gauge\nfill{node=\"one\"} 0.5\n"
                              "# HELP heaps_gauge g\n# TYPE heaps_gauge gauge\nheaps_gauge{node=\"one\"} 3\n"
                              "# HELP _9rms_dbfs_pol0 r\n# TYPE _9rms_dbfs_pol0 gauge\n_9rms_dbfs_pol0 4\n");
    free(page);
    cbf_metrics_text_free(t);
}

static void test_values(void **st)
{
    (void)st;
    cbf_metrics_text *t = cbf_metrics_text_new();
    assert_int_equal(cbf_metrics_text_add_int(t, "big", CBF_METRIC_COUNTER, "", node_labels, 3, UINT64_MAX), 0);
    assert_int_equal(cbf_metrics_text_add_float(t, "nan", CBF_METRIC_GAUGE, "", NULL, 0, NAN), 0);
    assert_int_equal(cbf_metrics_text_add_float(t, "pinf", CBF_METRIC_GAUGE, "", NULL, 0, INFINITY), 0);
    assert_int_equal(cbf_metrics_text_add_float(t, "ninf", CBF_METRIC_GAUGE, "", NULL, 0, -INFINITY), 0);
    assert_int_equal(cbf_metrics_text_add_float(t, "tenth", CBF_METRIC_GAUGE, "", NULL, 0, 0.1), 0);
    char *page = page_of(t);
    char *v;
    assert_string_equal((v = line_after(page, "big_total{engine=\"e\",node=\"n\",plugin=\"p\"} ")),
                        "18446744073709551615");
    free(v);
    assert_string_equal((v = line_after(page, "\nnan ")), "NaN");
    free(v);
    assert_string_equal((v = line_after(page, "\npinf ")), "+Inf");
    free(v);
    assert_string_equal((v = line_after(page, "\nninf ")), "-Inf");
    free(v);
    assert_string_equal((v = line_after(page, "\ntenth ")), "0.1");
    free(v);
    free(page);
    cbf_metrics_text_free(t);

    /* Random doubles over the whole range read back exactly. */
    unsigned seed = 7u ^ (unsigned)(uintptr_t)&seed;
    for (int i = 0; i < 2000; i++) {
        uint64_t bits = ((uint64_t)rand_r(&seed) << 42) ^ ((uint64_t)rand_r(&seed) << 21) ^ (uint64_t)rand_r(&seed);
        double d;
        memcpy(&d, &bits, sizeof d);
        if (!isfinite(d))
            continue;
        t = cbf_metrics_text_new();
        assert_int_equal(cbf_metrics_text_add_float(t, "d", CBF_METRIC_GAUGE, "", NULL, 0, d), 0);
        page = page_of(t);
        v = line_after(page, "\nd ");
        assert_true(strtod(v, NULL) == d);
        free(v);
        free(page);
        cbf_metrics_text_free(t);
    }
}

static void test_empty_page(void **st)
{
    (void)st;
    cbf_metrics_text *t = cbf_metrics_text_new();
    char *page = page_of(t);
    assert_string_equal(page, "");
    free(page);
    cbf_metrics_text_free(t);
}

static void test_katgpucbf_names(void **st)
{
    (void)st;
    const cbf_metric_alias *a;
    assert_non_null(a = cbf_metrics_alias("sender", "heaps", "cbf.xeng.vis"));
    assert_string_equal(a->name, "output_x_heaps");
    assert_non_null(a = cbf_metrics_alias("sender", "heaps", "cbf.feng.spectra"));
    assert_string_equal(a->name, "output_heaps");
    assert_non_null(a = cbf_metrics_alias("sender", "heaps", NULL));
    assert_string_equal(a->name, "output_heaps");
    assert_non_null(a = cbf_metrics_alias("fft_post", "saturated_pol1", "cbf.feng.fir"));
    assert_string_equal(a->name, "output_clipped_samples");
    assert_string_equal(a->label, "pol");
    assert_string_equal(a->label_value, "1");
    assert_non_null(a = cbf_metrics_alias("reducer", "saturated", "cbf.xeng.accum"));
    assert_string_equal(a->name, "output_x_clipped_visibilities");
    assert_non_null(a = cbf_metrics_alias("receiver", "flags_missing", NULL));
    assert_string_equal(a->name, "input_missing_heaps");
    /* Packet bytes are not katgpucbf's payload bytes; other plugins' names stay. */
    assert_null(cbf_metrics_alias("receiver", "bytes", NULL));
    assert_null(cbf_metrics_alias("dsim", "saturated", NULL));
    assert_null(cbf_metrics_alias("sender", "dumps_not_sent_no_antennas", "cbf.adc.packed"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_label_and_help_escaping),
        cmocka_unit_test(test_escaping_round_trip),
        cmocka_unit_test(test_families_grouped_and_counters_total),
        cmocka_unit_test(test_values),
        cmocka_unit_test(test_empty_page),
        cmocka_unit_test(test_katgpucbf_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
