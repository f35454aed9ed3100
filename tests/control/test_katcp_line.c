/* The katcp line parser and writer (core/src/katcp/katcp_line.c), alone: the
 * message forms and escapes of the katcp v5 specification, every kind of
 * malformed line refused with a message, and random lines written back and
 * read again unchanged (the property the libFuzzer harness also checks). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "katcp/katcp_line.h"
#include "katcp_check.h"

static void parse_ok(const char *line, size_t len, cbf_katcp_msg *m)
{
    cbf_error err;
    cbf_error_clear(&err);
    int rc = cbf_katcp_parse(line, len, m, &err);
    if (rc)
        fail_msg("'%s' refused: %s", line, err.msg);
}

static void test_forms(void **state)
{
    (void)state;
    cbf_katcp_msg m;
    parse_ok("?help", 5, &m);
    assert_int_equal(m.type, '?');
    assert_string_equal(m.name, "help");
    assert_true(m.id == -1);
    assert_int_equal(m.n_args, 0);
    cbf_katcp_msg_free(&m);

    static const char line[] = "!sensor-value[12] \t a\\_b  \\@ x\\\\y\\0z \\n\\r\\e\\t";
    parse_ok(line, sizeof line - 1, &m);
    assert_int_equal(m.type, '!');
    assert_string_equal(m.name, "sensor-value");
    assert_true(m.id == 12);
    assert_int_equal(m.n_args, 4);
    assert_string_equal(m.args[0], "a b");
    assert_int_equal(m.lens[1], 0);
    assert_int_equal(m.lens[2], 5);
    assert_memory_equal(m.args[2], "x\\y\0z", 5);
    assert_string_equal(m.args[3], "\n\r\x1b\t");
    cbf_katcp_msg_free(&m);
    parse_ok("#a-1 x ", 7, &m);   /* trailing whitespace adds no argument */
    assert_int_equal(m.n_args, 1);
    cbf_katcp_msg_free(&m);
}

static void test_malformed(void **state)
{
    (void)state;
    char longname[80];
    memset(longname, 'a', sizeof longname);
    longname[0] = '?';
    longname[sizeof longname - 1] = 0;
    const char *bad[] = {"", "help", "?", "? help", "?1abc", "?a[0]", "?a[", "?a[12", "?a[1x]", "?a[]",
                         "?a[1234567890123456]", "?a\\q", "?a b\\q", "?a b\\", "?a b\x1b", "?a!", "?a_b",
                         "?a b\rc", longname};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cbf_katcp_msg m;
        cbf_error err;
        cbf_error_clear(&err);
        if (!cbf_katcp_parse(bad[i], strlen(bad[i]), &m, &err))
            fail_msg("'%s' accepted", bad[i]);
        assert_true(err.msg[0]);
        cbf_katcp_msg_free(&m);
    }
    /* A NUL inside the line, raw. */
    cbf_katcp_msg m;
    cbf_error err;
    assert_int_not_equal(cbf_katcp_parse("?a b\0c", 6, &m, &err), 0);
    cbf_katcp_msg_free(&m);
    /* One argument too many. */
    size_t n = CBF_KATCP_MAX_ARGS + 1, len = 2 + 2 * n;
    char *many = malloc(len + 1);
    assert_non_null(many);
    memcpy(many, "?a", 2);
    for (size_t i = 0; i < n; i++)
        memcpy(many + 2 + 2 * i, " x", 2);
    assert_int_not_equal(cbf_katcp_parse(many, len, &m, &err), 0);
    assert_non_null(strstr(err.msg, "more than"));
    cbf_katcp_msg_free(&m);
    assert_int_equal(cbf_katcp_parse(many, len - 2, &m, &err), 0);   /* the most there may be */
    assert_int_equal(m.n_args, CBF_KATCP_MAX_ARGS);
    cbf_katcp_msg_free(&m);
    free(many);
}

static void test_writer(void **state)
{
    (void)state;
    cbf_katcp_buf b = {0};
    cbf_katcp_buf_start(&b, '!', "help", 7);
    cbf_katcp_buf_arg(&b, "ok", 2);
    cbf_katcp_buf_arg(&b, "", 0);
    cbf_katcp_buf_arg(&b, "a b\\c\0d\n\r\x1b\te", 12);
    cbf_katcp_buf_argf(&b, "%d=%s", 42, "x y");
    assert_false(b.oom);
    assert_string_equal(b.p, "!help[7] ok \\@ a\\_b\\\\c\\0d\\n\\r\\e\\te 42=x\\_y");
    cbf_katcp_buf_free(&b);
}

/* Random lines over an alphabet rich in what the grammar cares about: each
 * either refused with a message or written back and read again unchanged. */
static void test_round_trip(void **state)
{
    (void)state;
    static const char alpha[] = "?!#[]0123456789abz-_ \t\\@nrte\x1b";
    uint64_t x = 0x9e3779b97f4a7c15u;
    size_t parsed = 0;
    char line[64];
    for (int t = 0; t < 200000; t++) {
        size_t len = 0, want = 1 + t % 40;
        line[len++] = "?!#"[t % 3];
        line[len++] = 'a' + (char)(t % 26);
        while (len < want) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            line[len++] = alpha[x % (sizeof alpha)];   /* the terminating NUL too: a raw NUL */
        }
        const char *why = NULL;
        if (katcp_check_line(line, len, &why))
            fail_msg("line %d: %s", t, why);
        cbf_katcp_msg m;
        cbf_error err;
        parsed += cbf_katcp_parse(line, len, &m, &err) == 0;
        cbf_katcp_msg_free(&m);
    }
    /* Both branches were taken often (the alphabet is not all refusals). */
    assert_true(parsed > 20000 && parsed < 180000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_forms),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_writer),
        cmocka_unit_test(test_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
