/* katcp_table.c: the katcp server's sensors (cbf/katcp.h): the table a
 * program adds to, sets from any thread and removes from, under tab_mu;
 * the snapshot list a callback fills; and one reading of both, which is
 * what the sensor requests and the sampling strategies work on.
 *
 * A set that changes a sensor's value or status is numbered (seq, from one
 * count for the whole table, so a sensor removed and added again goes on
 * rising) and,
 * while some client samples on auto or event, queued as a change for the
 * server thread (woken through its pipe), so such a client sees every
 * change in order, not only the latest. KC_MAX_CHANGES bound the queue:
 * changes past them (or a queue out of memory) are not queued, and the
 * samplers get the value as read next (its seq is past what they saw). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "katcp_server.h"

static const char *const kc_status_words[] = {"unknown", "nominal", "warn", "error",
                                              "failure", "unreachable", "inactive"};
static const char *const kc_type_words[] = {"integer", "float", "boolean", "discrete",
                                            "string", "address", "timestamp"};

const char *cbf_katcp_status_name(cbf_katcp_status st)
{
    return (unsigned)st < 7 ? kc_status_words[st] : "unknown";
}

int cbf_katcp_status_parse(const char *word)
{
    for (int i = 0; i < 7; i++)
        if (word && !strcmp(word, kc_status_words[i]))
            return i;
    return -1;
}

const char *cbf_katcp_type_name(cbf_katcp_type t) { return (unsigned)t < 7 ? kc_type_words[t] : "string"; }

static void kc_sensor_free(kc_sensor *x)
{
    free(x->name);
    free(x->desc);
    free(x->units);
    for (size_t i = 0; i < x->n_values; i++)
        free(x->values[i]);
    free(x->values);
    free(x->value);
    memset(x, 0, sizeof *x);
}

void cbf_katcp_sensors_clear(struct cbf_katcp_sensors *ss)
{
    for (size_t i = 0; i < ss->n; i++)
        kc_sensor_free(&ss->s[i]);
    ss->n = 0;
}

/* A copy of one sensor, appended to ss: false when out of memory (nothing
 * appended). */
static bool kc_append(struct cbf_katcp_sensors *ss, const char *name, const char *desc, const char *units,
                      cbf_katcp_type type, const char *const *values, size_t n_values, const char *value,
                      cbf_katcp_status st, double updated, uint64_t seq)
{
    if (ss->n == ss->cap) {
        size_t cap = ss->cap ? 2 * ss->cap : 64;
        kc_sensor *p = realloc(ss->s, cap * sizeof *p);
        if (!p)
            return false;
        ss->s = p;
        ss->cap = cap;
    }
    kc_sensor *x = &ss->s[ss->n];
    *x = (kc_sensor){strdup(name), strdup(desc ? desc : ""), strdup(units ? units : ""), type,
                     n_values ? calloc(n_values, sizeof *x->values) : NULL, 0, strdup(value), st, updated, seq};
    bool ok = x->name && x->desc && x->units && x->value && (!n_values || x->values);
    for (size_t i = 0; ok && i < n_values; i++, x->n_values++)
        ok = (x->values[i] = strdup(values[i])) != NULL;
    if (!ok) {
        kc_sensor_free(x);
        return false;
    }
    ss->n++;
    return true;
}

const kc_sensor *cbf_katcp_sensor_find(const struct cbf_katcp_sensors *ss, const char *name)
{
    for (size_t i = 0; i < ss->n; i++)
        if (!strcmp(ss->s[i].name, name))
            return &ss->s[i];
    return NULL;
}

int cbf_katcp_sensors_put(cbf_katcp_sensors *out, const cbf_katcp_sensor_info *info, cbf_katcp_status st,
                          const char *value, double updated)
{
    if (!info->name || (unsigned)info->type > CBF_KATCP_TIMESTAMP || (unsigned)st > CBF_KATCP_INACTIVE)
        return CBF_EINVAL;
    return kc_append(out, info->name, info->description, info->units, info->type, info->values, info->n_values,
                     value ? value : "", st, updated, 0) ? CBF_OK : CBF_ENOMEM;
}

/* Under tab_mu. */
static void kc_take_locked(cbf_katcp_server *s, kc_taken *t)
{
    *t = (kc_taken){s->changes, s->n_changes, s->iface_changed};
    s->changes = NULL;
    s->n_changes = 0;
    s->iface_changed = false;
}

void cbf_katcp_changes_take(cbf_katcp_server *s, kc_taken *t)
{
    pthread_mutex_lock(&s->tab_mu);
    kc_take_locked(s, t);
    pthread_mutex_unlock(&s->tab_mu);
}

int cbf_katcp_sensors_read(cbf_katcp_server *s, struct cbf_katcp_sensors *ss, kc_taken *t)
{
    cbf_katcp_sensors_clear(ss);
    bool ok = true;
    pthread_mutex_lock(&s->tab_mu);
    if (t)
        kc_take_locked(s, t);
    for (size_t i = 0; i < s->tab.n && ok; i++) {
        const kc_sensor *x = &s->tab.s[i];
        ok = kc_append(ss, x->name, x->desc, x->units, x->type, (const char *const *)x->values, x->n_values,
                       x->value, x->status, x->updated, x->seq);
    }
    pthread_mutex_unlock(&s->tab_mu);
    if (!ok)
        return CBF_ENOMEM;
    return s->snapshot ? s->snapshot(ss, s->snapshot_user) : CBF_OK;
}

int cbf_katcp_sensor_read_one(cbf_katcp_server *s, const char *name, struct cbf_katcp_sensors *ss)
{
    cbf_katcp_sensors_clear(ss);
    bool ok = true, found = false;
    pthread_mutex_lock(&s->tab_mu);
    for (size_t i = 0; i < s->tab.n && !found; i++) {
        const kc_sensor *x = &s->tab.s[i];
        if ((found = !strcmp(x->name, name)))
            ok = kc_append(ss, x->name, x->desc, x->units, x->type, (const char *const *)x->values, x->n_values,
                           x->value, x->status, x->updated, x->seq);
    }
    pthread_mutex_unlock(&s->tab_mu);
    if (!ok)
        return CBF_ENOMEM;
    return !found && s->snapshot ? s->snapshot(ss, s->snapshot_user) : CBF_OK;
}

/* ---- the table ---- */

static bool kc_sensor_name_ok(const char *n)
{
    return n && *n && strspn(n, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_") == strlen(n);
}

/* Whether v is a value of sensor x's type: NULL, or what is wrong. */
static const char *kc_value_bad(const kc_sensor *x, const char *v)
{
    char *end;
    errno = 0;
    switch (x->type) {
    case CBF_KATCP_INTEGER:
        strtoll(v, &end, 10);
        return end == v || *end || errno ? "an integer" : NULL;
    case CBF_KATCP_FLOAT:
    case CBF_KATCP_TIMESTAMP: {
        double d = strtod(v, &end);
        return end == v || *end || (x->type == CBF_KATCP_TIMESTAMP && !isfinite(d)) ? "a number" : NULL;
    }
    case CBF_KATCP_BOOLEAN:
        return strcmp(v, "0") && strcmp(v, "1") ? "0 or 1" : NULL;
    case CBF_KATCP_ADDRESS:
        return *v ? NULL : "an address (host, host:port, [v6]:port)";
    case CBF_KATCP_DISCRETE:
        for (size_t i = 0; i < x->n_values; i++)
            if (!strcmp(v, x->values[i]))
                return NULL;
        return "one of its discrete values";
    default:
        return NULL;
    }
}

int cbf_katcp_sensor_add(cbf_katcp_server *s, const cbf_katcp_sensor_info *info, cbf_error *err)
{
    if (!kc_sensor_name_ok(info->name))
        return cbf_error_set(err, CBF_EINVAL, "%s: sensor '%s': a name is letters, digits, '.', '-' and '_'",
                             s->label, info->name ? info->name : "(null)");
    if ((unsigned)info->type > CBF_KATCP_TIMESTAMP || (info->type == CBF_KATCP_DISCRETE && !info->n_values))
        return cbf_error_set(err, CBF_EINVAL, "%s: sensor '%s': %s", s->label, info->name,
                             info->type == CBF_KATCP_DISCRETE ? "a discrete sensor needs its values" : "bad type");
    /* an address's zero as aiokatcp writes it: the unspecified host */
    const char *zero = info->type == CBF_KATCP_DISCRETE ? info->values[0]
                       : info->type == CBF_KATCP_STRING ? ""
                       : info->type == CBF_KATCP_ADDRESS ? "0.0.0.0" : "0";
    int rc = CBF_OK;
    pthread_mutex_lock(&s->tab_mu);
    if (cbf_katcp_sensor_find(&s->tab, info->name))
        rc = cbf_error_set(err, CBF_EINVAL, "%s: sensor '%s' is there already", s->label, info->name);
    else if (!kc_append(&s->tab, info->name, info->description, info->units, info->type, info->values,
                        info->n_values, zero, CBF_KATCP_UNKNOWN, cbf_katcp_now(CLOCK_REALTIME), ++s->tab_seq))
        rc = cbf_error_set(err, CBF_ENOMEM, "%s: out of memory", s->label);
    else
        s->iface_changed = true;
    pthread_mutex_unlock(&s->tab_mu);
    if (!rc)
        cbf_katcp_wake(s);
    return rc;
}

/* Under tab_mu: queues x's change for the event samplers. */
static void kc_queue_change(cbf_katcp_server *s, const kc_sensor *x)
{
    if (s->n_changes == KC_MAX_CHANGES)
        return;
    if (s->n_changes % 64 == 0) {
        kc_change *p = realloc(s->changes, (s->n_changes + 64) * sizeof *p);
        if (!p)
            return;
        s->changes = p;
    }
    kc_change *ch = &s->changes[s->n_changes];
    *ch = (kc_change){strdup(x->name), strdup(x->value), x->status, x->updated, x->seq};
    if (!ch->name || !ch->value) {
        free(ch->name);
        free(ch->value);
        return;
    }
    s->n_changes++;
}

int cbf_katcp_sensor_set(cbf_katcp_server *s, const char *name, cbf_katcp_status st, const char *value,
                         double timestamp, cbf_error *err)
{
    int rc = CBF_OK;
    bool woke = false;
    pthread_mutex_lock(&s->tab_mu);
    kc_sensor *x = (kc_sensor *)cbf_katcp_sensor_find(&s->tab, name);
    const char *bad = x && value ? kc_value_bad(x, value) : NULL;
    char *v = x && value && !bad ? strdup(value) : NULL;
    if (!x)
        rc = cbf_error_set(err, CBF_EINVAL, "%s: no sensor '%s'", s->label, name);
    else if (!value || bad)
        rc = cbf_error_set(err, CBF_EINVAL, "%s: sensor '%s' (%s): '%s' is not %s", s->label, name,
                           cbf_katcp_type_name(x->type), value ? value : "(null)", bad ? bad : "a value");
    else if ((unsigned)st > CBF_KATCP_INACTIVE)
        rc = cbf_error_set(err, CBF_EINVAL, "%s: sensor '%s': bad status %d", s->label, name, (int)st);
    else if (!v)
        rc = cbf_error_set(err, CBF_ENOMEM, "%s: out of memory", s->label);
    if (!rc) {
        bool changed = strcmp(v, x->value) || st != x->status;
        free(x->value);
        x->value = v;
        v = NULL;
        x->status = st;
        x->updated = timestamp > 0 ? timestamp : cbf_katcp_now(CLOCK_REALTIME);
        if (changed) {
            x->seq = ++s->tab_seq;
            if (s->event_samplers > 0) {
                kc_queue_change(s, x);
                woke = true;
            }
        }
    }
    pthread_mutex_unlock(&s->tab_mu);
    free(v);
    if (woke)
        cbf_katcp_wake(s);
    return rc;
}

static size_t kc_remove(cbf_katcp_server *s, const char *name, bool prefix)
{
    size_t gone = 0, n = prefix ? strlen(name) : 0;
    pthread_mutex_lock(&s->tab_mu);
    for (size_t i = 0; i < s->tab.n;) {
        kc_sensor *x = &s->tab.s[i];
        if (prefix ? strncmp(x->name, name, n) : strcmp(x->name, name)) {
            i++;
            continue;
        }
        kc_sensor_free(x);
        memmove(x, x + 1, (s->tab.n - i - 1) * sizeof *x);
        s->tab.n--;
        gone++;
    }
    s->iface_changed |= gone > 0;
    pthread_mutex_unlock(&s->tab_mu);
    if (gone)
        cbf_katcp_wake(s);
    return gone;
}

size_t cbf_katcp_sensor_remove(cbf_katcp_server *s, const char *name) { return kc_remove(s, name, false); }
size_t cbf_katcp_sensor_remove_prefix(cbf_katcp_server *s, const char *prefix)
{
    return kc_remove(s, prefix, true);
}

/* ---- changes, for the server thread ---- */

void cbf_katcp_changes_free(kc_change *ch, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(ch[i].name);
        free(ch[i].value);
    }
    free(ch);
}

void cbf_katcp_event_samplers(cbf_katcp_server *s, int delta)
{
    pthread_mutex_lock(&s->tab_mu);
    s->event_samplers += delta;
    pthread_mutex_unlock(&s->tab_mu);
}
