/* The timed-change queue (stage/timed.h): each refusal rule with its text,
 * merging at one timestamp, the granule, the bound, and taking changes in
 * time order with their payloads intact. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "stage/timed.h"

typedef struct payload {
    int value;
    char tag[12];
} payload;

static cbf_timed *make(int max_pending, int64_t granule)
{
    cbf_timed_config c = {.noun = "test change", .payload = sizeof(payload),
                          .max_pending = max_pending, .granule = granule};
    cbf_timed *q;
    cbf_error err = {0};
    assert_int_equal(cbf_timed_create(&c, &q, &err), 0);
    return q;
}

/* Checks and pushes a change at `at` carrying value; returns the check's code. */
static int add(cbf_timed *q, int64_t at, int value, cbf_error *err)
{
    int rc = cbf_timed_check(q, at, err);
    if (rc)
        return rc;
    int merged;
    payload *p = cbf_timed_push(q, at, &merged);
    assert_non_null(p);
    p->value = value;
    strcpy(p->tag, merged ? "merged" : "new");
    return 0;
}

static void resolve_follows_processing(void **state)
{
    (void)state;
    cbf_timed *q = make(4, 0);
    assert_int_equal(cbf_timed_resolve(q, -1), 0);
    assert_int_equal(cbf_timed_resolve(q, 77), 77);
    cbf_timed_processed(q, 4096);
    assert_int_equal(cbf_timed_resolve(q, -1), 4096);
    cbf_timed_destroy(q);
}

static void refuses_the_past(void **state)
{
    (void)state;
    cbf_timed *q = make(4, 0);
    cbf_error err = {0};
    assert_int_equal(add(q, 10, 1, &err), 0); /* before any data: anything goes */
    cbf_timed_processed(q, 100);
    assert_int_equal(add(q, 99, 2, &err), CBF_EINVAL);
    assert_non_null(strstr(err.msg, "timestamp 99 has already been processed"));
    assert_non_null(strstr(err.msg, "next spectrum is at 100"));
    assert_int_equal(cbf_timed_count(q), 1);
    assert_int_equal(add(q, 100, 3, &err), 0);
    cbf_timed_destroy(q);
}

static void refuses_beyond_the_horizon(void **state)
{
    (void)state;
    cbf_timed *q = make(4, 0);
    cbf_error err = {0};
    const int64_t far = INT64_C(9200000000000000000);
    assert_int_equal(add(q, far, 1, &err), 0); /* before any data: nothing to measure from */
    cbf_timed_pop(q, 1);
    cbf_timed_processed(q, 1000);
    assert_int_equal(add(q, far, 2, &err), CBF_EINVAL);
    assert_non_null(strstr(err.msg, "at most 8796093022208 ahead"));
    assert_int_equal(add(q, 1000 + CBF_TIMED_HORIZON + 1, 3, &err), CBF_EINVAL);
    assert_int_equal(cbf_timed_count(q), 0);
    assert_int_equal(add(q, 1000 + CBF_TIMED_HORIZON, 4, &err), 0);
    cbf_timed_destroy(q);
    cbf_timed_config c = {.noun = "test change", .payload = sizeof(payload), .max_pending = 2, .horizon = 50};
    assert_int_equal(cbf_timed_create(&c, &q, &err), 0);
    cbf_timed_processed(q, 1000);
    assert_int_equal(add(q, 1051, 5, &err), CBF_EINVAL);
    assert_int_equal(add(q, 1050, 6, &err), 0);
    cbf_timed_destroy(q);
}

static void merges_equal(void **state)
{
    (void)state;
    cbf_timed *q = make(4, 0);
    cbf_error err = {0};
    assert_int_equal(add(q, 500, 1, &err), 0);
    assert_int_equal(add(q, 500, 3, &err), 0);
    assert_int_equal(cbf_timed_count(q), 1);
    assert_int_equal(cbf_timed_replaced(q), 0);
    const payload *p = cbf_timed_payload(q, 0);
    assert_int_equal(p->value, 3);
    assert_string_equal(p->tag, "merged");
    cbf_timed_destroy(q);
}

/* A change before pending ones replaces them: a far-future mistake is
 * corrected by the right change, and the ones before it stay as they were. */
static void replaces_later_changes(void **state)
{
    (void)state;
    cbf_timed *q = make(4, 0);
    cbf_error err = {0};
    cbf_timed_processed(q, 100);
    assert_int_equal(add(q, 200, 1, &err), 0);
    assert_int_equal(add(q, 5000000, 2, &err), 0);
    assert_int_equal(add(q, 6000000, 3, &err), 0);
    assert_int_equal(cbf_timed_find(q, 199), -1);
    assert_int_equal(cbf_timed_find(q, 200), 0);
    assert_int_equal(cbf_timed_find(q, 5500000), 1);
    assert_int_equal(add(q, 300, 4, &err), 0);
    assert_int_equal(cbf_timed_replaced(q), 2);
    assert_int_equal(cbf_timed_count(q), 2);
    assert_int_equal(cbf_timed_at(q, 0), 200);
    assert_int_equal(((const payload *)cbf_timed_payload(q, 0))->value, 1);
    assert_int_equal(cbf_timed_at(q, 1), 300);
    assert_string_equal(((const payload *)cbf_timed_payload(q, 1))->tag, "new");
    /* At a pending change's own timestamp: it merges and the later go. */
    assert_int_equal(add(q, 400, 5, &err), 0);
    assert_int_equal(add(q, 200, 6, &err), 0);
    assert_int_equal(cbf_timed_replaced(q), 2);
    assert_int_equal(cbf_timed_count(q), 1);
    assert_string_equal(((const payload *)cbf_timed_payload(q, 0))->tag, "merged");
    /* The past is still refused, and a refusal drops nothing. */
    assert_int_equal(add(q, 500, 7, &err), 0);
    assert_int_equal(add(q, 99, 8, &err), CBF_EINVAL);
    assert_int_equal(cbf_timed_count(q), 2);
    cbf_timed_destroy(q);
}

static void cancels(void **state)
{
    (void)state;
    cbf_timed *q = make(4, 0);
    cbf_error err = {0};
    cbf_timed_processed(q, 100);
    for (int i = 1; i <= 3; i++)
        assert_int_equal(add(q, 1000 * i, i, &err), 0);
    assert_int_equal(cbf_timed_cancel(q, 2000), 2);
    assert_int_equal(cbf_timed_replaced(q), 2);
    assert_int_equal(cbf_timed_count(q), 1);
    assert_int_equal(cbf_timed_at(q, 0), 1000);
    assert_int_equal(cbf_timed_cancel(q, 5000), 0);
    assert_int_equal(cbf_timed_cancel(q, cbf_timed_resolve(q, -1)), 1);
    assert_int_equal(cbf_timed_count(q), 0);
    cbf_timed_destroy(q);
}

static void bounds_the_pending(void **state)
{
    (void)state;
    cbf_timed *q = make(2, 0);
    cbf_error err = {0};
    assert_int_equal(add(q, 1, 1, &err), 0);
    assert_int_equal(add(q, 2, 2, &err), 0);
    assert_int_equal(add(q, 3, 3, &err), CBF_EINVAL);
    assert_non_null(strstr(err.msg, "2 test changes are pending already"));
    /* A merge adds no entry, so the bound does not refuse it; nor does a
     * change that replaces one. */
    assert_int_equal(add(q, 2, 4, &err), 0);
    assert_int_equal(cbf_timed_count(q), 2);
    assert_int_equal(add(q, 1, 5, &err), 0);
    assert_int_equal(add(q, 2, 6, &err), 0);
    assert_int_equal(cbf_timed_count(q), 2);
    cbf_timed_destroy(q);
}

static void one_change_per_granule(void **state)
{
    (void)state;
    cbf_timed *q = make(8, 1000);
    cbf_error err = {0};
    assert_int_equal(add(q, 1200, 1, &err), 0);
    assert_int_equal(add(q, 1999, 2, &err), CBF_EINVAL);
    assert_non_null(strstr(err.msg, "one change per buffer"));
    assert_int_equal(add(q, 1200, 3, &err), 0); /* same timestamp: merges */
    assert_int_equal(add(q, 2000, 4, &err), 0); /* the next span */
    assert_int_equal(cbf_timed_count(q), 2);
    /* Earlier in the span of a pending change: it replaces that change. */
    assert_int_equal(add(q, 1100, 5, &err), 0);
    assert_int_equal(cbf_timed_count(q), 1);
    assert_int_equal(cbf_timed_replaced(q), 2);
    cbf_timed_destroy(q);
}

static void pops_in_time_order(void **state)
{
    (void)state;
    cbf_timed *q = make(4, 0);
    cbf_error err = {0};
    for (int i = 0; i < 4; i++)
        assert_int_equal(add(q, 100 * (i + 1), i, &err), 0);
    cbf_timed_pop(q, 1);
    assert_int_equal(cbf_timed_count(q), 3);
    assert_int_equal(cbf_timed_at(q, 0), 200);
    assert_int_equal(((const payload *)cbf_timed_payload(q, 0))->value, 1);
    assert_int_equal(((const payload *)cbf_timed_payload(q, 2))->value, 3);
    /* A freed slot takes a new change, zeroed before the caller fills it. */
    int merged;
    payload *p = cbf_timed_push(q, 900, &merged);
    assert_int_equal(merged, 0);
    assert_int_equal(p->value, 0);
    cbf_timed_pop(q, 10);
    assert_int_equal(cbf_timed_count(q), 0);
    cbf_timed_destroy(q);
}

static void refuses_a_bad_config(void **state)
{
    (void)state;
    cbf_timed_config c = {.noun = "x", .payload = 4, .max_pending = 0};
    cbf_timed *q = (cbf_timed *)&c;
    cbf_error err = {0};
    assert_int_equal(cbf_timed_create(&c, &q, &err), CBF_EINTERNAL);
    assert_null(q);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(resolve_follows_processing),
        cmocka_unit_test(refuses_the_past),
        cmocka_unit_test(refuses_beyond_the_horizon),
        cmocka_unit_test(merges_equal),
        cmocka_unit_test(replaces_later_changes),
        cmocka_unit_test(cancels),
        cmocka_unit_test(bounds_the_pending),
        cmocka_unit_test(one_change_per_granule),
        cmocka_unit_test(pops_in_time_order),
        cmocka_unit_test(refuses_a_bad_config),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
