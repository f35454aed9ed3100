/* beam_rng.h: the beamformer tests' inputs, from one xorshift64 state that
 * main seeds (CBF_TEST_STATE repeats a run). */
#ifndef BEAM_RNG_H
#define BEAM_RNG_H

#include <stdint.h>

static uint64_t rng_state;

static inline uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* uniform in [0, 1) */
static inline double unif(void) { return (double)(rnd() >> 11) * 0x1p-53; }

#endif
