/* Supervising candidate processes: see supervise.h. */
#include "harness/fuzz/supervise.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness/fuzz/coverage.h"

double kvc_now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int64_t kvc_process_rss_bytes(pid_t pid) {
    char path[64];
    if (pid) snprintf(path, sizeof path, "/proc/%ld/statm", (long)pid);
    else snprintf(path, sizeof path, "/proc/self/statm");
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    long long size, resident;
    int n = fscanf(f, "%lld %lld", &size, &resident);
    fclose(f);
    return n == 2 ? (int64_t)resident * (int64_t)sysconf(_SC_PAGESIZE) : -1;
}

int64_t kvc_process_tree_rss_bytes(pid_t pid) {
    int64_t total = kvc_process_rss_bytes(pid);
    if (total < 0) return -1;
    char path[96];
    snprintf(path, sizeof path, "/proc/%ld/task/%ld/children", (long)pid, (long)pid);
    FILE *f = fopen(path, "r");
    long child;
    for (int depth = 0; f && depth < 64 && fscanf(f, "%ld", &child) == 1; depth++) {
        int64_t rss = kvc_process_tree_rss_bytes((pid_t)child);
        if (rss > 0) total += rss;
    }
    if (f) fclose(f);
    return total;
}

void kvc_describe_exit(int status, char *out, size_t size) {
    if (WIFSIGNALED(status)) snprintf(out, size, "killed by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
    else snprintf(out, size, "exited with status %d", WEXITSTATUS(status));
}

void kvc_child_setup(pid_t parent) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(1);   /* the parent died before prctl */
    signal(SIGINT, SIG_IGN);
    signal(SIGTERM, SIG_DFL);
}

/* ---- interruption ---------------------------------------------------- */

#define MAX_TRACKED 64
static volatile sig_atomic_t interrupted_by;
static volatile pid_t tracked[MAX_TRACKED];

static void on_interrupt(int signo) {
    if (interrupted_by) {
        /* The second signal: no more saving, no orphans. */
        for (int i = 0; i < MAX_TRACKED; i++)
            if (tracked[i] > 0) kill(tracked[i], SIGKILL);
        for (int i = 0; i < MAX_TRACKED; i++)
            if (tracked[i] > 0) waitpid(tracked[i], NULL, 0);   /* async-signal-safe */
        kvc_coverage_flush();
        _exit(128 + signo);
    }
    interrupted_by = signo;
}

void kvc_interrupt_install(void) {
    interrupted_by = 0;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_interrupt;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0;   /* no SA_RESTART: poll() returns EINTR at once */
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

void kvc_interrupt_uninstall(void) {
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    interrupted_by = 0;
}

int kvc_interrupted(void) { return interrupted_by; }

void kvc_interrupt_track(pid_t pid) {
    for (int i = 0; i < MAX_TRACKED; i++)
        if (tracked[i] <= 0) { tracked[i] = pid; return; }
}

void kvc_interrupt_untrack(pid_t pid) {
    for (int i = 0; i < MAX_TRACKED; i++)
        if (tracked[i] == pid) tracked[i] = 0;
}

/* ---- one isolated call ------------------------------------------------- */

/* How often the supervisor looks at a child's memory and clock. */
#define WATCH_INTERVAL_MS 20

kvc_child_outcome kvc_run_isolated(void (*fn)(void *arg, int fd), void *arg, const kvc_child_limits *limits, void *result,
                                   size_t result_size, int *status) {
    int p[2];
    *status = 0;
    if (pipe(p)) return KVC_CHILD_DIED;
    fflush(stdout);
    fflush(stderr);
    pid_t parent = getpid(), pid = fork();
    if (pid < 0) { close(p[0]); close(p[1]); return KVC_CHILD_DIED; }
    if (pid == 0) {
        close(p[0]);
        kvc_child_setup(parent);
        fn(arg, p[1]);
        fflush(stdout);
        kvc_exit_worker(0);
    }
    close(p[1]);
    kvc_interrupt_track(pid);
    double started = kvc_now_seconds();
    size_t got = 0;
    kvc_child_outcome outcome = KVC_CHILD_DIED;
    for (;;) {
        struct pollfd fd = {.fd = p[0], .events = POLLIN};
        int n = poll(&fd, 1, WATCH_INTERVAL_MS);
        if (n > 0) {
            ssize_t r = read(p[0], (char *)result + got, result_size - got);
            if (r > 0) { got += (size_t)r; if (got == result_size) { outcome = KVC_CHILD_DONE; break; } continue; }
            if (r == 0 || errno != EINTR) break;   /* the child is gone */
        }
        if (limits->timeout_seconds > 0 && kvc_now_seconds() - started > limits->timeout_seconds) { outcome = KVC_CHILD_TIMEOUT; break; }
        if (limits->rss_limit_mb > 0 && kvc_process_rss_bytes(pid) > limits->rss_limit_mb * 1024 * 1024) { outcome = KVC_CHILD_MEMORY; break; }
    }
    if (outcome == KVC_CHILD_TIMEOUT || outcome == KVC_CHILD_MEMORY) kill(pid, SIGKILL);
    close(p[0]);
    while (waitpid(pid, status, 0) < 0 && errno == EINTR) {}
    kvc_interrupt_untrack(pid);
    /* A result followed by a crash on the way out is still a crash. */
    if (outcome == KVC_CHILD_DONE && !(WIFEXITED(*status) && WEXITSTATUS(*status) == 0)) outcome = KVC_CHILD_DIED;
    return outcome;
}

void kvc_describe_limit(kvc_child_outcome outcome, const kvc_child_limits *limits, char *out, size_t size) {
    if (outcome == KVC_CHILD_TIMEOUT) snprintf(out, size, "took longer than %g s (--timeout)", limits->timeout_seconds);
    else snprintf(out, size, "grew past %lld MB of resident memory (--rss-limit-mb)", (long long)limits->rss_limit_mb);
}
