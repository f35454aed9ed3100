/* ring.h: index arithmetic of a ring of packet slots shared with a NIC.
 *
 * head counts slots handed out (filled or posted), tail counts slots given
 * back (sent, or consumed and reposted); both only grow, so head - tail is
 * the slots in use even after the 64-bit counters' slot numbers wrap around
 * the ring, and a completion's index (kept in the work request) says
 * exactly which slots it releases. */
#ifndef CBF_RING_H
#define CBF_RING_H

#include <stdbool.h>
#include <stdint.h>

typedef struct cbf_ring {
    uint64_t head, tail;
    uint32_t size;
} cbf_ring;

static inline uint32_t cbf_ring_slot(const cbf_ring *r, uint64_t index) { return (uint32_t)(index % r->size); }
static inline uint32_t cbf_ring_used(const cbf_ring *r) { return (uint32_t)(r->head - r->tail); }
static inline uint32_t cbf_ring_free(const cbf_ring *r) { return r->size - cbf_ring_used(r); }

/* Index of the next slot to hand out; the caller has checked cbf_ring_free. */
static inline uint64_t cbf_ring_push(cbf_ring *r) { return r->head++; }

/* Gives back every slot up to and including index (a completion of the
 * work request that carried it). False, changing nothing, when index is not
 * in use: a completion the ring never handed out, or one already seen. */
static inline bool cbf_ring_release_through(cbf_ring *r, uint64_t index)
{
    if (index < r->tail || index >= r->head)
        return false;
    r->tail = index + 1;
    return true;
}

#endif
