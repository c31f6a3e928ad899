/* What the campaign's files share (fuzz.c: options and the library call;
 * worker.c: a case inside a worker; supervisor.c: the workers and their
 * messages; summary.c: progress, REPRO lines and reports). */
#ifndef KVCMP_HARNESS_FUZZ_CAMPAIGN_INTERNAL_H
#define KVCMP_HARNESS_FUZZ_CAMPAIGN_INTERNAL_H

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <malloc.h>
#include <omp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <dirent.h>
#include <time.h>
#include <unistd.h>

#include "kvcmp/backends.h"
#include "optimized/optimized.h"
#include "harness/backends/pyworker.h"
#include "kvcmp/campaign.h"
#include "harness/fuzz/coverage.h"
#include "kvcmp/generate.h"
#include "harness/fuzz/run.h"
#include "kvcmp/shrink.h"
#include "harness/fuzz/gpus.h"
#include "harness/fuzz/history.h"
#include "harness/fuzz/supervise.h"
#include "harness/options/options.h"
#include "harness/report/junit.h"
#include "harness/report/run_info.h"
#include "harness/fuzz/signature.h"
#include "harness/fuzz/signature_list.h"
#include "harness/replay/replay.h"
#include "harness/fuzz/dimensions.h"
#include "harness/fuzz/geometry.h"


#define MAX_JOBS 16
#define MAX_REPORTED_FAILURES 64
#define DEFAULT_INVALID_PER_MILLE KVC_GEN_DEFAULT_INVALID_PER_MILLE
#define DEFAULT_METAMORPHIC_PER_MILLE 60
#define DEFAULT_MAX_PER_SIGNATURE 3
/* What a minimal case's diagnosis may spend on pairs of deviations (the
 * single ones always run: a few dozen reference calls). */
#define DIAGNOSIS_PAIR_SECONDS 2.0

typedef struct {
    uint64_t seed;
    int64_t cases;            /* -1: run for `seconds` */
    double seconds;
    int64_t only;             /* >= 0: just this case */
    int shard_index, shard_count;
    int jobs, threads;
    int max_failures;         /* root causes that end the campaign (kvc_signature_list_root_causes) */
    int max_per_signature;    /* failures of one signature printed and saved */
    int threads_given;        /* --threads: else each case draws its own */
    int invalid_per_mille;
    int metamorphic_per_mille;
    int geometry_pool;        /* > 0: sizes and page paddings drawn from this many values */
    double shrink_seconds;
    kvc_child_limits limits;  /* --timeout, --rss-limit-mb */
    const char *save_dir;
    char default_save_dir[600];  /* OUT/failures/CAMPAIGN, when no save_dir is given */
    char default_json_path[600]; /* OUT/fuzz-summary.json */
    const char *candidate_name;
    const char *json_path;
    const char *out_dir;
    char command[1400];          /* how __REPRO lines run kvcmp, with TRITON_CACHE_DIR=... KVCMP_PYTHON=... for a py: candidate */
    char triton_cache[600];      /* a py: candidate: the workers' TRITON_CACHE_DIR ("" otherwise) */
    int triton_cache_set;        /* the campaign set it (OUT/triton-cache): the user had not */
    const char *junit_path;
    const char *stage_list;
    const char *family_list;
    uint64_t variant_mask;
    uint32_t family_mask;
    kvc_policy policy;
    int quiet;
} fuzz_options;

/* What a worker tells the parent.  MSG_DONE: no more cases (the exit
 * that follows is the end of the job, not a death); MSG_RETIRE: the
 * worker outgrew --rss-limit-mb and ends so that a fresh one replaces it. */
enum { MSG_START = KVC_MSG_START, MSG_RESULT = KVC_MSG_RESULT, MSG_SAVED = KVC_MSG_SAVED, MSG_DONE = KVC_MSG_DONE, MSG_RETIRE = KVC_MSG_RETIRE,
       MSG_PHASE = KVC_MSG_PHASE };
typedef struct {
    int type;
    int64_t index;
    int variant, family, invalid, outcome;
    int will_save;            /* MSG_RESULT: the worker asks to shrink and save it (the parent answers) */
    int phase;                /* MSG_PHASE: KVC_PYWORKER_* */
    int save_failed;          /* MSG_SAVED: saved holds the error */
    double at_seconds;        /* since the campaign started */
    double case_seconds;      /* MSG_RESULT: the worker's time on the case (generation and check) */
    char kind[32];
    char detail[700];
    char saved[400];
    int64_t tokens_before, tokens_after;
    int64_t page_padding;     /* MSG_SAVED: of the saved case's replay */
    kvc_fuzz_signature signature;  /* MSG_RESULT of a failure, MSG_SAVED */
    kvc_case_coverage coverage;    /* MSG_RESULT: what the case exercised (rule NULL: see rule) */
    char rule[32];                 /* MSG_RESULT: coverage.rule by value, not a pointer */
    int num_geometries;            /* MSG_RESULT: the candidate's distinct stage-call geometries (harness/fuzz/geometry.h) */
    uint8_t geometry_calls[4];     /* KVC_CALL_* of each */
    uint64_t geometries[4];        /* their keys */
} message;
/* One write each, never interleaved with another writer's (a candidate
 * that forked): the parent sees whole messages or a broken protocol. */
_Static_assert(sizeof(message) <= PIPE_BUF, "a message must fit one atomic pipe write");

static inline double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static inline const char *policy_name(kvc_policy p) { return p == KVC_POLICY_VLLM ? "vllm" : "exact"; }

typedef struct {
    const fuzz_options *o;
    kvc_fuzz_target target;
    kvc_gen_config gen;
    double started;
    int write_fd;
    int control_fd;           /* from the parent: 'Y'/'N' answers whether to save a failure, 'S' stops */
    int stopped;              /* the parent said 'S' (or went away) */
} worker;

typedef struct {
    int64_t cases, failures, skipped, invalid;
    double worker_seconds;    /* the workers' time on these cases, summed */
} tally;

typedef struct {
    message result;
    char saved[400];
    int64_t tokens_before, tokens_after;
    int64_t page_padding;     /* of the saved case's replay */
    int crash_signal;
} failure;

typedef struct {
    const fuzz_options *o;
    int64_t cases, failures, skipped;
    tally by_variant[64];
    tally by_family[KVC_FAM_COUNT];
    failure failures_list[MAX_REPORTED_FAILURES];
    int num_failures_listed;
    double started, first_failure_at;
    int progress_shown;
    const char *candidate_label;
    int workers_lost;         /* died or were killed outside a case */
    int write_failed;         /* a case or the summary could not be written */
    int interrupted;          /* the signal that stopped the campaign */
    char broken[600];         /* why the cases cannot be counted as run once each ("": they can) */
    char no_verdict[600];     /* why the campaign proves nothing either way ("": it does) */
    double first_start_at;    /* since started: when the first case began (the parent's clock); < 0: none began */
    int max_failures_reached; /* --max-failures root causes stopped it */
    int jobs_abandoned;       /* jobs whose workers kept dying and were not replaced */
    const char *stopped_by;   /* kvc_campaign_summary.stopped_by */
    kvc_signature_list signatures;
    kvc_coverage_tally coverage;
    kvc_geometry_set geometries[KVC_CALL_COUNT];   /* distinct geometry keys per stage call */
} campaign;

typedef enum { JOB_IDLE = KVC_JOB_IDLE, JOB_RUNNING = KVC_JOB_RUNNING, JOB_SHRINKING = KVC_JOB_SHRINKING } job_phase;

/* One job's worker as the parent sees it. */
typedef struct {
    pid_t pid;                /* 0: no worker */
    job_phase phase;
    int64_t index;            /* the case running or being shrunk */
    int64_t next_k;           /* the k of its next case (see worker_main); where a replacement starts */
    double since;             /* when the phase began */
    double pipe_closed_at;    /* > 0: its result pipe closed then (the worker ends or is killed) */
    int finished, retired;    /* sent MSG_DONE / MSG_RETIRE */
    int broken;               /* killed for breaking the protocol: nothing more to account */
    int lost_in_a_row;        /* replacements that died before a case */
    int window;               /* the Python worker's phase (KVC_PYWORKER_*): start-up or a first call of a geometry */
    double window_since;      /* when it began */
} job_slot;

/* fds[j]: job j's result pipe; fds[MAX_JOBS + j]: its exit (a pidfd), so
 * that one poll wakes for a message or a worker's end. */
typedef struct {
    fuzz_options *o;
    campaign *c;
    const kvc_backend *candidate;
    int stopping;             /* no more cases: max failures, a signal, a broken protocol */
    job_slot jobs[MAX_JOBS];
    int control[MAX_JOBS];    /* write ends of the workers' control pipes (non-blocking), -1 */
    struct pollfd fds[2 * MAX_JOBS];
} supervisor;

/* worker.c */
cJSON *replay_object(const kvc_fuzz_conditions *k);
uint64_t case_salt(const fuzz_options *o, int64_t index);
void save_case(const fuzz_options *o, const kvc_gen_case *g, int64_t index, message *m);
void worker_main(worker *w, int job, int64_t first_k);

/* summary.c */
void show_progress(campaign *c, int final);
void clear_progress(campaign *c);
void repro_fuzz(const campaign *c, int64_t index, const char *kind, char *out, size_t size);
void repro_replay(const campaign *c, int64_t page_padding, const char *saved, char *out, size_t size);
void judge_evidence(campaign *c, int stopped_early);
void print_summary(campaign *c, double elapsed);
cJSON *options_json(const fuzz_options *o);
void write_json(campaign *c, double elapsed, int exit_code);
int write_junit(campaign *c, double elapsed, int exit_code);

/* supervisor.c */
int spawn_worker(supervisor *s, int job);
void stop_for_signal(supervisor *s);
void supervise_jobs(supervisor *s);

#endif
