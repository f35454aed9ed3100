/* test_plan.c: the controller's configuration (tools/controller/config.c)
 * and a product planned from it (plan.c): the suite-style 4-antenna
 * wideband product with 4 beams (data/suite-4ant-wide-beams.json) planned
 * on loopback, its pipelines checked for the groups, ports, katcp ports and
 * beams' pols it must carry and loaded as cbf-run loads them; two products
 * side by side sharing no group or port; what the planner cannot run
 * refused at its JSON path; bad configurations refused at file:line:column.
 *
 *   test_plan DATA_DIR       (plugins from $CBF_PLUGIN_PATH) */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cbf/graph.h"
#include "ctl_test.h"
#include "plan.h"

#define WIDE "suite-4ant-wide-beams.json"

static const char *data_dir;

/* Groups 239.50.0.0/24, UDP ports from 9000, engine katcp from 9500. */
static const char *const CONFIG = "controller:\n"
                                  "  state_dir: state\n"
                                  "ranges:\n"
                                  "  multicast: 239.50.0.0/24\n"
                                  "  udp_ports: 9000-9099\n"
                                  "  engine_katcp: 9500-9599\n"
                                  "  product_katcp: 9600-9609\n";

typedef struct fixture {
    char *dir;
    cbf_controller_config *c;
    cbf_resources *res;
} fixture;

static void setup(fixture *f, const char *yaml)
{
    f->dir = ct_tmpdir("plan");
    cbf_error err = {0};
    if (!(f->c = ct_config(f->dir, yaml, &err)))
        fail_msg("configuration refused: %s", err.msg);
    assert_int_equal(cbf_resources_create(f->c, &f->res, &err), 0);
}

static void teardown(fixture *f)
{
    cbf_resources_free(f->res);
    cbf_controller_config_free(f->c);
    ct_rm_rf(f->dir);
    free(f->dir);
}

static cbf_product_plan *plan(fixture *f, cbf_product *p, const char *name)
{
    cbf_product_plan *pl = NULL;
    cbf_error err = {0};
    if (cbf_product_plan_make(p, name, f->c, f->res, &pl, &err))
        fail_msg("%s not planned: %s", name, err.msg);
    return pl;
}

static void has(const char *text, const char *what, const char *file)
{
    if (!strstr(text, what))
        fail_msg("%s lacks \"%s\":\n%s", file, what, text);
}

static char *pipeline(const cbf_product_plan *pl, const char *engine)
{
    char name[64];
    snprintf(name, sizeof name, "%s.yaml", engine);
    return ct_slurp(pl->dir, name, NULL);
}

static void check_engines(const cbf_product_plan *pl)
{
    /* receivers first: the 4 X-engines (one per substream), the 4
     * F-engines, then one dsim per antenna name */
    static const char *const names[] = {"xeng0", "xeng1", "xeng2", "xeng3", "feng0", "feng1",
                                        "feng2", "feng3", "digitiser0", "digitiser1", "digitiser2", "digitiser3"};
    static const char *const tasks[] = {
        "xb.baseline-correlation-products.0", "xb.baseline-correlation-products.1",
        "xb.baseline-correlation-products.2", "xb.baseline-correlation-products.3",
        "f.antenna-channelised-voltage.0",    "f.antenna-channelised-voltage.1",
        "f.antenna-channelised-voltage.2",    "f.antenna-channelised-voltage.3",
        "sim.dsim000.1712000000.0",           "sim.dsim001.1712000000.0",
        "sim.dsim002.1712000000.0",           "sim.dsim003.1712000000.0"};
    assert_int_equal(pl->n_engines, 12);
    assert_int_equal(pl->n_stages, 3);
    for (int i = 0; i < 12; i++) {
        const cbf_plan_engine *e = &pl->engines[i];
        assert_string_equal(e->name, names[i]);
        assert_string_equal(e->task, tasks[i]);
        assert_int_equal(e->stage, i / 4);
        assert_string_equal(e->host, "localhost");
        assert_string_equal(e->address, "127.0.0.1");
        assert_int_equal(e->katcp_port, 9500 + i);   /* every engine its own port, in start order */
    }
    /* what each carries: an F-engine its antenna's two inputs, a dsim the
     * inputs reading its two streams, an X-engine its quarter of the band */
    const cbf_plan_engine *f1 = &pl->engines[5], *d2 = &pl->engines[10], *x3 = &pl->engines[3];
    assert_int_equal(f1->n_inputs, 2);
    assert_int_equal(f1->inputs[0], 2);
    assert_int_equal(f1->inputs[1], 3);
    assert_string_equal(f1->carries, "inputs m801h, m801v");
    assert_int_equal(d2->n_inputs, 2);
    assert_int_equal(d2->inputs[0], 4);
    assert_string_equal(d2->carries, "digitiser streams dsim002h dsim002v, read by inputs m802h, m802v");
    assert_int_equal(x3->first_channel, 768);
    assert_int_equal(x3->n_channels, 256);
    assert_int_equal(x3->n_inputs, 0);
}

/* Every stream's block: digitisers 0-7, F-engine output 8-11, beams 12-15,
 * visibilities 16-19; every group of a kind of stream on its one port
 * (katsdpcontroller's a.b.c.d+N:port): digitisers 9000, F-engines 9001,
 * beams 9002, visibilities 9003. */
static void check_streams(const cbf_product_plan *pl)
{
    struct { const char *name; unsigned group; int port, count; } want[] = {
        {"dsim000h", 0, 9000, 1}, {"dsim003v", 7, 9000, 1},
        {"antenna-channelised-voltage", 8, 9001, 4}, {"tied-array-channelised-voltage-0x", 12, 9002, 1},
        {"tied-array-channelised-voltage-1x", 13, 9002, 1}, {"tied-array-channelised-voltage-0y", 14, 9002, 1},
        {"baseline-correlation-products", 16, 9003, 4}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const cbf_plan_stream *s = cbf_product_plan_stream(pl, want[i].name);
        assert_non_null(s);
        assert_int_equal(s->first.addr, (239u << 24 | 50u << 16) + want[i].group);
        assert_int_equal(s->first.port, want[i].port);
        assert_int_equal(s->count, want[i].count);
        assert_int_equal(s->first.same_port, 1);
    }
}

static void check_pipelines(const cbf_product_plan *pl)
{
    char *t = pipeline(pl, "feng1");
    has(t, "  name: p1-feng1\n", "feng1.yaml");
    has(t, "  katcp: \"127.0.0.1:9505\"\n", "feng1.yaml");
    has(t, "  sync_time: 1700000123\n", "feng1.yaml");   /* the parse's now, whole seconds */
    has(t, "      address: 239.50.0.2:9000,239.50.0.3:9000\n", "feng1.yaml");   /* dsim001h, dsim001v */
    has(t, "      stops: 0\n", "feng1.yaml");   /* runs until deconfigured */
    has(t, "channels: 1024, antenna: 0, spectra_per_buffer: 1024, taps: 16, window: hann, w_cutoff: 1}",
        "feng1.yaml");   /* 2^20 / n_chans spectra per heap, katsdpcontroller's PFB defaults */
    has(t, "      destinations: \"239.50.0.8:9001,239.50.0.9:9001,239.50.0.10:9001,239.50.0.11:9001\"\n",
        "feng1.yaml");
    free(t);
    t = pipeline(pl, "xeng1");
    has(t, "  katcp: \"127.0.0.1:9501\"\n", "xeng1.yaml");
    has(t, "      address: 239.50.0.9:9001\n", "xeng1.yaml");
    has(t, "      first_channel: 256\n", "xeng1.yaml");
    has(t, "      heap_accumulation_threshold: 408\n", "xeng1.yaml");   /* 0.5 s of 1.225 ms heaps */
    /* rx_reorder_tol's 0.3136 s would be 256 heaps; 256 MiB of 4 MiB chunks
     * (4 antennas x 256 channels x 1024 spectra x 4 bytes) hold it to 64 */
    has(t, "      chunks_in_flight: 64\n      buffers: 66\n", "xeng1.yaml");
    /* each beam's pol from its src_pol (the document lists both x beams first) */
    has(t, "      beams: [{pol: 0}, {pol: 0}, {pol: 1}, {pol: 1}]\n", "xeng1.yaml");
    has(t, "239.50.0.12:9002,239.50.0.13:9002,239.50.0.14:9002,239.50.0.15:9002", "xeng1.yaml");
    has(t, "  vsend:\n    plugin: sender\n    params:\n      destinations: \"239.50.0.17:9003\"\n", "xeng1.yaml");
    has(t, "  - reduce.out -> vsend.in\n", "xeng1.yaml");
    if (strstr(t, "filesink"))
        fail_msg("xeng1.yaml records to a file:\n%s", t);
    free(t);
    t = pipeline(pl, "digitiser2");
    has(t, "  katcp: \"127.0.0.1:9510\"\n", "digitiser2.yaml");
    has(t, "      destinations: \"239.50.0.4:9000,239.50.0.5:9000\"\n", "digitiser2.yaml");
    /* clock_ratio 0.001 of one antenna's two real-time streams */
    has(t, "      rate_gbps: 0.03516", "digitiser2.yaml");
    free(t);
    double real = 1712e6 / 4096 * (4096 * 10 / 8 + 72 + 66) * 8 / 1e9;
    assert_true(fabs(pl->dsim_rate_gbps - 0.001 * 2 * real) < 1e-12);
    /* every pipeline loads as cbf-run loads it */
    cbf_error err = {0};
    cbf_registry *reg;
    assert_int_equal(cbf_registry_open(NULL, 0, &reg, &err), 0);
    for (int i = 0; i < pl->n_engines; i++) {
        cbf_graph *g;
        if (cbf_graph_load(pl->engines[i].pipeline, NULL, 0, reg, &g, &err))
            fail_msg("%s does not load: %s", pl->engines[i].pipeline, err.msg);
        cbf_graph_free(g);
    }
    cbf_registry_close(reg);
}

static void test_suite_product(void **state)
{
    (void)state;
    fixture f;
    setup(&f, CONFIG);
    cbf_error err = {0};
    cbf_product *p = ct_product(data_dir, WIDE, NULL, &err);
    if (!p)
        fail_msg("%s", err.msg);
    cbf_product_plan *pl = plan(&f, p, "p1");
    char dir[2048];
    snprintf(dir, sizeof dir, "%s/state/p1", f.dir);   /* state_dir relative to the configuration */
    assert_string_equal(pl->dir, dir);
    check_engines(pl);
    check_streams(pl);
    if (cbf_product_plan_write(pl, &err))
        fail_msg("%s", err.msg);
    check_pipelines(pl);
    cbf_product_plan_free(pl);
    for (int k = 0; k < CBF_RES_KINDS; k++)   /* all given back */
        assert_int_equal(cbf_resources_used(f.res, (cbf_res_kind)k), 0);
    cbf_product_free(p);
    teardown(&f);
}

/* controller.jones_per_batch (a band slowed for a small machine): heaps
 * of 65536 values per input, 64 spectra at 1024 channels; the dumps and
 * beams follow, and the digitiser chunks shrink to one heap's samples;
 * more channels than values refused. */
static void test_jones_per_batch(void **state)
{
    (void)state;
    fixture f;
    setup(&f, CONFIG);
    cbf_error err = {0};
    cbf_product *p = ct_product(data_dir, WIDE, NULL, &err);
    assert_non_null(p);
    assert_int_equal(cbf_product_set_jones_per_batch(p, 65536, &err), 0);
    const cbf_product_stream *acv = cbf_product_find(p, "antenna-channelised-voltage");
    const cbf_product_stream *bcp = cbf_product_find(p, "baseline-correlation-products");
    const cbf_product_stream *beam = cbf_product_find(p, "tied-array-channelised-voltage-0x");
    assert_int_equal(acv->u.acv.spectra_per_heap, 64);
    assert_int_equal(beam->u.tacv.spectra_per_heap, 64);
    /* 0.5 s of 64 x 2048-sample heaps at 1712 MHz: 6530.76 heaps, 6531 */
    assert_int_equal(bcp->u.bcp.heaps_per_dump, 6531);
    assert_int_equal(bcp->u.bcp.n_accs, 6531 * 64);
    cbf_product_plan *pl = plan(&f, p, "j");
    assert_int_equal(pl->sets[0].desc->spectra_per_heap, 64);
    assert_int_equal(pl->sets[0].desc->samples_per_chunk, 131072);   /* 64 spectra of 2048 samples */
    cbf_product_plan_free(pl);
    /* 16 spectra: too few for the beams */
    assert_int_equal(cbf_product_set_jones_per_batch(p, 16384, &err), 0);
    assert_int_equal(cbf_product_plan_make(p, "j", f.c, f.res, &pl, &err), CBF_ECONFIG);
    has(err.msg, "outputs.tied-array-channelised-voltage-0x: 16 spectra per heap (controller.jones_per_batch / "
        "n_chans of \"antenna-channelised-voltage\"): cbf's beamformer takes a multiple of 32", "the error");
    assert_int_equal(cbf_product_set_jones_per_batch(p, 512, &err), CBF_ECONFIG);
    has(err.msg, "controller.jones_per_batch 512: fewer than the 1024 channels of "
        "outputs.antenna-channelised-voltage", "the error");
    cbf_product_free(p);
    teardown(&f);
}

/* controller.rx_reorder_tol and dsim_threads reach the pipelines: 0.02 s
 * of 1.225 ms heaps is 16.3, so 17 heaps in each X-engine's window; each
 * dsim computes with 3 threads. */
static void test_window_threads(void **state)
{
    (void)state;
    char cfg[2048];
    const char *head = "controller:\n";
    assert_int_equal(strncmp(CONFIG, head, strlen(head)), 0);
    snprintf(cfg, sizeof cfg, "%s  rx_reorder_tol: 0.02\n  dsim_threads: 3\n%s", head, CONFIG + strlen(head));
    fixture f;
    setup(&f, cfg);
    cbf_error err = {0};
    cbf_product *p = ct_product(data_dir, WIDE, NULL, &err);
    assert_non_null(p);
    cbf_product_plan *pl = plan(&f, p, "p1");
    if (cbf_product_plan_write(pl, &err))
        fail_msg("%s", err.msg);
    char *t = pipeline(pl, "xeng2");
    has(t, "      chunks_in_flight: 17\n      buffers: 19\n", "xeng2.yaml");
    free(t);
    t = pipeline(pl, "digitiser0");
    has(t, "      threads: 3\n", "digitiser0.yaml");
    free(t);
    cbf_product_plan_free(pl);
    cbf_product_free(p);
    teardown(&f);
}

/* The suite's VLBI product less its resampled beams (the V-engine, not
 * planned): the VLBI channeliser (32768 channels, decimation_factor 4,
 * pass_bandwidth 128 MHz) plans as a narrowband set whose F-engines keep
 * the whole band: the ddc subsamples by 8 with the pass band given, the
 * pfb one tap rectangular (katgpucbf's VLBI defaults); spectra and
 * bandwidth those of decimation 4. */
static void test_vlbi_product(void **state)
{
    (void)state;
    fixture f;
    setup(&f, CONFIG);
    cbf_error err = {0};
    const char *edits[] = {"outputs/tied-array-resampled-voltage", NULL, "simulation", "{\"clock_ratio\": 0.0001}",
                           NULL};
    cbf_product *p = ct_product(data_dir, "suite-4ant-vlbi.json", edits, &err);
    if (!p)
        fail_msg("%s", err.msg);
    cbf_product_plan *pl = plan(&f, p, "vlbi");
    const cbf_plan_set *v = &pl->sets[0];
    assert_string_equal(v->acv->name, "antenna-channelised-voltage");
    assert_int_equal(v->desc->decimation, 4);
    assert_true(v->desc->pass_bandwidth == 128e6);
    assert_true(pl->sets[1].desc->pass_bandwidth == 0);   /* the wideband copy */
    if (cbf_product_plan_write(pl, &err))
        fail_msg("%s", err.msg);
    char *t = pipeline(pl, "feng0");
    has(t, "decimation: 8, pass_bandwidth: 128000000}", "feng0.yaml's ddc");
    has(t, "channels: 32768, spectra_per_buffer", "feng0.yaml's pfb");
    has(t, "taps: 1, window: rect, w_cutoff: 0}", "feng0.yaml's pfb");
    free(t);
    t = pipeline(pl, "xeng0");
    has(t, "samples_between_spectra: 262144", "xeng0.yaml (2 x 32768 x 4)");
    free(t);
    cbf_product_plan_free(pl);
    cbf_product_free(p);
    teardown(&f);
}

/* The suite's narrowband product: a narrowband channeliser (32768
 * channels at 1/8) with its correlator and 8 beams, and the wideband copy
 * (8192 channels) with its own: two sets, set 0 the narrowband one (first
 * in the document) with the dsims, set 1's engines prefixed c1-, each set
 * on its own groups and ports, requests and flags going to its own. */
static void test_narrowband_product(void **state)
{
    (void)state;
    fixture f;
    setup(&f, CONFIG);
    cbf_error err = {0};
    const char *edits[] = {"simulation", "{\"clock_ratio\": 0.0001}", NULL};
    cbf_product *p = ct_product(data_dir, "suite-4ant-nb-beams.json", edits, &err);
    if (!p)
        fail_msg("%s", err.msg);
    cbf_product_plan *pl = plan(&f, p, "nb");
    assert_int_equal(pl->n_sets, 2);
    const cbf_plan_set *nb = &pl->sets[0], *wb = &pl->sets[1];
    assert_string_equal(nb->acv->name, "antenna-channelised-voltage");
    assert_string_equal(nb->bcp->name, "baseline-correlation-products");
    assert_int_equal(nb->n_tacv, 8);
    assert_string_equal(wb->acv->name, "wideband-antenna-channelised-voltage");
    assert_string_equal(wb->bcp->name, "wideband-baseline-correlation-products");
    assert_int_equal(wb->n_tacv, 0);
    assert_int_equal(nb->desc->decimation, 8);
    assert_true(fabs(nb->desc->ddc_centre_hz - 1712e6 * 3456789 / 16777216.0) < 1e-3);
    assert_int_equal(wb->desc->decimation, 1);
    assert_int_equal(nb->desc->digitisers, 4);
    assert_int_equal(wb->desc->digitisers, 0);   /* its F-engines join the same digitiser groups */
    assert_int_equal(nb->desc->dig.addr, wb->desc->dig.addr);
    /* 4 dsims, 4 + 4 F-engines, 4 + 4 X-engines */
    assert_int_equal(pl->n_engines, 20);
    int names = 0;
    for (int i = 0; i < pl->n_engines; i++) {
        const cbf_plan_engine *e = &pl->engines[i];
        for (int j = 0; j < i; j++) {
            if (!strcmp(e->name, pl->engines[j].name) || !strcmp(e->task, pl->engines[j].task) ||
                e->katcp_port == pl->engines[j].katcp_port)
                fail_msg("engines %s (%s) and %s (%s) share a name, task or port", e->name, e->task,
                         pl->engines[j].name, pl->engines[j].task);
        }
        if (e->kind == PROC_FENG && e->set == 1) {
            char want[64];
            snprintf(want, sizeof want, "f.wideband-antenna-channelised-voltage.%d", e->index);
            assert_string_equal(e->task, want);
            snprintf(want, sizeof want, "c1-feng%d", e->index);
            assert_string_equal(e->name, want);
            names++;
        }
        if (e->kind == PROC_XENG)
            assert_ptr_equal(e->bcp, pl->sets[e->set].bcp);
        if (i)   /* every X-engine, then every F-engine, then the dsims */
            assert_true(e->stage >= pl->engines[i - 1].stage);
    }
    assert_int_equal(names, 4);
    assert_int_equal(pl->engines[pl->n_engines - 1].kind, PROC_DIGITISER);
    assert_int_equal(pl->n_stages, 3);
    /* no group of one stream inside another's */
    for (int i = 0; i < pl->n_streams; i++)
        for (int j = 0; j < i; j++) {
            const cbf_plan_stream *a = &pl->streams[i], *b = &pl->streams[j];
            if (a->count && b->count && a->first.addr < b->first.addr + (unsigned)b->count &&
                b->first.addr < a->first.addr + (unsigned)a->count)
                fail_msg("%s and %s share groups", a->stream->name, b->stream->name);
        }
    if (cbf_product_plan_write(pl, &err))
        fail_msg("%s", err.msg);
    char *t = pipeline(pl, "feng0");
    has(t, "plugin: ddc", "feng0.yaml");
    free(t);
    t = pipeline(pl, "c1-feng0");
    if (strstr(t, "plugin: ddc"))
        fail_msg("the wideband F-engine has a ddc:\n%s", t);
    has(t, "channels: 8192", "c1-feng0.yaml");
    free(t);
    cbf_product_plan_free(pl);
    for (int k = 0; k < CBF_RES_KINDS; k++)   /* all given back */
        assert_int_equal(cbf_resources_used(f.res, (cbf_res_kind)k), 0);
    cbf_product_free(p);
    teardown(&f);
}

#define DSIM(a) "{\"type\": \"sim.dig.baseband_voltage\", \"band\": \"l\", \"adc_sample_rate\": 1712e6, " \
                "\"centre_frequency\": 1284e6, \"antenna\": \"dsim00" a ", 0:0:0, 0:0:0, 0, 0\"}"

/* The digitiser streams as the document orders and shares them: a dsim
 * per antenna name wherever its two streams stand, and the suite's
 * one-dsim form, every antenna reading the same two streams. */
static void test_digitiser_streams(void **state)
{
    (void)state;
    fixture f;
    setup(&f, CONFIG);
    /* every v stream moved to the end, after the beams */
    static const char *const moved[] = {"outputs/dsim000v", NULL, "outputs/dsim000v", DSIM("0"),
                                        "outputs/dsim001v", NULL, "outputs/dsim001v", DSIM("1"),
                                        "outputs/dsim002v", NULL, "outputs/dsim002v", DSIM("2"),
                                        "outputs/dsim003v", NULL, "outputs/dsim003v", DSIM("3"), NULL};
    cbf_error err = {0};
    cbf_product *p = ct_product(data_dir, WIDE, moved, &err);
    if (!p)
        fail_msg("%s", err.msg);
    assert_string_equal(p->streams[p->n_streams - 4].name, "dsim000v");   /* moved after every other stream */
    cbf_product_plan *pl = plan(&f, p, "moved");
    unsigned g = 239u << 24 | 50u << 16;
    assert_int_equal(cbf_product_plan_stream(pl, "dsim000v")->first.addr, g + 1);   /* antenna 0's pol 1 */
    assert_int_equal(cbf_product_plan_stream(pl, "dsim001h")->first.addr, g + 2);
    assert_int_equal(cbf_product_plan_stream(pl, "dsim003v")->first.port, 9000);
    const cbf_plan_engine *d1 = &pl->engines[9];
    assert_string_equal(d1->task, "sim.dsim001.1712000000.0");
    assert_string_equal(d1->carries, "digitiser streams dsim001h dsim001v, read by inputs m801h, m801v");
    assert_int_equal(cbf_product_plan_write(pl, &err), 0);
    char *t = pipeline(pl, "feng1");
    has(t, "      address: 239.50.0.2:9000,239.50.0.3:9000\n", "feng1.yaml");
    free(t);
    cbf_product_plan_free(pl);
    cbf_product_free(p);
    /* one dsim, every antenna's two inputs reading its two streams */
    static const char *const one[] = {
        "outputs/dsim001h", NULL, "outputs/dsim001v", NULL, "outputs/dsim002h", NULL, "outputs/dsim002v", NULL,
        "outputs/dsim003h", NULL, "outputs/dsim003v", NULL,
        "outputs/antenna-channelised-voltage/src_streams", "[\"dsim000h\", \"dsim000v\", \"dsim000h\", "
        "\"dsim000v\", \"dsim000h\", \"dsim000v\", \"dsim000h\", \"dsim000v\"]", NULL};
    if (!(p = ct_product(data_dir, WIDE, one, &err)))
        fail_msg("%s", err.msg);
    pl = plan(&f, p, "one");
    assert_int_equal(pl->n_engines, 9);   /* 4 X-engines, 4 F-engines, 1 dsim */
    assert_int_equal(pl->n_groups, 2 + 4 + 4 + 4);
    const cbf_plan_engine *d0 = &pl->engines[8];
    assert_string_equal(d0->task, "sim.dsim000.1712000000.0");
    assert_int_equal(d0->n_inputs, 8);   /* its end would flag every input */
    assert_int_equal(cbf_product_plan_write(pl, &err), 0);
    for (int a = 0; a < 4; a++) {
        char name[16];
        snprintf(name, sizeof name, "feng%d", a);
        t = pipeline(pl, name);
        has(t, "      address: 239.50.0.0:9000,239.50.0.1:9000\n", name);
        free(t);
    }
    t = pipeline(pl, "digitiser0");
    has(t, "      antennas: 1\n", "digitiser0.yaml");
    has(t, "      destinations: \"239.50.0.0:9000,239.50.0.1:9000\"\n", "digitiser0.yaml");
    free(t);
    cbf_product_plan_free(pl);
    cbf_product_free(p);
    teardown(&f);
}

static int overlap(unsigned a, int na, unsigned b, int nb)
{
    return a < b + (unsigned)nb && b < a + (unsigned)na;
}

static void test_side_by_side(void **state)
{
    (void)state;
    fixture f;
    setup(&f, CONFIG);
    cbf_error err = {0};
    cbf_product *p = ct_product(data_dir, WIDE, NULL, &err);
    assert_non_null(p);
    cbf_product_plan *a = plan(&f, p, "a"), *b = plan(&f, p, "b");
    assert_int_equal(a->n_groups, 20);
    assert_false(overlap(a->group0, a->n_groups, b->group0, b->n_groups));
    assert_false(overlap(a->udp0, 4, b->udp0, 4));   /* a port per kind of stream */
    assert_false(overlap(a->katcp0, a->n_katcp, b->katcp0, b->n_katcp));
    /* every stream of each inside its own block, so no group or port is shared */
    for (int k = 0; k < 2; k++) {
        const cbf_product_plan *pl = k ? b : a;
        for (int i = 0; i < pl->n_streams; i++) {
            const cbf_plan_stream *s = &pl->streams[i];
            assert_true(s->first.addr >= pl->group0 && s->first.addr + (unsigned)s->count <= pl->group0 + 20);
            assert_true((unsigned)s->first.port >= pl->udp0 && (unsigned)s->first.port < pl->udp0 + 4);
        }
        for (int i = 0; i < pl->n_engines; i++)
            assert_true((unsigned)pl->engines[i].katcp_port - pl->katcp0 < (unsigned)pl->n_katcp);
    }
    /* a deconfigured product's groups go to the next one */
    unsigned first = a->group0;
    cbf_product_plan_free(a);
    cbf_product_plan *c = plan(&f, p, "c");
    assert_int_equal(c->group0, first);
    cbf_product_plan_free(b);
    cbf_product_plan_free(c);
    cbf_product_free(p);
    teardown(&f);
    /* a range too small for the product is named */
    setup(&f, "ranges:\n  multicast: 239.60.0.0/28\n");
    p = ct_product(data_dir, WIDE, NULL, &err);
    cbf_product_plan *none = NULL;
    assert_int_equal(cbf_product_plan_make(p, "big", f.c, f.res, &none, &err), CBF_EAGAIN);
    assert_null(none);
    has(err.msg, "product \"big\": no 20 consecutive free multicast groups in ranges.multicast (", "the error");
    has(err.msg, "controller.yaml:2:14): 16 of them", "the error");
    for (int k = 0; k < CBF_RES_KINDS; k++)   /* nothing kept from the refused one */
        assert_int_equal(cbf_resources_used(f.res, (cbf_res_kind)k), 0);
    cbf_product_free(p);
    teardown(&f);
}

typedef struct refusal {
    const char *file;
    const char *edits[7];
    const char *starts;        /* the message's start: the JSON path */
    const char *also;          /* and text further on */
} refusal;

static void test_refusals(void **state)
{
    (void)state;
    static const refusal bad[] = {
        {"suite-4ant-vlbi.json", {NULL}, "outputs.tied-array-resampled-voltage.type: "
         "gpucbf.tied_array_resampled_voltage (VLBI's resampled beams) has no cbf engine yet", NULL},
        {WIDE, {"outputs/baseline-correlation-products", NULL, NULL}, "outputs: no "
         "gpucbf.baseline_correlation_products of \"antenna-channelised-voltage\": cbf's X-engines always "
         "correlate", NULL},
        {WIDE, {"outputs/acv2", "{\"type\": \"gpucbf.antenna_channelised_voltage\", \"n_chans\": 1024, "
                "\"src_streams\": [\"dsim000h\", \"dsim000v\"]}", NULL},
         "outputs: no gpucbf.baseline_correlation_products of \"acv2\"", NULL},
        {WIDE, {"outputs/bcp2", "{\"type\": \"gpucbf.baseline_correlation_products\", \"src_streams\": "
                "[\"antenna-channelised-voltage\"], \"int_time\": 0.5}", NULL},
         "outputs.bcp2: a second correlator of \"antenna-channelised-voltage\" (after "
         "\"baseline-correlation-products\")", NULL},
        {WIDE, {"outputs/antenna-channelised-voltage/taps", "32", NULL},
         "outputs.antenna-channelised-voltage.taps: 32: cbf's pfb takes 1 to 16 taps", NULL},
        {WIDE, {"outputs/antenna-channelised-voltage/n_chans", "32", NULL},
         "outputs.antenna-channelised-voltage.n_chans: 32: cbf's pfb takes at least 64 channels", NULL},
        {WIDE, {"outputs/dsim003v/antenna", "\"dsim009, 0:0:0, 0:0:0, 0, 0\"", NULL},
         "outputs.dsim003h.antenna: antenna \"dsim003\" has one digitiser stream", NULL},
        {WIDE, {"version", "\"4.9\"", "outputs/dsim001h/bits_per_sample", "8", NULL},
         "outputs.dsim001h.bits_per_sample: differs from \"dsim000h\"'s", NULL},
        {WIDE, {"inputs/dig0", "{\"type\": \"dig.baseband_voltage\", \"url\": \"spead://239.1.1.1+7:7148\", "
                "\"sync_time\": 1700000000, \"adc_sample_rate\": 1712e6, \"centre_frequency\": 1284e6, "
                "\"band\": \"l\", \"antenna\": \"m000\"}", NULL},
         "inputs.dig0: a real digitiser (dig.baseband_voltage) is not planned yet", NULL},
        /* in real time the F-engines' digitiser streams (35 Gb/s each) are beyond the loopback host's 10 */
        {WIDE, {"simulation/clock_ratio", "1", NULL}, "product \"p\" at simulation.clock_ratio 1 (a lower one "
         "slows the simulated digitisers): host 'localhost': NIC 127.0.0.1 sends", "more than 9.00 Gb/s"},
    };
    fixture f;
    setup(&f, CONFIG);
    int failures = 0;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cbf_error err = {0};
        cbf_product *p = ct_product(data_dir, bad[i].file, bad[i].edits, &err);
        if (!p) {
            printf("case %zu: the product itself was refused: %s\n", i, err.msg);
            failures++;
            continue;
        }
        cbf_product_plan *pl = NULL;
        int rc = cbf_product_plan_make(p, "p", f.c, f.res, &pl, &err);
        if (!rc || strncmp(err.msg, bad[i].starts, strlen(bad[i].starts)) ||
            (bad[i].also && !strstr(err.msg, bad[i].also))) {
            printf("case %zu: want \"%s...%s\", got %s\n", i, bad[i].starts, bad[i].also ? bad[i].also : "",
                   rc ? err.msg : "a plan");
            failures++;
        }
        cbf_product_plan_free(pl);
        cbf_product_free(p);
    }
    /* the name becomes a folder, files and unit names: nothing that could leave them */
    cbf_error err = {0};
    cbf_product *p = ct_product(data_dir, WIDE, NULL, &err);
    cbf_product_plan *pl = NULL;
    assert_int_equal(cbf_product_plan_make(p, "../x", f.c, f.res, &pl, &err), CBF_ECONFIG);
    has(err.msg, "product name \"../x\": letters, digits and '_' only", "the error");
    cbf_product_free(p);
    for (int k = 0; k < CBF_RES_KINDS; k++)
        assert_int_equal(cbf_resources_used(f.res, (cbf_res_kind)k), 0);
    teardown(&f);
    assert_int_equal(failures, 0);
}

static void test_config(void **state)
{
    (void)state;
    static const struct { const char *yaml, *want, *also; } bad[] = {
        {"controler:\n  launcher: local\n", "controller.yaml:1:1: unknown section 'controler' (did you mean "
         "'controller'?)"},
        {"controller:\n  lancher: local\n", "controller.yaml:2:3: "},
        {"controller:\n  launcher: docker\n", "controller.yaml:2:13: "},
        {"ranges:\n  udp_ports: 9000\n", "controller.yaml:2:14: ranges.udp_ports: expected FIRST-LAST, got '9000'"},
        {"ranges:\n  multicast: 10.0.0.0/24\n", "controller.yaml:2:14: ranges.multicast: '10.0.0.0/24' is not a "
         "range of multicast groups"},
        {"ranges:\n  engine_katcp: 5000-5100\n  product_katcp: 5050-5060\n",
         "controller.yaml:3:18: ranges.product_katcp: overlaps ranges.engine_katcp (", "controller.yaml:2:17)"},
        {"restart:\n  initial: 10\n  max: 1\n", "controller.yaml:3:8: restart.max: 1 s is less than "
         "restart.initial (10 s)"},
        {"hosts:\n  h1: {roles: feng, interfaces: 192.0.2.1, nic_gbps: 10}\n",
         "controller.yaml:2:7: host 'h1': 192.0.2.1 is not an address of this machine, and launcher local"},
        {"hosts:\n  h1: {roles: feng, interfaces: 127.0.0.1, nic_gbps: 10, control: here}\n",
         "host 'h1': control: 'here' is not an IPv4 address"},
    };
    int failures = 0;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *dir = ct_tmpdir("config");
        cbf_error err = {0};
        cbf_controller_config *c = ct_config(dir, bad[i].yaml, &err);
        const char *at = c ? NULL : strstr(err.msg, "controller.yaml");
        if (c || !strstr(at ? at : "", bad[i].want) || (bad[i].also && !strstr(err.msg, bad[i].also))) {
            printf("case %zu: want \"%s\", got %s\n", i, bad[i].want, c ? "a configuration" : err.msg);
            failures++;
        }
        if (i == 1 && !c && !strstr(err.msg, "did you mean 'launcher'?")) {
            printf("case 1: no hint: %s\n", err.msg);
            failures++;
        }
        cbf_controller_config_free(c);
        ct_rm_rf(dir);
        free(dir);
    }
    assert_int_equal(failures, 0);
    /* no file: every default, this machine over loopback */
    cbf_controller_config *c = NULL;
    cbf_error err = {0};
    assert_int_equal(cbf_controller_config_load(NULL, &c, &err), 0);
    assert_int_equal(c->launcher, CBF_LAUNCHER_LOCAL);
    assert_string_equal(c->cbf_run, "cbf-run");
    assert_int_equal(c->n_hosts, 1);
    assert_string_equal(c->hosts[0].control, "127.0.0.1");
    assert_int_equal(c->groups.first, 239u << 24 | 102u << 16);
    assert_true(c->restart_initial == 1 && c->restart_max == 60 && c->start_timeout == 60);
    cbf_controller_config_free(c);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: test_plan DATA_DIR\n");
        return 2;
    }
    data_dir = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_suite_product),
        cmocka_unit_test(test_digitiser_streams),
        cmocka_unit_test(test_side_by_side),
        cmocka_unit_test(test_narrowband_product),
        cmocka_unit_test(test_vlbi_product),
        cmocka_unit_test(test_jones_per_batch),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_config),
        cmocka_unit_test(test_window_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
