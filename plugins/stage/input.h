/* stage/input.h: the receive loop of a stage with one input, so each
 * plugin writes only what it does with a buffer. */
#ifndef CBF_STAGE_INPUT_H
#define CBF_STAGE_INPUT_H

#include <stdint.h>

#include "cbf/buffer.h"
#include "cbf/error.h"
#include "cbf/node.h"
#include "cbf/port.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Does the stage's work on one input buffer; the loop drops the reference
 * afterwards (take refs it to keep it). */
typedef int (*cbf_stage_take_fn)(void *ctx, cbf_buffer *buf, cbf_error *err);

/* Receives every buffer of input `port` (index 0) and hands it to take,
 * until the producer finishes (0), the engine stops or take fails (its
 * code). */
int cbf_stage_input_loop(cbf_node *node, const char *port, cbf_stage_take_fn take, void *ctx,
                         cbf_error *err);

/* An attribute the stage cannot work without, read from its input's
 * descriptor in init: 0, or CBF_ECONFIG naming the attribute. */
int cbf_stage_input_attr(const cbf_port_desc *d, const char *name, double *v, cbf_error *err);

/* katgpucbf's STREAM.chan-range of an X or B engine: the text sensor
 * `name` (katcp flags as cbf_text_katcp's) set to "(first,last)", the
 * channels of input d (first_channel on, `channels` of them), inclusive,
 * as xbgpu writes it (no space). */
void cbf_stage_chan_range(cbf_node *node, const char *name, unsigned flags, const cbf_port_desc *d,
                          int64_t channels);

#ifdef __cplusplus
}
#endif
#endif
