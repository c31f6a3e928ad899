/* Supervising the processes that run candidate code (fuzz workers, the
 * per-case children of `replay --impl LIB.so`): time and memory limits,
 * how a child ended in words, and SIGINT/SIGTERM.
 *
 * The limits are enforced from outside, by the parent: a candidate that
 * loops forever, blocks its signals or scribbles over its own process
 * cannot stop its supervisor from killing it. */
#ifndef KVCMP_FUZZ_SUPERVISE_H
#define KVCMP_FUZZ_SUPERVISE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define KVC_DEFAULT_TIMEOUT_SECONDS 10.0
#define KVC_DEFAULT_RSS_LIMIT_MB 2048

#define KVC_DEFAULT_STARTUP_TIMEOUT_SECONDS 60.0
#define KVC_DEFAULT_COMPILE_TIMEOUT_SECONDS 60.0

typedef struct {
    double timeout_seconds;     /* one case; <= 0: no limit */
    int64_t rss_limit_mb;       /* resident memory of the child; <= 0: no limit */
    double startup_seconds;     /* a Python worker's start-up inside a case (the fuzz workers) */
    double compile_seconds;     /* a Python worker's first call of a geometry: allowed on top of timeout_seconds */
} kvc_child_limits;

double kvc_now_seconds(void);

/* Resident memory of a process in bytes (0 = this one); -1 if unknown. */
int64_t kvc_process_rss_bytes(pid_t pid);
/* The same with its children's and their children's (a fuzz worker and
 * the Python interpreter it runs a candidate in). */
int64_t kvc_process_tree_rss_bytes(pid_t pid);
/* This process's resident bytes when they exceed limit_bytes, else 0.
 * Its peak (one system call) bounds its current size, so /proc/self/statm
 * (four, and a fuzz worker asks after every case) is read only once the
 * peak has passed the limit. */
int64_t kvc_own_rss_above(int64_t limit_bytes);

/* "killed by signal 11 (Segmentation fault)", "exited with status 3". */
void kvc_describe_exit(int status, char *out, size_t size);

/* In a freshly forked child that runs candidate code: it dies with its
 * parent (no orphans when the supervisor is killed), leaves the
 * terminal's SIGINT to the supervisor, and SIGTERM kills it. */
void kvc_child_setup(pid_t parent);
/* Also a group of its own (the supervisor kills it whole: kvc_kill_group)
 * and /dev/null for stdin.  Descriptors 0, 1 and 2 that the candidate
 * closed are /dev/null again after kvc_child_standard_fds, so that no file
 * the worker opens later (a saved case) receives the candidate's output. */
void kvc_child_standard_fds(void);
/* In a freshly forked child: closes every descriptor above 2 but the two
 * given (-1: none), so that the candidate it runs can write into no pipe
 * or file of its supervisor's, nor of whatever started kvcmp. */
void kvc_close_inherited_fds(int keep_a, int keep_b);
/* SIGKILL to the process group of a child set up by kvc_child_setup: the
 * helpers its candidate forked die with it. */
void kvc_kill_group(pid_t pid);
/* Makes this process the subreaper of its descendants (a command that
 * supervises candidates: kvcmp fuzz and replay), so that a helper a
 * candidate detached (setsid, a double fork) becomes its child when its
 * own parent dies, not init's. */
void kvc_become_subreaper(void);
/* After a supervised child was killed and reaped: kills and reaps every
 * child of this process but the keep[num_keep] (the live workers), the
 * orphans handed to it as subreaper included, again until none is left.
 * Nothing without kvc_become_subreaper (a library caller's children are
 * its own). */
void kvc_reap_descendants(const pid_t *keep, int num_keep);
/* A descriptor that becomes readable when the child exits (a pidfd), or
 * -1 on kernels without one. */
int kvc_exit_fd(pid_t pid);
/* 1 when the child has exited; it stays unreaped, so that its pid still
 * names its process group for kvc_kill_group. */
int kvc_exited(pid_t pid);

/* SIGHUP, SIGINT and SIGTERM set a flag that kvc_interrupted() returns
 * (the signal number); a second one kills the tracked children and exits
 * at once with 128 + the signal. */
void kvc_interrupt_install(void);
int kvc_interrupted(void);
void kvc_interrupt_track(pid_t pid);
void kvc_interrupt_untrack(pid_t pid);
/* Back to the dispositions before kvc_interrupt_install (an ignored
 * SIGHUP, as nohup leaves it, is never replaced). */
void kvc_interrupt_uninstall(void);

typedef enum { KVC_CHILD_DONE, KVC_CHILD_DIED, KVC_CHILD_TIMEOUT, KVC_CHILD_MEMORY } kvc_child_outcome;

/* Runs fn(arg, fd) in a child under the limits; fn writes result_size
 * bytes of its result to fd.  KVC_CHILD_DONE when they all arrived and
 * the child exited with 0; else *status holds how the child ended (killed
 * by the supervisor for the TIMEOUT and MEMORY outcomes).  The wait is
 * bounded by the timeout whatever the child does with the pipe, and the
 * child's process group is killed at the end.  A SIGINT or SIGTERM kills
 * it and goes on to the caller's handler (DIED, *status that signal). */
kvc_child_outcome kvc_run_isolated(void (*fn)(void *arg, int fd), void *arg, const kvc_child_limits *limits, void *result,
                                   size_t result_size, int *status);

/* ---- the fuzz workers' protocol ----------------------------------------
 * A worker reports each case as START, RESULT (and SAVED when it shrank
 * and saved it), then DONE at the end of its job or RETIRE when it
 * outgrew its memory limit.  The candidate runs inside the worker, so the
 * parent checks every message against what the worker may say next. */
enum { KVC_MSG_START, KVC_MSG_RESULT, KVC_MSG_SAVED, KVC_MSG_DONE, KVC_MSG_RETIRE, KVC_MSG_PHASE };
/* KVC_MSG_PHASE: inside a case (or its shrinking), the Python worker's
 * phase (KVC_PYWORKER_*: start-up, a first call of a geometry, back to
 * plain calls), whose time the parent allows on top of --timeout. */
enum { KVC_JOB_IDLE, KVC_JOB_RUNNING, KVC_JOB_SHRINKING };

/* What the parent knows of one worker when a message arrives. */
typedef struct {
    int phase;                /* KVC_JOB_* */
    int64_t index;            /* the case running or being shrunk */
    int64_t next_index;       /* the case it must start next */
    int complete;             /* its job's cases are done (or the campaign stops) */
    int variants, families;   /* how many kvcmp knows */
} kvc_worker_view;

/* The fields of a message the parent relies on. */
typedef struct {
    int type;
    int64_t index;
    int variant, family, threads, other_threads;
    int phase;                /* KVC_MSG_PHASE */
} kvc_worker_message;

/* NULL when m may come now; else why not, in why ("it sent a result for
 * case 3, which it was not running ..."). */
const char *kvc_protocol_error(const kvc_worker_message *m, const kvc_worker_view *v, char *why, size_t size);

/* Why a child was stopped, for FAIL lines: "took longer than 0.5 s (--timeout)". */
void kvc_describe_limit(kvc_child_outcome outcome, const kvc_child_limits *limits, char *out, size_t size);

#endif
