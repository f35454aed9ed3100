/* cbf-controller: a katsdpcontroller-compatible master controller that
 * configures cbf products, each behind a product controller of its own
 * (docs/controller.md, "Running cbf-controller"). It serves until SIGINT
 * or SIGTERM, then deconfigures every product, leaving no engine behind. */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "master.h"
#include "resources.h"
#include "startup.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: cbf-controller [--config FILE] [--host HOST] [--port PORT]\n"
               "                      [--configure NAME PRODUCT.json [--capture]]\n"
               "  --config FILE  the controller's configuration (docs/controller.md); default: every\n"
               "                 engine on this machine over loopback\n"
               "  --host HOST    the address the master and product controllers listen on\n"
               "                 (default 127.0.0.1: this machine only)\n"
               "  --port PORT    the master controller's katcp port (default 5001; 0: a free one)\n"
               "  --configure NAME PRODUCT.json\n"
               "                 once up, configure product NAME from that file (katsdpcontroller's\n"
               "                 product configuration), as ?product-configure would; exit 1 if refused\n"
               "  --capture      then capture-start every correlator and beam stream of it\n"
               "  --version      print cbf-controller's version and exit\n"
               "On start it prints one line: the master controller's bound address.\n");
}

/* The default engine program, `cbf-run` on PATH, is taken from beside
 * this program when it is there: in the build tree (build/tools/cbf-run,
 * this in build/tools/controller/) and installed (both in bindir), so the
 * quick start needs no PATH. A configuration naming another stays. */
static void cbf_run_beside(cbf_controller_config *c)
{
    if (strcmp(c->cbf_run, "cbf-run"))
        return;
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        return;
    self[n] = '\0';
    char *slash = strrchr(self, '/');
    if (!slash)
        return;
    *slash = '\0';
    const char *tries[] = {"%s/cbf-run", "%s/../cbf-run"};
    for (int i = 0; i < 2; i++) {
        char p[PATH_MAX + 16];
        snprintf(p, sizeof p, tries[i], self);
        char *real = realpath(p, NULL);
        if (real && access(real, X_OK) == 0) {
            snprintf(c->cbf_run, sizeof c->cbf_run, "%s", real);
            free(real);
            return;
        }
        free(real);
    }
}

/* --name VALUE or --name=VALUE at argv[*i]; NULL when argv[*i] is not it. */
static const char *option(int argc, char **argv, int *i, const char *name)
{
    size_t l = strlen(name);
    if (strncmp(argv[*i], name, l))
        return NULL;
    if (argv[*i][l] == '=')
        return argv[*i] + l + 1;
    if (argv[*i][l] == '\0' && *i + 1 < argc)
        return argv[++*i];
    return NULL;
}

int main(int argc, char **argv)
{
    const char *config = NULL, *host = "127.0.0.1", *port_text = "5001", *v;
    const char *product = NULL, *product_file = NULL;
    int capture = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--version")) {
            printf("cbf-controller %s\n", CBF_VERSION);
            return 0;
        } else if ((v = option(argc, argv, &i, "--config"))) {
            config = v;
        } else if ((v = option(argc, argv, &i, "--host"))) {
            host = v;
        } else if ((v = option(argc, argv, &i, "--port"))) {
            port_text = v;
        } else if (!strcmp(argv[i], "--configure") && i + 2 < argc) {
            product = argv[++i];
            product_file = argv[++i];
        } else if (!strcmp(argv[i], "--capture")) {
            capture = 1;
        } else {
            fprintf(stderr, "cbf-controller: unknown argument '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    if (capture && !product) {
        fprintf(stderr, "cbf-controller: --capture needs --configure NAME PRODUCT.json\n");
        return 2;
    }
    char *end;
    long port = strtol(port_text, &end, 10);
    if (end == port_text || *end || port < 0 || port > 65535) {
        fprintf(stderr, "cbf-controller: --port '%s': a port from 0 to 65535\n", port_text);
        return 2;
    }
    /* SIGINT and SIGTERM are waited for below; every thread started from
     * here on has them blocked (engines start with an empty mask). */
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
    signal(SIGPIPE, SIG_IGN);

    /* The configuration's relative paths are taken from its folder, and
     * engines run in their product's folder: so the folder in full. */
    char *config_abs = config ? realpath(config, NULL) : NULL;
    if (config && !config_abs) {
        fprintf(stderr, "cbf-controller: --config %s: %s\n", config, strerror(errno));
        return 2;
    }
    cbf_error err = {0};
    cbf_controller_config *c = NULL;
    cbf_resources *res = NULL;
    cbf_master *m = NULL;
    if (!cbf_controller_config_load(config_abs, &c, &err))
        cbf_run_beside(c);
    if (err.code || cbf_resources_create(c, &res, &err) ||
        cbf_master_open(host, (unsigned)port, c, res, &m, &err)) {
        fprintf(stderr, "cbf-controller: %s\n", err.msg);
        cbf_resources_free(res);
        cbf_controller_config_free(c);
        free(config_abs);
        return 2;
    }
    printf("cbf-controller: master controller on %s\n", cbf_master_address(m));
    fflush(stdout);
    if (product && cbf_controller_startup(cbf_master_address(m), product, product_file, capture, stdout, &err)) {
        fprintf(stderr, "cbf-controller: %s\n", err.msg);
        cbf_master_close(m);
        cbf_resources_free(res);
        cbf_controller_config_free(c);
        free(config_abs);
        return 1;
    }
    int sig = 0;
    sigwait(&stop, &sig);
    fprintf(stderr, "cbf-controller: %s: deconfiguring every product\n", strsignal(sig));
    cbf_master_close(m);
    cbf_resources_free(res);
    cbf_controller_config_free(c);
    free(config_abs);
    return 0;
}
