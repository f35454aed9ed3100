/* beamctl.h: the beamformer's beams as a control client sees them: names,
 * the weights, delays and quantisation gains in force, the changes waiting
 * for their timestamps (stage/timed.h, one queue per beam and kind), the
 * `beam-weights`, `beam-delays` and `beam-quant-gains` requests, and the
 * per-beam text sensors katgpucbf names (<beam>.weight, .delay,
 * .quantiser-gain, .beng-clip-cnt). Everything here runs on the node's
 * thread (requests are handed to it between buffers). */
#ifndef CBF_BEAMCTL_H
#define CBF_BEAMCTL_H

#include <cbf/cbf.h>

#include <stdint.h>

#include "beamform.h"
#include "stage/timed.h"

/* A beam name and its longest sensor suffix fit a text sensor's name. */
#define CBF_BEAM_NAME_MAX 64

enum { BF_WEIGHTS, BF_DELAYS, BF_QGAIN, BF_KINDS };
enum { BF_T_WEIGHT, BF_T_DELAY, BF_T_QGAIN, BF_T_CLIP, BF_TEXTS };

typedef struct cbf_beamctl {
    int A, B;
    int64_t sbs;                 /* digitiser samples between spectra */
    double spacing, first, centre;
    char (*names)[CBF_BEAM_NAME_MAX];  /* [beam] */
    double *w;                   /* in force: [beam][antenna] weights */
    double *d;                   /* in force: [beam][antenna][delay s, fringe rad] */
    double *qg;                  /* in force: [beam] */
    int64_t *delay_at;           /* [beam]: timestamp the delays in force came at (0: YAML) */
    uint8_t *dirty;              /* [beam]: coefficients to remake */
    cbf_timed **q;               /* [beam][kind], made on a beam's first request */
    int64_t next;                /* first unprocessed timestamp, once have_next */
    int have_next;
    cbf_text **t;                /* [beam][BF_TEXTS] */
    uint64_t *clips;             /* [beam] */
    double *rose;                /* [beam]: monotonic seconds of the last rise; 0 never */
    uint8_t *clip_warn;          /* [beam]: the status last set */
} cbf_beamctl;

/* Names (`names`), weights, delays, fringe offsets and quantisation gains
 * from the parameters; the sensors made and set. spacing: Hz per channel;
 * first: absolute channel of local channel 0; centre: the band's centre
 * channel. */
int cbf_beamctl_init(cbf_beamctl *c, cbf_node *node, const cbf_params *p, int A, int B, int64_t sbs,
                double spacing, double first, double centre, cbf_error *err);
void cbf_beamctl_free(cbf_beamctl *c);

/* Remakes the rows of coef ([beam][antenna]) of beams changed since the
 * last call; 1 when any was, 0 when none, or an error. */
int cbf_beamctl_coef(cbf_beamctl *c, cbf_beam_coef *coef, cbf_error *err);
/* Puts into force every pending change at or before `upto` and shows it
 * in the sensors. */
void cbf_beamctl_apply(cbf_beamctl *c, int64_t upto);
/* The earliest pending change's timestamp; INT64_MAX when none. */
int64_t cbf_beamctl_next_change(const cbf_beamctl *c);
/* Every timestamp before next has been processed. */
void cbf_beamctl_processed(cbf_beamctl *c, int64_t next);
/* Adds one buffer's saturation counts per beam to the clip sensors. */
void cbf_beamctl_clips(cbf_beamctl *c, const uint64_t *sat);

#define CBF_BEAMCTL_N_REQUESTS 3
extern const cbf_request_decl cbf_beamctl_requests[CBF_BEAMCTL_N_REQUESTS];
int cbf_beamctl_request(cbf_beamctl *c, const cbf_request *req, cbf_reply *reply, cbf_error *err);

#endif
