/* cbf/log.h: levelled logging to stderr, one line per message, prefixed with
 * the elapsed time, the level and the node (the thread's node, if any). */
#ifndef CBF_LOG_H
#define CBF_LOG_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum cbf_log_level {
    CBF_LOG_ERROR = 0,
    CBF_LOG_WARN = 1,
    CBF_LOG_INFO = 2,
    CBF_LOG_DEBUG = 3,
    CBF_LOG_TRACE = 4,
} cbf_log_level;

void cbf_log_set_level(cbf_log_level level);
cbf_log_level cbf_log_get_level(void);
/* Parses "error", "warn", "info", "debug", "trace"; returns 0 or CBF_EINVAL. */
int cbf_log_level_parse(const char *text, cbf_log_level *out);

/* A status line kept at the bottom of a terminal (cbf-run's progress):
 * drawn in place, cleared before every log line and drawn again after it,
 * so log lines never run into it. NULL or "" removes it. Only for stderr on
 * a terminal; the caller decides that. */
void cbf_log_status(const char *line);

/* Names the calling thread's node in its log lines (NULL for none). */
void cbf_log_set_thread_name(const char *name);

void cbf_log(cbf_log_level level, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

#define cbf_log_error(...) cbf_log(CBF_LOG_ERROR, __VA_ARGS__)
#define cbf_log_warn(...) cbf_log(CBF_LOG_WARN, __VA_ARGS__)
#define cbf_log_info(...) cbf_log(CBF_LOG_INFO, __VA_ARGS__)
#define cbf_log_debug(...) cbf_log(CBF_LOG_DEBUG, __VA_ARGS__)

#ifdef __cplusplus
}
#endif
#endif
