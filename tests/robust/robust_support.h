/* Helpers of the supervision tests: campaigns run as a child build/kvcmp
 * process (Criterion already forks per test; a campaign forks workers of
 * its own), in a process group of their own so that a leftover worker
 * is seen; signals sent at a chosen moment; the hostile candidates of
 * tests/plugins/candidate.c. */
#ifndef KVCMP_TESTS_ROBUST_SUPPORT_H
#define KVCMP_TESTS_ROBUST_SUPPORT_H

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#include "tests/test_support.h"

#include "harness/fuzz/run.h"
#include "kvcmp/backends.h"

#define ARGC(argv) ((int)(sizeof(argv) / sizeof(argv)[0]))

typedef struct {
    int status;          /* the exit status, or 128 + the signal that killed it */
    double seconds;      /* wall time */
    char *out, *err;
    int leftovers;       /* processes of its group, or descendants of it, still alive afterwards */
    int overran;         /* killed at child_options.limit_seconds (default 120) */
    int bait_bytes;      /* bytes written into the pipe kvcmp inherited as descriptor 3 */
} child_run;

typedef struct {
    double signal_after;     /* > 0: send `signals` this many seconds after the start */
    int signals[2];          /* sent back to back; 0 ends the list */
    long file_size_limit;    /* > 0: RLIMIT_FSIZE in bytes */
    int kill_workers;        /* SIGKILL a worker this many times, 0.3 s apart */
    double limit_seconds;    /* > 0: kill its process group after this long (else 120 s) */
} child_options;

static inline double robust_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The kvcmp of the test binary's own build: BUILD/asan/unit-tests runs
 * BUILD/kvcmp (the coverage build its own). */
static inline void kvcmp_binary(char *out, size_t size) {
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    cr_assert(n > 0);
    self[n] = 0;
    char *dir = dirname(dirname(self));
    snprintf(out, size, "%s/kvcmp", dir);
    if (!support_file_exists(out)) cr_skip_test("%s not built (make test builds it)", out);
}

static inline void hostile_plugin(const char *kind, char *out, size_t size) {
    const char *dir = getenv("KVCMP_TEST_PLUGINS");
    snprintf(out, size, "%s/%s.so", dir && dir[0] ? dir : "build/test-plugins", kind);
    if (!support_file_exists(out)) cr_skip_test("%s not built (make test builds tests/plugins/candidate.c into it)", out);
}

/* Processes in group pgid, after up to a second for the kernel to
 * deliver PR_SET_PDEATHSIG. */
static inline int group_members(pid_t pgid) {
    for (int i = 0; i < 100; i++) {
        while (waitpid(-pgid, NULL, WNOHANG) > 0) {}   /* orphans reparented to us (a subreaper) */
        if (kill(-pgid, 0) != 0 && errno == ESRCH) return 0;
        usleep(10000);
    }
    kill(-pgid, SIGKILL);   /* do not leave them to the next test */
    return 1;
}

/* Descendants of a kvcmp run that outlived it: this process is their
 * subreaper (run_kvcmp), so they are its children now, in whatever
 * process group they put themselves.  Waits up to a second for
 * PR_SET_PDEATHSIG, then kills and counts what is left. */
static inline int orphans_left(void) {
    int left = 0;
    for (int i = 0; i < 100; i++) {
        while (waitpid(-1, NULL, WNOHANG) > 0) {}
        left = 0;
        DIR *tasks = opendir("/proc/self/task");
        for (struct dirent *t; tasks && (t = readdir(tasks)) != NULL;) {
            if (t->d_name[0] == '.') continue;
            char path[300];
            snprintf(path, sizeof path, "/proc/self/task/%s/children", t->d_name);
            FILE *f = fopen(path, "r");
            long child;
            while (f && fscanf(f, "%ld", &child) == 1) {
                left++;
                if (i == 99) { kill(-(pid_t)child, SIGKILL); kill((pid_t)child, SIGKILL); }
            }
            if (f) fclose(f);
        }
        if (tasks) closedir(tasks);
        if (!left) return 0;
        usleep(10000);
    }
    while (waitpid(-1, NULL, WNOHANG) > 0) {}
    return left;
}

/* The first child of pid (a fuzz worker), or 0. */
static inline pid_t first_child(pid_t pid) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%ld/task/%ld/children", (long)pid, (long)pid);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    long child = 0;
    if (fscanf(f, "%ld", &child) != 1) child = 0;
    fclose(f);
    return (pid_t)child;
}

/* Runs `kvcmp argv...` (NULL-terminated) with stdout and stderr
 * captured, under the options (NULL: none). */
static inline child_run run_kvcmp(char **argv, const child_options *opt) {
    char binary[4096];
    kvcmp_binary(binary, sizeof binary);
    char out_path[] = "/tmp/kvcmp-test-out-XXXXXX", err_path[] = "/tmp/kvcmp-test-err-XXXXXX";
    int out_fd = mkstemp(out_path), err_fd = mkstemp(err_path);
    cr_assert(out_fd >= 0 && err_fd >= 0);
    unlink(out_path);
    unlink(err_path);
    int argc = 0;
    while (argv[argc]) argc++;
    char **full = calloc((size_t)argc + 2, sizeof *full);
    full[0] = binary;
    for (int i = 0; i < argc; i++) full[i + 1] = argv[i];
    /* What kvcmp leaves behind, in any process group, becomes ours to see. */
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    double started = robust_now(), limit = opt && opt->limit_seconds > 0 ? opt->limit_seconds : 120;
    /* kvcmp inherits the write end of a pipe as descriptor 3 and nothing
     * else of the test runner's: a candidate must not reach either. */
    int bait[2];
    cr_assert(pipe2(bait, O_NONBLOCK) == 0);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        setpgid(0, 0);
        /* kvcmp starts as a user's command would: a test run from a
         * background job (SIGINT ignored) or under nohup (SIGHUP ignored)
         * would otherwise pass those dispositions on through exec. */
        signal(SIGINT, SIG_DFL);
        signal(SIGHUP, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        dup2(out_fd, STDOUT_FILENO);
        dup2(err_fd, STDERR_FILENO);
        if (bait[1] != 3) { dup2(bait[1], 3); close(bait[1]); }
        close_range(4, ~0U, 0);
        if (opt && opt->file_size_limit > 0) {
            signal(SIGXFSZ, SIG_IGN);   /* the write fails with EFBIG, as a full disk's does with ENOSPC */
            struct rlimit limit = {.rlim_cur = (rlim_t)opt->file_size_limit, .rlim_max = (rlim_t)opt->file_size_limit};
            setrlimit(RLIMIT_FSIZE, &limit);
        }
        execv(binary, full);
        _exit(127);
    }
    setpgid(pid, pid);
    close(bait[1]);
    free(full);
    int status = 0, signalled = 0, killed = 0, overran = 0;
    for (;;) {
        pid_t done = waitpid(pid, &status, WNOHANG);
        if (done == pid) break;
        double elapsed = robust_now() - started;
        if (opt && opt->signal_after > 0 && !signalled && elapsed > opt->signal_after) {
            for (int i = 0; i < 2 && opt->signals[i]; i++) kill(pid, opt->signals[i]);
            signalled = 1;
        }
        if (opt && killed < opt->kill_workers && elapsed > 0.3 * (killed + 1)) {
            pid_t worker = first_child(pid);
            if (worker > 0 && kill(worker, SIGKILL) == 0) killed++;
        }
        if (elapsed > limit && !overran) {
            /* Nothing may outlive the test: the group, then orphans_left. */
            kill(-pid, SIGKILL);
            kill(pid, SIGKILL);
            overran = 1;
        }
        usleep(5000);
    }
    child_run run = {.seconds = robust_now() - started, .overran = overran};
    run.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    run.leftovers = group_members(pid);
    run.leftovers += orphans_left();
    char drained[4096];
    for (ssize_t n; (n = read(bait[0], drained, sizeof drained)) > 0;) run.bait_bytes += (int)n;
    close(bait[0]);
    cr_expect(!overran, "kvcmp %s did not end within %g s and was killed", argv[0], limit);
    run.out = support_read_fd(out_fd);
    run.err = support_read_fd(err_fd);
    close(out_fd);
    close(err_fd);
    return run;
}

static inline void free_child_run(child_run *run) {
    free(run->out);
    free(run->err);
}

static inline int count_of(const char *text, const char *needle) {
    int n = 0;
    for (const char *p = text; (p = strstr(p, needle)) != NULL; p += strlen(needle)) n++;
    return n;
}

static inline void expect_text(const char *text, const char *needle, const char *what) {
    cr_expect(text && strstr(text, needle) != NULL, "%s lacks '%s':\n%s", what, needle, text ? text : "(null)");
}

static inline cJSON *read_summary(const char *path) {
    char *text = support_read_file(path);
    cJSON *root = cJSON_Parse(text);
    cr_assert_not_null(root, "%s is not valid JSON:\n%s", path, text);
    free(text);
    return root;
}

/* A number of a campaign's summary JSON. */
static inline double summary_number(const char *json_path, const char *key) {
    cJSON *root = read_summary(json_path);
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(root, key);
    cr_assert(cJSON_IsNumber(item), "no number %s in %s", key, json_path);
    double v = item->valuedouble;
    cJSON_Delete(root);
    return v;
}

/* Entries of dir (hidden ones included); -1 if it does not exist. */
static inline int entries_in(const char *dir, int *hidden) {
    DIR *d = opendir(dir);
    if (hidden) *hidden = 0;
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        n++;
        if (hidden && e->d_name[0] == '.') (*hidden)++;
    }
    closedir(d);
    return n;
}

/* Every case directory under dir loads (complete, never half-written). */
static inline int complete_cases_in(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        char path[4096], error[512];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        kvc_case c;
        cr_expect_eq(kvc_case_load(path, &c, error, sizeof error), 0, "%s", error);
        cr_expect_not_null(kvc_case_get(&c, "kv_cache.out"), "%s has no expected output", path);
        kvc_case_free(&c);
        n++;
    }
    closedir(d);
    return n;
}

#endif
