/* Supervising candidate processes: see supervise.h. */
#include "harness/fuzz/supervise.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
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

int64_t kvc_own_rss_above(int64_t limit_bytes) {
    /* RUSAGE_THREAD: the peak is the process's all the same (one memory
     * map), without summing the times of every thread (the team masters'
     * and their pools', some 30). */
    struct rusage usage = {0};
    getrusage(RUSAGE_THREAD, &usage);   /* fails only on a bad argument */
    if ((int64_t)usage.ru_maxrss * 1024 <= limit_bytes) return 0;
    int64_t rss = kvc_process_rss_bytes(0);
    return rss > limit_bytes ? rss : 0;
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
    setpgid(0, 0);   /* the parent's kvc_kill_group reaches what it forks */
    signal(SIGINT, SIG_IGN);
    signal(SIGTERM, SIG_DFL);
    /* A group of its own is a background group: reading the terminal
     * would stop it, and so would writing to it under `stty tostop`. */
    signal(SIGTTOU, SIG_IGN);
    int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (null >= 0 && null != STDIN_FILENO) { dup2(null, STDIN_FILENO); close(null); }
    kvc_child_standard_fds();
}

void kvc_child_standard_fds(void) {
    for (int fd = 0; fd <= 2; fd++)
        if (fcntl(fd, F_GETFD) < 0 && errno == EBADF) {
            /* open() takes the lowest free descriptor: this one. */
            int null = open("/dev/null", O_RDWR);
            if (null >= 0 && null != fd) close(null);
        }
}

void kvc_close_inherited_fds(int keep_a, int keep_b) {
    unsigned lo = (unsigned)(keep_a < keep_b ? keep_a : keep_b), hi = (unsigned)(keep_a < keep_b ? keep_b : keep_a);
    if (keep_b < 0 || keep_a < 0) lo = hi;
    /* An empty range (lo or hi next to another) is EINVAL: nothing to close. */
    close_range(3, lo - 1, 0);
    close_range(lo + 1, hi - 1, 0);
    close_range(hi + 1, ~0U, 0);
}

void kvc_kill_group(pid_t pid) {
    kill(-pid, SIGKILL);
    kill(pid, SIGKILL);   /* should setpgid have failed */
}

/* ---- descendants that left the process group ------------------------- */

/* The process that became a subreaper (a forked child is none, though
 * it has a copy of this variable). */
static pid_t subreaper;

void kvc_become_subreaper(void) {
    if (subreaper != getpid() && prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0) subreaper = getpid();
}

/* The parent of process `pid` from /proc/PID/stat, -1 if unknown. */
static pid_t parent_of(pid_t pid) {
    char path[64], text[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t n = read(fd, text, sizeof text - 1);
    close(fd);
    if (n <= 0) return -1;
    text[n] = 0;
    /* "PID (COMM) STATE PPID ...": COMM may hold spaces and parentheses. */
    char *end = strrchr(text, ')');
    int ppid;
    char state;
    return end && sscanf(end + 1, " %c %d", &state, &ppid) == 2 ? (pid_t)ppid : -1;
}

void kvc_reap_descendants(const pid_t *keep, int num_keep) {
    pid_t self = getpid();
    if (subreaper != self) return;
    /* Killing a child hands its own children to this process (the
     * subreaper): look again until a pass finds none. */
    for (int pass = 0; pass < 1000; pass++) {
        DIR *proc = opendir("/proc");
        if (!proc) return;
        pid_t found[256];
        int n = 0;
        for (struct dirent *e; n < 256 && (e = readdir(proc));) {
            char *end;
            long pid = strtol(e->d_name, &end, 10);
            if (*end || pid <= 0 || parent_of((pid_t)pid) != self) continue;
            int kept = 0;
            for (int k = 0; k < num_keep; k++) kept |= keep[k] == (pid_t)pid;
            if (!kept) found[n++] = (pid_t)pid;
        }
        closedir(proc);
        if (!n) return;
        for (int i = 0; i < n; i++) {
            kill(found[i], SIGKILL);
            while (waitpid(found[i], NULL, 0) < 0 && errno == EINTR) {}
        }
    }
}

/* ---- interruption ---------------------------------------------------- */

#define MAX_TRACKED 64
static volatile sig_atomic_t interrupted_by;
static volatile pid_t tracked[MAX_TRACKED];

static void on_interrupt(int signo) {
    if (interrupted_by) {
        /* The second signal: no more saving, no orphans. */
        for (int i = 0; i < MAX_TRACKED; i++)
            if (tracked[i] > 0) kvc_kill_group(tracked[i]);
        for (int i = 0; i < MAX_TRACKED; i++)
            if (tracked[i] > 0) waitpid(tracked[i], NULL, 0);   /* async-signal-safe */
        kvc_coverage_flush();
        _exit(128 + signo);
    }
    interrupted_by = signo;
}

/* The dispositions before kvc_interrupt_install, put back by kvc_interrupt_uninstall. */
static struct sigaction before_hup, before_int, before_term;
static int installed;

void kvc_interrupt_install(void) {
    interrupted_by = 0;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_interrupt;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0;   /* no SA_RESTART: poll() returns EINTR at once */
    sigaction(SIGHUP, NULL, &before_hup);
    /* nohup's ignored hangup stays ignored. */
    if (before_hup.sa_handler != SIG_IGN) sigaction(SIGHUP, &sa, NULL);
    sigaction(SIGINT, &sa, &before_int);
    sigaction(SIGTERM, &sa, &before_term);
    installed = 1;
}

void kvc_interrupt_uninstall(void) {
    if (installed) {
        sigaction(SIGHUP, &before_hup, NULL);
        sigaction(SIGINT, &before_int, NULL);
        sigaction(SIGTERM, &before_term, NULL);
        installed = 0;
    }
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

/* SIGINT/SIGTERM while a child runs: its group is killed and the signal
 * goes on to the handler the caller had (the default ends the process,
 * Python's raises KeyboardInterrupt). */
static volatile sig_atomic_t isolated_interrupt;
static void on_isolated_interrupt(int signo) { isolated_interrupt = signo; }

int kvc_exit_fd(pid_t pid) { return (int)syscall(SYS_pidfd_open, pid, 0); }

int kvc_exited(pid_t pid) {
    siginfo_t info;
    memset(&info, 0, sizeof info);
    return waitid(P_PID, (id_t)pid, &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == pid;
}

/* Waits up to WATCH_INTERVAL_MS for the child's result or its exit;
 * reads what came.  1: result_size bytes have arrived; 0: the pipe closed
 * or failed first (the child's exit decides); -1: not yet. */
static int wait_result(int fd, int exit_fd, void *result, size_t result_size, size_t *got) {
    struct pollfd p[2] = {{.fd = exit_fd, .events = POLLIN}, {.fd = fd, .events = POLLIN}};
    /* poll skips a negative fd: without a pidfd (an old kernel) or once
     * the result is in, the watch interval paces the loop. */
    if (poll(p, 2, WATCH_INTERVAL_MS) <= 0 || !p[1].revents) return -1;
    ssize_t r = read(fd, (char *)result + *got, result_size - *got);
    if (r < 0 && errno == EINTR) return -1;
    if (r <= 0) return 0;
    *got += (size_t)r;
    return *got == result_size ? 1 : -1;
}

kvc_child_outcome kvc_run_isolated(void (*fn)(void *arg, int fd), void *arg, const kvc_child_limits *limits, void *result,
                                   size_t result_size, int *status) {
    int p[2];
    *status = 0;
    if (pipe2(p, O_CLOEXEC)) return KVC_CHILD_DIED;
    fflush(stdout);
    fflush(stderr);
    pid_t parent = getpid(), pid = fork();
    if (pid < 0) { close(p[0]); close(p[1]); return KVC_CHILD_DIED; }
    if (pid == 0) {
        kvc_close_inherited_fds(p[1], -1);
        kvc_child_setup(parent);
        fn(arg, p[1]);
        fflush(stdout);
        kvc_exit_worker(0);
    }
    close(p[1]);
    setpgid(pid, pid);
    struct sigaction sa = {.sa_handler = on_isolated_interrupt}, old_int, old_term;
    sigemptyset(&sa.sa_mask);
    isolated_interrupt = 0;
    sigaction(SIGINT, NULL, &old_int);
    sigaction(SIGTERM, NULL, &old_term);
    /* A signal the caller ignores (a background job's SIGINT) stays ignored. */
    if (old_int.sa_handler != SIG_IGN) sigaction(SIGINT, &sa, NULL);
    if (old_term.sa_handler != SIG_IGN) sigaction(SIGTERM, &sa, NULL);
    double started = kvc_now_seconds();
    size_t got = 0;
    int complete = 0, exit_fd = kvc_exit_fd(pid);
    kvc_child_outcome outcome = KVC_CHILD_DIED;
    /* Bounded whatever the child does with its end of the pipe: the
     * child's exit, not the pipe's end, finishes a call. */
    for (int fd = p[0];;) {
        int r = wait_result(fd, exit_fd, result, result_size, &got);
        if (r >= 0) { fd = -1; complete = r; }
        if (kvc_exited(pid)) { outcome = complete ? KVC_CHILD_DONE : KVC_CHILD_DIED; break; }
        if (isolated_interrupt) break;
        if (limits->timeout_seconds > 0 && kvc_now_seconds() - started > limits->timeout_seconds) { outcome = KVC_CHILD_TIMEOUT; break; }
        if (limits->rss_limit_mb > 0 && kvc_process_tree_rss_bytes(pid) > limits->rss_limit_mb * 1024 * 1024) { outcome = KVC_CHILD_MEMORY; break; }
    }
    if (exit_fd >= 0) close(exit_fd);
    /* Unreaped, the child's pid cannot yet name another process group. */
    kvc_kill_group(pid);
    close(p[0]);
    while (waitpid(pid, status, 0) < 0 && errno == EINTR) {}
    kvc_reap_descendants(NULL, 0);
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    if (isolated_interrupt) {
        *status = isolated_interrupt;   /* reads as "killed by signal N" */
        raise(isolated_interrupt);
        return KVC_CHILD_DIED;
    }
    /* A result followed by a crash on the way out is still a crash. */
    if (outcome == KVC_CHILD_DONE && !(WIFEXITED(*status) && WEXITSTATUS(*status) == 0)) outcome = KVC_CHILD_DIED;
    return outcome;
}

void kvc_describe_limit(kvc_child_outcome outcome, const kvc_child_limits *limits, char *out, size_t size) {
    if (outcome == KVC_CHILD_TIMEOUT) snprintf(out, size, "took longer than %g s (--timeout)", limits->timeout_seconds);
    else snprintf(out, size, "grew past %lld MB of resident memory (--rss-limit-mb)", (long long)limits->rss_limit_mb);
}

const char *kvc_protocol_error(const kvc_worker_message *m, const kvc_worker_view *v, char *why, size_t size) {
    int running = v->phase == KVC_JOB_RUNNING && m->index == v->index;
    if (m->type == KVC_MSG_START && (v->phase != KVC_JOB_IDLE || m->index != v->next_index))
        snprintf(why, size, "it started case %lld out of turn (expected case %lld%s)", (long long)m->index, (long long)v->next_index,
                 v->phase == KVC_JOB_IDLE ? "" : " after the one it was running");
    else if (m->type == KVC_MSG_RESULT && !running)
        snprintf(why, size, "it sent a result for case %lld, which it was not running (a second result for one case)", (long long)m->index);
    else if (m->type == KVC_MSG_RESULT && ((unsigned)m->variant >= (unsigned)v->variants || (unsigned)m->family >= (unsigned)v->families ||
                                           (m->threads | m->other_threads) < 0))
        snprintf(why, size, "its result for case %lld names no variant, family or thread count kvcmp knows", (long long)m->index);
    else if (m->type == KVC_MSG_SAVED && (v->phase != KVC_JOB_SHRINKING || m->index != v->index))
        snprintf(why, size, "it reported saving case %lld, which it was not shrinking", (long long)m->index);
    else if (m->type == KVC_MSG_DONE && (v->phase != KVC_JOB_IDLE || !v->complete))
        snprintf(why, size, "it ended its job at case %lld, before its cases were done", (long long)v->next_index);
    else if (m->type == KVC_MSG_RETIRE && v->phase != KVC_JOB_IDLE)
        snprintf(why, size, "it retired in the middle of case %lld", (long long)v->index);
    else if (m->type == KVC_MSG_PHASE && (v->phase == KVC_JOB_IDLE || m->index != v->index || (unsigned)m->phase > 2))
        snprintf(why, size, "it sent a phase (%d) for case %lld, which it was not running", m->phase, (long long)m->index);
    else if ((unsigned)m->type > KVC_MSG_PHASE)
        snprintf(why, size, "it sent a message of unknown type %d", m->type);
    else
        return NULL;
    return why;
}
