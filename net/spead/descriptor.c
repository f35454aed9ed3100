/* Item descriptors as spead2 writes and reads them: the value of item 0x0005
 * is itself a one-packet SPEAD heap (heap counter 1) whose items are the
 * descriptor's id (immediate), name, description, format, shape and, for
 * numpy-typed items, the .npy header dict. In SPEAD-64-48 a format field is
 * a type character and a 16-bit bit width; a shape entry is a flag byte
 * (nonzero: variable length) and a 48-bit size. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "spead.h"
#include "wire.h"

#define FIELD_BYTES 3
#define DIM_BYTES 7
#define NPY_MAX 256

static size_t numpy_header(const cbf_spead_descriptor *d, char *out, size_t cap)
{
    size_t n = (size_t)snprintf(out, cap, "{'descr': '%s', 'fortran_order': %s, 'shape': (",
                                d->dtype, d->fortran_order ? "True" : "False");
    for (int i = 0; i < d->ndim && n < cap; i++)
        n += (size_t)snprintf(out + n, cap - n, "%s%" PRIu64, i ? ", " : "", d->shape[i]);
    if (n < cap)   /* a one-element tuple needs its trailing comma */
        n += (size_t)snprintf(out + n, cap - n, "%s)}", d->ndim == 1 ? "," : "");
    return n < cap ? n : 0;
}

static void named(cbf_spead_descriptor *d, uint16_t id, const char *name, const char *doc)
{
    memset(d, 0, sizeof(*d));
    d->id = id;
    snprintf(d->name, sizeof d->name, "%s", name);
    snprintf(d->description, sizeof d->description, "%s", doc);
}

void cbf_spead_descriptor_u48(cbf_spead_descriptor *d, uint16_t id, const char *name, const char *doc)
{
    named(d, id, name, doc);
    d->n_fields = 1;
    d->field_code[0] = 'u';
    d->field_bits[0] = 48;
}

void cbf_spead_descriptor_array(cbf_spead_descriptor *d, uint16_t id, const char *name, const char *doc,
                                const char *dtype, int ndim, const size_t *shape)
{
    named(d, id, name, doc);
    snprintf(d->dtype, sizeof d->dtype, "%s", dtype);
    d->ndim = ndim < CBF_SPEAD_DESC_MAX_DIMS ? ndim : CBF_SPEAD_DESC_MAX_DIMS;
    for (int i = 0; i < d->ndim; i++)
        d->shape[i] = shape[i];
}

size_t cbf_spead_descriptor_encode(const cbf_spead_descriptor *d, uint8_t *buf, size_t cap)
{
    if (d->ndim < 0 || d->ndim > CBF_SPEAD_DESC_MAX_DIMS || d->n_fields < 0 ||
        d->n_fields > CBF_SPEAD_DESC_MAX_FIELDS)
        return 0;
    bool numpy = d->dtype[0] != '\0';
    char npy[NPY_MAX];
    size_t npy_len = 0;
    if (numpy && !(npy_len = numpy_header(d, npy, sizeof npy)))
        return 0;
    uint8_t format[CBF_SPEAD_DESC_MAX_FIELDS * FIELD_BYTES];
    size_t format_len = numpy ? 0 : (size_t)d->n_fields * FIELD_BYTES;
    for (int i = 0; !numpy && i < d->n_fields; i++) {
        format[i * FIELD_BYTES] = (uint8_t)d->field_code[i];
        spead_store_be(format + i * FIELD_BYTES + 1, d->field_bits[i], 2);
    }
    uint8_t shape[CBF_SPEAD_DESC_MAX_DIMS * DIM_BYTES];
    for (int i = 0; i < d->ndim; i++) {
        shape[i * DIM_BYTES] = 0;
        spead_store_be(shape + i * DIM_BYTES + 1, d->shape[i], 6);
    }
    cbf_spead_item_out items[] = {
        {.id = CBF_SPEAD_DESC_ID, .immediate = true, .value = d->id},
        {.id = CBF_SPEAD_DESC_NAME, .data = d->name, .len = strnlen(d->name, sizeof d->name)},
        {.id = CBF_SPEAD_DESC_DESCRIPTION, .data = d->description,
         .len = strnlen(d->description, sizeof d->description)},
        {.id = CBF_SPEAD_DESC_FORMAT, .data = format, .len = format_len},
        {.id = CBF_SPEAD_DESC_SHAPE, .data = shape, .len = (size_t)d->ndim * DIM_BYTES},
        {.id = CBF_SPEAD_DESC_DTYPE, .data = npy, .len = npy_len},
    };
    int n_items = numpy ? 6 : 5;
    size_t payload = 0;
    for (int i = 1; i < n_items; i++)
        payload += items[i].len;
    size_t need = CBF_SPEAD_HEADER_BYTES + (size_t)(4 + n_items) * CBF_SPEAD_POINTER_BYTES + payload;
    cbf_spead_encoder e;
    if (need > cap || cbf_spead_encoder_init(&e, 1, items, n_items, need, false, NULL))
        return 0;
    size_t len = cbf_spead_encoder_next(&e, buf);
    return cbf_spead_encoder_next(&e, buf + len) == 0 ? len : 0;
}

/* Minimal reader for the dict spead2 writes:
 * {'descr': '<i4', 'fortran_order': False, 'shape': (3, 2), } */
static int parse_numpy(const char *s, cbf_spead_descriptor *d, cbf_error *err)
{
    const char *p = strstr(s, "'descr':");
    if (!p)
        return cbf_error_set(err, CBF_EINVAL, "spead descriptor 0x%x: numpy header has no 'descr'", d->id);
    p = strchr(p + 8, '\'');
    const char *q = p ? strchr(p + 1, '\'') : NULL;
    if (!q || (size_t)(q - p - 1) >= sizeof d->dtype)
        return cbf_error_set(err, CBF_EINVAL, "spead descriptor 0x%x: numpy 'descr' unreadable", d->id);
    memcpy(d->dtype, p + 1, (size_t)(q - p - 1));
    d->dtype[q - p - 1] = '\0';
    p = strstr(s, "'fortran_order':");
    d->fortran_order = p && strncmp(p + 16 + strspn(p + 16, " "), "True", 4) == 0;
    p = strstr(s, "'shape':");
    p = p ? strchr(p, '(') : NULL;
    if (!p)
        return cbf_error_set(err, CBF_EINVAL, "spead descriptor 0x%x: numpy header has no shape", d->id);
    d->ndim = 0;
    for (p++;;) {
        p += strspn(p, " ,");
        if (*p == ')')
            return 0;
        char *end;
        unsigned long long v = strtoull(p, &end, 10);
        if (end == p || d->ndim == CBF_SPEAD_DESC_MAX_DIMS)
            return cbf_error_set(err, CBF_EINVAL, "spead descriptor 0x%x: numpy shape unreadable", d->id);
        d->shape[d->ndim++] = v;
        p = end;
    }
}

static int copy_text(char *dst, size_t cap, const uint8_t *src, size_t len)
{
    if (len >= cap)
        return -1;
    memcpy(dst, src, len);
    dst[len] = '\0';
    return 0;
}

int cbf_spead_descriptor_decode(const uint8_t *buf, size_t len, cbf_spead_descriptor *d,
                                cbf_error *err)
{
    cbf_spead_packet *pkt = malloc(sizeof(*pkt));
    if (!pkt)
        return cbf_error_set(err, CBF_ENOMEM, "spead descriptor: out of memory");
    int rc = 0;
    cbf_spead_reason r = cbf_spead_decode(buf, len, pkt);
    memset(d, 0, sizeof(*d));
    if (r != CBF_SPEAD_OK || pkt->heap_offset != 0 || pkt->payload_len != pkt->heap_size) {
        rc = cbf_error_set(err, CBF_EINVAL, "spead descriptor: not a one-packet heap (%s)",
                           cbf_spead_reason_name(r));
        goto out;
    }
    cbf_spead_heap h = {.cnt = pkt->heap_cnt, .size = pkt->heap_size, .received = pkt->heap_size,
                        .complete = true, .n_items = pkt->n_items, .items = pkt->items,
                        .payload = pkt->payload};
    const cbf_spead_item *id = cbf_spead_heap_find(&h, CBF_SPEAD_DESC_ID);
    if (!id || !id->immediate) {
        rc = cbf_error_set(err, CBF_EINVAL, "spead descriptor: no immediate id (0x14)");
        goto out;
    }
    d->id = (uint16_t)(id->value & 0x7fff);
    for (int i = 0; i < h.n_items && !rc; i++) {
        const cbf_spead_item *it = &h.items[i];
        const uint8_t *v;
        size_t n;
        if (it->immediate || cbf_spead_heap_item_bytes(&h, it, &v, &n))
            continue;
        const char *field = NULL;
        switch (it->id) {
        case CBF_SPEAD_DESC_NAME:
            field = copy_text(d->name, sizeof d->name, v, n) ? "name" : NULL;
            break;
        case CBF_SPEAD_DESC_DESCRIPTION:
            field = copy_text(d->description, sizeof d->description, v, n) ? "description" : NULL;
            break;
        case CBF_SPEAD_DESC_FORMAT:
            if (n % FIELD_BYTES || n / FIELD_BYTES > CBF_SPEAD_DESC_MAX_FIELDS) {
                field = "format";
                break;
            }
            d->n_fields = (int)(n / FIELD_BYTES);
            for (int f = 0; f < d->n_fields; f++) {
                d->field_code[f] = (char)v[f * FIELD_BYTES];
                d->field_bits[f] = (uint16_t)spead_load_be(v + f * FIELD_BYTES + 1, 2);
            }
            break;
        case CBF_SPEAD_DESC_SHAPE:
            if (n % DIM_BYTES || n / DIM_BYTES > CBF_SPEAD_DESC_MAX_DIMS) {
                field = "shape";
                break;
            }
            if (d->dtype[0])
                break; /* the numpy header's shape stands */
            d->ndim = (int)(n / DIM_BYTES);
            for (int k = 0; k < d->ndim; k++)
                d->shape[k] = spead_load_be(v + k * DIM_BYTES + 1, 6);
            break;
        case CBF_SPEAD_DESC_DTYPE: {
            char npy[NPY_MAX];
            if (copy_text(npy, sizeof npy, v, n)) {
                field = "numpy header";
                break;
            }
            rc = parse_numpy(npy, d, err);
            break;
        }
        default:
            break;
        }
        if (field)
            rc = cbf_error_set(err, CBF_EINVAL, "spead descriptor 0x%x: %s field malformed (%zu bytes)",
                               d->id, field, n);
    }
out:
    free(pkt);
    return rc;
}
