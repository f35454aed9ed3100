/* product.h: a katsdpcontroller product configuration (schema 4.x, the
 * JSON that `?product-configure NAME CONFIG` carries) as a typed model for
 * cbf-controller (docs/controller.md, "Product configuration").
 *
 * product.c checks the document field by field as katsdpcontroller's
 * schema and stream classes do, fills in the defaults they fill in and
 * works out the figures its stream sensors report (bandwidth, substreams,
 * accumulations, ...), so the controller plans and answers from one place.
 * A refused document gives CBF_ECONFIG and one line naming the JSON path
 * of the fault: `outputs.acv.src_streams[2]: no output named "dig_m803h"`. */
#ifndef CBF_PRODUCT_H
#define CBF_PRODUCT_H

#include <stddef.h>

#include <jansson.h>

#include "cbf/error.h"

typedef enum {
    CBF_STREAM_DIG,   /* sim.dig.baseband_voltage output, dig.baseband_voltage input */
    CBF_STREAM_ACV,   /* gpucbf.antenna_channelised_voltage */
    CBF_STREAM_BCP,   /* gpucbf.baseline_correlation_products */
    CBF_STREAM_TACV,  /* gpucbf.tied_array_channelised_voltage */
    CBF_STREAM_TARV,  /* gpucbf.tied_array_resampled_voltage (VLBI) */
} cbf_stream_kind;

typedef enum { CBF_DITHER_DEFAULT, CBF_DITHER_UNIFORM, CBF_DITHER_NONE } cbf_dither;
typedef enum { CBF_WINDOW_HANN, CBF_WINDOW_RECT } cbf_window;

typedef struct cbf_product_stream cbf_product_stream;

typedef struct cbf_product_strings {
    char **v;
    int n;
} cbf_product_strings;

typedef struct cbf_product_dig {
    int simulated;                     /* 1: sim.dig (a dsim to start); 0: a real digitiser input */
    const char *url;                   /* input only: spead://GROUP[+N]:PORT as given */
    unsigned group;                    /* input only: first group, IPv4 host order */
    int n_groups, port;                /* input only */
    double sync_time;                  /* given, or the parse's `now` in whole seconds */
    int sync_time_given;
    double adc_sample_rate, centre_frequency;
    const char *band;
    const char *antenna;               /* as given: a name or a katpoint description */
    const char *antenna_name;          /* the description's first field */
    int bits_per_sample;               /* default 10 */
    int samples_per_heap;              /* default 4096, a power of two */
    cbf_product_strings command_line_extra;
} cbf_product_dig;

typedef struct cbf_product_acv {
    int n_inputs;                      /* = n_src */
    const char **input_labels;         /* given, or the source names */
    int n_chans;
    double w_cutoff;                   /* default 1 (VLBI 0) */
    cbf_window window;                 /* default hann (VLBI rect) */
    int taps;                          /* default 16 (VLBI 1) */
    int narrowband, vlbi;
    int decimation_factor;             /* 1 wideband */
    double nb_centre_frequency;        /* narrowband.centre_frequency, Hz in the digitised band */
    double pass_bandwidth;             /* VLBI: given; otherwise = bandwidth */
    int subsampling;                   /* decimation (x 2 for VLBI) */
    int ddc_taps;                      /* 16 x subsampling; 0 wideband */
    double weight_pass;                /* 0.005 narrowband; 0 wideband */
    cbf_dither dither;
    cbf_product_strings command_line_extra;
    /* what the sources and the above give (the stream sensors) */
    const char **antennas;             /* distinct antenna names, in input order */
    int n_ants, n_fengs;               /* n_fengs = n_inputs / 2 */
    const char *band;
    double adc_sample_rate, sync_time;
    double bandwidth;                  /* adc / 2 / decimation */
    double centre_frequency;           /* on the sky */
    double center_freq;                /* the sensor: in the digitised band */
    int n_samples_between_spectra;     /* 2 x n_chans x decimation */
    int n_substreams, n_chans_per_substream;
    int spectra_per_heap;              /* 2^20 / n_chans */
    double pfb_group_delay, ddc_group_delay;  /* samples (negative) */
    int bits_per_sample;               /* 8 */
} cbf_product_acv;

typedef struct cbf_product_bcp {
    const cbf_product_stream *acv;
    double int_time_requested;
    double int_time;                   /* rounded to whole heaps, as katsdpcontroller does */
    int heaps_per_dump, n_accs;
    int n_baselines, n_xengs, n_chans_per_substream;
    int bits_per_sample;               /* 32 */
    cbf_product_strings command_line_extra;
} cbf_product_bcp;

typedef struct cbf_product_tacv {
    const cbf_product_stream *acv;
    int src_pol;
    cbf_dither dither;
    int spectra_per_heap, n_bengs, n_chans_per_substream;
    int n_sources;                     /* source indices src_pol, src_pol + 2, ... */
    int bits_per_sample;               /* 8 */
    cbf_product_strings command_line_extra;
} cbf_product_tacv;

typedef struct cbf_product_tarv {
    const cbf_product_stream *acv;     /* the beams' channeliser */
    int n_chans;                       /* 2 */
    const char *pols[2];               /* x y, or R L */
    const char *station_id;
    double bandwidth;                  /* the channeliser's pass_bandwidth */
    int bits_per_sample;               /* 2 */
} cbf_product_tarv;

struct cbf_product_stream {
    const char *name;
    const char *type;                  /* as written */
    cbf_stream_kind kind;
    int is_input;
    int index;                         /* in cbf_product.streams */
    cbf_product_strings src_names;     /* src_streams as written */
    const cbf_product_stream **src;    /* the same, resolved */
    int n_src;
    union {
        cbf_product_dig dig;
        cbf_product_acv acv;
        cbf_product_bcp bcp;
        cbf_product_tacv tacv;
        cbf_product_tarv tarv;
    } u;
};

typedef struct cbf_product {
    char version[8];                   /* "4.7" */
    int minor;
    /* config */
    int develop_any_gpu, develop_disable_ibverbs, develop_less_resources;
    double develop_data_timeout;       /* 0: none */
    const char *vlbi_recorder_protocol;   /* udps (default), udpsnor */
    const char *vlbimeta_mode;         /* antab (default) */
    double shutdown_delay;             /* -1: not given (katsdpcontroller's own default) */
    int mirror_sensors;                /* default 1 */
    const char *image_tag, *wrapper;   /* NULL when not given */
    cbf_product_strings image_overrides;  /* "name=image" */
    int n_service_overrides;
    /* simulation */
    double clock_ratio, start_time;    /* 1, 0 when not given */
    /* inputs first, then outputs, each in the document's order */
    cbf_product_stream *streams;
    int n_streams;
    void **owned;                      /* every string and array above, freed with the product */
    int n_owned, cap_owned;
} cbf_product;

/* Parses and checks a configuration. now: UNIX seconds, the sync_time a
 * simulated digitiser without one gets (katsdpcontroller takes the time of
 * the request, whole seconds). CBF_ECONFIG naming the JSON path, CBF_ENOMEM. */
int cbf_product_parse(const char *text, size_t len, double now, cbf_product **out, cbf_error *err);
/* Heaps of `jones` complex values per input (katgpucbf's fgpu
 * --jones-per-batch; the parse takes its default, 2^20): every
 * channeliser's spectra per heap becomes jones / n_chans, and the
 * correlators' dumps and the beams' heaps follow. A band slower than the
 * real one keeps real-time heap times so (dev/qualification). CBF_ECONFIG
 * when a channeliser has more channels than that. */
int cbf_product_set_jones_per_batch(cbf_product *p, int jones, cbf_error *err);
int cbf_product_from_json(const json_t *root, double now, cbf_product **out, cbf_error *err);
void cbf_product_free(cbf_product *p);
const cbf_product_stream *cbf_product_find(const cbf_product *p, const char *name);
/* The stream kind's katsdpcontroller type name. */
const char *cbf_product_kind_name(cbf_stream_kind k, int is_input);
/* The task name katsdpcontroller gives the dsim making digitiser stream d:
 * sim.ANTENNA.RATE, the rate as Python's repr writes it
 * (sim.dsim000.1712000000.0), the form katgpucbf's suite finds dsims by. */
void cbf_product_dsim_task(const cbf_product_dig *d, char *buf, size_t n);

#endif
