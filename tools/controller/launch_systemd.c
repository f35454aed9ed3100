/* launch_systemd.c: an engine as a cbf@ unit (launch.h,
 * systemd/cbf@.service.in). The pipeline is copied to the unit's confdir
 * as INSTANCE.yaml (on another host with scp), then `systemctl start`
 * (`systemctl -H HOST` for another host); the unit's state is read with
 * `systemctl show`, and `systemctl stop` stops it, waiting for cbf-run to
 * drain as the unit's TimeoutStopSec allows. The unit's own log is the
 * journal (journalctl -u UNIT). Not tried on a real systemd: the
 * controller_launch test checks the commands. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "launch.h"

void cbf_systemd_instance(const cbf_launcher *L, const cbf_plan_engine *e, char *unit, size_t n, char *yaml,
                          size_t yn)
{
    snprintf(unit, n, "%s@%s-%s", L->c->systemd_unit, L->product, e->name);
    snprintf(yaml, yn, "%s/%s-%s.yaml", L->c->systemd_confdir, L->product, e->name);
}

static int here(const cbf_plan_engine *e)
{
    return cbf_address_is_local(e->address);
}

/* systemctl [-H HOST] */
static void systemctl(const cbf_launcher *L, const cbf_plan_engine *e, cbf_argv *a)
{
    cbf_argv_add(a, "%s", L->c->systemctl);
    if (!here(e)) {
        cbf_argv_add(a, "-H");
        cbf_argv_add(a, "%s", e->host);
    }
}

int cbf_systemd_command(const cbf_launcher *L, const cbf_plan_engine *e, cbf_argv *a)
{
    char unit[160], yaml[1200];
    cbf_systemd_instance(L, e, unit, sizeof unit, yaml, sizeof yaml);
    systemctl(L, e, a);
    cbf_argv_add(a, "start");
    cbf_argv_add(a, "%s", unit);
    return 0;
}

static int copy_file(const char *from, const char *to, cbf_error *err)
{
    char tmp[1300];
    snprintf(tmp, sizeof tmp, "%s.tmp", to);
    FILE *in = fopen(from, "rb");
    if (!in)
        return cbf_error_set(err, CBF_EIO, "%s: cannot read: %s", from, strerror(errno));
    FILE *out = fopen(tmp, "wb");
    if (!out) {
        fclose(in);
        return cbf_error_set(err, CBF_EIO, "%s: cannot write (the unit's confdir): %s", tmp, strerror(errno));
    }
    char buf[8192];
    size_t r;
    while ((r = fread(buf, 1, sizeof buf, in)) > 0)
        if (fwrite(buf, 1, r, out) != r)
            break;
    int bad = ferror(in) | ferror(out);
    fclose(in);
    bad |= fclose(out);
    if (bad || rename(tmp, to)) {
        unlink(tmp);
        return cbf_error_set(err, CBF_EIO, "%s: cannot write (the unit's confdir)", to);
    }
    return 0;
}

/* Runs a; CBF_EIO with its output when it fails. */
static int must(cbf_launcher *L, const cbf_argv *a, cbf_error *err)
{
    char out[1024], cmd[2048];
    int st = L->exec.run(L->exec.ctx, a->v, out, sizeof out, err);
    if (st < 0)
        return err->code ? err->code : CBF_EIO;
    if (st) {
        cbf_argv_text(a, cmd, sizeof cmd);
        char *nl = strchr(out, '\n');
        if (nl && !nl[1])
            *nl = '\0';
        return cbf_error_set(err, CBF_EIO, "'%s' exited with status %d: %s", cmd, st, out[0] ? out : "(no output)");
    }
    return 0;
}

int cbf_systemd_start(cbf_launcher *L, const cbf_plan_engine *e, cbf_launch_handle *h, cbf_error *err)
{
    char yaml[1200];
    cbf_systemd_instance(L, e, h->unit, sizeof h->unit, yaml, sizeof yaml);
    int rc;
    if (here(e)) {
        rc = copy_file(e->pipeline, yaml, err);
    } else {
        cbf_argv a;
        cbf_argv_init(&a);
        cbf_argv_add(&a, "%s", L->c->scp);
        cbf_argv_add(&a, "%s", e->pipeline);
        cbf_argv_add(&a, "%s:%s", e->host, yaml);
        rc = must(L, &a, err);
    }
    cbf_argv a;
    if (!rc && !(rc = cbf_launch_command(L, e, &a, err)))
        rc = must(L, &a, err);
    h->running = !rc;
    return rc;
}

/* KEY=value of systemctl show's output into buf ("?" when absent). */
static void field(const char *out, const char *key, char *buf, size_t n)
{
    size_t kl = strlen(key);
    snprintf(buf, n, "?");
    for (const char *l = out; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
        if (!strncmp(l, key, kl) && l[kl] == '=') {
            size_t len = strcspn(l + kl + 1, "\n");
            snprintf(buf, n, "%.*s", (int)len, l + kl + 1);
            return;
        }
}

int cbf_systemd_ended(cbf_launcher *L, const cbf_plan_engine *e, cbf_launch_handle *h, char *reason, size_t n)
{
    cbf_argv a;
    cbf_argv_init(&a);
    systemctl(L, e, &a);
    cbf_argv_add(&a, "show");
    cbf_argv_add(&a, "--property=ActiveState,SubState,Result,ExecMainStatus");
    cbf_argv_add(&a, "%s", h->unit);
    char out[1024], state[64], sub[64], result[64], status[32];
    cbf_error err = {0};
    if (L->exec.run(L->exec.ctx, a.v, out, sizeof out, &err) != 0)
        return 0;   /* state unknown (systemd unreachable): not taken for an end */
    field(out, "ActiveState", state, sizeof state);
    if (!strcmp(state, "active") || !strcmp(state, "reloading"))
        return 0;
    field(out, "SubState", sub, sizeof sub);
    field(out, "Result", result, sizeof result);
    field(out, "ExecMainStatus", status, sizeof status);
    h->status = !strcmp(result, "exit-code") ? atoi(status) : -1;
    snprintf(reason, n, "unit %s is %s (%s): result %s, exit status %s (journalctl -u %s)", h->unit, state, sub,
             result, status, h->unit);
    h->running = 0;
    return 1;
}

int cbf_systemd_stop(cbf_launcher *L, const cbf_plan_engine *engines, cbf_launch_handle *h, int n, cbf_error *err)
{
    int rc = 0;
    /* one systemctl stop per host, every unit of it at once */
    for (int i = 0; i < n; i++) {
        if (!h[i].unit[0])
            continue;
        int seen = 0;
        for (int j = 0; j < i; j++)
            seen |= h[j].unit[0] && !strcmp(engines[j].host, engines[i].host);
        if (seen)
            continue;
        cbf_argv a;
        cbf_argv_init(&a);
        systemctl(L, &engines[i], &a);
        cbf_argv_add(&a, "stop");
        for (int j = i; j < n; j++)
            if (h[j].unit[0] && !strcmp(engines[j].host, engines[i].host))
                cbf_argv_add(&a, "%s", h[j].unit);
        cbf_error e2 = {0};
        int r = must(L, &a, rc ? &e2 : err);
        rc = rc ? rc : r;
    }
    for (int i = 0; i < n; i++) {
        char unit[160], yaml[1200];
        cbf_systemd_instance(L, &engines[i], unit, sizeof unit, yaml, sizeof yaml);
        if (h[i].unit[0] && here(&engines[i]))
            unlink(yaml);   /* another host's copy stays: overwritten by the next start */
        if (!rc) {
            h[i].running = 0;
            h[i].unit[0] = '\0';
        }
    }
    return rc;
}
