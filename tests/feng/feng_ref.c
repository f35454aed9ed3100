/* feng_ref.c: see feng_ref.h. Slow on purpose: O(channels^2) per spectrum. */
#include "feng_ref.h"

#include <math.h>
#include <stdlib.h>

int64_t feng_ref_sample(const uint8_t *in, size_t i, int bits)
{
    int64_t v = 0;
    for (int b = 0; b < bits; b++) {
        size_t bit = i * (size_t)bits + (size_t)b;
        v = (v << 1) | ((in[bit / 8] >> (7 - bit % 8)) & 1);
    }
    if (v >= (int64_t)1 << (bits - 1))
        v -= (int64_t)1 << bits;
    return v;
}

void feng_ref_put(uint8_t *out, size_t i, int bits, int64_t v)
{
    uint64_t u = (uint64_t)v & (((uint64_t)1 << bits) - 1);
    for (int b = 0; b < bits; b++) {
        size_t bit = i * (size_t)bits + (size_t)b;
        uint8_t mask = (uint8_t)(0x80u >> (bit % 8));
        if ((u >> (bits - 1 - b)) & 1)
            out[bit / 8] |= mask;
        else
            out[bit / 8] &= (uint8_t)~mask;
    }
}

void feng_ref_weights(int channels, int taps, double w_cutoff, int hann, double *w)
{
    const int step = 2 * channels, n = step * taps;
    double sum2 = 0.0;
    for (int i = 0; i < n; i++) {
        double win = hann ? pow(sin(M_PI * i / (n - 1)), 2) : 1.0;
        double x = w_cutoff * ((i + 0.5) / step - taps / 2.0);
        w[i] = win * (x == 0.0 ? 1.0 : sin(M_PI * x) / (M_PI * x));
        sum2 += w[i] * w[i];
    }
    for (int i = 0; i < n; i++)
        w[i] /= sqrt(sum2);
}

void feng_ref_spectrum(const feng_ref_setup *s, const uint8_t *in, int64_t start,
                       double complex *X)
{
    const int N = s->channels, step = 2 * N;
    double *y = calloc((size_t)step, sizeof(double));
    for (int t = 0; t < s->taps; t++)
        for (int j = 0; j < step; j++)
            y[j] += s->weights[t * step + j] *
                    (double)feng_ref_sample(in, (size_t)(start + (int64_t)t * step + j), s->bits);
    double complex *tw = malloc(sizeof(double complex) * (size_t)step);
    for (int e = 0; e < step; e++)
        tw[e] = cexp(-2.0 * M_PI * I * (double)e / step);
    for (int k = 0; k < N; k++) {
        double complex acc = 0;
        /* exp(-2 pi i j k / step), its angle reduced exactly in integers. */
        for (int j = 0; j < step; j++)
            acc += y[j] * tw[((long)j * k) % step];
        double ang = -M_PI * s->fine_delay * (k - N / 2) / N + s->phase +
                     0.5 * M_PI * (double)(s->coarse % 4);
        X[k] = acc * cexp(I * ang) * s->gains[k];
    }
    free(tw);
    free(y);
}

int feng_ref_quant(double v, int lim, int *clipped)
{
    double r = nearbyint(v); /* default rounding mode: half to even */
    if (r > lim || r < -lim) {
        *clipped = 1;
        return r > 0 ? lim : -lim;
    }
    return (int)r;
}
