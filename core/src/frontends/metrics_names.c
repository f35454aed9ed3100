/* metrics_names.c: katgpucbf's Prometheus names for the node counters that
 * count the same thing, so dashboards and alerts written for MeerKAT's
 * fgpu/xbgpu read cbf too (with namespace cbf_ for theirs fgpu_/xbgpu_);
 * and what the sensors whose kind or name would mislead mean (timestamps
 * kept as counters, configuration values kept as gauges).
 *
 * This is a table of names only: the core includes nothing of the plugins
 * and the exporter works the same for a plugin it has never heard of (its
 * counters keep their own names). A counter is listed only where it means
 * what katgpucbf's does; where it does not (the receiver's and sender's
 * `bytes` count whole packets, katgpucbf's payload bytes only) it keeps its
 * own name. docs/control.md shows the table. */
#include <string.h>

#include "metrics.h"

#define XENG "cbf.xeng."   /* an X-engine stream: katgpucbf's output_x_* names */

static const cbf_metric_alias aliases[] = {
    /* The receiver: digitiser heaps into an F-engine, F-engine heaps into an
     * X-engine (one presence flag per heap, or per batch and antenna). */
    {"receiver", "heaps", NULL, "input_heaps", "number of heaps received (complete in their chunk)"},
    {"receiver", "chunks", NULL, "input_chunks", "number of chunks received"},
    {"receiver", "flags_missing", NULL, "input_missing_heaps",
     "number of heaps dropped on the input (presence flags left clear when their chunk left)"},
    {"receiver", "heaps_late", NULL, "input_too_old_heaps",
     "number of heaps that arrived too late to be processed"},
    {"receiver", "heaps_incomplete", NULL, "input_incomplete_heaps",
     "number of heaps only partially received"},
    /* The F-engine's requantisation. */
    {"fft_post", "saturated_pol0", NULL, "output_clipped_samples",
     "number of samples that were saturated", "pol", "0"},
    {"fft_post", "saturated_pol1", NULL, "output_clipped_samples",
     "number of samples that were saturated", "pol", "1"},
    /* The X-engine's visibilities. */
    {"reducer", "saturated", NULL, "output_x_clipped_visibilities",
     "number of scalar visibilities that saturated"},
    /* The sender: X-engine streams under output_x_*, the others (F-engine,
     * digitiser) under output_*. */
    {"sender", "heaps", XENG, "output_x_heaps", "number of X-engine heaps transmitted"},
    {"sender", "dumps_not_sent_no_antennas", XENG, "output_x_skipped_accs",
     "skipped output accumulations because input data was entirely incomplete"},
    {"sender", "heaps", NULL, "output_heaps", "number of heaps transmitted"},
    {"sender", "heaps_not_sent_missing", NULL, "output_skipped_heaps",
     "heaps not sent because input data was incomplete"},
};

const cbf_metric_alias *cbf_metrics_alias(const char *plugin, const char *counter, const char *input_type)
{
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++) {
        const cbf_metric_alias *a = &aliases[i];
        if (strcmp(a->plugin, plugin) || strcmp(a->counter, counter))
            continue;
        if (!a->input_prefix)
            return a;
        if (input_type && !strncmp(input_type, a->input_prefix, strlen(a->input_prefix)))
            return a;
    }
    return NULL;
}

/* The runtime's and the shipped plugins' sensors that are not counts of
 * events or whose name says too little. Another plugin's sensors are
 * exported by kind, with a help that names them. docs/control.md lists
 * these. */
static const cbf_metric_meaning meanings[] = {
    /* Timestamps: counters in the node (they only rise), values here. */
    {NULL, "steady_state_timestamp", false, false,
     "ADC timestamp (samples since sync_time) from which the node's output reflects every timed request "
     "it has accepted (katgpucbf's steady-state-timestamp)"},
    {"receiver", "rx.timestamp", false, false, "ADC timestamp of the last chunk the receiver sent on"},
    {"sender", "tx.next_timestamp", false, false,
     "ADC timestamp after the last buffer the sender took (sent, or held back while not capturing)"},
    /* Gauges whose name says too little. */
    {"receiver", "rx.unixtime", false, false,
     "UNIX time of the last chunk the receiver sent on (NaN without the engine's sync_time)"},
    {"receiver", "rx.missing_unixtime", false, false,
     "UNIX time of the last chunk that had data missing (NaN: none yet)"},
    {"receiver", "rx.synchronised", false, false,
     "1 when the last chunk was whole, 0 while data is missing (katgpucbf's rx.synchronised)"},
    {"pfb", "rms_dbfs_pol0", false, false,
     "digitiser power of polarisation 0 over the last buffer, dB relative to full scale (nominal -30 to -10)"},
    {"pfb", "rms_dbfs_pol1", false, false,
     "digitiser power of polarisation 1 over the last buffer, dB relative to full scale (nominal -30 to -10)"},
    {NULL, "gpu_ms_per_buffer", false, false,
     "milliseconds the node's GPU kernels took on its last buffer (NaN until one has been timed)"},
    {"receiver", "gro", false, false,
     "1 when the receiver's sockets take datagrams coalesced by the kernel (UDP_GRO), 0 when off or refused"},
    {"sender", "gso", false, false,
     "1 while every socket queue of the sender sends runs of packets as UDP_SEGMENT messages, 0 when off, "
     "on ibverbs or after the kernel refused one"},
    /* Configuration in force: labels of cbf_node_config_info. */
    {"fft_post", "dither", true, true, NULL},
    {"fft_post", "dither_key", true, false, NULL},
    {"dsim", "period", true, false, NULL},
};

const char cbf_metrics_config_help[] =
    "configuration in force, one label per value, always 1: fft_post dither (true: uniform dither added "
    "before requantising) and dither_key (its generator's key); dsim period (samples after which the "
    "signal in force repeats, 0: never)";

const cbf_metric_meaning *cbf_metrics_meaning(const char *plugin, const char *sensor)
{
    for (size_t i = 0; i < sizeof meanings / sizeof meanings[0]; i++) {
        const cbf_metric_meaning *m = &meanings[i];
        if ((!m->plugin || !strcmp(m->plugin, plugin)) && !strcmp(m->sensor, sensor))
            return m;
    }
    return NULL;
}
