/* cbf/port.h: ports, their descriptors, and moving buffers along edges.
 *
 * An edge is a bounded queue (depth from YAML). Sending to a full queue
 * blocks the sender: back-pressure, never a drop. An output wired to several
 * inputs gives each consumer its own reference to the same buffer. */
#ifndef CBF_PORT_H
#define CBF_PORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "cbf/buffer.h"
#include "cbf/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum cbf_dtype {
    CBF_DTYPE_U8, CBF_DTYPE_I8, CBF_DTYPE_I16, CBF_DTYPE_I32, CBF_DTYPE_I64,
    CBF_DTYPE_U64, CBF_DTYPE_F32, CBF_DTYPE_F64,
    CBF_DTYPE_CI4,    /* complex 4-bit, one byte: real in the high nibble */
    CBF_DTYPE_CI8,    /* complex int8: [re, im] */
    CBF_DTYPE_CI32,   /* complex int32 */
    CBF_DTYPE_CI64,   /* complex int64 */
    CBF_DTYPE_CF32,   /* complex float32 */
    CBF_DTYPE_PACKED, /* bit-packed signed samples, big-endian; desc.bits per sample;
                         the innermost axis counts bytes */
} cbf_dtype;

const char *cbf_dtype_name(cbf_dtype t);
/* Bytes per element; 0 for CBF_DTYPE_PACKED. */
size_t cbf_dtype_size(cbf_dtype t);

#define CBF_MAX_DIMS 6
#define CBF_AXIS_NAME_MAX 24
#define CBF_MAX_ATTRS 24
#define CBF_ATTR_NAME_MAX 40

/* What one buffer on a port holds. Set by the producer in its init; read by
 * consumers in theirs (the core initialises nodes upstream first). */
typedef struct cbf_port_desc {
    const char *type;             /* which buffer type this stream is (static string): one of
                                     the output's declared alternatives; NULL when it declares
                                     one type (the core fills it in for consumers) */
    cbf_dtype dtype;
    int bits;                     /* CBF_DTYPE_PACKED: bits per sample */
    int ndim;
    size_t shape[CBF_MAX_DIMS];
    char axes[CBF_MAX_DIMS][CBF_AXIS_NAME_MAX];   /* "antenna", "pol", "channel", ... */
    cbf_mem_kind mem;             /* where the payload lives */
    size_t n_present;             /* presence flags per buffer */
    const char *present_axis;     /* what one flag covers: "heap", "batch", ... (static string) */
    size_t aux_size;              /* side data bytes per buffer */
    const char *aux_layout;       /* how to read aux, e.g. "u64[pol] power_sum" (static string) */
    int64_t timestamp_step;       /* digitiser samples from one buffer to the next */
    int n_attrs;                  /* numeric facts a consumer or a sink needs */
    char attr_names[CBF_MAX_ATTRS][CBF_ATTR_NAME_MAX];
    double attr_values[CBF_MAX_ATTRS];
} cbf_port_desc;

/* Helpers for building descriptors. */
void cbf_port_desc_init(cbf_port_desc *d, cbf_dtype dtype, cbf_mem_kind mem);
/* Appends an axis (outermost first). Returns 0 or CBF_EINVAL (too many). */
int cbf_port_desc_add_axis(cbf_port_desc *d, const char *name, size_t len);
int cbf_port_desc_set_attr(cbf_port_desc *d, const char *name, double value);
/* Returns 0 and sets *value, or CBF_EINVAL if absent. */
int cbf_port_desc_get_attr(const cbf_port_desc *d, const char *name, double *value);
/* Product of the shape (elements, or bytes for PACKED). */
size_t cbf_port_desc_elements(const cbf_port_desc *d);
size_t cbf_port_desc_bytes(const cbf_port_desc *d);

typedef struct cbf_port cbf_port;
typedef struct cbf_node cbf_node;

/* Producer side, in init. */
int cbf_port_set_desc(cbf_port *out, const cbf_port_desc *d, cbf_error *err);
/* Consumer side, in init: the descriptor the upstream producer set. */
const cbf_port_desc *cbf_port_get_desc(const cbf_port *in);

/* Receives the next buffer (the caller owns one reference). Returns 0,
 * CBF_EOS when the producer has finished and the queue is empty, or
 * CBF_ESTOPPED when the engine is aborting. */
int cbf_port_recv(cbf_port *in, cbf_buffer **out);
/* Sends a buffer, handing over the caller's reference (also on failure).
 * Blocks while a consumer's queue is full. Returns 0 or CBF_ESTOPPED. An
 * output with no edges drops the reference: an optional, unwired output. */
int cbf_port_send(cbf_port *out, cbf_buffer *buf);

/* Whether this output feeds an input declared CBF_PORT_WRITES_INPUT (its
 * only consumer, then): its buffers may come back changed. A producer that
 * would skip rewriting data a returning buffer still holds checks this. */
bool cbf_port_feeds_writer(const cbf_port *out);

const char *cbf_port_name(const cbf_port *p);
/* The node at the other end of an input port (for sinks that record it). */
cbf_node *cbf_port_peer(const cbf_port *in);

#ifdef __cplusplus
}
#endif
#endif
