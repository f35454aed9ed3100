/* array.h: cbf-array's model of an array description, a measured budget
 * and the plan made from them (docs/scaling.md, "cbf-array").
 *
 * desc.c loads the description and the budget through libcbf's parameter
 * validation, so a mistake is one line starting with file:line:column, as
 * for a pipeline; plan.c places the engines, works out every stream's
 * rate and checks each host against its NICs and each GPU against the
 * budget; write.c writes the per-process pipelines and the tables. */
#ifndef CBF_ARRAY_H
#define CBF_ARRAY_H

#include <stdio.h>

#include "cbf/error.h"

#define ARRAY_MAX_HOSTS 256
#define ARRAY_MAX_IFS 8
#define ARRAY_MAX_CORR 32
#define ARRAY_WHERE 512
#define ARRAY_MAX_ANTENNAS 4096
#define ARRAY_MAX_BEAMS 64

enum { ROLE_DIGITISER = 1, ROLE_FENG = 2, ROLE_XENG = 4, ROLE_BEAMS = 8 };

typedef struct array_host {
    char name[64];
    unsigned roles;
    int gpus;                           /* 0: the engines run on the CPU */
    char ifs[ARRAY_MAX_IFS][64];        /* interface addresses, one per NIC */
    int n_ifs;
    double nic_gbps;                    /* each NIC's line rate */
    char control[64];                   /* where its engines' katcp ports bind ("": 127.0.0.1) */
    /* A Linux network namespace that is this host (a test's hosts on one
     * machine, scripts/cbf_netns.py): cbf-controller's local launcher runs
     * its engines there (ip netns exec); "": the launcher's own. */
    char netns[64];
    char where[ARRAY_WHERE];            /* of the host's mapping */
} array_host;

typedef struct array_group {
    unsigned addr;                      /* IPv4, host order */
    int port;
    /* Group i of the stream on port + i (0), or every group on `port` (1,
     * multicast.same_port: katgpucbf's a.b.c.d+N:port, which its receivers
     * join on the one port). Ports apart let a NIC spread the flows by port;
     * cbf's receiver binds each group's address, so one port serves too. */
    int same_port;
} array_group;

/* What cbf-bench measured on one kind of GPU host (docs/scaling.md,
 * "Budget files"). */
typedef struct array_budget {
    char path[512];
    char gpu[128];
    double pcie_h2d_gbs, pcie_d2h_gbs;  /* GB/s, both directions at once */
    double feng_gsps;                   /* F-engine Gsample/s of one GPU, the whole engine */
    int n_corr;
    double corr_ants[ARRAY_MAX_CORR], corr_tops[ARRAY_MAX_CORR];
    double beam_tflops;
    char where_pcie_h2d[ARRAY_WHERE], where_pcie_d2h[ARRAY_WHERE], where_feng[ARRAY_WHERE],
        where_corr[ARRAY_WHERE], where_beam[ARRAY_WHERE];
} array_budget;

typedef struct array_desc {
    char path[512];
    char name[64];
    int antennas, channels, bits, spectra_per_heap, xengines, beams, heaps_per_dump;
    int samples_per_chunk;
    double adc_sample_rate, gain, fill;
    int beam_pols[ARRAY_MAX_BEAMS];     /* beam b's pol (default b mod 2) */
    /* Narrowband (katgpucbf's narrowband channeliser): decimation > 1 puts a
     * ddc (centre ddc_centre_hz, that decimation) before each F-engine's
     * pfb; the channels then span adc_sample_rate / 2 / decimation about the
     * centre, and spectra are 2 x channels x decimation digitiser samples
     * apart. 1: wideband. */
    int decimation;
    double ddc_centre_hz;
    /* VLBI (katgpucbf's narrowband.vlbi): > 0 keeps the whole band the ddc
     * makes (no channel discarded; the ddc subsamples by 2 x decimation,
     * its filter flat over this many Hz about the centre), the same
     * channels, bandwidth and spectra as the discarding form. 0: discard. */
    double pass_bandwidth;
    /* Seconds an F-engine heap may arrive behind the newest one and still be
     * placed: the X-engines' receive window (katgpucbf's --rx-reorder-tol,
     * 2^29 ADC samples, as time; write.c holds it to 256 MiB). 0: 8 heaps. */
    double rx_reorder_tol;
#define ARRAY_RX_REORDER_TOL "0.3136"   /* its default, 2^29 / 1712e6 s (the controller's too) */
    /* Put before every process name (NAME.yaml, NAME.log, engine.name) and
     * the plan's tables (PREFIXprocesses.tsv, PREFIXmulticast.tsv), so that
     * several plans (a product's channelisers) share one folder; "": none. */
    char prefix[16];
    /* F-engines' PFB and quantiser */
    int taps, dither;
    char window[8];
    double w_cutoff;
    /* input i (2 x antenna + pol) reads digitiser stream input_streams[i]
     * (default i); streams 2k and 2k + 1 are digitiser antenna k's pols,
     * and there are dig_antennas of them */
    int input_streams[2 * ARRAY_MAX_ANTENNAS];
    int dig_antennas;
    double sync_time;                   /* engine.sync_time of every engine; 0: none */
    int katcp_port;                     /* first engine katcp port (process k at +k); 0: none */
    int record;                         /* X-engines' HDF5 files and the beam receiver */
    int endless;                        /* receivers ignore stream stops */
    array_group dig, feng, beam, vis;   /* first group of each stream */
    int has_vis;                        /* X-engines send visibilities to vis + x */
    /* simulate: dsim processes standing in for the digitisers (0: real ones) */
    int digitisers;
    long long length;
    double noise, tone_hz, tone_amplitude, delay_step, sim_rate_gbps;
    int sim_threads;                    /* each dsim's threads (plugins/dsim threads); 0: 1 */
    /* sizing (--figures): a host as the array would buy it */
    int size_gpus_per_host, size_nics_per_host;
    double size_nic_gbps;
    unsigned size_first_if;             /* IPv4, host order; 0: not given */
    int has_sizing;
    array_host hosts[ARRAY_MAX_HOSTS];
    int n_hosts;
    int hosts_sized;                    /* hosts made from `sizing` (no `hosts` section) */
    array_budget budget;
    int has_budget;
    /* file:line:column of what a later refusal names */
    char where_root[ARRAY_WHERE], where_array[ARRAY_WHERE], where_xengines[ARRAY_WHERE],
        where_beams[ARRAY_WHERE], where_digitisers[ARRAY_WHERE], where_sizing[ARRAY_WHERE],
        where_hosts[ARRAY_WHERE], where_record[ARRAY_WHERE];
} array_desc;

/* Loads and checks the description (and the budget it names). CBF_ECONFIG
 * with "file:line:column: ..." for a bad one, and for a budget file given
 * where a description belongs. */
int array_desc_load(const char *path, array_desc *d, cbf_error *err);
/* "a.b.c.d:port" (a multicast group) into g; CBF_ECONFIG "where: what: ...". */
int array_group_parse(const char *text, const char *what, const char *where, array_group *g, cbf_error *err);

/* ---- rates (plan.c) ---- */
/* d->decimation, 1 for a description filled in by hand that left it 0. */
int array_decimation(const array_desc *d);
/* The digitiser rate the channels stand for, per pol: adc_sample_rate
 * wideband, adc_sample_rate / decimation narrowband (a band of half that).
 * The F-engines' output, the X-engines' input and the beams scale with it;
 * what the digitisers send does not. */
double array_band_sps(const array_desc *d);
/* Gb/s on the wire (UDP payload + SPEAD, UDP, IP and Ethernet headers). */
double array_dig_gbps_per_pol(const array_desc *d);
double array_feng_gbps_per_antenna(const array_desc *d);
double array_beam_gbps(const array_desc *d);     /* one beam, the whole band */
double array_vis_gbps(const array_desc *d);      /* the visibilities, whole band (0: heaps_per_dump 0) */
double array_corr_tops_needed(const array_desc *d, int channels);
double array_beam_tflops_needed(const array_desc *d, int channels);
/* The budget's correlator rate at n antennas: linear between measured
 * sizes, the nearest one outside them. */
double array_corr_tops(const array_budget *b, double n);

/* ---- the plan (plan.c) ---- */
enum { PROC_BEAMS, PROC_XENG, PROC_FENG, PROC_DIGITISER };   /* also the start order */

typedef struct array_proc {
    int kind;
    int index;                          /* antenna, X-engine, digitiser */
    int host, gpu, nic;                 /* gpu -1: none; nic -1: all of the host's */
    int first, count;                   /* digitiser: its digitiser antennas; X-engine: channels */
    int katcp_port;                     /* engine.katcp on its host's control address; 0: none */
    char name[32];
} array_proc;

typedef struct array_plan {
    array_proc *procs;
    int n_procs;
} array_plan;

/* Places the processes on the hosts; CBF_ECONFIG naming the description's
 * place when it cannot (no host for a role, channels that do not divide). */
int array_plan_make(const array_desc *d, array_plan *p, cbf_error *err);
void array_plan_free(array_plan *p);
/* Prints each host's NICs and GPUs against their budget to f (NULL: not
 * printed); returns 0, or CBF_EINVAL with the first figure over budget in
 * err, naming the host. */
int array_plan_check(const array_desc *d, const array_plan *p, FILE *f, cbf_error *err);
/* ---- sizing (figures.c) ---- */
#define ARRAY_N_LIMITS 5

/* What --figures works out from the description's array and `sizing` host
 * and the budget: antennas one GPU's F-engines take under each limit, GPUs
 * the X-engines need under each, and so the counts. */
typedef struct array_size {
    double f_limits[ARRAY_N_LIMITS];    /* antennas per GPU under each limit */
    double x_limits[ARRAY_N_LIMITS];    /* X-engine GPUs needed under each */
    int f_binds, x_binds;               /* index of the limit that binds first */
    int per_gpu, f_gpus, f_hosts;       /* F-engines */
    int x_needed, xengines, x_hosts;    /* X-engines: one per GPU, dividing the channels */
} array_size;

/* CBF_ECONFIG naming the description's place without a `sizing` section or
 * array.budget; CBF_EINVAL when one antenna does not fit one GPU. */
int array_size_make(const array_desc *d, array_size *s, cbf_error *err);
/* The sizing of docs/scaling.md: how many hosts, GPUs, NICs, switch ports
 * and groups the array needs, and what binds first. */
int array_figures(const array_desc *d, FILE *f, cbf_error *err);
/* What --out and --check plan with, where the description leaves it to the
 * sizing: array.xengines 0 becomes the X-engine count --figures gives, and
 * without a `hosts` section the hosts are the ones --figures counts (f0...,
 * x0..., b0 for the beams, d0... for simulated digitisers), with
 * consecutive interface addresses from sizing.first_interface. CBF_ECONFIG
 * naming the place when the description gives neither. */
int array_desc_complete(array_desc *d, cbf_error *err);

/* ---- output (write.c) ---- */
void array_group_text(array_group g, int offset, char *buf, size_t n);
int array_write(const array_desc *d, const array_plan *p, const char *dir, cbf_error *err);

#endif
