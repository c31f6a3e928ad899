/* The fuzzing campaign as a library call: options in, summary out.
 *
 * kvc_campaign_run generates cases (case i of a seed is always the same
 * case), runs each through the reference and the candidate in supervised
 * worker processes (per-case timeout and memory limit, a dead worker
 * replaced and its case saved), groups failures by signature (stage,
 * check, cause class), shrinks the first few of each signature keeping
 * the signature, diagnoses each shrunk case against the catalogue of
 * deviations (kvcmp/deviations.h: failures explained by one deviation
 * are one signature, "explained by NAME"), saves them under the output directory with __REPRO
 * lines, and writes the JSON and JUnit summaries.  `kvcmp fuzz`, the
 * Python package (`kvcmp.fuzz`, `python -m kvcmp fuzz`) and CI recipes
 * all run this one engine.
 *
 * A candidate is "opt", "ref", a path to a plug-in library
 * (include/kvcmp/plugin.h) or "py:FILE.py:FUNCTION" / "py:MODULE:FUNCTION"
 * (a Python callable run by a worker interpreter, python/kvcmp/_worker.py). */
#ifndef KVCMP_CAMPAIGN_H
#define KVCMP_CAMPAIGN_H

#include <stdint.h>

#include "compare.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    uint64_t seed;
    int64_t cases;              /* >= 0: this many cases; -1: run for `seconds` */
    double seconds;
    int64_t only;               /* >= 0: just this case (its REPRO line) */
    int shard_index, shard_count;   /* this campaign runs the cases i with i % count == index */
    int jobs;                   /* worker processes */
    int threads;                /* > 0: the candidate's OpenMP threads; 0: each case draws 1-8 */
    int max_failures;           /* root causes that end the campaign: signatures a shared
                                   deviation explains count once, unexplained ones once per
                                   stage and place where the first wrong value arises */
    int max_per_signature;      /* failures of one signature printed, shrunk and saved */
    int invalid_per_mille;      /* cases corrupted on purpose (must be rejected) */
    int metamorphic_per_mille;  /* cases that also get the thread and page-permutation checks */
    int geometry_pool;          /* > 0: page geometry drawn from this many shapes per campaign */
    double shrink_seconds;
    double timeout_seconds;     /* one case; <= 0: none */
    int64_t rss_limit_mb;       /* a worker's resident memory; <= 0: none */
    kvc_policy policy;
    const char *candidate;      /* NULL: "opt" */
    const char *python;         /* interpreter of a py: candidate; NULL: $KVCMP_PYTHON or python3 */
    const char *stages;         /* variant name prefixes, comma-separated; NULL: all */
    const char *families;       /* value families; NULL: the default mix */
    const char *out_dir;        /* every output goes under it; NULL: "kvcmp-out" */
    const char *save_dir;       /* NULL: OUT/failures/seedS-TIME-PID; "": nothing saved */
    const char *json_path;      /* NULL: OUT/fuzz-summary.json; "": none */
    const char *junit_path;     /* NULL: none */
    const char *command;        /* how __REPRO lines invoke kvcmp; NULL: "kvcmp" */
    int quiet;                  /* no start lines, no progress */
    double startup_timeout_seconds;  /* a py: worker's start-up and the candidate's import; <= 0: the default (60) */
    double compile_timeout_seconds;  /* allowance of a py: worker's first call of each geometry before
                                        timeout_seconds applies (a JIT compiles); 0: none */
} kvc_campaign_options;

typedef struct {
    char key[200];              /* "v4.compress bytes: scale floor" */
    char stage[40], check[32], cause[64];
    int64_t count;              /* failures of this signature */
    int64_t first_case;
    char first_repro[800];      /* regenerates and re-checks the first case */
    int64_t minimal_case;       /* -1 when none was saved */
    int64_t minimal_tokens;
    char minimal_saved[400];    /* the smallest saved case's directory */
    char minimal_repro[900];    /* replays it */
    int diagnosed;              /* the deviation catalogue ran on its failures */
    char explained_by[120];     /* the deviations that, planted alone, write the candidate's
                                   bytes on every failing case checked and the contract's on
                                   the passing ones, comma-separated (a composition "a+b");
                                   "" when none */
    char refuted[120];          /* those that wrote them on one case but not on another */
    int64_t cases_checked;      /* failing and passing cases the explanation was checked on */
    int64_t cases_held;         /* of those, where it held (cases_checked when explained) */
    int rejected_input;         /* its failures are on inputs the contract rejects */
} kvc_campaign_signature;

/* The exit codes of a campaign (kvc_campaign_summary.exit_code), by
 * precedence: a signal, then a write error, then failures, then no verdict. */
enum {
    KVC_CAMPAIGN_PASS = 0,            /* every case asked was compared, none failed */
    KVC_CAMPAIGN_FAILURES = 1,        /* the candidate failed cases (or broke the case protocol) */
    KVC_CAMPAIGN_BAD_OPTIONS = 2,     /* nothing ran: a bad option, a candidate that cannot load or offers no stage */
    KVC_CAMPAIGN_WRITE_FAILED = 3,    /* a case, the summary or the JUnit file could not be written */
    KVC_CAMPAIGN_NO_VERDICT = 4,      /* no failure, but no evidence either: no case compared, fewer than asked,
                                         or a --stage item whose cases were all skipped */
    KVC_CAMPAIGN_INTERRUPTED = 128,   /* + the signal (SIGHUP 129, SIGINT 130, SIGTERM 143) */
};

typedef struct {
    int64_t cases, failures, skipped;
    double seconds, cases_per_second;
    int workers_lost;           /* died or were killed outside a case */
    int interrupted;            /* the signal that stopped it, else 0 */
    int write_failed;           /* a case or a summary could not be written */
    int num_signatures;
    kvc_campaign_signature *signatures;   /* owned: kvc_campaign_summary_free */
    char save_dir[512];         /* where the failing cases are */
    int exit_code;              /* KVC_CAMPAIGN_*: 0 no failure, 1 failures, 2 bad options, 3 write errors,
                                   4 no verdict, 128+N interrupted */
    int64_t compared;           /* cases run through both sides (cases - skipped) */
    char stopped_by[16];        /* "cases" (every case asked ran), "time" (--seconds ran out), "max-failures",
                                   "interrupted", "protocol" (the candidate broke it), "" (nothing ran) */
    char no_verdict[600];       /* why the campaign gives no verdict (exit code 4), else "" */
    double startup_seconds;     /* from the start until the first case started; -1: no case started */
} kvc_campaign_summary;

/* The defaults of `kvcmp fuzz`. */
void kvc_campaign_options_init(kvc_campaign_options *options);

/* Runs the campaign; returns summary->exit_code.  A bad option or a
 * candidate that cannot be loaded or offers no stage: a message on
 * stderr naming it, exit code 2, nothing written. */
int kvc_campaign_run(const kvc_campaign_options *options, kvc_campaign_summary *summary);

void kvc_campaign_summary_free(kvc_campaign_summary *summary);

/* `kvcmp fuzz ARGS...` (argv holds the options only), for front ends
 * that pass a command line through: the Python package's
 * `python -m kvcmp fuzz`.  command is how its __REPRO lines invoke it. */
int kvc_campaign_main(const char *command, int argc, char **argv);

#ifdef __cplusplus
}
#endif

#endif
