/* katcp_sampling.c: the katcp server's sensor requests (?sensor-list,
 * ?sensor-value, ?sensor-sampling) and the #sensor-status informs the
 * strategies call for, on the sensors katcp_table.c reads.
 *
 * auto and event: every change of a table sensor (its queued changes, in
 * order, then anything newer than the last sent, by seq); a snapshot
 * sensor when its status or value differs from what was last sent. period:
 * the value now, every period. A new strategy starts with the value now. */
#include <math.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "katcp_server.h"

static const char *const kc_strategy_names[] = {"none", "auto", "period", "event"};

static bool kc_evented(kc_strategy how) { return how == KS_AUTO || how == KS_EVENT; }

/* The sensor's own time: when its value last changed (katcp v5). */
static void kc_status_line(cbf_katcp_buf *b, const char *inform, long long id, const char *name,
                           cbf_katcp_status st, const char *value, double updated)
{
    char ts[32];
    snprintf(ts, sizeof ts, "%.6f", updated);
    const char *a[] = {ts, "1", name, cbf_katcp_status_name(st), value};
    cbf_katcp_buf_msg(b, '#', inform, id, 5, a);
}

static void kc_sensor_line(cbf_katcp_buf *b, const char *inform, long long id, const kc_sensor *x)
{
    kc_status_line(b, inform, id, x->name, x->status, x->value, x->updated);
}

/* What an event strategy compares for a snapshot sensor: status and value
 * (malloc'd). */
static char *kc_last(const kc_sensor *x)
{
    const char *st = cbf_katcp_status_name(x->status);
    size_t n = strlen(st) + strlen(x->value) + 2;
    char *l = malloc(n);
    if (l)
        snprintf(l, n, "%s %s", st, x->value);
    return l;
}

/* Picks the sensors of ss named by the argument: one name, /regex/ (POSIX
 * extended), or all when there is none. false (and the reply sent) for a
 * bad expression or an unknown name. */
static bool kc_match(cbf_katcp_call *c, struct cbf_katcp_sensors *ss, bool *pick)
{
    const char *a = c->m->n_args ? c->m->args[0] : NULL;
    size_t al = a ? c->m->lens[0] : 0;
    regex_t re;
    bool is_re = a && al >= 2 && a[0] == '/' && a[al - 1] == '/';
    /* Bounded, so no expression holds the server: POSIX matching is
     * polynomial in the pattern without intervals and back-references,
     * which can blow it up ((a{255}){255}... or (a*)*\1). */
    if (is_re && al - 2 > KC_MAX_REGEX) {
        cbf_katcp_reply_fmt(c, "fail", "regular expression longer than %d characters", KC_MAX_REGEX);
        return false;
    }
    for (size_t i = 1; is_re && i + 1 < al; i++) {
        if (a[i] == '\\' && i + 2 < al && a[i + 1] >= '1' && a[i + 1] <= '9') {
            cbf_katcp_reply_fmt(c, "fail", "'%s': back-references (\\%c) are not taken here", a, a[i + 1]);
            return false;
        }
        if (a[i] == '{' && (i < 2 || a[i - 1] != '\\')) {
            cbf_katcp_reply_fmt(c, "fail", "'%s': intervals {m,n} are not taken here (repeat the atom, or use * + ?)",
                                a);
            return false;
        }
        i += a[i] == '\\';   /* an escaped character is itself */
    }
    if (is_re) {
        char *pat = strndup(a + 1, al - 2);
        int rc = pat ? regcomp(&re, pat, REG_EXTENDED | REG_NOSUB) : REG_ESPACE;
        free(pat);
        if (rc) {
            cbf_katcp_reply_fmt(c, "fail", "'%s' is not a valid regular expression", a);
            return false;
        }
    }
    size_t n = 0;
    for (size_t i = 0; i < ss->n; i++) {
        pick[i] = !a || (is_re ? !regexec(&re, ss->s[i].name, 0, NULL, 0) : !strcmp(a, ss->s[i].name));
        n += pick[i];
    }
    if (is_re)
        regfree(&re);
    if (a && !is_re && !n) {
        cbf_katcp_reply_fmt(c, "fail", "unknown sensor '%s'", a);
        return false;
    }
    return true;
}

static void kc_sensor_list_or_value(cbf_katcp_call *c, bool value)
{
    if (!cbf_katcp_want_args(c, 0, 1))
        return;
    struct cbf_katcp_sensors ss = {0};
    bool *pick = NULL;
    if (cbf_katcp_sensors_read(c->s, &ss, NULL) || !(pick = calloc(ss.n + 1, sizeof *pick))) {
        cbf_katcp_reply_fmt(c, "fail", "out of memory");
    } else if (kc_match(c, &ss, pick)) {
        size_t n = 0;
        for (size_t i = 0; i < ss.n; i++) {
            if (!pick[i])
                continue;
            n++;
            const kc_sensor *x = &ss.s[i];
            if (value) {
                kc_sensor_line(c->out, "sensor-value", c->m->id, x);
                continue;
            }
            /* a discrete sensor lists its values (katcp v5) */
            const char *head[] = {x->name, x->desc, x->units, cbf_katcp_type_name(x->type)};
            const char **a = malloc((4 + x->n_values) * sizeof *a);
            if (!a) {
                c->out->oom = 1;
                break;
            }
            memcpy(a, head, sizeof head);
            for (size_t k = 0; k < x->n_values; k++)
                a[4 + k] = x->values[k];
            cbf_katcp_buf_msg(c->out, '#', "sensor-list", c->m->id, 4 + x->n_values, a);
            free(a);
        }
        cbf_katcp_reply_fmt(c, "ok", "%zu", n);
    }
    free(pick);
    cbf_katcp_sensors_clear(&ss);
    free(ss.s);
}

void cbf_katcp_sensor_list(cbf_katcp_call *c) { kc_sensor_list_or_value(c, false); }
void cbf_katcp_sensor_value(cbf_katcp_call *c) { kc_sensor_list_or_value(c, true); }

static kc_sampling *kc_sampling_of(kc_client *cl, const char *name)
{
    for (size_t i = 0; i < cl->n_samp; i++)
        if (!strcmp(cl->samp[i].name, name))
            return &cl->samp[i];
    return NULL;
}

static void kc_sampling_drop(cbf_katcp_server *s, kc_client *cl, kc_sampling *sp)
{
    if (kc_evented(sp->how))
        cbf_katcp_event_samplers(s, -1);
    free(sp->name);
    free(sp->last);
    *sp = cl->samp[--cl->n_samp];
}

void cbf_katcp_sampling_clear(cbf_katcp_server *s, kc_client *cl)
{
    while (cl->n_samp)
        kc_sampling_drop(s, cl, &cl->samp[cl->n_samp - 1]);
    free(cl->samp);
    cl->samp = NULL;
}

/* The strategy asked for: 0, or -1 with the fail reply sent. */
static int kc_strategy_arg(cbf_katcp_call *c, kc_strategy *how, double *period)
{
    const char *word = c->m->args[1];
    int st = -1;
    for (int i = 0; i < 4; i++)
        if (!strcmp(word, kc_strategy_names[i]))
            st = i;
    if (st < 0) {
        cbf_katcp_reply_fmt(c, "fail", "strategy '%s' is not supported here (auto, period SECONDS, event, none)",
                            word);
        return -1;
    }
    char *end = NULL;
    *period = 0;
    if (st == KS_PERIOD) {
        *period = c->m->n_args == 3 ? strtod(c->m->args[2], &end) : NAN;
        if (!end || *end || !(*period >= KC_MIN_PERIOD && *period <= 1e6)) {
            cbf_katcp_reply_fmt(c, "fail", "period: expected seconds from %g to 1e6", KC_MIN_PERIOD);
            return -1;
        }
    } else if (c->m->n_args != 2) {
        cbf_katcp_reply_fmt(c, "fail", "strategy '%s' takes no parameter", word);
        return -1;
    }
    *how = (kc_strategy)st;
    return 0;
}

void cbf_katcp_sensor_sampling(cbf_katcp_call *c)
{
    if (!cbf_katcp_want_args(c, 1, 3))
        return;
    cbf_katcp_server *s = c->s;
    kc_client *cl = c->c;
    const char *name = c->m->args[0];
    kc_sampling *cur = kc_sampling_of(cl, name);
    kc_strategy how = cur ? cur->how : KS_NONE;
    double period = cur ? cur->period : 0;
    if (c->m->n_args > 1 && kc_strategy_arg(c, &how, &period))
        return;
    /* Counted before the sensor is read, so a change made after the read
     * is queued for this client too. */
    int delta = (int)kc_evented(how) - (int)(cur && kc_evented(cur->how));
    if (delta > 0)
        cbf_katcp_event_samplers(s, delta);
    struct cbf_katcp_sensors ss = {0};
    const kc_sensor *x = NULL;
    int rc = cbf_katcp_sensor_read_one(s, name, &ss);
    if (rc || !(x = cbf_katcp_sensor_find(&ss, name))) {
        if (delta > 0)
            cbf_katcp_event_samplers(s, -delta);
        cbf_katcp_reply_fmt(c, "fail", "%s '%s'", rc ? "out of memory reading sensor" : "unknown sensor", name);
        goto done;
    }
    if (c->m->n_args > 1 && how == KS_NONE && cur) {
        kc_sampling_drop(s, cl, cur);   /* counts itself off */
        cur = NULL;
    } else if (c->m->n_args > 1 && how != KS_NONE) {
        if (!cur) {
            kc_sampling *p = realloc(cl->samp, (cl->n_samp + 1) * sizeof *p);
            char *nm = strdup(name);
            if (!p || !nm) {
                if (p)
                    cl->samp = p;
                free(nm);
                if (delta > 0)
                    cbf_katcp_event_samplers(s, -delta);
                cbf_katcp_reply_fmt(c, "fail", "out of memory");
                goto done;
            }
            cl->samp = p;
            cur = &cl->samp[cl->n_samp++];
            memset(cur, 0, sizeof *cur);
            cur->name = nm;
        }
        if (delta < 0)
            cbf_katcp_event_samplers(s, delta);
        cur->how = how;
        cur->period = period;
        cur->next = cbf_katcp_now(CLOCK_MONOTONIC) + period;
        free(cur->last);
        cur->last = NULL;
    }
    const char *word = kc_strategy_names[cur ? cur->how : KS_NONE];
    char p[32];
    snprintf(p, sizeof p, "%g", cur ? cur->period : 0.0);
    const char *a[] = {name, word, p};
    cbf_katcp_reply(c, "ok", cur && cur->how == KS_PERIOD ? 3 : 2, a);
    /* A new strategy starts with the value now, as katcp servers do. */
    if (c->m->n_args > 1 && cur) {
        kc_sensor_line(&cl->out, "sensor-status", -1, x);
        cur->last = kc_last(x);
        cur->seq = x->seq;
    }
done:
    cbf_katcp_sensors_clear(&ss);
    free(ss.s);
}

/* The queued changes of table sensors, in order, to their event samplers. */
static void kc_deliver(cbf_katcp_server *s, const kc_taken *t)
{
    for (size_t k = 0; k < t->n; k++) {
        const kc_change *ch = &t->ch[k];
        for (int i = 0; i < KC_MAX_CLIENTS; i++) {
            kc_client *cl = &s->cl[i];
            kc_sampling *sp = cl->fd >= 0 ? kc_sampling_of(cl, ch->name) : NULL;
            if (!sp || !kc_evented(sp->how) || ch->seq <= sp->seq)
                continue;
            kc_status_line(&cl->out, "sensor-status", -1, ch->name, ch->status, ch->value, ch->updated);
            sp->seq = ch->seq;
        }
    }
}

void cbf_katcp_sample(cbf_katcp_server *s, struct cbf_katcp_sensors *ss, double *next)
{
    bool any = false;
    for (int i = 0; i < KC_MAX_CLIENTS; i++)
        any |= s->cl[i].fd >= 0 && s->cl[i].n_samp > 0;
    kc_taken t = {0};
    int rc = any ? cbf_katcp_sensors_read(s, ss, &t) : (cbf_katcp_changes_take(s, &t), CBF_OK);
    if (t.iface)
        for (int i = 0; i < KC_MAX_CLIENTS; i++)
            if (s->cl[i].fd >= 0) {
                const char *a[] = {"sensor-list"};
                cbf_katcp_buf_msg(&s->cl[i].out, '#', "interface-changed", -1, 1, a);
            }
    kc_deliver(s, &t);
    cbf_katcp_changes_free(t.ch, t.n);
    if (!any || rc)
        return;
    double now = cbf_katcp_now(CLOCK_MONOTONIC);
    for (int i = 0; i < KC_MAX_CLIENTS; i++) {
        kc_client *cl = &s->cl[i];
        for (size_t j = 0; cl->fd >= 0 && j < cl->n_samp; j++) {
            kc_sampling *sp = &cl->samp[j];
            const kc_sensor *x = cbf_katcp_sensor_find(ss, sp->name);
            if (!x)
                continue;
            bool send = false;
            if (sp->how == KS_PERIOD) {
                if (now >= sp->next) {
                    send = true;
                    sp->next += sp->period;
                    if (sp->next <= now)
                        sp->next = now + sp->period;   /* after a stall, from now */
                }
                if (sp->next < *next)
                    *next = sp->next;
            } else if (x->seq) {
                send = x->seq > sp->seq;   /* a change no queue brought (it was full) */
                sp->seq = send ? x->seq : sp->seq;
            } else {
                char *last = kc_last(x);
                if (last && (!sp->last || strcmp(last, sp->last))) {
                    send = true;
                    free(sp->last);
                    sp->last = last;
                } else {
                    free(last);
                }
            }
            if (send)
                kc_sensor_line(&cl->out, "sensor-status", -1, x);
        }
    }
}
