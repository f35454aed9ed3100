/* metrics_names.c: katgpucbf's Prometheus names for the node counters that
 * count the same thing, so dashboards and alerts written for MeerKAT's
 * fgpu/xbgpu read cbf too (with namespace cbf_ for theirs fgpu_/xbgpu_).
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
