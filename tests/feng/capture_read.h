/* capture_read.h: reads what the feng_capture test sink (capture.c) wrote:
 * per buffer its timestamp, presence flags, aux bytes and payload. */
#ifndef FENG_CAPTURE_READ_H
#define FENG_CAPTURE_READ_H

#include <stddef.h>
#include <stdint.h>

typedef struct capbuf {
    int64_t ts;
    uint64_t np, as, bytes;
    uint8_t *present, *aux, *data;
} capbuf;

typedef struct capture {
    size_t n;
    capbuf b[128];
} capture;

/* Fails the running cmocka test when the file is missing or cut short. */
void read_capture(const char *path, capture *c);
void free_capture(capture *c);
/* The captured buffer with timestamp ts; fails the test when there is none. */
const capbuf *capture_find(const capture *c, int64_t ts);

#endif
