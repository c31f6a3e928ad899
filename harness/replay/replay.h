/* kvcmp replay: run case directories through a backend and compare. */
#ifndef KVCMP_REPLAY_H
#define KVCMP_REPLAY_H

#include "kvcmp/compare.h"

typedef struct {
    const kvc_backend *backend;
    const char *impl_name;        /* as given on the command line, for __REPRO */
    kvc_policy policy;
    int64_t page_padding;
    int quiet;                    /* print only failures and the summary */
    int silent;                   /* print nothing (the caller reports) */
    const char *outputs_dir;      /* --outputs: outside outputs, see below */
    int outputs_in_case;          /* --outputs-in-case: NAME.got.npy beside the case (never read without it) */
    uint64_t variant_mask;        /* --stage: the fuzzer's variants (kvc_variant_mask) to replay; 0 = all */
    const char *junit_path;       /* --junit FILE */
    struct kvc_junit *junit;      /* when set, each case is also a testcase there */
    double timeout_seconds;       /* a plug-in's case runs in a process of its own, */
    int64_t rss_limit_mb;         /* stopped past these limits (0: none) */
    const char *skip_list;        /* --skip: entries the walk reports, by name or path, comma-separated, skipped instead of failed */
} kvc_replay_options;

/* Per-source tallies, for "counted per source" summaries. */
#define KVC_REPLAY_MAX_SOURCES 32
typedef struct {
    char source[64];
    int passed, failed, skipped, known;
} kvc_source_tally;

typedef struct {
    int passed, failed, skipped, known;   /* known: expected upstream differences (harness/replay/known.h) */
    int selected;                 /* cases that --stage selected (all, without it) */
    int num_sources;
    kvc_source_tally sources[KVC_REPLAY_MAX_SOURCES];
} kvc_replay_totals;

/* A case tree walked (harness/replay/walk.c): the case directories under
 * path (itself, or a tree), sorted, and what the walk refused, each a
 * message naming the entry: a symlink (never followed: the root only, as
 * given), an entry it could not stat or read, a directory whose paths
 * would exceed PATH_MAX (kind "unreadable"), a hidden directory
 * ("hidden"), a FIFO, socket or device ("not a file"), and, in a tree
 * that has cases, a directory holding files but no case.json and no case
 * below it ("not a case").  Hidden regular files are passed over. */
typedef struct {
    char *path, *why;
    const char *kind;   /* a static string, the label of the entry's FAIL line */
} kvc_refusal;

typedef struct {
    char **dirs;
    int count;
    kvc_refusal *refused;
    int num_refused;
} kvc_case_walk;

/* Returns walk->count; free with kvc_case_walk_free. */
int kvc_walk_cases(const char *path, kvc_case_walk *walk);
void kvc_case_walk_free(kvc_case_walk *walk);
/* The case directories only.  Returns the count; *dirs is malloc'ed
 * (free with kvc_free_case_list). */
int kvc_find_cases(const char *path, char ***dirs);
void kvc_free_case_list(char **dirs, int count);
/* CASE, the last component of a case directory's path: the folder of its
 * outputs under --outputs. */
void kvc_case_dir_name(const char *case_dir, char *out, size_t size);
/* Case directories of one name would be judged by one --outputs folder:
 * each directory after the first of its name, in the walks' order, as a
 * pair (*pairs)[2i] (the directory) and [2i+1] (the first of its name;
 * malloc'ed, the strings the walks').  Returns how many (-1: out of memory). */
int kvc_case_name_clashes(const kvc_case_walk *walks, int num_walks, const char ***pairs);
/* text for a terminal or a report: bytes outside printable ASCII
 * (control characters, escape sequences, anything else) as \xNN,
 * truncated to fit.  Returns out. */
const char *kvc_escape_text(const char *text, char *out, size_t size);

/* What kvc_replay_case made of a case. */
enum { KVC_REPLAY_PASS = 0, KVC_REPLAY_FAIL = 1, KVC_REPLAY_SKIP = 2, KVC_REPLAY_UNSELECTED = 3, KVC_REPLAY_KNOWN = 4 };

/* Replay one case: KVC_REPLAY_PASS, _FAIL, _SKIP (the backend does not
 * offer its stage), _KNOWN (a difference the case's corpus documents,
 * harness/replay/known.h; not a failure) or _UNSELECTED (not a variant of
 * variant_mask; not counted).  Prints one line (and __REPRO on fail). */
int kvc_replay_case(const char *dir, const kvc_replay_options *options, kvc_replay_totals *totals,
                    kvc_compare_report *report_out);
/* The source label of a case: the first word of case.json "source". */
void kvc_case_source_label(const kvc_case *c, char *out, size_t size);

/* Outside outputs (harness/replay/outside.c): an implementation that
 * ran elsewhere left its output NAME of the case directory .../CASE as
 * OUTPUTS/CASE/NAME.npy (kvcmp replay --outputs OUTPUTS), or as
 * NAME.got.npy inside the case directory; both load as the tensor
 * "NAME.got".  The reference runs on the inputs and is "expected".
 *
 * Beside its outputs the outside runner writes a status file (SPEC.md
 * section 10): OUTPUTS/CASE/status.json, or status.got.json in the case
 * directory, {"status": "ran" | "rejected" | "crashed", "message": "..."}.
 * A case without one failed: the runner died before it could say. */
#define KVC_OUTSIDE_STATUS_FILE "status.json"
#define KVC_OUTSIDE_GOT_STATUS_FILE "status.got.json"

typedef enum { KVC_OUTSIDE_NO_STATUS, KVC_OUTSIDE_RAN, KVC_OUTSIDE_REJECTED, KVC_OUTSIDE_CRASHED } kvc_outside_state;

typedef struct {
    kvc_outside_state state;
    char message[600];        /* the runner's "message" (why it rejected, the exception), or "" */
    char path[1100];          /* where the status file is (or was looked for) */
} kvc_outside_status;

/* "ran", "rejected", "crashed" or "missing". */
const char *kvc_outside_state_name(kvc_outside_state state);
/* Loads the outside outputs (from OUTPUTS/CASE, or NAME.got.npy already in
 * the case when outputs_dir is NULL) and the status file into *status.  A
 * missing status file is KVC_OUTSIDE_NO_STATUS; an unreadable output or a
 * malformed status file is -1 with the file and the field named in error. */
int kvc_load_outside_outputs(kvc_case *c, const char *outputs_dir, const char *case_dir, kvc_outside_status *status, char *error,
                             size_t error_size);
/* Whether the case directory holds outside outputs: a NAME.got tensor or
 * a status.got.json. */
int kvc_has_outside_outputs(const kvc_case *c, const char *case_dir);
/* The status against the reference's run (ref_status KVC_OK: it ran; else
 * it rejected with ref->error): 1 when they disagree (a crash, no status,
 * a rejection of a case the reference runs, a run of a case it rejects,
 * or a rejected case whose outputs were written), 0 when both rejected
 * and nothing was written, -1 when both ran and the bytes decide.  The
 * verdict in words goes to detail. */
int kvc_outside_status_verdict(const kvc_case *c, const kvc_outside_status *status, int ref_status, const kvc_run_result *ref,
                               char *detail, size_t size);
/* 0 pass, 1 fail, with the one-line verdict (and the causes of a
 * difference, harness/compare/causes.c) in detail. */
int kvc_compare_outside(const kvc_case *c, const kvc_outside_status *status, kvc_policy policy, kvc_compare_report *report,
                        char *detail, size_t size);

int kvc_cmd_replay(int argc, char **argv);

#endif
