/* timeref.h (private to libcbf): the engine's time reference (engine keys
 * sync_time and adc_sample_rate) and exact UNIX time <-> ADC timestamp
 * conversion, shared by the loader (graph.c), the engine (engine.c) and
 * the request path (request.c). */
#ifndef CBF_TIMEREF_H
#define CBF_TIMEREF_H

#include <stdbool.h>
#include <stdint.h>

#define CBF_TIME_HIDDEN __attribute__((visibility("hidden")))

/* A UNIX time as whole seconds and a fraction in [0, 1), kept apart so a
 * decimal text such as "1700000000.123456789" loses nothing: a double has
 * about 0.2 us of resolution at today's UNIX times, which is hundreds of
 * samples at GHz rates. */
typedef struct cbf_unix_time {
    int64_t sec;
    long double frac;
} cbf_unix_time;

/* Reads seconds from text: a decimal number (exact), an exponent form
 * (rounded to long double), optionally quoted ("..." or '...', as a JSON
 * string arrives). 0, or -1 when not a finite number. */
CBF_TIME_HIDDEN int cbf_time_parse(const char *text, cbf_unix_time *out);
CBF_TIME_HIDDEN double cbf_time_to_double(const cbf_unix_time *t);

/* The ADC timestamp of UNIX time t: round((t - sync) x rate), halves away
 * from zero. 0, or -1 when it does not fit an int64. */
CBF_TIME_HIDDEN int cbf_time_to_ts(const cbf_unix_time *t, const cbf_unix_time *sync, long double rate, int64_t *ts);

#endif
