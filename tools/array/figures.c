/* figures.c: cbf-array --figures, the sizing of docs/scaling.md. From the
 * description's array and `sizing` host and the budget's measured figures:
 * how many antennas one GPU's F-engines can take under each limit (NIC in
 * and out, PCIe both ways, the GPU), how many GPUs the X-engines need under
 * each, and so the hosts, NICs, switch ports and multicast groups. The
 * smallest antenna count (F) and the largest GPU count (X) name the limit
 * that binds first. One X-engine per GPU, each an equal share of the
 * channels: the smallest X-engine count that divides the channels and is
 * at least the GPUs needed. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "array.h"

#define N_LIMITS ARRAY_N_LIMITS
/* The F-engine's last limit is cbf-bench's measured whole-engine rate
 * (feng_gsps), the X-engine's the correlator and beamformer kernels. */
static const char *const f_names[N_LIMITS] = {"NIC in", "NIC out", "PCIe in", "PCIe out", "engine"};
static const char *const x_names[N_LIMITS] = {"NIC in", "NIC out", "PCIe in", "PCIe out", "GPU"};

static int argbest(const double *v, int want_max)
{
    int k = 0;
    for (int i = 1; i < N_LIMITS; i++)
        if (want_max ? v[i] > v[k] : v[i] < v[k])
            k = i;
    return k;
}

static void limits_line(FILE *f, const char *what, const char *const *names, const double *v)
{
    fprintf(f, "%s:", what);
    for (int i = 0; i < N_LIMITS; i++)
        fprintf(f, " %s %.2f%s", names[i], v[i], i + 1 < N_LIMITS ? "," : "\n");
}

/* NIC Gb/s of one GPU at fill: the host's NICs shared by its GPUs */
static double nic_per_gpu(const array_desc *d)
{
    return d->size_nics_per_host * d->size_nic_gbps / d->size_gpus_per_host * d->fill;
}

int array_size_make(const array_desc *d, array_size *s, cbf_error *err)
{
    memset(s, 0, sizeof *s);
    if (!d->has_sizing)
        return cbf_error_set(err, CBF_ECONFIG, "%s: section 'sizing' is missing (the host the array would "
                             "be built from: gpus_per_host, nics_per_host, nic_gbps)", d->where_root);
    if (!d->has_budget)
        return cbf_error_set(err, CBF_ECONFIG, "%s: array.budget is not given (the budget file of "
                             "cbf-bench's figures the sizing divides by)", d->where_array);
    const array_budget *b = &d->budget;
    double fill = d->fill, A = d->antennas, sps = 2 * d->adc_sample_rate;   /* both pols */
    double band = 2 * array_band_sps(d);   /* both pols: what the channels carry (narrowband: 1 / decimation) */
    double nic = nic_per_gpu(d);
    double dig = 2 * array_dig_gbps_per_pol(d), fout = array_feng_gbps_per_antenna(d);
    double *fa = s->f_limits, *xg = s->x_limits;
    fa[0] = nic / dig;
    fa[1] = nic / fout;
    fa[2] = b->pcie_h2d_gbs * fill / (sps * d->bits / 8 / 1e9);
    fa[3] = b->pcie_d2h_gbs * fill / (band / 1e9);
    fa[4] = b->feng_gsps * fill / (sps / 1e9);
    s->f_binds = argbest(fa, 0);
    s->per_gpu = (int)floor(fa[s->f_binds]);
    if (s->per_gpu < 1)
        return cbf_error_set(err, CBF_EINVAL, "%s: one antenna does not fit one GPU's %s (%.2f antennas)",
                             d->where_sizing, f_names[s->f_binds], fa[s->f_binds]);
    s->f_gpus = (int)ceil(A / s->per_gpu);
    s->f_hosts = (s->f_gpus + d->size_gpus_per_host - 1) / d->size_gpus_per_host;
    double corr = array_corr_tops_needed(d, d->channels), bf = array_beam_tflops_needed(d, d->channels);
    xg[0] = A * fout / nic;
    xg[1] = d->beams * array_beam_gbps(d) / nic;
    xg[2] = A * band / 1e9 / (b->pcie_h2d_gbs * fill);
    xg[3] = d->beams * array_band_sps(d) / 1e9 / (b->pcie_d2h_gbs * fill);
    xg[4] = (corr / array_corr_tops(b, A) + bf / b->beam_tflops) / fill;
    s->x_binds = argbest(xg, 1);
    s->x_needed = (int)ceil(xg[s->x_binds]);
    int x = s->x_needed < 1 ? 1 : s->x_needed;
    while (d->channels % x)
        x++;
    s->xengines = x;
    s->x_hosts = (x + d->size_gpus_per_host - 1) / d->size_gpus_per_host;
    return 0;
}

int array_figures(const array_desc *d, FILE *f, cbf_error *err)
{
    array_size s;
    int rc = array_size_make(d, &s, err);
    if (rc)
        return rc;
    const array_budget *b = &d->budget;
    double fill = d->fill, A = d->antennas, sps = 2 * d->adc_sample_rate;   /* both pols */
    double dig = 2 * array_dig_gbps_per_pol(d), fout = array_feng_gbps_per_antenna(d);
    double beam = array_beam_gbps(d);
    const char *bname = strrchr(b->path, '/') ? strrchr(b->path, '/') + 1 : b->path;
    fprintf(f, "array %s: %d antennas, %d channels, 2 pols x %.0f Msample/s, %d-bit, %d beams\n", d->name,
            d->antennas, d->channels, d->adc_sample_rate / 1e6, d->bits, d->beams);
    fprintf(f, "host: %d GPUs, %d NICs x %g Gb/s; budget %s (%s); fill %g\n", d->size_gpus_per_host,
            d->size_nics_per_host, d->size_nic_gbps, bname, b->gpu, fill);
    fprintf(f, "per GPU at fill: NIC %.1f Gb/s each way; PCIe %.2f GB/s in, %.2f GB/s out\n", nic_per_gpu(d),
            b->pcie_h2d_gbs * fill, b->pcie_d2h_gbs * fill);
    if (array_decimation(d) > 1)
    {
        fprintf(f, "narrowband: 1/%d, %.9g MHz about %.9g MHz", array_decimation(d), array_band_sps(d) / 2 / 1e6,
                d->ddc_centre_hz / 1e6);
        if (d->pass_bandwidth > 0)
            fprintf(f, " (VLBI: the whole band kept, flat over %.9g MHz)", d->pass_bandwidth / 1e6);
        fputc('\n', f);
    }
    fprintf(f, "per antenna: digitiser %.2f Gb/s in, F-engine %.2f Gb/s out; %.3f Gsample/s;\n"
               "  PCIe %.3f GB/s in, %.3f GB/s out\n", dig, fout, sps / 1e9, sps * d->bits / 8 / 1e9,
            2 * array_band_sps(d) / 1e9);
    limits_line(f, "F-engine antennas per GPU", f_names, s.f_limits);
    fprintf(f, "  -> %d antennas per GPU (%s binds): %d GPUs in %d hosts\n", s.per_gpu, f_names[s.f_binds],
            s.f_gpus, s.f_hosts);
    double corr = array_corr_tops_needed(d, d->channels), bf = array_beam_tflops_needed(d, d->channels);
    limits_line(f, "X-engine GPUs needed", x_names, s.x_limits);
    int x = s.xengines;
    fprintf(f, "  -> %d (%s binds); %d X-engines of %d channels (the next count that divides\n"
               "     the channels), one per GPU, in %d hosts; each receives %.2f Gb/s\n",
            s.x_needed, x_names[s.x_binds], x, d->channels / x, s.x_hosts, A * fout / x);
    fprintf(f, "GPU work: correlator %.1f Tops/s in all (%.0f per GPU at N = %d); beamformer %.2f TFLOP/s\n",
            corr, array_corr_tops(b, A), d->antennas, bf);
    int hosts = s.f_hosts + s.x_hosts, nics = hosts * d->size_nics_per_host;
    int groups = 2 * d->antennas + x + d->beams;
    double traffic = A * dig + A * fout + d->beams * beam;
    fprintf(f, "totals: %d hosts, %d GPUs, %d NICs; switch ports: %d NICs + %d digitisers = %d;\n"
               "  multicast groups: %d digitiser + %d F-engine + %d beam = %d; %.2f Tb/s into the switch\n",
            hosts, s.f_gpus + x, nics, nics, d->antennas, nics + d->antennas, 2 * d->antennas, x, d->beams, groups,
            traffic / 1e3);
    fprintf(f, "first bottleneck: F-engines %s, X-engines %s\n", f_names[s.f_binds], x_names[s.x_binds]);
    return 0;
}
