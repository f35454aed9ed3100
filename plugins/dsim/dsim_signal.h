/* dsim_signal.h: what dsim generates, as a value that can be replaced
 * while it runs. A spec is the signal's description: cbf's own form (the
 * YAML parameters tones, combs, impulses, constants, noise, common_noise,
 * and the replay period) and, per input, an output of a program in
 * katgpucbf's signal language (dsim_lang.h) that replaces it; a signal is
 * a spec made ready: its model and, in replay mode, its packed period.
 * The `signals` request builds a new signal from the one that will be in
 * force and queues it for its timestamp. */
#ifndef CBF_DSIM_SIGNAL_H
#define CBF_DSIM_SIGNAL_H

#include <cbf/cbf.h>

#include "dsim_lang.h"
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
    int64_t period;         /* cbf's form, replay: samples per repeat; 0: compute mode */
    /* katgpucbf's language: what each input plays (a NULL prog: cbf's
     * form above), each holding a reference to its program, and the text
     * of the request that set the language last (katgpucbf's signals-orig). */
    int inputs;
    cbf_dsim_lang_input *lang;  /* [inputs]; NULL when no input plays one */
    char *lang_text;
} cbf_dsim_spec;

typedef struct cbf_dsim_signal {
    cbf_dsim_spec spec;
    cbf_dsim_model *model;
    cbf_dsim_period per;    /* replay only */
    int64_t repeat;         /* samples after which it repeats; 0: never (the `period` gauge) */
    char *text;             /* every input as katgpucbf writes it (the `signals` sensor) */
} cbf_dsim_signal;

/* What the language needs besides the text: the replay mode, the longest
 * period a request may ask (katgpucbf's max-period) and the entropy of a
 * wgn given none (NULL: the system's random source). */
typedef struct cbf_dsim_lang_ctx {
    bool replay;
    int64_t max_period;
    cbf_dsim_entropy_fn entropy;
    void *entropy_ctx;
} cbf_dsim_lang_ctx;

/* The spec the node's YAML describes (p: the node's parameters): cbf's
 * form, or with `signals` katgpucbf's language at `period` samples (one
 * output for every input, two (one per pol, each antenna its own parse)
 * or one per input); CBF_ECONFIG naming the YAML place. */
int cbf_dsim_spec_from_params(const cbf_params *p, int inputs, int64_t period,
                              const cbf_dsim_lang_ctx *lc, cbf_dsim_spec *out, cbf_error *err);
/* A request's spec. With `signals` (katgpucbf's language): two outputs
 * for antenna `antenna` (its two inputs; the others as in base), or for
 * every antenna each its own parse of the text (so a wgn without entropy
 * is independent between antennas, as between katgpucbf's dsims), or one
 * output per input; period `period` or max_period. Without: cbf's form,
 * base with every argument the request gives replaced (flat lists, one
 * group of the YAML record's fields per entry), on every input. */
int cbf_dsim_spec_from_request(const cbf_params *args, const cbf_dsim_spec *base, int inputs,
                               const cbf_dsim_lang_ctx *lc, cbf_dsim_spec *out, cbf_error *err);
void cbf_dsim_spec_free(cbf_dsim_spec *s);

/* Makes the signal of spec (taking it over, freed on failure too) on the
 * fixed part of fixed (antennas, rate, bits, delays, seed, dither seed).
 * In replay mode the packed period is the longest of the parts' periods
 * (powers of two, so each repeats within it), at least one heap. */
int cbf_dsim_signal_build(cbf_dsim_signal *sig, cbf_dsim_spec *spec, const cbf_dsim_config *fixed,
                          cbf_dsim_workers *w, cbf_error *err);
void cbf_dsim_signal_free(cbf_dsim_signal *sig);

#endif
