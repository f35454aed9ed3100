/* exec.c: running programs for the launcher (launch.h): argument vectors,
 * and the real run (to its end, output captured) and spawn (a child in its
 * own process group, output to a log) that tests replace. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "launch.h"

void cbf_argv_init(cbf_argv *a)
{
    memset(a, 0, sizeof *a);
}

void cbf_argv_add(cbf_argv *a, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    size_t room = sizeof a->buf - a->used;
    int len = a->n < CBF_ARGV_MAX ? vsnprintf(a->buf + a->used, room, fmt, ap) : -1;
    va_end(ap);
    if (len < 0 || (size_t)len >= room) {
        a->overflow = 1;
        return;
    }
    a->v[a->n++] = a->buf + a->used;
    a->v[a->n] = NULL;
    a->used += (size_t)len + 1;
}

void cbf_argv_words(cbf_argv *a, const char *words)
{
    char w[1024];
    snprintf(w, sizeof w, "%s", words);
    for (char *save, *t = strtok_r(w, " \t", &save); t; t = strtok_r(NULL, " \t", &save))
        cbf_argv_add(a, "%s", t);
}

void cbf_argv_text(const cbf_argv *a, char *buf, size_t n)
{
    buf[0] = '\0';
    for (int i = 0; i < a->n; i++) {
        size_t l = strlen(buf);
        snprintf(buf + l, n > l ? n - l : 0, "%s%s", i ? " " : "", a->v[i]);
    }
}

/* In the child, before exec: only async-signal-safe calls. */
static void child_setup(pid_t parent, int die_with_parent)
{
    setpgid(0, 0);
    if (die_with_parent) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)   /* the parent went before the line above */
            _exit(1);
    }
    /* a daemon may block or ignore signals; its engines must not inherit that */
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    static const int sigs[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGPIPE, SIGCHLD, SIGUSR1, SIGUSR2};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        signal(sigs[i], SIG_DFL);
}

/* Every descriptor above 2 closes on exec (the daemon's listening sockets
 * are not the engine's). */
static void close_on_exec_above_2(void)
{
#ifdef SYS_close_range
    if (syscall(SYS_close_range, 3u, ~0u, 4u /* CLOSE_RANGE_CLOEXEC */) == 0)
        return;
#endif
    long max = sysconf(_SC_OPEN_MAX);
    for (int fd = 3; fd < (max > 0 && max < 65536 ? max : 65536); fd++)
        fcntl(fd, F_SETFD, FD_CLOEXEC);
}

_Noreturn static void report_and_exit(int report)
{
    int e = errno;
    ssize_t w = write(report, &e, sizeof e);
    (void)w;
    _exit(127);
}

/* The child: stdin from /dev/null, stdout and stderr to out, in dir, then
 * argv; a failure's errno goes back through report, which closes on a
 * successful exec. */
_Noreturn static void child(char *const argv[], int out, const char *dir, int report, pid_t parent,
                            int die_with_parent)
{
    child_setup(parent, die_with_parent);
    int null = open("/dev/null", O_RDONLY);
    if (null < 0 || dup2(null, 0) < 0 || dup2(out, 1) < 0 || dup2(out, 2) < 0 || (dir && chdir(dir)))
        report_and_exit(report);
    close_on_exec_above_2();
    execvp(argv[0], argv);
    report_and_exit(report);
}

/* The child's exec errno (0: it ran), read from the pipe's other end. */
static int exec_result(int rd)
{
    int e = 0;
    ssize_t r;
    do
        r = read(rd, &e, sizeof e);
    while (r < 0 && errno == EINTR);
    return r == (ssize_t)sizeof e ? e : 0;
}

static pid_t spawn(void *ctx, char *const argv[], const char *dir, const char *log, int truncate, cbf_error *err)
{
    (void)ctx;
    int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | (truncate ? O_TRUNC : 0), 0644);
    if (fd < 0)
        return cbf_error_set(err, CBF_EIO, "%s: cannot write the log: %s", log, strerror(errno)), -1;
    int p[2];
    if (pipe2(p, O_CLOEXEC)) {
        close(fd);
        return cbf_error_set(err, CBF_EIO, "pipe: %s", strerror(errno)), -1;
    }
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0)
        child(argv, fd, dir, p[1], parent, 1);
    int e = pid < 0 ? errno : 0;
    close(p[1]);
    if (pid > 0) {
        setpgid(pid, pid);   /* also here: the group exists before anyone signals it */
        e = exec_result(p[0]);
    }
    close(p[0]);
    if (pid > 0 && e) {
        waitpid(pid, NULL, 0);
        dprintf(fd, "cbf-controller: cannot run '%s' (in %s): %s\n", argv[0], dir ? dir : ".", strerror(e));
        pid = -1;
    }
    close(fd);
    if (pid < 0)
        cbf_error_set(err, CBF_EIO, "cannot run '%s'%s%s: %s", argv[0], dir ? " in " : "", dir ? dir : "",
                      strerror(e));
    return pid;
}

static int run(void *ctx, char *const argv[], char *out, size_t n, cbf_error *err)
{
    (void)ctx;
    int o[2], p[2];
    if (pipe2(o, O_CLOEXEC))
        return cbf_error_set(err, CBF_EIO, "pipe: %s", strerror(errno)), -1;
    if (pipe2(p, O_CLOEXEC)) {
        close(o[0]);
        close(o[1]);
        return cbf_error_set(err, CBF_EIO, "pipe: %s", strerror(errno)), -1;
    }
    pid_t pid = fork();
    if (pid == 0)
        child(argv, o[1], NULL, p[1], 0, 0);
    int e = pid < 0 ? errno : 0;
    close(o[1]);
    close(p[1]);
    size_t got = 0;
    char sink[4096];
    for (;;) {   /* to the end, whatever fits in out */
        char *dst = out && got + 1 < n ? out + got : sink;
        size_t room = out && got + 1 < n ? n - 1 - got : sizeof sink;
        ssize_t r = pid > 0 ? read(o[0], dst, room) : 0;
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        if (dst != sink)
            got += (size_t)r;
    }
    if (out && n)
        out[got] = '\0';
    close(o[0]);
    if (pid > 0)
        e = exec_result(p[0]);
    close(p[0]);
    int st = 0;
    if (pid > 0)
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
        }
    if (pid < 0 || e)
        return cbf_error_set(err, CBF_EIO, "cannot run '%s': %s", argv[0], strerror(e)), -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

const cbf_launch_exec cbf_launch_exec_real = {run, spawn, NULL};
