/* stage/path.h: the path a stage's work takes, CPU or GPU, for a stage
 * whose kernels read its input where it is (the correlator, beamformer
 * and xbengine plugins): what each would otherwise set up and tear down
 * again.
 *
 * The CPU path reads host or pinned input in place (waiting on the host
 * for a pinned buffer's event) and refuses device input. The GPU path
 * queues the kernels on one stream of the stage's; it reads device input
 * in place and uploads host or pinned input into two device slots in turn
 * (stage/flight.h's upload), the kernels' stream waiting for the upload
 * on the GPU. A build without CUDA refuses the GPU path. */
#ifndef CBF_STAGE_PATH_H
#define CBF_STAGE_PATH_H

#include <stddef.h>
#include <stdint.h>
#include "cbf/buffer.h"
#include "cbf/error.h"
#include "cbf/node.h"
#include "cbf/port.h"
#include "stage/flight.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cbf_stage_path {
    const cbf_port_desc *in;     /* the input port's descriptor */
    int gpu;                     /* the node's path (cbf_node_use_gpu) */
    void *stream;                /* GPU: the kernels' (cudaStream_t); NULL on the CPU */
    cbf_stage_upload up;         /* GPU, host input: the upload slots */
} cbf_stage_path;

/* In init, first: the descriptor of input `port` (index 0) and the
 * node's path; CBF_ENOTSUP for the GPU in a build without CUDA,
 * CBF_ECONFIG for device input on the CPU path. On the GPU, the kernels'
 * stream. On failure cbf_stage_path_fini frees what was made (p is zeroed
 * first). */
int cbf_stage_path_open(cbf_stage_path *p, cbf_node *node, const char *port, cbf_error *err);
/* Once the stage knows how many bytes of each input buffer its kernels
 * read: on the GPU with host or pinned input, the upload slots; nothing
 * otherwise. */
int cbf_stage_path_upload_init(cbf_stage_path *p, size_t bytes, cbf_error *err);
/* Where the kernels read buf from, in *data: its own data on the CPU path
 * (after its event, for a pinned buffer) and for device input (the
 * kernels' stream waits for its event); for host input on the GPU, the
 * slot it is being uploaded into. The caller holds buf until every kernel
 * reading it is done. */
int cbf_stage_path_put(cbf_stage_path *p, const cbf_buffer *buf, const uint8_t **data,
                       cbf_error *err);
/* Every kernel reading the last put's data is queued on `stream` (the
 * kernels' or, where a second stream reads it too, the later one): the
 * slot may take the next upload once that stream has passed here. */
int cbf_stage_path_read(cbf_stage_path *p, void *stream, cbf_error *err);
/* In fini, before what the kernels use is freed: waits for the kernels'
 * stream and the uploads (after an error, work may still be queued), then
 * frees the slots and the stream. Any other stream reading the input is
 * the caller's to wait for first. */
void cbf_stage_path_fini(cbf_stage_path *p);

#ifdef __cplusplus
}
#endif
#endif
