/* dsim_signal.h: what dsim generates, as a value that can be replaced
 * while it runs. A spec is the signal's description (the YAML parameters
 * tones, combs, impulses, constants, noise, common_noise, and the replay
 * period); a signal is a spec made ready: its model and, in replay mode,
 * its packed period. The `signals` request builds a new signal from the
 * one that will be in force and queues it for its timestamp. */
#ifndef CBF_DSIM_SIGNAL_H
#define CBF_DSIM_SIGNAL_H

#include <cbf/cbf.h>

#include "dsim_model.h"
#include "dsim_replay.h"
#include "dsim_workers.h"

typedef struct cbf_dsim_spec {
    int n_tones, n_combs, n_impulses;
    cbf_dsim_tone *tones;
    cbf_dsim_comb *combs;
    cbf_dsim_impulse *impulses;
    double *constants;      /* [2 x antennas]; NULL: none */
    double noise, common_noise;
    int64_t period;         /* replay: samples per repeat; 0: compute mode */
} cbf_dsim_spec;

typedef struct cbf_dsim_signal {
    cbf_dsim_spec spec;
    cbf_dsim_model *model;
    cbf_dsim_period per;    /* replay only */
} cbf_dsim_signal;

/* The spec the node's YAML describes (p: the node's parameters). */
int cbf_dsim_spec_from_params(const cbf_params *p, int inputs, int64_t period,
                              cbf_dsim_spec *out, cbf_error *err);
/* A request's spec: base with every argument the request gives replaced
 * (flat lists, one group of the YAML record's fields per entry). */
int cbf_dsim_spec_from_request(const cbf_params *args, const cbf_dsim_spec *base, int inputs,
                               cbf_dsim_spec *out, cbf_error *err);
void cbf_dsim_spec_free(cbf_dsim_spec *s);

/* Makes the signal of spec (taking it over, freed on failure too) on the
 * fixed part of fixed (antennas, rate, bits, delays, seed). */
int cbf_dsim_signal_build(cbf_dsim_signal *sig, cbf_dsim_spec *spec, const cbf_dsim_config *fixed,
                          cbf_dsim_workers *w, cbf_error *err);
void cbf_dsim_signal_free(cbf_dsim_signal *sig);

#endif
