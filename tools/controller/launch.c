/* launch.c: the launcher (launch.h): the local backend, the child-process
 * handling it shares with slurm's srun steps (start, end, stop by signals
 * to the process group), and the checks the supervisor uses. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "launch.h"

void cbf_launcher_init(cbf_launcher *L, const cbf_controller_config *c, const char *product,
                       const cbf_launch_exec *exec)
{
    memset(L, 0, sizeof *L);
    L->c = c;
    snprintf(L->product, sizeof L->product, "%s", product);
    L->exec = exec ? *exec : cbf_launch_exec_real;
}

int cbf_launch_children(const cbf_launcher *L)
{
    return L->c->launcher != CBF_LAUNCHER_SYSTEMD;
}

int cbf_launch_command(const cbf_launcher *L, const cbf_plan_engine *e, cbf_argv *a, cbf_error *err)
{
    cbf_argv_init(a);
    if (L->c->launcher == CBF_LAUNCHER_SYSTEMD) {
        cbf_systemd_command(L, e, a);
    } else {
        if (L->c->launcher == CBF_LAUNCHER_SLURM)
            cbf_slurm_command(L, e, a);
        else if (e->netns[0]) {   /* ip execs the engine: its pid is the child's */
            cbf_argv_add(a, "ip");
            cbf_argv_add(a, "netns");
            cbf_argv_add(a, "exec");
            cbf_argv_add(a, "%s", e->netns);
        }
        cbf_argv_add(a, "%s", L->c->cbf_run);
        cbf_argv_add(a, "%s", e->pipeline);
        cbf_argv_words(a, L->c->cbf_run_args);
    }
    if (a->overflow)
        return cbf_error_set(err, CBF_EINVAL, "%s: its command has more than %d words or 8 KiB", e->name,
                             CBF_ARGV_MAX);
    return 0;
}

static int open_pidfd(pid_t pid)
{
#ifdef SYS_pidfd_open
    int fd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (fd >= 0)
        fcntl(fd, F_SETFD, FD_CLOEXEC);
    return fd;
#else
    (void)pid;
    return -1;
#endif
}

int cbf_launch_start(cbf_launcher *L, const cbf_plan_engine *e, int first, cbf_launch_handle *h, cbf_error *err)
{
    memset(h, 0, sizeof *h);
    h->pidfd = -1;
    h->status = -1;
    if (!cbf_launch_children(L))
        return cbf_systemd_start(L, e, h, err);
    cbf_argv a;
    int rc = cbf_launch_command(L, e, &a, err);
    if (rc)
        return rc;
    char dir[1100];
    snprintf(dir, sizeof dir, "%s", e->pipeline);
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = '\0';
    pid_t pid = L->exec.spawn(L->exec.ctx, a.v, slash ? dir : NULL, e->log, first, err);
    if (pid < 0)
        return err->code ? err->code : CBF_EIO;
    h->pid = pid;
    h->pidfd = open_pidfd(pid);   /* -1 on a kernel before 5.3: waitpid polls instead */
    h->running = 1;
    return 0;
}

static void how_it_ended(int st, cbf_launch_handle *h, char *reason, size_t n)
{
    h->status = WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : -1;
    if (WIFEXITED(st))
        snprintf(reason, n, "exited with status %d%s", WEXITSTATUS(st),
                 WEXITSTATUS(st) == 2 ? " (a bad pipeline)" : WEXITSTATUS(st) == 127 ? " (not run)" : "");
    else if (WIFSIGNALED(st))
        snprintf(reason, n, "killed by signal %d (%s)", WTERMSIG(st), strsignal(WTERMSIG(st)));
    else
        snprintf(reason, n, "ended (wait status %d)", st);
}

static void reaped(cbf_launch_handle *h)
{
    if (h->pidfd >= 0)
        close(h->pidfd);
    h->pidfd = -1;
    h->pid = 0;
    h->running = 0;
}

int cbf_launch_ended(cbf_launcher *L, const cbf_plan_engine *e, cbf_launch_handle *h, char *reason, size_t n)
{
    if (!h->running)
        return 1;
    if (!cbf_launch_children(L))
        return cbf_systemd_ended(L, e, h, reason, n);
    int st;
    pid_t r = waitpid(h->pid, &st, WNOHANG);
    if (r == 0 || (r < 0 && errno == EINTR))
        return 0;
    h->status = -1;
    if (r < 0)   /* someone else reaped it (SIGCHLD set to SIG_IGN?) */
        snprintf(reason, n, "ended, its status lost (waitpid: %s)", strerror(errno));
    else
        how_it_ended(st, h, reason, n);
    reaped(h);
    return 1;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

/* Waits until every running child has ended or the deadline passes,
 * reaping them; the number still running. */
static int reap_until(cbf_launcher *L, const cbf_plan_engine *engines, cbf_launch_handle *h, int n, double deadline)
{
    char why[256];
    for (;;) {
        int left = 0, have_fds = 1;
        struct pollfd fds[256];
        int nf = 0;
        for (int i = 0; i < n; i++)
            if (h[i].running && !cbf_launch_ended(L, &engines[i], &h[i], why, sizeof why)) {
                left++;
                if (h[i].pidfd < 0 || nf == 256)
                    have_fds = 0;
                else
                    fds[nf++] = (struct pollfd){.fd = h[i].pidfd, .events = POLLIN};
            }
        double wait = deadline - now_s();
        if (!left || wait <= 0)
            return left;
        /* with pidfds, woken by the first to end; without, a short wait and look again */
        int ms = (int)(wait * 1000) + 1;
        poll(have_fds ? fds : NULL, have_fds ? (nfds_t)nf : 0, have_fds || ms < 10 ? ms : 10);
    }
}

int cbf_launch_stop(cbf_launcher *L, const cbf_plan_engine *engines, cbf_launch_handle *h, int n, cbf_error *err)
{
    if (!cbf_launch_children(L))
        return cbf_systemd_stop(L, engines, h, n, err);
    for (int i = 0; i < n; i++)
        if (h[i].running)
            kill(-h[i].pid, SIGTERM);   /* its group: cbf-run (or srun, which passes it on) and anything it started */
    int left = reap_until(L, engines, h, n, now_s() + L->c->stop_timeout);
    if (left) {
        for (int i = 0; i < n; i++)
            if (h[i].running)
                kill(-h[i].pid, SIGKILL);
        left = reap_until(L, engines, h, n, now_s() + 10);
    }
    if (left)
        return cbf_error_set(err, CBF_EIO, "%d engine(s) of product %s did not end 10 s after SIGKILL", left,
                             L->product);
    return 0;
}

int cbf_launch_port_open(const char *address, int port, int timeout_ms)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (inet_pton(AF_INET, address, &sa.sin_addr) != 1)
        return 0;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return 0;
    int ok = connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
    if (!ok && errno == EINPROGRESS) {
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        int e = 0;
        socklen_t l = sizeof e;
        ok = poll(&p, 1, timeout_ms) == 1 && !getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &l) && e == 0;
    }
    close(fd);
    return ok;
}

void cbf_launch_last_line(const char *path, char *buf, size_t n)
{
    buf[0] = '\0';
    FILE *f = fopen(path, "rb");
    if (!f)
        return;
    char tail[4096];
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    long from = size > (long)sizeof tail - 1 ? size - (long)sizeof tail + 1 : 0;
    fseek(f, from, SEEK_SET);
    size_t got = fread(tail, 1, sizeof tail - 1, f);
    fclose(f);
    tail[got] = '\0';
    char *end = tail + got;
    while (end > tail && (end[-1] == '\n' || end[-1] == '\r' || end[-1] == ' '))
        *--end = '\0';
    char *start = strrchr(tail, '\n');
    snprintf(buf, n, "%s", start ? start + 1 : tail);
}
