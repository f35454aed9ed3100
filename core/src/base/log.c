/* log.c: one line per message on stderr. A single fputs per line keeps lines
 * from different node threads whole; the level is read without a lock since
 * a stale value for one message does no harm. The status line (cbf-run's
 * progress on a terminal) is under a mutex: a log line has to clear it,
 * print, and draw it again as one write. */
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "cbf/error.h"
#include "cbf/log.h"

static atomic_int log_level = CBF_LOG_INFO;
static _Thread_local const char *thread_name;
static struct timespec log_t0;
static atomic_flag log_t0_set = ATOMIC_FLAG_INIT;

static pthread_mutex_t status_mu = PTHREAD_MUTEX_INITIALIZER;
static char status_line[1024];

static const char *const level_names[] = {"error", "warn", "info", "debug", "trace"};

void cbf_log_set_level(cbf_log_level level) { atomic_store(&log_level, (int)level); }
cbf_log_level cbf_log_get_level(void) { return (cbf_log_level)atomic_load(&log_level); }

int cbf_log_level_parse(const char *text, cbf_log_level *out)
{
    for (int i = 0; i <= CBF_LOG_TRACE; i++) {
        if (text && !strcasecmp(text, level_names[i])) {
            *out = (cbf_log_level)i;
            return CBF_OK;
        }
    }
    if (text && !strcasecmp(text, "warning")) {
        *out = CBF_LOG_WARN;
        return CBF_OK;
    }
    return CBF_EINVAL;
}

void cbf_log_set_thread_name(const char *name) { thread_name = name; }

void cbf_log_status(const char *line)
{
    pthread_mutex_lock(&status_mu);
    snprintf(status_line, sizeof status_line, "%s", line ? line : "");
    fprintf(stderr, "\r%s\033[K", status_line);
    fflush(stderr);
    pthread_mutex_unlock(&status_mu);
}

void cbf_log(cbf_log_level level, const char *fmt, ...)
{
    if ((int)level > atomic_load(&log_level))
        return;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (!atomic_flag_test_and_set(&log_t0_set))
        log_t0 = now;
    double t = (double)(now.tv_sec - log_t0.tv_sec) + 1e-9 * (double)(now.tv_nsec - log_t0.tv_nsec);

    char line[2048];
    int n = snprintf(line, sizeof line, "[%9.3f] %-5s %s%s", t, level_names[level],
                     thread_name ? thread_name : "", thread_name ? ": " : "");
    if (n < 0 || (size_t)n >= sizeof line)
        n = 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    va_end(ap);
    size_t len = strlen(line);
    line[len] = '\n';
    line[len + 1] = '\0';
    pthread_mutex_lock(&status_mu);
    if (status_line[0]) {
        char out[sizeof line + sizeof status_line + 16];
        snprintf(out, sizeof out, "\r\033[K%s%s\033[K", line, status_line);
        fputs(out, stderr);
        fflush(stderr);
    } else {
        fputs(line, stderr);
    }
    pthread_mutex_unlock(&status_mu);
}
