/* cbf-bench engine, case d (the F-engine on the CPU path) at its smallest:
 * it must run a real pipeline through the runtime, stop it, drain it, print
 * its table and report zero loss. No timing is asserted: rates belong to
 * the benchmark's reader. The program under test is argv[1]. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <cmocka.h>

static const char *bench;

/* Runs cbf-bench with `args`; returns its exit status and its stdout. */
static int run_bench(const char *args, char *out, size_t cap)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' engine %s", bench, args);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void cpu_case_runs_drains_and_reports(void **state)
{
    (void)state;
    static char out[1 << 16];
    int st = run_bench("--case d --seconds 1 --ants 1 --channels 4096", out, sizeof out);
    printf("%s", out);
    assert_int_equal(st, 0);
    assert_non_null(strstr(out, "### (d) F-engine from host memory, CPU"));
    assert_non_null(strstr(out, "CPU cores"));
    assert_non_null(strstr(out, "| channels | antennas | Gsample/s | antennas of rate | antennas per core |"));
    /* The row: 4096 channels, 1 antenna, no missing data, stopped and drained. */
    const char *row = strstr(out, "\n| 4096 | 1 | ");
    assert_non_null(row);
    const char *end = strchr(row + 1, '\n');
    assert_non_null(end);
    char line[512];
    snprintf(line, sizeof line, "%.*s", (int)(end - row - 1), row + 1);
    assert_non_null(strstr(line, "| 0 | ok, drained"));
    assert_non_null(strstr(out, "case d: zero loss in every row"));
}

static void bad_options_are_refused(void **state)
{
    (void)state;
    static char out[1 << 12];
    assert_int_equal(run_bench("--case x 2>/dev/null", out, sizeof out), 2);
    assert_int_equal(run_bench("--ants 0 2>/dev/null", out, sizeof out), 2);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test_bench_engine PATH/cbf-bench\n");
        return 2;
    }
    bench = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(cpu_case_runs_drains_and_reports),
        cmocka_unit_test(bad_options_are_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
