/* plan.c: where each engine runs, what every stream costs, and whether the
 * hosts can carry it (docs/scaling.md shows the same arithmetic by hand).
 *
 * Rates on the wire count each packet's UDP payload (SPEAD header and
 * items included) and 66 bytes of Ethernet framing beside it (header, IPv4,
 * UDP, FCS, preamble and gap): what a NIC's line rate must carry. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "array.h"

#define FRAME_BYTES 66.0      /* Ethernet 14 + IPv4 20 + UDP 8 + FCS 4 + preamble and gap 20 */
#define SPEAD_DIG 72.0        /* digitiser packet: header and 8 items beside 4096 samples */
#define SPEAD_FX 72.0         /* F-engine and beam packets: header and 8 items */
#define PACKET 8872.0         /* the sender's packet_size (UDP payload), jumbo frames */

int array_decimation(const array_desc *d)
{
    return d->decimation > 1 ? d->decimation : 1;
}

double array_band_sps(const array_desc *d)
{
    return d->adc_sample_rate / array_decimation(d);
}

static double spectra_rate(const array_desc *d)   /* spectra per second of each channel */
{
    return array_band_sps(d) / (2.0 * d->channels);
}

double array_dig_gbps_per_pol(const array_desc *d)
{
    double data = 4096.0 * d->bits / 8;
    return d->adc_sample_rate / 4096.0 * (data + SPEAD_DIG + FRAME_BYTES) * 8 / 1e9;
}

/* data bytes/s cut into full packets of PACKET bytes of UDP payload */
static double wire_gbps(double data_bytes)
{
    double per = PACKET - SPEAD_FX;
    return data_bytes / per * (PACKET + FRAME_BYTES) * 8 / 1e9;
}

double array_feng_gbps_per_antenna(const array_desc *d)
{
    return wire_gbps(2.0 * array_band_sps(d));     /* 2 pols x 2 bytes x channels x spectra/s */
}

double array_beam_gbps(const array_desc *d)
{
    return wire_gbps(array_band_sps(d));           /* 2 bytes x channels x spectra/s */
}

double array_vis_gbps(const array_desc *d)
{
    if (!d->heaps_per_dump)
        return 0;
    double dump_s = (double)d->heaps_per_dump * d->spectra_per_heap / spectra_rate(d);
    double n = d->antennas;
    return wire_gbps(n * (n + 1) / 2 * 4 * 8 * d->channels / dump_s);   /* 4 products x CI32 */
}

double array_corr_tops_needed(const array_desc *d, int channels)
{
    double n = d->antennas;
    return 8.0 * 2 * n * (n + 1) * channels * spectra_rate(d) / 1e12;
}

double array_beam_tflops_needed(const array_desc *d, int channels)
{
    return 8.0 * d->beams * d->antennas * channels * spectra_rate(d) / 1e12;
}

double array_corr_tops(const array_budget *b, double n)
{
    if (n <= b->corr_ants[0])
        return b->corr_tops[0];
    for (int i = 1; i < b->n_corr; i++)
        if (n <= b->corr_ants[i]) {
            double t = (n - b->corr_ants[i - 1]) / (b->corr_ants[i] - b->corr_ants[i - 1]);
            return b->corr_tops[i - 1] + t * (b->corr_tops[i] - b->corr_tops[i - 1]);
        }
    return b->corr_tops[b->n_corr - 1];
}

/* ---- placement ---- */

typedef struct slot { int host, gpu, nic; } slot;

static int slots_of(const array_desc *d, unsigned role, slot *s)
{
    int n = 0;
    for (int h = 0; h < d->n_hosts; h++) {
        if (!(d->hosts[h].roles & role))
            continue;
        int g = d->hosts[h].gpus;
        for (int k = 0; k < (g ? g : 1); k++)
            s[n++] = (slot){h, g ? k : -1, k % d->hosts[h].n_ifs};
    }
    return n;
}

static array_proc *add(array_plan *p, const char *prefix, int kind, int index, const char *fmt)
{
    array_proc *q = &p->procs[p->n_procs++];
    memset(q, 0, sizeof *q);
    q->kind = kind;
    q->index = index;
    /* prefix (15 bytes at most) and digitiser4095 or xeng65535 fit the 31 */
    char base[sizeof q->name];
    snprintf(base, sizeof base, fmt, index);
    snprintf(q->name, sizeof q->name, "%s%s", prefix, base);
    return q;
}

/* q runs on slot t and covers [first, first + count) (channels or antennas). */
static void place(array_proc *q, slot t, int first, int count)
{
    q->host = t.host;
    q->gpu = t.gpu;
    q->nic = t.nic;
    q->first = first;
    q->count = count;
}

/* where: the description's place that calls for the role (array.beams,
 * simulate.digitisers, the hosts section) */
static int need_role(int n_slots, const char *where, const char *role, const char *why, cbf_error *err)
{
    if (n_slots)
        return 0;
    return cbf_error_set(err, CBF_ECONFIG, "%s: no host has role '%s' (%s)", where, role, why);
}

int array_plan_make(const array_desc *d, array_plan *p, cbf_error *err)
{
    memset(p, 0, sizeof *p);
    if (!d->xengines)   /* array_desc_complete sizes them first */
        return cbf_error_set(err, CBF_ECONFIG, "%s: array.xengines: a plan needs at least one",
                             d->where_xengines);
    if (d->channels % d->xengines)
        return cbf_error_set(err, CBF_ECONFIG, "%s: array.xengines: %d does not divide the %d channels",
                             d->where_xengines, d->xengines, d->channels);
    int max_slots = 0;
    for (int h = 0; h < d->n_hosts; h++)
        max_slots += d->hosts[h].gpus ? d->hosts[h].gpus : 1;
    slot *s = calloc((size_t)max_slots + 1, sizeof *s);
    p->procs = calloc((size_t)(d->antennas + d->xengines + d->digitisers + 1), sizeof *p->procs);
    if (!s || !p->procs) {
        free(s);
        return cbf_error_set(err, CBF_ENOMEM, "out of memory");
    }
    int n, rc = 0;
    if (d->beams && d->record) {   /* the beam receiver records them; unrecorded they are only sent */
        n = slots_of(d, ROLE_BEAMS, s);
        if (!(rc = need_role(n, d->where_beams, "beams", "array.beams is not 0", err))) {
            array_proc *q = add(p, d->prefix, PROC_BEAMS, 0, "beams");
            q->host = s[0].host;
            q->gpu = -1;
            q->nic = 0;
        }
    }
    int cx = d->channels / d->xengines;
    n = slots_of(d, ROLE_XENG, s);
    rc = rc ? rc : need_role(n, d->where_hosts, "xeng", "the X-engines", err);
    for (int x = 0; !rc && x < d->xengines; x++)
        place(add(p, d->prefix, PROC_XENG, x, "xeng%d"), s[(long)x * n / d->xengines], x * cx, cx);
    n = slots_of(d, ROLE_FENG, s);
    rc = rc ? rc : need_role(n, d->where_hosts, "feng", "the F-engines", err);
    for (int a = 0; !rc && a < d->antennas; a++)
        place(add(p, d->prefix, PROC_FENG, a, "feng%d"), s[(long)a * n / d->antennas], a, 1);
    if (d->digitisers) {
        n = 0;
        for (int h = 0; h < d->n_hosts; h++)
            if (d->hosts[h].roles & ROLE_DIGITISER)
                s[n++] = (slot){h, -1, -1};
        rc = rc ? rc : need_role(n, d->where_digitisers, "digitiser", "simulate.digitisers is not 0", err);
        for (int k = 0; !rc && k < d->digitisers; k++) {
            array_proc *q = add(p, d->prefix, PROC_DIGITISER, k, "digitiser%d");
            q->host = s[(long)k * n / d->digitisers].host;
            q->gpu = -1;
            q->nic = -1;
            q->first = (int)((long)k * d->dig_antennas / d->digitisers);
            q->count = (int)((long)(k + 1) * d->dig_antennas / d->digitisers) - q->first;
        }
    }
    /* procs are in start order (the PROC_* order), so process k's port is katcp + k */
    for (int k = 0; !rc && d->katcp_port && k < p->n_procs; k++)
        p->procs[k].katcp_port = d->katcp_port + k;
    if (!rc && d->katcp_port && d->katcp_port + p->n_procs - 1 > 65535)
        rc = cbf_error_set(err, CBF_ECONFIG, "%s: array.katcp: %d processes from port %d pass 65535",
                           d->where_array, p->n_procs, d->katcp_port);
    free(s);
    if (rc)
        array_plan_free(p);
    return rc;
}

void array_plan_free(array_plan *p)
{
    free(p->procs);
    memset(p, 0, sizeof *p);
}

/* ---- the budget check ---- */

typedef struct load {
    double rx[ARRAY_MAX_IFS], tx[ARRAY_MAX_IFS];
} load;

typedef struct gload {
    double feng_gsps, corr_tops, beam_tflops, h2d, d2h;   /* GB/s for PCIe */
    int corr_ants;
} gload;

static void proc_traffic(const array_desc *d, const array_proc *q, double *rx, double *tx)
{
    double frac = (double)q->count / d->channels;
    switch (q->kind) {
    case PROC_DIGITISER: *rx = 0; *tx = q->count * 2 * array_dig_gbps_per_pol(d); break;
    case PROC_FENG: *rx = 2 * array_dig_gbps_per_pol(d); *tx = array_feng_gbps_per_antenna(d); break;
    case PROC_XENG:
        *rx = d->antennas * array_feng_gbps_per_antenna(d) * frac;
        *tx = (d->beams * array_beam_gbps(d) + (d->has_vis ? array_vis_gbps(d) : 0)) * frac;
        break;
    default: *rx = d->beams * array_beam_gbps(d); *tx = 0; break;
    }
}

static void proc_gpu(const array_desc *d, const array_proc *q, gload *g)
{
    if (q->kind == PROC_FENG) {
        /* every digitiser sample in, wideband or narrowband (the budget's
         * feng_gsps is the wideband engine's); a 1 / decimation share out */
        double sps = 2 * d->adc_sample_rate;
        g->feng_gsps += sps / 1e9;
        g->h2d += sps * d->bits / 8 / 1e9;
        g->d2h += 2 * array_band_sps(d) / 1e9;
    } else if (q->kind == PROC_XENG) {
        double frac = (double)q->count / d->channels;
        g->corr_tops += array_corr_tops_needed(d, q->count);
        g->beam_tflops += array_beam_tflops_needed(d, q->count);
        g->corr_ants = d->antennas;
        g->h2d += d->antennas * 2 * array_band_sps(d) * frac / 1e9;
        double vis = 0;
        if (d->heaps_per_dump) {
            double dump_s = (double)d->heaps_per_dump * d->spectra_per_heap / spectra_rate(d);
            vis = (double)d->antennas * (d->antennas + 1) / 2 * 4 * 8 * q->count / dump_s;
        }
        g->d2h += (d->beams * array_band_sps(d) * frac + vis) / 1e9;
    }
}

static double gpu_fraction(const array_desc *d, const gload *g)
{
    const array_budget *b = &d->budget;
    return g->feng_gsps / b->feng_gsps +
           (g->corr_ants ? g->corr_tops / array_corr_tops(b, g->corr_ants) : 0) +
           g->beam_tflops / b->beam_tflops;
}

static int check_host(const array_desc *d, const array_plan *p, int h, FILE *f, cbf_error *err)
{
    const array_host *H = &d->hosts[h];
    load l = {{0}, {0}};
    gload g[64];
    memset(g, 0, sizeof g);
    for (int i = 0; i < p->n_procs; i++) {
        const array_proc *q = &p->procs[i];
        if (q->host != h)
            continue;
        double rx, tx;
        proc_traffic(d, q, &rx, &tx);
        for (int k = 0; k < H->n_ifs; k++)
            if (q->nic < 0 || q->nic == k) {
                l.rx[k] += q->nic < 0 ? rx / H->n_ifs : rx;
                l.tx[k] += q->nic < 0 ? tx / H->n_ifs : tx;
            }
        if (q->gpu >= 0)
            proc_gpu(d, q, &g[q->gpu]);
    }
    int rc = 0;
    double cap = H->nic_gbps * d->fill;
    for (int k = 0; k < H->n_ifs; k++) {
        if (f)
            fprintf(f, "%-12s nic %-15s rx %8.2f Gb/s  tx %8.2f Gb/s  of %g x %.2f\n", H->name, H->ifs[k],
                    l.rx[k], l.tx[k], H->nic_gbps, d->fill);
        double worst = fmax(l.rx[k], l.tx[k]);
        if (!rc && worst > cap)
            rc = cbf_error_set(err, CBF_EINVAL, "host '%s': NIC %s %s %.2f Gb/s, more than %.2f Gb/s "
                               "(nic_gbps %g x array.fill %g; host at %s)", H->name, H->ifs[k],
                               l.rx[k] >= l.tx[k] ? "receives" : "sends", worst, cap, H->nic_gbps,
                               d->fill, H->where);
    }
    for (int k = 0; k < H->gpus && d->has_budget; k++) {
        const array_budget *b = &d->budget;
        double frac = gpu_fraction(d, &g[k]);
        if (f)
            fprintf(f, "%-12s gpu %-15d load %5.3f  PCIe in %6.2f of %.2f GB/s, out %6.2f of %.2f GB/s\n",
                    H->name, k, frac, g[k].h2d, b->pcie_h2d_gbs, g[k].d2h, b->pcie_d2h_gbs);
        if (rc)
            continue;
        if (frac > d->fill) {
            char parts[3][ARRAY_WHERE + 96], *sep = "";
            parts[0][0] = parts[1][0] = parts[2][0] = '\0';
            if (g[k].feng_gsps > 0)
                snprintf(parts[0], sizeof parts[0], "F-engines %.2f Gsample/s of feng_gsps %g at %s",
                         g[k].feng_gsps, b->feng_gsps, b->where_feng), sep = "; ";
            if (g[k].corr_tops > 0)
                snprintf(parts[1], sizeof parts[1], "%scorrelator %.1f Tops/s of %.0f (corr_tops at %s)", sep,
                         g[k].corr_tops, array_corr_tops(b, g[k].corr_ants), b->where_corr), sep = "; ";
            if (g[k].beam_tflops > 0)
                snprintf(parts[2], sizeof parts[2], "%sbeamformer %.2f TFLOP/s of beam_tflops %g at %s", sep,
                         g[k].beam_tflops, b->beam_tflops, b->where_beam);
            rc = cbf_error_set(err, CBF_EINVAL, "host '%s': GPU %d: its engines need %.3f of the GPU, "
                               "more than array.fill %g (%s%s%s)", H->name, k, frac, d->fill, parts[0],
                               parts[1], parts[2]);
        }
        else if (g[k].h2d > b->pcie_h2d_gbs * d->fill)
            rc = cbf_error_set(err, CBF_EINVAL, "host '%s': GPU %d: PCIe host to GPU %.2f GB/s, more than "
                               "%.2f (pcie_h2d_gbs %g at %s x array.fill %g)", H->name, k, g[k].h2d,
                               b->pcie_h2d_gbs * d->fill, b->pcie_h2d_gbs, b->where_pcie_h2d, d->fill);
        else if (g[k].d2h > b->pcie_d2h_gbs * d->fill)
            rc = cbf_error_set(err, CBF_EINVAL, "host '%s': GPU %d: PCIe GPU to host %.2f GB/s, more than "
                               "%.2f (pcie_d2h_gbs %g at %s x array.fill %g)", H->name, k, g[k].d2h,
                               b->pcie_d2h_gbs * d->fill, b->pcie_d2h_gbs, b->where_pcie_d2h, d->fill);
    }
    return rc;
}

int array_plan_check(const array_desc *d, const array_plan *p, FILE *f, cbf_error *err)
{
    int rc = 0;
    cbf_error later;   /* every host is printed; the first refusal is the one reported */
    for (int h = 0; h < d->n_hosts; h++) {
        int r = check_host(d, p, h, f, rc ? &later : err);
        rc = rc ? rc : r;
    }
    if (f && !d->has_budget)
        fprintf(f, "GPUs and PCIe not checked: the description names no array.budget\n");
    return rc;
}
