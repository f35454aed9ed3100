/* The Remez exchange against MATLAB's firpm (the two designs scipy's own
 * tests compare with, published to 15 digits), and the DDC designs against
 * the alternation theorem and their own report. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "filter_design.h"

/* MATLAB firpm(11, [0 0.3 0.5 1], [1 1 0 0]): 12 taps, type II. */
static const double matlab_lp12[12] = {
    0.024590270518440, -0.041314581814658, -0.075943803756711, -0.003530911231040,
    0.193140296954975, 0.373400753484939, 0.373400753484939, 0.193140296954975,
    -0.003530911231040, -0.075943803756711, -0.041314581814658, 0.024590270518440};
/* MATLAB firpm(20, [0 0.8 0.9 1], [0 0 1 1]): 21 taps, type I high-pass. */
static const double matlab_hp21[21] = {
    -0.038976016082299, 0.018704846485491, -0.014644062687875, 0.002879152556419,
    0.016849978528150, -0.043276706138248, 0.073641298245579, -0.103908158578635,
    0.129770906801075, -0.147163447297124, 0.153302248456347, -0.147163447297124,
    0.129770906801075, -0.103908158578635, 0.073641298245579, -0.043276706138248,
    0.016849978528150, 0.002879152556419, -0.014644062687875, 0.018704846485491,
    -0.038976016082299};

static void matches_matlab(void **state)
{
    (void)state;
    double h[21];
    char msg[256];
    /* The reference is printed to 15 decimals: 1e-12 is the print, not slack
     * in the algorithm (both designs solve the same grid problem). */
    cbf_fd_band lp[2] = {{0.0, 0.15, 1.0, 1.0}, {0.25, 0.5, 0.0, 1.0}};
    assert_int_equal(cbf_fd_remez(12, lp, 2, 16, h, NULL, msg, sizeof msg), 0);
    for (int i = 0; i < 12; i++)
        assert_true(fabs(h[i] - matlab_lp12[i]) < 1e-12);
    cbf_fd_band hp[2] = {{0.0, 0.4, 0.0, 1.0}, {0.45, 0.5, 1.0, 1.0}};
    assert_int_equal(cbf_fd_remez(21, hp, 2, 16, h, NULL, msg, sizeof msg), 0);
    for (int i = 0; i < 21; i++)
        assert_true(fabs(h[i] - matlab_hp21[i]) < 1e-12);
}

/* Weighted error W (A - D) at f, with the band it lies in. */
static double werr(const double *h, int taps, const cbf_fd_band *b, double f)
{
    return b->weight * (cbf_fd_amplitude(h, taps, f) - b->desired);
}

/* Alternation theorem: the minimax error reaches +-delta, alternating in
 * sign, at (taps + 1) / 2 + 1 frequencies. Counted on a grid 8x denser than
 * the design's: a run of same-signed points within 0.1% of delta is one
 * extremum. The largest error anywhere may exceed delta only by what the
 * design grid misses between its points (a few percent at 16 points per
 * basis function). */
static void check_equiripple(const double *h, int taps, const cbf_fd_band *b, int nb,
                             double delta)
{
    const int L = (taps + 1) / 2;
    const double step = 0.5 / (128.0 * L);
    int count = 0, last_sign = 0;
    double emax = 0.0;
    for (int i = 0; i < nb; i++) {
        double hi = b[i].hi;
        if (taps % 2 == 0 && hi > 0.5 - 1e-9)
            hi = 0.5 - 0.5 / (16.0 * L); /* the type II zero at 0.5 is fixed */
        const int pts = (int)ceil((hi - b[i].lo) / step);
        for (int k = 0; k <= pts; k++) {
            double e = werr(h, taps, &b[i], b[i].lo + (hi - b[i].lo) * k / pts);
            emax = fmax(emax, fabs(e));
            if (fabs(e) < delta * 0.999)
                continue;
            int sign = e > 0 ? 1 : -1;
            if (sign != last_sign)
                count++;
            last_sign = sign;
        }
    }
    if (count < L + 1 || emax > 1.05 * delta)
        fail_msg("%d taps: %d alternations (need %d), max error %.6g vs delta %.6g", taps,
                 count, L + 1, emax, delta);
}

static void ddc_designs_are_equiripple(void **state)
{
    (void)state;
    static const int cases[][3] = {{8, 8, 0}, {16, 8, 0}, {16, 4, 1}, {32, 8, 0}, {8, 12, 0}, {16, 16, 0}};
    double *h = malloc(CBF_FD_MAX_TAPS * sizeof(double));
    cbf_fd_band b[64];
    char msg[256];
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int S = cases[c][0], taps = S * cases[c][1] + cases[c][2]; /* odd taps: type I */
        double wp = 0.005;
        cbf_fd_info info;
        cbf_fd_report rep;
        int rc = cbf_fd_ddc_design(taps, S, wp, h, &info, &rep, msg, sizeof msg);
        if (rc)
            fail_msg("S %d taps %d: %s", S, taps, msg);
        for (int i = 0; i < taps; i++)
            assert_true(h[i] == h[taps - 1 - i]);
        int nb = cbf_fd_ddc_bands(S, wp, b, 64);
        assert_true(nb == S / 2 + 1);
        check_equiripple(h, taps, b, nb, info.delta);
        /* The report measures what the design promised: passband within
         * 1 +- delta / wp and aliases under delta, to the same grid slack. */
        double dp = info.delta / wp;
        assert_true(rep.pass_max <= 1.0 + 1.05 * dp && rep.pass_min >= 1.0 - 1.05 * dp);
        assert_true(rep.stop_max <= 1.05 * info.delta);
        assert_true(fabs(rep.ripple_db - 20.0 * log10((1 + dp) / (1 - dp))) <
                    0.05 * rep.ripple_db);
        assert_true(rep.alias_db >= -20.0 * log10(1.05 * info.delta / (1.0 - dp)));
        printf("# S %2d taps %3d: ripple %.4f dB, alias suppression %.1f dB, %d iterations\n",
               S, taps, rep.ripple_db, rep.alias_db, info.iterations);
    }
    free(h);
}

/* Leaving the bands that land in discarded channels free buys suppression:
 * the same taps constrained over the whole stopband [3 / (4S), 0.5] do worse. */
static void alias_only_beats_full_stopband(void **state)
{
    (void)state;
    const int S = 16, taps = 8 * S;
    double h[8 * 16];
    char msg[256];
    cbf_fd_info alias, full;
    assert_int_equal(cbf_fd_ddc_design(taps, S, 0.005, h, &alias, NULL, msg, sizeof msg), 0);
    cbf_fd_band b[2] = {{0.0, 0.25 / S, 1.0, 0.005}, {0.75 / S, 0.5, 0.0, 1.0}};
    assert_int_equal(cbf_fd_remez(taps, b, 2, 0, h, &full, msg, sizeof msg), 0);
    printf("# S %d taps %d: delta %.3g (alias bands only) vs %.3g (whole stopband)\n", S, taps,
           alias.delta, full.delta);
    assert_true(alias.delta < 0.95 * full.delta);
}

static void pass_weight_trades_ripple_for_suppression(void **state)
{
    (void)state;
    const int S = 8, taps = 8 * S;
    double h[64];
    char msg[256];
    cbf_fd_report lo, hi;
    assert_int_equal(cbf_fd_ddc_design(taps, S, 0.001, h, NULL, &lo, msg, sizeof msg), 0);
    assert_int_equal(cbf_fd_ddc_design(taps, S, 0.1, h, NULL, &hi, msg, sizeof msg), 0);
    assert_true(lo.alias_db > hi.alias_db + 10.0);
    assert_true(lo.ripple_db > hi.ripple_db);
}

static void bad_arguments(void **state)
{
    (void)state;
    double h[64];
    char msg[256] = "";
    cbf_fd_band overlap[2] = {{0.0, 0.3, 1.0, 1.0}, {0.2, 0.5, 0.0, 1.0}};
    assert_int_equal(cbf_fd_remez(31, overlap, 2, 0, h, NULL, msg, sizeof msg), CBF_KERN_EINVAL);
    assert_non_null(strstr(msg, "band 1"));
    cbf_fd_band ok[2] = {{0.0, 0.1, 1.0, 1.0}, {0.2, 0.5, 0.0, 1.0}};
    assert_int_equal(cbf_fd_remez(2, ok, 2, 0, h, NULL, msg, sizeof msg), CBF_KERN_EINVAL);
    ok[1].weight = 0.0;
    assert_int_equal(cbf_fd_remez(31, ok, 2, 0, h, NULL, msg, sizeof msg), CBF_KERN_EINVAL);
    assert_int_equal(cbf_fd_ddc_design(64, 1, 0.005, h, NULL, NULL, msg, sizeof msg),
                     CBF_KERN_EINVAL);
    assert_int_equal(cbf_fd_ddc_design(64, 8, -1.0, h, NULL, NULL, msg, sizeof msg),
                     CBF_KERN_EINVAL);
    assert_non_null(strstr(msg, "pass_weight"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(matches_matlab),
        cmocka_unit_test(ddc_designs_are_equiripple),
        cmocka_unit_test(alias_only_beats_full_stopband),
        cmocka_unit_test(pass_weight_trades_ripple_for_suppression),
        cmocka_unit_test(bad_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
