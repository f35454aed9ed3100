/* filter_design.h: equiripple (Parks-McClellan) linear-phase FIR design and
 * the narrowband DDC low-pass built on it.
 *
 * Frequencies are in cycles per input sample, 0..0.5. A design minimises
 * the largest weighted error max W(f) |A(f) - D(f)| over the union of the
 * given bands (the Remez exchange on a dense grid); between bands the
 * response is free. A(f) is the real amplitude of the symmetric taps:
 * H(f) = A(f) exp(-2 pi i f (taps - 1) / 2).
 *
 * The DDC low-pass (cbf_fd_ddc_design) constrains only what reaches the
 * narrowband output: after subsampling by S the PFB keeps the inner half of
 * its band, |f| <= 1/(4S); input frequencies that alias onto that half,
 * |f - k/S| <= 1/(4S) for k >= 1, form the stopbands; everything else lands
 * in the discarded outer channels and is left free (see docs/narrowband.md).
 *
 * Return values are 0 or a CBF_KERN_* code (kernels/common/status.h);
 * the message buffer (may be NULL) says what was wrong. */
#ifndef CBF_KERNEL_FILTER_DESIGN_H
#define CBF_KERNEL_FILTER_DESIGN_H

#include <stddef.h>

#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CBF_FD_DEFAULT_DENSITY 16
#define CBF_FD_MAX_TAPS 8192
/* katgpucbf's default passband weight: stopband error 200x smaller than the
 * passband error. */
#define CBF_FD_DEFAULT_PASS_WEIGHT 0.005

typedef struct cbf_fd_band {
    double lo, hi;   /* edges, cycles per sample, 0 <= lo <= hi <= 0.5 */
    double desired;  /* target amplitude over the band */
    double weight;   /* > 0: error weight over the band */
} cbf_fd_band;

typedef struct cbf_fd_info {
    double delta;    /* the equiripple weighted error the exchange converged to */
    int iterations;
    int extremals;   /* alternation points of the final set (basis size + 1) */
} cbf_fd_info;

/* Designs `taps` symmetric taps (odd: type I, even: type II, whose response
 * is zero at 0.5 by construction). Bands must be in increasing order and
 * disjoint. density: grid points per basis function (16 is the usual
 * choice; 0 picks it). info may be NULL. */
int cbf_fd_remez(int taps, const cbf_fd_band *bands, int n_bands, int density, double *h,
                 cbf_fd_info *info, char *msg, size_t msglen);

/* Amplitude A(f) of symmetric taps, evaluated in double. */
double cbf_fd_amplitude(const double *h, int taps, double f);

/* The DDC bands for subsampling factor S >= 2: passband [0, 1/(4S)] with
 * desired 1 and weight pass_weight, then each alias band with desired 0 and
 * weight 1, clipped to 0.5. Returns the band count (at most S / 2 + 1), or
 * CBF_KERN_EINVAL when max_bands is too small or an argument is bad. */
int cbf_fd_ddc_bands(int subsampling, double pass_weight, cbf_fd_band *bands, int max_bands);

/* Figures of the DDC filter on a dense grid (at least 16 points per tap
 * over 0..0.5, band edges included). */
typedef struct cbf_fd_report {
    double pass_min, pass_max;   /* extremes of A(f) over the passband */
    double stop_max;             /* largest |A(f)| over the alias bands */
    double ripple_db;            /* 20 log10(pass_max / pass_min), peak to peak */
    double alias_db;             /* worst alias suppression: -20 log10(stop_max / pass_min) */
} cbf_fd_report;

int cbf_fd_ddc_report(const double *h, int taps, int subsampling, cbf_fd_report *rep,
                      char *msg, size_t msglen);

/* cbf_fd_remez over cbf_fd_ddc_bands at grid density 32 (at 16 the error
 * between grid points of the sharper designs overshoots delta by up to 7%);
 * rep (may be NULL) gets the report. */
int cbf_fd_ddc_design(int taps, int subsampling, double pass_weight, double *h,
                      cbf_fd_info *info, cbf_fd_report *rep, char *msg, size_t msglen);

#ifdef __cplusplus
}
#endif
#endif
