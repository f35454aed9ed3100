/* cbf-bench engine --verbose: CPU time of every thread of this process over
 * the measuring window, from /proc/self/task. Threads are named by the
 * runtime and plugins ("recv/rx3", "send/tx1", "dsim/w5", node names), so
 * a thread at 100% says which stage and which of its threads is the limit. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine.h"

#define MAX_THREADS 1024

typedef struct eng_thread {
    int tid;
    char name[16];
    unsigned long long ticks;   /* user + system, clock ticks */
} eng_thread;

typedef struct eng_tsnap {
    eng_thread th[MAX_THREADS];
    int n;
    double t;
} eng_tsnap;

/* One thread's name and CPU ticks from its stat line: "tid (comm) state
 * ... utime stime ..." (fields 14 and 15); comm may hold spaces and
 * parentheses, so the fields are counted from the last ')'. */
static int eng_thread_read(int tid, eng_thread *t)
{
    char path[64], line[1024];
    snprintf(path, sizeof path, "/proc/self/task/%d/stat", tid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t n = fread(line, 1, sizeof line - 1, f);
    fclose(f);
    line[n] = 0;
    char *open = strchr(line, '('), *close = strrchr(line, ')');
    if (!open || !close || close < open)
        return -1;
    size_t len = (size_t)(close - open - 1);
    snprintf(t->name, sizeof t->name, "%.*s", (int)(len < 15 ? len : 15), open + 1);
    unsigned long long ut, st;
    /* After ')': state is field 3; utime and stime are 14 and 15. */
    if (sscanf(close + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
        return -1;
    t->tid = tid;
    t->ticks = ut + st;
    return 0;
}

static void eng_threads_take(eng_tsnap *s)
{
    s->n = 0;
    s->t = cbf_bench_eng_now();
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    while (d && (e = readdir(d)) && s->n < MAX_THREADS)
        if (e->d_name[0] != '.' && eng_thread_read(atoi(e->d_name), &s->th[s->n]) == 0)
            s->n++;
    if (d)
        closedir(d);
}

static int eng_thread_busier(const void *a, const void *b)
{
    const eng_thread *x = a, *y = b;
    return x->ticks < y->ticks ? 1 : x->ticks > y->ticks ? -1 : 0;
}

/* Threads alive at both ends, busiest first: CPU seconds per second. */
static void eng_threads_show(const eng_tsnap *a, eng_tsnap *z)
{
    double hz = (double)sysconf(_SC_CLK_TCK), dt = z->t - a->t;
    int n = 0;
    for (int i = 0; i < z->n; i++)
        for (int k = 0; k < a->n; k++)
            if (a->th[k].tid == z->th[i].tid) {
                z->th[n] = z->th[i];
                z->th[n++].ticks -= a->th[k].ticks;
                break;
            }
    qsort(z->th, (size_t)n, sizeof z->th[0], eng_thread_busier);
    double total = 0;
    for (int i = 0; i < n; i++)
        total += (double)z->th[i].ticks / hz / dt;
    printf("threads over the window (CPU seconds per second; %d threads, %.2f cores in all):", n, total);
    for (int i = 0; i < n && z->th[i].ticks > 0; i++)
        printf("%s %s %.2f", i % 6 ? "," : "\n ", z->th[i].name, (double)z->th[i].ticks / hz / dt);
    printf("\n");
}

void cbf_bench_eng_window(const eng_bench *b)
{
    if (!b->o->verbose) {
        cbf_bench_eng_sleep(b->o->seconds);
        return;
    }
    eng_tsnap *s = malloc(2 * sizeof *s);
    if (!s) {
        cbf_bench_eng_sleep(b->o->seconds);
        return;
    }
    eng_threads_take(&s[0]);
    cbf_bench_eng_sleep(b->o->seconds);
    eng_threads_take(&s[1]);
    eng_threads_show(&s[0], &s[1]);
    free(s);
}
