/* write.c: the plan's folder: one pipeline per process, laid out as
 * pipelines/array-*.yaml are (the same nodes and parameters, each value
 * written out rather than given by --set), the start order, and the
 * multicast plan. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "array.h"

void array_group_text(array_group g, int offset, char *buf, size_t n)
{
    unsigned a = g.addr + (unsigned)offset;
    snprintf(buf, n, "%u.%u.%u.%u:%d", a >> 24, (a >> 16) & 255, (a >> 8) & 255, a & 255,
             g.port + (g.same_port ? 0 : offset));
}

/* count groups from first, comma-separated */
static void groups(array_group g, int first, int count, char *buf, size_t n)
{
    buf[0] = '\0';
    for (int i = 0; i < count; i++) {
        char one[32];
        array_group_text(g, first + i, one, sizeof one);
        size_t l = strlen(buf);
        snprintf(buf + l, n - l, "%s%s", i ? "," : "", one);
    }
}

static void interfaces(const array_host *h, int nic, char *buf, size_t n)
{
    buf[0] = '\0';
    for (int k = 0; k < h->n_ifs; k++)
        if (nic < 0 || nic == k) {
            size_t l = strlen(buf);
            snprintf(buf + l, n - l, "%s%s", l ? "," : "", h->ifs[k]);
        }
}

/* The shortest text that reads back as v: 0.04, not 0.040000000000000001. */
static const char *num(double v, char *buf)
{
    snprintf(buf, 32, "%.15g", v);
    if (strtod(buf, NULL) != v)
        snprintf(buf, 32, "%.17g", v);
    return buf;
}

static void engine(FILE *f, const array_desc *d, const array_proc *q, const char *gpu_none)
{
    const array_host *h = &d->hosts[q->host];
    char n[32];
    fprintf(f, "# Written by cbf-array from %s: process %s on host %s.\n", d->path, q->name, h->name);
    fprintf(f, "engine:\n  name: %s-%s\n", d->name, q->name);
    if (q->gpu >= 0)
        fprintf(f, "  gpu: required\n  gpu_device: %d\n", q->gpu);
    else
        fprintf(f, "  gpu: %s\n", gpu_none);
    if (d->adc_sample_rate != 1712e6 || d->sync_time > 0)   /* a sync_time needs the rate beside it */
        fprintf(f, "  adc_sample_rate: %s\n", num(d->adc_sample_rate, n));
    if (d->sync_time > 0)
        fprintf(f, "  sync_time: %s\n", num(d->sync_time, n));
    if (q->katcp_port)
        fprintf(f, "  katcp: \"%s:%d\"\n", h->control[0] ? h->control : "127.0.0.1", q->katcp_port);
    fprintf(f, "nodes:\n");
}

/* Simulated digitisers send at simulate.rate_gbps; the engines' senders
 * are then paced at PACE times their share of it (pipelines/array-feng.yaml
 * does so for the F-engines): unpaced, an engine sends each buffer in one
 * burst, and several bursts at once overrun a receiver's socket buffer on
 * a loaded host. 0 where the digitisers are real or unpaced. */
#define PACE 8.0
static double sim_share_gbps(const array_desc *d)
{
    /* one digitiser antenna's share of its digitiser's rate: what one F-engine reads */
    return d->digitisers > 0 && d->sim_rate_gbps > 0 ? d->sim_rate_gbps * d->digitisers / d->dig_antennas : 0.0;
}

/* A narrowband engine sends a 1 / decimation share of what the wideband
 * one would: its pace is cut as much, so that it stays PACE times its data. */
static double paced_gbps(const array_desc *d, double wideband_gbps)
{
    return wideband_gbps / array_decimation(d);
}

/* Narrowband spectra are 2 x channels x decimation digitiser samples apart:
 * the receivers of F-engine and beam heaps are told so (wideband: their
 * default, 2 x channels). */
static void spectra_step(FILE *f, const array_desc *d)
{
    if (array_decimation(d) > 1)
        fprintf(f, "      samples_between_spectra: %d\n", 2 * d->channels * array_decimation(d));
}

static void write_digitiser(FILE *f, const array_desc *d, const array_proc *q, const char *ifs)
{
    char dst[16384], n1[32], n2[32];
    engine(f, d, q, "none");
    fprintf(f, "  dsim:\n    plugin: dsim\n    params:\n      antennas: %d\n      bits: %d\n"
               "      samples_per_chunk: %d\n      length: %lld\n      noise: %s\n      delays: [",
            q->count, d->bits, d->samples_per_chunk, d->length, num(d->noise, n1));
    for (int a = 0; a < q->count; a++)
        fprintf(f, "%s%s", a ? ", " : "", num((q->first + a) * d->delay_step, n1));
    fprintf(f, "]\n      tones: [{frequency: %s, amplitude: %s}]\n", num(d->tone_hz, n1),
            num(d->tone_amplitude, n2));
    if (d->sim_threads > 1)
        fprintf(f, "      threads: %d\n", d->sim_threads);
    groups(d->dig, 2 * q->first, 2 * q->count, dst, sizeof dst);
    fprintf(f, "  send:\n    plugin: sender\n    params:\n      destinations: \"%s\"\n      interface: %s\n",
            dst, ifs);
    if (d->sim_rate_gbps > 0)
        fprintf(f, "      rate_gbps: %s\n", num(d->sim_rate_gbps, dst));
    fprintf(f, "edges:\n  - dsim.out -> send.in\n");
}

/* stream stops that end a receiver: one per sender, or none for an
 * endless array (a controller's product runs until it is stopped, whatever
 * its senders do) */
static int stops(const array_desc *d, int senders)
{
    return d->endless ? 0 : senders;
}

static void write_feng(FILE *f, const array_desc *d, const array_proc *q, const char *ifs)
{
    char src[64], dst[16384], n[32], w[32];
    engine(f, d, q, "auto");
    array_group_text(d->dig, d->input_streams[2 * q->index], src, 32);
    array_group_text(d->dig, d->input_streams[2 * q->index + 1], dst, 32);
    snprintf(src + strlen(src), sizeof src - strlen(src), ",%s", dst);
    groups(d->feng, 0, d->xengines, dst, sizeof dst);
    fprintf(f, "  recv:\n    plugin: receiver\n    params:\n      address: %s\n      interface: %s\n"
               "      antennas: 1\n      bits: %d\n      samples_per_chunk: %d\n      stops: %d\n",
            src, ifs, d->bits, d->samples_per_chunk, stops(d, 2));
    int nb = array_decimation(d) > 1;
    /* Narrowband: the ddc picks the antenna and mixes the centre to DC; the
     * pfb channelises its complex output (plugins/ddc, "Channelising the
     * output"), channel 0 the lowest frequency. VLBI's whole-band form
     * subsamples twice as much and keeps every channel (docs/narrowband.md,
     * "Keeping the whole band"): the pfb and fft_post take it from the
     * ddc's pass_bandwidth attribute. */
    if (nb && d->pass_bandwidth > 0)
        fprintf(f, "  ddc: {plugin: ddc, params: {centre_frequency: %s, decimation: %d, pass_bandwidth: %s}}\n",
                num(d->ddc_centre_hz, n), 2 * array_decimation(d), num(d->pass_bandwidth, w));
    else if (nb)
        fprintf(f, "  ddc: {plugin: ddc, params: {centre_frequency: %s, decimation: %d}}\n",
                num(d->ddc_centre_hz, n), array_decimation(d));
    /* pfb's buffers: one heap's spectra, or with the default 256 pfb's
     * own choice (256 on the CPU, larger on the GPU, whose host cost is
     * per buffer: plugins/pfb/README.md), which 256 divides. */
    char spb[48] = "";
    if (d->spectra_per_heap != 256)
        snprintf(spb, sizeof spb, "spectra_per_buffer: %d, ", d->spectra_per_heap);
    fprintf(f, "  pfb: {plugin: pfb, params: {channels: %d, %s%staps: %d, "
               "window: %s, w_cutoff: %s}}\n", d->channels, nb ? "" : "antenna: 0, ", spb,
            d->taps, d->window, num(d->w_cutoff, w));
    fprintf(f, "  post: {plugin: fft_post, params: {spectra_per_heap: %d, gain: [%s, 0.0], feng_id: %d, "
               "dither: %s}}\n", d->spectra_per_heap, num(d->gain, n), q->index, d->dither ? "true" : "false");
    fprintf(f, "  send:\n    plugin: sender\n    params:\n      destinations: \"%s\"\n      interface: %s\n"
               "      feng_id: %d\n", dst, ifs, q->index);
    if (sim_share_gbps(d) > 0)
        fprintf(f, "      rate_gbps: %s\n", num(paced_gbps(d, PACE * sim_share_gbps(d)), n));
    fprintf(f, "edges:\n%s  - pfb.out -> post.in\n  - post.out -> send.in\n",
            nb ? "  - recv.out -> ddc.in\n  - ddc.out -> pfb.in\n" : "  - recv.out -> pfb.in\n");
}

/* The X-engine receiver's window in heaps: array.rx_reorder_tol's time (F-engines
 * whose latencies differ, one restarted, a host busier than the others all
 * land their heaps this far behind the newest), at least 8 heaps, at most
 * 256 MiB of chunks (each buffer is held while its heap is open). */
static int xeng_window(const array_desc *d, const array_proc *q)
{
    const double heap_s = d->spectra_per_heap * 2.0 * d->channels / array_band_sps(d);
    const double chunk = (double)d->antennas * q->count * d->spectra_per_heap * 4.0;
    /* less a hair: a tolerance of exactly k heaps is k, not k + 1 from rounding */
    double n = d->rx_reorder_tol > 0 ? ceil(d->rx_reorder_tol / heap_s - 1e-9) : 8;
    if (n > floor(256.0 * 1024 * 1024 / chunk))
        n = floor(256.0 * 1024 * 1024 / chunk);
    return n < 8 ? 8 : n > 4096 ? 4096 : (int)n;
}

static void write_xeng(FILE *f, const array_desc *d, const array_proc *q, const char *ifs)
{
    char src[64], dst[4096], n[32];
    const int window = xeng_window(d, q);
    engine(f, d, q, "auto");
    groups(d->feng, q->index, 1, src, sizeof src);
    fprintf(f, "  recv:\n    plugin: receiver\n    params:\n      address: %s\n      interface: %s\n"
               "      stream: feng\n      antennas: %d\n      channels: %d\n      first_channel: %d\n"
               "      total_channels: %d\n      spectra_per_heap: %d\n      batches: 1\n      stops: %d\n"
               "      chunks_in_flight: %d\n      buffers: %d\n",
            src, ifs, d->antennas, q->count, q->first, d->channels, d->spectra_per_heap, stops(d, d->antennas),
            window, window + 2);
    spectra_step(f, d);
    /* With beams, one xbengine node (correlation and beams from one
     * upload, one kernel where it pays: plugins/xbengine), named corr so
     * that corr.* settings reach it either way. */
    fprintf(f, "  corr:\n    plugin: %s\n", d->beams ? "xbengine" : "correlator");
    if (d->heaps_per_dump || d->beams)
        fprintf(f, "    params:\n");
    if (d->heaps_per_dump)
        fprintf(f, "      heap_accumulation_threshold: %d\n", d->heaps_per_dump);
    if (d->beams) {
        /* Every beam at the phase centre, weights 1 / N: a coherent beam
         * keeps one antenna's level; steer with the beam requests. */
        fprintf(f, "      beams: [");
        for (int b = 0; b < d->beams; b++)
            fprintf(f, "%s{pol: %d}", b ? ", " : "", d->beam_pols[b]);
        fprintf(f, "]\n      weights: [");
        for (int a = 0; a < d->antennas; a++)
            fprintf(f, "%s%s", a ? ", " : "", num(1.0 / d->antennas, n));
        fprintf(f, "]\n");
    }
    fprintf(f, "  reduce: {plugin: reducer}\n");
    if (d->beams) {
        groups(d->beam, 0, d->beams, dst, sizeof dst);
        fprintf(f, "  bsend:\n    plugin: sender\n    params:\n      destinations: \"%s\"\n"
                   "      interface: %s\n", dst, ifs);
        /* a beam carries one byte per digitiser sample of one pol (2 N
         * samples in, N complex 8-bit values out), over this X-engine's
         * share of the channels */
        if (sim_share_gbps(d) > 0)
            fprintf(f, "      rate_gbps: %s\n",
                    num(paced_gbps(d, PACE * sim_share_gbps(d) * 4.0 * d->beams / (d->bits * (double)d->xengines)),
                        n));
    }
    if (d->has_vis) {
        groups(d->vis, q->index, 1, dst, sizeof dst);
        fprintf(f, "  vsend:\n    plugin: sender\n    params:\n      destinations: \"%s\"\n"
                   "      interface: %s\n", dst, ifs);
    }
    if (d->record)
        fprintf(f, "  sink: {plugin: filesink, params: {path: %s.h5, overwrite: true}}\n", q->name);
    fprintf(f, "edges:\n  - recv.batches -> corr.in\n  - corr.out -> reduce.in\n");
    if (d->record)
        fprintf(f, "  - reduce.out -> sink.in\n");
    if (d->has_vis)
        fprintf(f, "  - reduce.out -> vsend.in\n");
    if (d->beams)
        fprintf(f, "  - corr.beams -> bsend.in\n");
}

static void write_beams(FILE *f, const array_desc *d, const array_proc *q, const char *ifs)
{
    char src[4096];
    engine(f, d, q, "none");
    groups(d->beam, 0, d->beams, src, sizeof src);
    fprintf(f, "  recv:\n    plugin: receiver\n    params:\n      stream: beam\n      address: \"%s\"\n"
               "      interface: %s\n      antennas: %d\n      channels: %d\n      channels_per_heap: %d\n"
               "      total_channels: %d\n      spectra_per_heap: %d\n      batches: 1\n      stops: %d\n"
               "      chunks_in_flight: 16\n      buffers: 18\n",
            src, ifs, d->antennas, d->channels, d->channels / d->xengines, d->channels, d->spectra_per_heap,
            stops(d, d->xengines * d->beams));
    spectra_step(f, d);
    fprintf(f, "  sink: {plugin: filesink, params: {path: %s.h5, overwrite: true}}\n", q->name);
    fprintf(f, "edges:\n  - recv.beams -> sink.in\n");
}

/* The UDP ports a process receives on: what its senders wait for. */
static void binds(const array_desc *d, const array_proc *q, char *buf, size_t n)
{
    array_group g = q->kind == PROC_FENG ? d->dig : q->kind == PROC_XENG ? d->feng : d->beam;
    int first = q->kind == PROC_XENG ? q->index : 0;
    int count = q->kind == PROC_FENG ? 2 : q->kind == PROC_XENG ? 1 : q->kind == PROC_BEAMS ? d->beams : 0;
    buf[0] = '\0';
    for (int i = 0; i < count; i++) {
        size_t l = strlen(buf);
        int k = q->kind == PROC_FENG ? d->input_streams[2 * q->index + i] : first + i;
        snprintf(buf + l, n - l, "%s%d", i ? "," : "", g.port + (g.same_port ? 0 : k));
    }
    if (!count)
        snprintf(buf, n, "-");
}

/* Appends name to the comma-separated list buf unless it is there. */
static void add_name(char *buf, size_t n, const char *name)
{
    char tok[80], padded[8192];
    snprintf(tok, sizeof tok, ",%s,", name);
    snprintf(padded, sizeof padded, ",%s,", buf);
    if (strstr(padded, tok))
        return;
    size_t l = strlen(buf);
    snprintf(buf + l, n - l, "%s%s", l ? "," : "", name);
}

/* Hosts of the processes of one kind whose index satisfies the filter. */
static void hosts_of(const array_desc *d, const array_plan *p, int kind, int lo, int hi, char *buf, size_t n)
{
    buf[0] = '\0';
    for (int i = 0; i < p->n_procs; i++) {
        const array_proc *q = &p->procs[i];
        int idx = kind == PROC_DIGITISER ? q->first : q->index;
        int last = kind == PROC_DIGITISER ? q->first + q->count - 1 : q->index;
        if (q->kind == kind && last >= lo && idx <= hi)
            add_name(buf, n, d->hosts[q->host].name);
    }
    if (!buf[0])
        snprintf(buf, n, "%s", kind == PROC_DIGITISER ? "(digitisers)" : "(none)");
}

/* Hosts of the F-engines that read digitiser stream s. */
static void readers_of(const array_desc *d, const array_plan *p, int s, char *buf, size_t n)
{
    buf[0] = '\0';
    for (int i = 0; i < p->n_procs; i++) {
        const array_proc *q = &p->procs[i];
        if (q->kind == PROC_FENG && (d->input_streams[2 * q->index] == s || d->input_streams[2 * q->index + 1] == s))
            add_name(buf, n, d->hosts[q->host].name);
    }
    if (!buf[0])
        snprintf(buf, n, "(none)");
}

static void write_multicast(FILE *f, const array_desc *d, const array_plan *p)
{
    char g[32], s[8192], r[8192];
    fprintf(f, "# stream\tgroup:port\tsenders\treceivers\tGb/s\n");
    for (int i = 0; i < 2 * d->dig_antennas; i++) {
        array_group_text(d->dig, i, g, sizeof g);
        hosts_of(d, p, PROC_DIGITISER, i / 2, i / 2, s, sizeof s);
        readers_of(d, p, i, r, sizeof r);
        fprintf(f, "digitiser %d pol %d\t%s\t%s\t%s\t%.2f\n", i / 2, i % 2, g, s, r, array_dig_gbps_per_pol(d));
    }
    for (int x = 0; x < d->xengines; x++) {
        array_group_text(d->feng, x, g, sizeof g);
        hosts_of(d, p, PROC_FENG, 0, d->antennas, s, sizeof s);
        hosts_of(d, p, PROC_XENG, x, x, r, sizeof r);
        fprintf(f, "feng to xeng %d\t%s\t%s\t%s\t%.2f\n", x, g, s, r,
                d->antennas * array_feng_gbps_per_antenna(d) / d->xengines);
    }
    for (int b = 0; b < d->beams; b++) {
        array_group_text(d->beam, b, g, sizeof g);
        hosts_of(d, p, PROC_XENG, 0, d->xengines, s, sizeof s);
        hosts_of(d, p, PROC_BEAMS, 0, 0, r, sizeof r);
        fprintf(f, "beam %d pol %d\t%s\t%s\t%s\t%.2f\n", b, d->beam_pols[b], g, s,
                d->record ? r : "(subscribers)", array_beam_gbps(d));
    }
    for (int x = 0; d->has_vis && x < d->xengines; x++) {
        array_group_text(d->vis, x, g, sizeof g);
        hosts_of(d, p, PROC_XENG, x, x, s, sizeof s);
        fprintf(f, "visibilities of xeng %d\t%s\t%s\t(subscribers)\t%.2f\n", x, g, s,
                array_vis_gbps(d) / d->xengines);
    }
}

static FILE *open_in(const char *dir, const char *name, cbf_error *err)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (!f)
        cbf_error_set(err, CBF_EIO, "%s: cannot write: %s", path, strerror(errno));
    return f;
}

int array_write(const array_desc *d, const array_plan *p, const char *dir, cbf_error *err)
{
    if (mkdir(dir, 0777) && errno != EEXIST)
        return cbf_error_set(err, CBF_EIO, "%s: cannot make the folder: %s", dir, strerror(errno));
    char table[64];
    snprintf(table, sizeof table, "%sprocesses.tsv", d->prefix);
    FILE *order = open_in(dir, table, err);
    if (!order)
        return err->code;
    fprintf(order, "# start in this order, each once the ports of the ones before are bound\n"
                   "# order\tname\thost\tgpu\tpipeline\tudp ports it receives on\n");
    static const int start[] = {PROC_BEAMS, PROC_XENG, PROC_FENG, PROC_DIGITISER};
    int stage = 0;   /* numbered among the kinds the plan has */
    for (int s = 0; s < 4; s++) {
        int first = 1;
        for (int i = 0; i < p->n_procs; i++) {
            const array_proc *q = &p->procs[i];
            if (q->kind != start[s])
                continue;
            stage += first;
            first = 0;
            char file[64], ifs[1024], ports[4096];
            snprintf(file, sizeof file, "%s.yaml", q->name);
            FILE *f = open_in(dir, file, err);
            if (!f) {
                fclose(order);
                return err->code;
            }
            interfaces(&d->hosts[q->host], q->nic, ifs, sizeof ifs);
            if (q->kind == PROC_DIGITISER)
                write_digitiser(f, d, q, ifs);
            else if (q->kind == PROC_FENG)
                write_feng(f, d, q, ifs);
            else if (q->kind == PROC_XENG)
                write_xeng(f, d, q, ifs);
            else
                write_beams(f, d, q, ifs);
            int bad = ferror(f) | fclose(f);
            binds(d, q, ports, sizeof ports);
            char gpu[16] = "-";
            if (q->gpu >= 0)
                snprintf(gpu, sizeof gpu, "%d", q->gpu);
            fprintf(order, "%d\t%s\t%s\t%s\t%s\t%s\n", stage, q->name, d->hosts[q->host].name, gpu, file, ports);
            if (bad) {
                fclose(order);
                return cbf_error_set(err, CBF_EIO, "%s/%s: write failed", dir, file);
            }
        }
    }
    int bad = ferror(order) | fclose(order);
    snprintf(table, sizeof table, "%smulticast.tsv", d->prefix);
    FILE *m = open_in(dir, table, err);
    if (!m)
        return err->code;
    write_multicast(m, d, p);
    bad |= ferror(m) | fclose(m);
    return bad ? cbf_error_set(err, CBF_EIO, "%s: write failed", dir) : 0;
}
