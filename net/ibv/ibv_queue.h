/* ibv_queue.h (private to net/ibv): the device, protection domain,
 * completion queue, raw-packet queue pair and registered ring that the
 * receive and send queues both need. */
#ifndef CBF_IBV_QUEUE_H
#define CBF_IBV_QUEUE_H

#include <stdlib.h>
#include "ibv.h"

typedef struct cbf_ibv_queue {
    cbf_ibv_nic nic;
    struct ibv_context *ctx;
    struct ibv_pd *pd;
    struct ibv_comp_channel *chan;   /* receive: to sleep in poll() until a completion */
    struct ibv_cq *cq;
    struct ibv_qp *qp;
    struct ibv_mr *mr;
    uint8_t *mem;
    uint32_t slots;
    size_t slot_bytes;
} cbf_ibv_queue;

/* Probes the interface, opens its device and makes a raw-packet queue pair
 * (ready to receive; to send too when send) with a registered ring of
 * slots x slot_bytes. Closes everything on failure. */
int cbf_ibv_queue_open(cbf_ibv_queue *q, const char *iface_addr, uint32_t slots, size_t slot_bytes, bool send,
                       bool channel, cbf_error *err);
void cbf_ibv_queue_close(cbf_ibv_queue *q);

static inline uint8_t *cbf_ibv_slot(const cbf_ibv_queue *q, uint32_t slot) { return q->mem + (size_t)slot * q->slot_bytes; }

#endif
