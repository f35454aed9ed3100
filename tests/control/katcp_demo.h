/* katcp_demo.h: two katcp servers in one process, built on libcbf's
 * public katcp API (cbf/katcp.h) as a program that is not an engine would
 * (the array's controller daemon): the cmocka test (test_katcp_server.c)
 * and the aiokatcp test's server program (katcp_serve.c) run the same.
 *
 * Server A, a "device", has a sensor table and these requests:
 *   ?meet N      slow: waits until N ?meet calls are running at once (all
 *                are answered ok N), or fails after 20 s with how many met;
 *   ?hold        slow: waits until ?release (for client time-outs);
 *   ?release     lets the ?hold calls go;
 *   ?count N     a thread of its own sets demo.counter to 1, 2, ... N;
 *   ?echo ARG... one #echo inform per argument, then ok and the count;
 *   ?quiet       returns without a reply (the server fails it);
 *   ?drop PREFIX removes the table's sensors so named; ?add NAME adds one.
 * Its table: demo.counter (integer), demo.level (float), demo.flag
 * (boolean), demo.state (discrete idle|busy), demo.where (address),
 * demo.when (timestamp), demo.note (string).
 *
 * Server B, a "controller", reads its sensors from a snapshot callback
 * (b.reads, integer: how often it was read) and has ?ask NAME ARG...:
 * slow, it calls NAME on server A with the C client and replies with A's
 * status, then A's reply arguments, with one #ask inform per inform A sent. */
#ifndef CBF_TEST_KATCP_DEMO_H
#define CBF_TEST_KATCP_DEMO_H

#include <pthread.h>
#include <stdbool.h>

#include "cbf/katcp.h"

typedef struct katcp_demo {
    cbf_katcp_server *a, *b;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int meeting, met_round;   /* ?meet callers inside now; rounds completed */
    bool released;            /* ?hold may return */
    pthread_t counter;
    bool counting;
    long reads;               /* B's snapshot callback calls */
} katcp_demo;

/* Opens and starts both servers on 127.0.0.1:0. 0 or an error. */
int katcp_demo_open(katcp_demo *d, cbf_error *err);
void katcp_demo_close(katcp_demo *d);

#endif
