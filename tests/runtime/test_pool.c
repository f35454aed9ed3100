/* test_pool.c: pools outside a graph: get/ref/unref, reset of metadata,
 * blocking get, leak detection at destroy, poisoning on return
 * (CBF_POOL_POISON), and (with a GPU) pinned and device pools with their
 * events. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "cbf/cbf.h"
#ifdef CBF_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

static cbf_pool *make(const char *name, cbf_mem_kind kind, size_t count, size_t size)
{
    cbf_pool_config c = {.name = name, .kind = kind, .count = count, .size = size,
                         .n_present = 7, .aux_size = 24};
    cbf_pool *p = NULL;
    cbf_error err;
    int rc = cbf_pool_create(&c, &p, &err);
    if (rc)
        print_error("%s\n", err.msg);
    assert_int_equal(rc, CBF_OK);
    return p;
}

static void test_get_ref_unref(void **st)
{
    (void)st;
    cbf_pool *p = make("t.host", CBF_MEM_HOST, 4, 100);
    assert_int_equal(cbf_pool_count(p), 4);
    assert_int_equal(cbf_pool_free_count(p), 4);
    cbf_buffer *b[4];
    for (int i = 0; i < 4; i++) {
        assert_int_equal(cbf_pool_get(p, &b[i]), CBF_OK);
        assert_non_null(b[i]->data);
        assert_int_equal((uintptr_t)b[i]->data % 64, 0);
        assert_int_equal(b[i]->size, 100);
        assert_int_equal(b[i]->n_present, 7);
        assert_non_null(b[i]->aux);
        /* The whole payload is ours to write (a sanitizer would catch less). */
        memset(b[i]->data, 0xA5, b[i]->size);
    }
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < i; j++)
            assert_ptr_not_equal(b[i]->data, b[j]->data);
    cbf_buffer *extra = (cbf_buffer *)0x1;
    assert_int_equal(cbf_pool_try_get(p, &extra), CBF_EAGAIN);
    assert_string_equal(cbf_error_name(CBF_EAGAIN), "none free now");
    assert_null(extra);

    /* Two references: the buffer returns on the second unref only, and is
     * shared (not writable) while both are held. */
    assert_true(cbf_buffer_is_writable(b[0]));
    cbf_buffer_ref(b[0]);
    assert_false(cbf_buffer_is_writable(b[0]));
    cbf_buffer_unref(b[0]);
    assert_true(cbf_buffer_is_writable(b[0]));
    assert_int_equal(cbf_pool_free_count(p), 0);
    /* Dirty metadata must be reset by the next get. */
    b[0]->seq = 77;
    b[0]->timestamp = -5;
    b[0]->saturated = 3;
    b[0]->missing = 2;
    memset(b[0]->present, 0, 7);
    cbf_buffer_unref(b[0]);
    assert_int_equal(cbf_pool_free_count(p), 1);
    cbf_buffer *again;
    assert_int_equal(cbf_pool_try_get(p, &again), 0);
    assert_ptr_equal(again, b[0]);
    assert_int_equal(again->seq, 0);
    assert_int_equal(again->timestamp, 0);
    assert_int_equal(again->saturated, 0);
    assert_int_equal(again->missing, 0);
    for (int i = 0; i < 7; i++)
        assert_int_equal(again->present[i], 1);
    for (int i = 0; i < 4; i++)
        cbf_buffer_unref(b[i]);
    assert_int_equal(cbf_pool_free_count(p), 4);
    cbf_error err;
    assert_int_equal(cbf_pool_destroy(p, &err), CBF_OK);
}

static void test_leak_detected(void **st)
{
    (void)st;
    cbf_pool *p = make("t.leaky", CBF_MEM_HOST, 5, 64);
    cbf_buffer *a, *b;
    assert_int_equal(cbf_pool_get(p, &a), CBF_OK);
    assert_int_equal(cbf_pool_get(p, &b), CBF_OK);
    cbf_buffer_unref(a);
    cbf_error err;
    assert_int_equal(cbf_pool_destroy(p, &err), CBF_ELEAK);
    assert_int_equal(err.code, CBF_ELEAK);
    assert_non_null(strstr(err.msg, "'t.leaky'"));
    assert_non_null(strstr(err.msg, "1 of 5"));
    /* Nothing was freed: the buffer is still usable and can come back. */
    memset(b->data, 1, b->size);
    cbf_buffer_unref(b);
    assert_int_equal(cbf_pool_destroy(p, &err), CBF_OK);
}

static void *getter(void *arg)
{
    cbf_buffer *b = NULL;
    int rc = cbf_pool_get(arg, &b);
    return rc == CBF_OK ? b : NULL;
}

static void test_get_blocks_until_returned(void **st)
{
    (void)st;
    cbf_pool *p = make("t.block", CBF_MEM_HOST, 1, 8);
    cbf_buffer *only;
    assert_int_equal(cbf_pool_get(p, &only), CBF_OK);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, getter, p), 0);
    /* Whether or not the getter is asleep yet, it can only finish with the
     * buffer we give back now. */
    cbf_buffer_unref(only);
    void *got;
    pthread_join(t, &got);
    assert_ptr_equal(got, only);
    cbf_buffer_unref(got);
    cbf_error err;
    assert_int_equal(cbf_pool_destroy(p, &err), CBF_OK);
}

static void test_bad_config(void **st)
{
    (void)st;
    cbf_pool_config c = {.name = "t.zero", .kind = CBF_MEM_HOST, .count = 0, .size = 8};
    cbf_pool *p = (cbf_pool *)0x1;
    cbf_error err;
    assert_int_equal(cbf_pool_create(&c, &p, &err), CBF_EINVAL);
    assert_null(p);
    assert_non_null(strstr(err.msg, "t.zero"));
}

static void test_gpu_pools(void **st)
{
    (void)st;
    cbf_error err;
    if (cbf_gpu_count() == 0) {
        cbf_pool_config c = {.name = "t.pinned", .kind = CBF_MEM_PINNED, .count = 2, .size = 8};
        cbf_pool *p = NULL;
        assert_int_equal(cbf_pool_create(&c, &p, &err), CBF_ENOTSUP);
        assert_null(p);
        assert_non_null(strstr(err.msg, "t.pinned"));
        skip();
    }
#ifdef CBF_HAVE_CUDA
    const size_t n = 1 << 20;
    uint32_t *ref = malloc(n), *back = malloc(n);
    assert_non_null(ref);
    assert_non_null(back);
    srand(12345);
    for (size_t i = 0; i < n / 4; i++)
        ref[i] = (uint32_t)rand() * 2654435761u + 1u;
    cbf_mem_kind kinds[] = {CBF_MEM_PINNED, CBF_MEM_DEVICE};
    for (int k = 0; k < 2; k++) {
        cbf_pool *p = make(k ? "t.device" : "t.pinned", kinds[k], 3, n);
        cbf_buffer *b;
        assert_int_equal(cbf_pool_get(p, &b), CBF_OK);
        assert_non_null(b->event);
        assert_int_equal(b->kind, kinds[k]);
        cudaStream_t s;
        assert_int_equal(cudaStreamCreate(&s), cudaSuccess);
        /* An async copy on a stream, then the event: copy_to_host must wait
         * for it rather than read a half-written buffer. */
        assert_int_equal(cudaMemcpyAsync(b->data, ref, n, cudaMemcpyDefault, s), cudaSuccess);
        assert_int_equal(cbf_buffer_record(b, s, &err), CBF_OK);
        memset(back, 0xEE, n); /* poison */
        assert_int_equal(cbf_buffer_copy_to_host(b, back, n, &err), CBF_OK);
        assert_memory_equal(back, ref, n);
        cudaStream_t s2;
        assert_int_equal(cudaStreamCreate(&s2), cudaSuccess);
        assert_int_equal(cbf_buffer_wait_stream(b, s2, &err), CBF_OK);
        assert_int_equal(cudaStreamSynchronize(s2), cudaSuccess);
        assert_int_equal(cbf_buffer_sync_host(b, &err), CBF_OK);
        cudaStreamDestroy(s);
        cudaStreamDestroy(s2);
        cbf_buffer_unref(b);
        assert_int_equal(cbf_pool_destroy(p, &err), CBF_OK);
    }
    free(ref);
    free(back);
#endif
}

static int all_bytes(const void *p, size_t n, uint8_t v)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++)
        if (b[i] != v)
            return 0;
    return 1;
}

/* A consumer that reads a buffer after its last reference went back sees
 * the poison, in the payload, the flags, aux and the metadata; one that
 * still holds a reference (fan-out) sees the data. */
static void test_poison_on_return(void **st)
{
    (void)st;
    const char *was = getenv("CBF_POOL_POISON");
    setenv("CBF_POOL_POISON", "1", 1);
    cbf_pool *p = make("t.poison", CBF_MEM_HOST, 2, 64);
    cbf_buffer *b;
    assert_int_equal(cbf_pool_get(p, &b), CBF_OK);
    memset(b->data, 0x11, 64);
    b->timestamp = 1234;
    b->present[3] = 0;
    memset(b->aux, 0x22, 24);
    cbf_buffer_ref(b); /* a second consumer */
    cbf_buffer_unref(b);
    assert_true(all_bytes(b->data, 64, 0x11));
    assert_int_equal(b->timestamp, 1234);
    cbf_buffer_unref(b); /* the last reference: back to the pool */
    assert_true(all_bytes(b->data, 64, 0xa5));
    assert_true(all_bytes(b->present, 7, 0xa5));
    assert_true(all_bytes(b->aux, 24, 0xa5));
    assert_true(all_bytes(&b->timestamp, sizeof b->timestamp, 0xa5));
    /* The next holder gets fresh metadata as ever. */
    cbf_buffer *again;
    assert_int_equal(cbf_pool_get(p, &again), CBF_OK);
    assert_ptr_equal(again, b);
    assert_int_equal(again->timestamp, 0);
    assert_true(all_bytes(again->present, 7, 1));
    cbf_buffer_unref(again);
    cbf_error err;
    assert_int_equal(cbf_pool_destroy(p, &err), CBF_OK);
    /* Off: what was written stays. */
    setenv("CBF_POOL_POISON", "0", 1);
    p = make("t.plain", CBF_MEM_HOST, 2, 64);
    assert_int_equal(cbf_pool_get(p, &b), CBF_OK);
    memset(b->data, 0x11, 64);
    cbf_buffer_unref(b);
    assert_true(all_bytes(b->data, 64, 0x11));
    assert_int_equal(cbf_pool_destroy(p, &err), CBF_OK);
#ifdef CBF_HAVE_CUDA
    if (cbf_gpu_count() > 0) {
        setenv("CBF_POOL_POISON", "1", 1);
        p = make("t.dpoison", CBF_MEM_DEVICE, 2, 4096);
        assert_int_equal(cbf_pool_get(p, &b), CBF_OK);
        assert_int_equal(cudaMemset(b->data, 0x11, 4096), cudaSuccess);
        void *d = b->data;
        cbf_buffer_unref(b);
        uint8_t back[4096];
        assert_int_equal(cudaMemcpy(back, d, sizeof back, cudaMemcpyDeviceToHost), cudaSuccess);
        assert_true(all_bytes(back, sizeof back, 0xa5));
        assert_int_equal(cbf_pool_destroy(p, &err), CBF_OK);
    }
#endif
    if (was)
        setenv("CBF_POOL_POISON", was, 1);
    else
        unsetenv("CBF_POOL_POISON");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_get_ref_unref),
        cmocka_unit_test(test_leak_detected),
        cmocka_unit_test(test_get_blocks_until_returned),
        cmocka_unit_test(test_bad_config),
        cmocka_unit_test(test_gpu_pools),
        cmocka_unit_test(test_poison_on_return),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
