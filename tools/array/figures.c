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

#define N_LIMITS 5
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

int array_figures(const array_desc *d, FILE *f, cbf_error *err)
{
    if (!d->has_sizing || !d->has_budget)
        return cbf_error_set(err, CBF_ECONFIG, "%s: --figures needs a 'sizing' section and array.budget",
                             d->path);
    const array_budget *b = &d->budget;
    double fill = d->fill, A = d->antennas, sps = 2 * d->adc_sample_rate;   /* both pols */
    double nic = d->size_nics_per_host * d->size_nic_gbps / d->size_gpus_per_host * fill;  /* per GPU */
    double dig = 2 * array_dig_gbps_per_pol(d), fout = array_feng_gbps_per_antenna(d);
    double beam = array_beam_gbps(d);
    const char *bname = strrchr(b->path, '/') ? strrchr(b->path, '/') + 1 : b->path;
    fprintf(f, "array %s: %d antennas, %d channels, 2 pols x %.0f Msample/s, %d-bit, %d beams\n", d->name,
            d->antennas, d->channels, d->adc_sample_rate / 1e6, d->bits, d->beams);
    fprintf(f, "host: %d GPUs, %d NICs x %g Gb/s; budget %s (%s); fill %g\n", d->size_gpus_per_host,
            d->size_nics_per_host, d->size_nic_gbps, bname, b->gpu, fill);
    fprintf(f, "per GPU at fill: NIC %.1f Gb/s each way; PCIe %.2f GB/s in, %.2f GB/s out\n", nic,
            b->pcie_h2d_gbs * fill, b->pcie_d2h_gbs * fill);
    fprintf(f, "per antenna: digitiser %.2f Gb/s in, F-engine %.2f Gb/s out; %.3f Gsample/s;\n"
               "  PCIe %.3f GB/s in, %.3f GB/s out\n", dig, fout, sps / 1e9, sps * d->bits / 8 / 1e9, sps / 1e9);
    double fa[N_LIMITS] = {nic / dig, nic / fout, b->pcie_h2d_gbs * fill / (sps * d->bits / 8 / 1e9),
                           b->pcie_d2h_gbs * fill / (sps / 1e9), b->feng_gsps * fill / (sps / 1e9)};
    limits_line(f, "F-engine antennas per GPU", f_names, fa);
    int fk = argbest(fa, 0), per_gpu = (int)floor(fa[fk]);
    if (per_gpu < 1)
        return cbf_error_set(err, CBF_EINVAL, "%s: one antenna does not fit one GPU's %s", d->path,
                             f_names[fk]);
    int f_gpus = (int)ceil(A / per_gpu);
    int f_hosts = (f_gpus + d->size_gpus_per_host - 1) / d->size_gpus_per_host;
    fprintf(f, "  -> %d antennas per GPU (%s binds): %d GPUs in %d hosts\n", per_gpu, f_names[fk],
            f_gpus, f_hosts);
    double corr = array_corr_tops_needed(d, d->channels), bf = array_beam_tflops_needed(d, d->channels);
    double xg[N_LIMITS] = {A * fout / nic, d->beams * beam / nic,
                           A * sps / 1e9 / (b->pcie_h2d_gbs * fill),
                           d->beams * d->adc_sample_rate / 1e9 / (b->pcie_d2h_gbs * fill),
                           (corr / array_corr_tops(b, A) + bf / b->beam_tflops) / fill};
    limits_line(f, "X-engine GPUs needed", x_names, xg);
    int xk = argbest(xg, 1), need = (int)ceil(xg[xk]), x = need < 1 ? 1 : need;
    while (d->channels % x)
        x++;
    int x_hosts = (x + d->size_gpus_per_host - 1) / d->size_gpus_per_host;
    fprintf(f, "  -> %d (%s binds); %d X-engines of %d channels (the next count that divides\n"
               "     the channels), one per GPU, in %d hosts; each receives %.2f Gb/s\n",
            need, x_names[xk], x, d->channels / x, x_hosts, A * fout / x);
    fprintf(f, "GPU work: correlator %.1f Tops/s in all (%.0f per GPU at N = %d); beamformer %.2f TFLOP/s\n",
            corr, array_corr_tops(b, A), d->antennas, bf);
    int hosts = f_hosts + x_hosts, nics = hosts * d->size_nics_per_host;
    int groups = 2 * d->antennas + x + d->beams;
    double traffic = A * dig + A * fout + d->beams * beam;
    fprintf(f, "totals: %d hosts, %d GPUs, %d NICs; switch ports: %d NICs + %d digitisers = %d;\n"
               "  multicast groups: %d digitiser + %d F-engine + %d beam = %d; %.2f Tb/s into the switch\n",
            hosts, f_gpus + x, nics, nics, d->antennas, nics + d->antennas, 2 * d->antennas, x, d->beams, groups,
            traffic / 1e3);
    fprintf(f, "first bottleneck: F-engines %s, X-engines %s\n", f_names[fk], x_names[xk]);
    return 0;
}
