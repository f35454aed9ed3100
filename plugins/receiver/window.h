/* window.h: the receiver's chunk window (private to the plugin).
 *
 * Heaps are placed into output chunks by timestamp. `n_ring` consecutive
 * chunks are open at once; a heap for a newer chunk sends the oldest ones
 * on, and a heap for a chunk already sent is late. Thread-safe: the socket
 * threads place heaps concurrently, a batch at a time: the lock is taken
 * once per batch to claim the heaps' places (flags, piece counts), and the
 * bytes are copied after it is released, by each thread into its own
 * places; a chunk leaves only once no thread is still copying into it. */
#ifndef CBF_RX_WINDOW_H
#define CBF_RX_WINDOW_H

#include <cbf/cbf.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct rx_chunk {
    cbf_buffer *buf;
    uint16_t *pieces;   /* per flag: pieces received (feng: channel ranges) */
    atomic_int writers; /* threads with bytes claimed here still to copy */
} rx_chunk;

/* One heap to place: its chunk, flag, byte offset, bytes and the pieces
 * that make its flag present. */
typedef struct rx_place {
    int64_t idx;
    size_t flag, offset;
    const uint8_t *data;
    size_t len;
    unsigned need;
    rx_chunk *claimed;  /* private */
} rx_place;

typedef struct rx_window {
    pthread_mutex_t lock;
    cbf_port *out;
    cbf_pool *pool;
    size_t n_flags, bytes;
    /* Bytes behind each flag when flag f is exactly bytes [f x flag_bytes,
     * (f + 1) x flag_bytes) and one piece fills them (digitiser heaps): a
     * chunk then zeroes only what is missing as it leaves, instead of all
     * of it as it opens. 0 = zeroed at opening. */
    size_t flag_bytes;
    int64_t chunk_step;            /* samples per chunk */
    rx_chunk *ring;
    int n_ring;
    int64_t base, last_index;
    bool started;
    uint64_t seq;
    atomic_int send_rc;            /* first failure to get or send a buffer; read by any thread */
    cbf_counter *c_late_heaps, *c_bad_heaps, *c_chunks, *c_missing;
} rx_window;

/* The counters and out, pool, n_flags, bytes, flag_bytes, chunk_step must be set before. */
int rx_window_init(rx_window *w, int n_ring, cbf_error *err);
void rx_window_free(rx_window *w);
/* Copies each heap's bytes into chunk idx at offset and counts it towards
 * flag, which becomes present once `need` pieces have come. */
void rx_window_place(rx_window *w, rx_place *heaps, int n);
/* At the end: sends every chunk up to the last one that saw a heap. */
int rx_window_drain(rx_window *w);

#endif
