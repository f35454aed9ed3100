/* window.h: the receiver's chunk window (private to the plugin).
 *
 * A chunk is n_flags x per_flag pieces of piece_bytes each, piece p at
 * bytes [p x piece_bytes, (p + 1) x piece_bytes): one piece is one heap's
 * payload (a digitiser heap; an F-engine heap's channel range), and a flag
 * is present once all its per_flag pieces are complete.
 *
 * Packets are placed one by one, straight from the receive buffers into the
 * chunk (the heap is never assembled elsewhere): a piece is complete when
 * the payload bytes counted into it reach piece_bytes. So the packets of a
 * heap may arrive in any order and on any thread, as long as each says
 * which chunk and piece it belongs to.
 *
 * `n_ring` consecutive chunks are open at once; a packet for the chunk
 * after the newest open one sends the oldest on (the stream's own step),
 * and a packet for a chunk already sent is late. A packet further ahead
 * would have the window skip chunks: it moves the window only once the
 * stream agrees, `jump_packets` distinct packets for chunks within the
 * window's width of one another (one spoofed or corrupt timestamp must not
 * flush the window through thousands of empty chunks and make the genuine
 * stream late). Until then they are held (a copy of each, up to hold_bytes):
 * placed when the jump is taken, so a genuine jump or gap loses nothing;
 * counted as outliers and dropped when the stream goes on without them. A packet more than `max_ahead` chunks beyond the newest open chunk
 * is dropped and counted whatever agrees with it. When no packet has fitted the window
 * for `resync_ns` while such packets keep coming, the stream itself has
 * moved (a digitiser resynchronised, forwards or back): the open chunks go
 * on, and the window restarts at the new place. Downstream then sees a jump
 * in timestamps, not a run of empty chunks.
 * Thread-safe: the socket threads place packets concurrently, a batch at a
 * time: the lock is taken once per batch to claim the packets' places
 * (byte counts, flags), and the bytes are copied after it is released, by
 * each thread into its own places; a chunk leaves only once no thread is
 * still copying into it. */
#ifndef CBF_RX_WINDOW_H
#define CBF_RX_WINDOW_H

#include <cbf/cbf.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct rx_chunk {
    cbf_buffer *buf;
    uint32_t *got;      /* per piece: payload bytes counted in */
    uint16_t *done;     /* per flag: pieces complete */
    size_t flags_done;  /* flags whose pieces are all complete */
    atomic_int writers; /* threads with bytes claimed here still to copy */
} rx_chunk;

/* Bytes to place: a packet's payload, or a whole heap assembled elsewhere. */
typedef struct rx_place {
    int64_t idx;        /* chunk */
    size_t piece;       /* heap within the chunk */
    size_t offset;      /* of data within the piece */
    const uint8_t *data;
    size_t len;
    bool first;         /* holds the heap's byte 0: a late one counts a late heap */
    uint32_t packets;   /* packets it stands for (a heap assembled elsewhere: all of them) */
    uint32_t note;      /* with first, when piece_notes: the heap's aux word (clip count) */
    rx_chunk *claimed;  /* private */
} rx_place;

typedef struct rx_window {
    pthread_mutex_t lock;
    cbf_port *out;
    cbf_pool *pool;
    size_t n_flags, per_flag, piece_bytes;
    int64_t chunk_step;            /* samples per chunk */
    bool piece_notes;              /* aux is a uint32 per piece, from rx_place.note; 0 for a
                                      piece not complete; their sum counted in c_notes */
    rx_chunk *ring;
    int n_ring;
    int64_t base, last_index;
    int64_t max_ahead;             /* chunks past base + n_ring - 1 a packet may ask for */
    uint32_t jump_packets;         /* packets that must agree before the window skips chunks */
    size_t hold_bytes;             /* the most bytes of one place held meanwhile */
    /* Where the stream may have jumped to (lock held): the first chunk asked
     * for, the packets that agree, and copies of those held (hold[i].p.data
     * points at hold[i].bytes). */
    int64_t cand_idx;
    uint64_t cand_packets;
    struct rx_held {
        rx_place p;
        uint8_t *bytes;
    } *hold;
    int n_hold, n_held;
    uint64_t accepted;             /* packets accepted in this batch, not yet in c_accepted */
    uint64_t resync_ns;
    uint64_t now_ns, last_fit_ns;  /* this batch's time; the last packet that fitted */
    bool started;
    /* A chunk at the window's tail whose every flag is complete leaves at
     * once, not only when the window moves past it: the latency is then the
     * stream's own, not chunks_in_flight chunks of it (seconds at a slow
     * rate). A packet again for a chunk gone so is late, not duplicate. */
    bool release_complete;
    bool complete_pending;         /* a chunk became complete in this batch */
    uint64_t seq;
    atomic_int send_rc;            /* first failure to get or send a buffer; read by any thread */
    /* Per packet (each packet placed lands in exactly one of accepted,
     * late, duplicate, ahead, outlier, stopped) and per heap or chunk. */
    cbf_counter *c_accepted, *c_late_packets, *c_duplicate, *c_ahead, *c_outlier, *c_stopped;
    cbf_counter *c_heaps, *c_incomplete, *c_late_heaps, *c_chunks, *c_missing, *c_notes;
    cbf_gauge *g_sync;             /* rx.synchronised: 1 when the last chunk was whole */
    /* katgpucbf's rx.timestamp, rx.unixtime and rx.missing-unixtime: the
     * last chunk sent, and the last one with data missing; UNIX times
     * through the engine's sync_time (NaN without one). */
    const cbf_node *node;
    cbf_counter *c_rx_ts;
    cbf_gauge *g_rx_unix, *g_missing_unix;
} rx_window;

/* The counters and out, pool, n_flags, per_flag, piece_bytes, chunk_step,
 * max_ahead, jump_packets, hold_bytes, resync_ns and release_complete must
 * be set before. */
int rx_window_init(rx_window *w, int n_ring, cbf_error *err);
void rx_window_free(rx_window *w);
/* Claims each place (counts its bytes into its piece) and copies the bytes;
 * places already late, too far ahead, outliers, or bytes beyond a complete
 * piece, are counted (by their packets) and dropped. */
void rx_window_place(rx_window *w, rx_place *places, int n, uint64_t now_ns);
/* At the end: sends every chunk up to the last one that saw a packet. */
int rx_window_drain(rx_window *w);

#endif
