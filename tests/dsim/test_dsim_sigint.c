/* SIGINT at full rate: an endless replay dsim (2 antennas, 2 threads)
 * into discard under the real cbf-run is interrupted once dsim says every
 * pool buffer has been reused (so it is running at rate, not starting);
 * cbf-run must exit 0 saying it drained, discard must have received every
 * buffer dsim sent, and no pool may report a leak. Skips (77) until
 * cbf-run exists. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "pipeline.h"

static const char *yaml =
    "engine: {gpu: none}\n"
    "nodes:\n"
    "  dsim:\n"
    "    plugin: dsim\n"
    "    params: {antennas: 2, mode: replay, threads: 2, samples_per_chunk: 262144,\n"
    "             noise: 0.05, common_noise: 0.02, buffers: 4}\n"
    "  sink: {plugin: discard}\n"
    "edges:\n"
    "  - dsim.out -> sink.in\n";

static void sigint_at_rate_drains(void **state)
{
    (void)state;
    char yml[512], out_path[512];
    snprintf(yml, sizeof yml, "%s/sigint.yaml", pl_tmpdir());
    snprintf(out_path, sizeof out_path, "%s/sigint.out", pl_tmpdir());
    FILE *f = fopen(yml, "w");
    assert_non_null(f);
    fputs(yaml, f);
    fclose(f);
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    const pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int out = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(out, STDOUT_FILENO);
        dup2(fds[1], STDERR_FILENO);
        close(fds[0]);
        execl(pl_cbf_run(), pl_cbf_run(), yml, (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    FILE *err = fdopen(fds[0], "r");
    static char log[65536];
    size_t len = 0;
    char line[4096];
    int at_rate = 0, interrupted = 0;
    while (fgets(line, sizeof line, err)) {
        const size_t n = strlen(line);
        if (len + n < sizeof log) {
            memcpy(log + len, line, n + 1);
            len += n;
        }
        at_rate |= strstr(line, "every pool buffer reused") != NULL;
        if (at_rate && !interrupted) {
            assert_int_equal(kill(pid, SIGINT), 0);
            interrupted = 1;
        }
    }
    fclose(err);
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (!interrupted)
        fail_msg("dsim never reached its rate; stderr:\n%s", log);
    static char table[65536];
    f = fopen(out_path, "r");
    assert_non_null(f);
    table[fread(table, 1, sizeof table - 1, f)] = '\0';
    fclose(f);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fail_msg("cbf-run ended with status %d; stderr:\n%s\nstdout:\n%s", status, log, table);
    assert_non_null(strstr(table, "stopped (SIGINT) and drained"));
    assert_null(strstr(log, "never came back"));
    assert_null(strstr(log, "leak"));
    const long long sent = pl_table_column(table, "dsim", 3);
    assert_true(sent > 4);
    assert_int_equal(pl_table_column(table, "sink", 2), sent);
    assert_int_equal(pl_table_value(table, "sink", "buffers"), sent);
}

int main(void)
{
    int rc = pl_setup();
    if (rc)
        return rc;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(sigint_at_rate_drains),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
