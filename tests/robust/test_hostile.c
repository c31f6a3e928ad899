/* Candidates that attack the supervision itself (the
 * candidates of tests/plugins/candidate.c from writes_stop_flag on):
 * they poke the memory a campaign once shared with its workers, fork so
 * that every result arrives twice, write into their const inputs, close
 * the result pipe and hang, leave a helper process running, close
 * stdout and stderr and keep logging, or write garbage into kvcmp's pipes.  `kvcmp fuzz` and `kvcmp replay
 * --impl` must end with the right status and failure kind, well within
 * run_kvcmp's limit (a generous bound, not a timing assertion), with no
 * process of theirs left (run_kvcmp is the subreaper of whatever they
 * leave, in any process group). */
#include "tests/robust/robust_support.h"

/* The hostile candidates implement v41.rope_plain_insert only. */
#define STAGE "--stage", "v41.rope_plain_insert"
/* Each run ends in seconds; past this it is killed and the test fails. */
#define LIMIT_SECONDS 60

static const child_options limited = {.limit_seconds = LIMIT_SECONDS};

typedef struct {
    char dir[64], save[512], json[512], cases[512], plugin[512];
} paths;

static void make_paths(paths *p, const char *kind) {
    support_temp_dir(p->dir, sizeof p->dir);
    snprintf(p->save, sizeof p->save, "%s/saved", p->dir);
    snprintf(p->json, sizeof p->json, "%s/summary.json", p->dir);
    snprintf(p->cases, sizeof p->cases, "%s/cases", p->dir);
    hostile_plugin(kind, p->plugin, sizeof p->plugin);
}

/* The failure_list kinds: how many, and how many equal `kind`. */
static int failures_listed(const char *json_path, const char *kind, int *of_kind) {
    cJSON *root = read_summary(json_path);
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(root, "failure_list"), *item;
    int n = 0;
    *of_kind = 0;
    cJSON_ArrayForEach(item, list) {
        const cJSON *k = cJSON_GetObjectItemCaseSensitive(item, "kind");
        *of_kind += cJSON_IsString(k) && strcmp(k->valuestring, kind) == 0;
        n++;
    }
    cJSON_Delete(root);
    return n;
}

/* Cases 0..7 of seed 1 for the hostile candidates' stage, for replay. */
static void generate_cases(const char *dir) {
    char *argv[] = {"gen", "--seed", "1", "--cases", "8", STAGE, "--invalid-rate", "0", "--out", (char *)dir, NULL};
    child_run run = run_kvcmp(argv, &limited);
    cr_assert_eq(run.status, 0, "kvcmp gen failed:\n%s", run.err);
    cr_assert_gt(entries_in(dir, NULL), 0, "kvcmp gen wrote no case into %s", dir);
    free_child_run(&run);
}

/* The files under dir (recursively) that contain needle. */
static int files_containing(const char *dir, const char *needle) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat st;
        if (lstat(path, &st) != 0) continue;
        if (S_ISDIR(st.st_mode)) { n += files_containing(path, needle); continue; }
        char *text = support_read_file(path);
        size_t size = (size_t)st.st_size, len = strlen(needle);
        for (size_t i = 0; text && i + len <= size; i++)
            if (memcmp(text + i, needle, len) == 0) { n++; break; }
        free(text);
    }
    closedir(d);
    return n;
}

Test(hostile, a_candidate_that_pokes_shared_memory_does_not_end_the_campaign, .timeout = 120) {
    paths p;
    make_paths(&p, "writes_stop_flag");
    char *argv[] = {"fuzz", "--seed", "1", "--cases", "40", "--jobs", "2", STAGE, "--candidate", p.plugin, "--save", p.save,
                    "--json", p.json, "--quiet", NULL};
    child_run run = run_kvcmp(argv, &limited);
    /* The candidate is the reference: a full campaign passes. */
    cr_expect_eq(run.status, 0, "stdout:\n%s\nstderr:\n%s", run.out, run.err);
    cr_expect_eq(summary_number(p.json, "cases"), 40, "the campaign stopped early:\n%s", run.out);
    cr_expect_eq(run.leftovers, 0, "a process outlived the campaign");
    free_child_run(&run);
    support_remove_tree(p.dir);
}

Test(hostile, a_candidate_that_forks_fails_the_campaign, .timeout = 120) {
    paths p;
    make_paths(&p, "forks_twice");
    char *argv[] = {"fuzz", "--seed", "1", "--cases", "20", "--jobs", "2", STAGE, "--candidate", p.plugin, "--save", p.save,
                    "--json", p.json, "--quiet", NULL};
    child_run run = run_kvcmp(argv, &limited);
    cr_expect_eq(run.status, 1, "every case passes twice, which is no pass:\nstdout:\n%s\nstderr:\n%s", run.out, run.err);
    expect_text(run.err, "broke the case protocol", "stderr");
    expect_text(run.out, "fuzz: FAILED, cases not accounted for", "stdout");
    cJSON *root = read_summary(p.json);
    cr_expect(cJSON_IsString(cJSON_GetObjectItemCaseSensitive(root, "unaccounted")), "the summary does not say why");
    cJSON_Delete(root);
    cr_expect_eq(run.leftovers, 0, "a forked copy outlived the campaign");
    free_child_run(&run);
    support_remove_tree(p.dir);
}

Test(hostile, a_write_into_a_const_input_is_named_as_such, .timeout = 120) {
    paths p;
    make_paths(&p, "writes_input");
    /* Every case gets the thread check: its other thread count is above 1 when its first is 1. */
    char *argv[] = {"fuzz", "--seed", "1", "--cases", "20", "--jobs", "2", STAGE, "--candidate", p.plugin, "--save", p.save,
                    "--metamorphic-rate", "1000", "--max-failures-per-signature", "100", "--json", p.json, "--quiet", NULL};
    child_run run = run_kvcmp(argv, &limited);
    cr_expect_eq(run.status, 1, "stderr:\n%s", run.err);
    int of_kind, listed = failures_listed(p.json, "input-write", &of_kind);
    /* It writes in the first call or in the thread check of each case with tokens the reference accepts. */
    cr_expect_gt(listed, 10, "%s", run.out);
    cr_expect_eq(of_kind, listed, "a write into the input was given another kind:\n%s", run.out);
    expect_text(run.out, "candidate wrote into its input latent", "stdout");
    cr_expect_eq(run.leftovers, 0);
    free_child_run(&run);
    support_remove_tree(p.dir);
}

Test(hostile, fuzz_ends_when_a_candidate_closes_the_result_pipe_and_hangs, .timeout = 120) {
    paths p;
    make_paths(&p, "closes_pipe_and_hangs");
    char *argv[] = {"fuzz", "--seed", "1", "--cases", "2", "--jobs", "1", STAGE, "--timeout", "1", "--candidate", p.plugin,
                    "--max-failures-per-signature", "100", "--save", p.save, "--json", p.json, "--quiet", NULL};
    child_run run = run_kvcmp(argv, &limited);
    cr_expect_eq(run.status, 1, "stderr:\n%s", run.err);
    cr_expect_eq(count_of(run.out, "timeout: the worker running this case took longer than 1 s (--timeout) and was killed"), 2, "%s",
                 run.out);
    cr_expect_eq(run.leftovers, 0);
    free_child_run(&run);
    support_remove_tree(p.dir);
}

Test(hostile, replay_ends_when_a_candidate_closes_the_result_pipe_and_hangs, .timeout = 120) {
    paths p;
    make_paths(&p, "closes_pipe_and_hangs");
    generate_cases(p.cases);
    char *argv[] = {"replay", "--impl", p.plugin, "--timeout", "1", p.cases, NULL};
    child_run run = run_kvcmp(argv, &limited);
    cr_expect_eq(run.status, 1, "stderr:\n%s", run.err);
    cr_expect_eq(count_of(run.out, "timeout: the candidate's process took longer than 1 s (--timeout)"), entries_in(p.cases, NULL), "%s",
                 run.out);
    cr_expect_eq(run.leftovers, 0);
    free_child_run(&run);
    support_remove_tree(p.dir);
}

/* The first SIGINT stops a campaign whose worker hangs with its pipe closed. */
Test(hostile, sigint_stops_fuzz_while_a_worker_hangs_with_its_pipe_closed, .timeout = 120) {
    paths p;
    make_paths(&p, "closes_pipe_and_hangs");
    char *argv[] = {"fuzz", "--seed", "1", "--cases", "2", "--jobs", "1", STAGE, "--timeout", "100", "--candidate", p.plugin,
                    "--save", p.save, "--json", p.json, "--quiet", NULL};
    child_options opt = {.limit_seconds = LIMIT_SECONDS, .signal_after = 1.0, .signals = {SIGINT}};
    child_run run = run_kvcmp(argv, &opt);
    cr_expect_eq(run.status, 128 + SIGINT, "stderr:\n%s", run.err);
    cJSON *root = read_summary(p.json);
    cr_expect(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, "interrupted")), "the summary does not say it was interrupted");
    cJSON_Delete(root);
    cr_expect_eq(run.leftovers, 0);
    free_child_run(&run);
    support_remove_tree(p.dir);
}

Test(hostile, sigint_stops_replay_while_a_candidate_hangs_with_its_pipe_closed, .timeout = 120) {
    paths p;
    make_paths(&p, "closes_pipe_and_hangs");
    generate_cases(p.cases);
    char *argv[] = {"replay", "--impl", p.plugin, "--timeout", "100", p.cases, NULL};
    child_options opt = {.limit_seconds = LIMIT_SECONDS, .signal_after = 1.0, .signals = {SIGINT}};
    child_run run = run_kvcmp(argv, &opt);
    cr_expect_eq(run.status, 128 + SIGINT, "stderr:\n%s", run.err);
    cr_expect_eq(run.leftovers, 0);
    free_child_run(&run);
    support_remove_tree(p.dir);
}

Test(hostile, fuzz_leaves_no_helper_of_the_candidate_running, .timeout = 120) {
    paths p;
    make_paths(&p, "leaves_helper");
    char *argv[] = {"fuzz", "--seed", "1", "--cases", "20", "--jobs", "2", STAGE, "--candidate", p.plugin, "--save", p.save,
                    "--json", p.json, "--quiet", NULL};
    child_run run = run_kvcmp(argv, &limited);
    cr_expect_eq(run.status, 0, "stderr:\n%s", run.err);
    cr_expect_eq(summary_number(p.json, "cases"), 20);
    cr_expect_eq(run.leftovers, 0, "the candidate's helper outlived the campaign");
    free_child_run(&run);
    support_remove_tree(p.dir);
}

Test(hostile, replay_leaves_no_helper_of_the_candidate_running, .timeout = 120) {
    paths p;
    make_paths(&p, "leaves_helper");
    generate_cases(p.cases);
    char *argv[] = {"replay", "--impl", p.plugin, p.cases, NULL};
    child_run run = run_kvcmp(argv, &limited);
    cr_expect_eq(run.status, 0, "stdout:\n%s\nstderr:\n%s", run.out, run.err);
    cr_expect_eq(run.leftovers, 0, "the candidate's helpers outlived the replay");
    free_child_run(&run);
    support_remove_tree(p.dir);
}

Test(hostile, a_candidate_that_closes_stdio_and_logs_writes_nothing_into_saved_cases, .timeout = 120) {
    paths p;
    make_paths(&p, "closes_stdio_and_logs");
    char *argv[] = {"fuzz", "--seed", "1", "--cases", "8", "--jobs", "2", STAGE, "--candidate", p.plugin, "--save", p.save,
                    "--max-failures-per-signature", "100", "--json", p.json, "--quiet", NULL};
    child_run run = run_kvcmp(argv, &limited);
    cr_expect_eq(run.status, 1, "stderr:\n%s", run.err);
    int of_kind, listed = failures_listed(p.json, "bytes", &of_kind);
    cr_expect_gt(listed, 0, "%s", run.out);
    cr_expect_eq(of_kind, listed, "%s", run.out);
    cr_expect_eq(complete_cases_in(p.save), listed, "a saved case does not load");
    cr_expect_eq(files_containing(p.save, "candidate log line"), 0, "the candidate's log lines are in saved cases");
    cr_expect_eq(run.leftovers, 0);
    free_child_run(&run);
    support_remove_tree(p.dir);
}

Test(hostile, fuzz_fails_a_candidate_that_writes_into_its_pipes, .timeout = 120) {
    paths p;
    make_paths(&p, "forges_results");
    char *argv[] = {"fuzz", "--seed", "1", "--cases", "4", "--jobs", "1", STAGE, "--candidate", p.plugin, "--save", p.save,
                    "--json", p.json, "--quiet", NULL};
    child_run run = run_kvcmp(argv, &limited);
    cr_expect_eq(run.status, 1, "stdout:\n%s\nstderr:\n%s", run.out, run.err);
    expect_text(run.err, "broke the case protocol: it sent a message of unknown type", "stderr");
    cr_expect_eq(run.bait_bytes, 0, "the candidate wrote into a descriptor kvcmp inherited");
    cr_expect_eq(run.leftovers, 0);
    free_child_run(&run);
    support_remove_tree(p.dir);
}

Test(hostile, replay_fails_a_candidate_that_writes_into_its_pipe, .timeout = 120) {
    paths p;
    make_paths(&p, "forges_results");
    generate_cases(p.cases);
    char *argv[] = {"replay", "--impl", p.plugin, p.cases, NULL};
    child_run run = run_kvcmp(argv, &limited);
    cr_expect_eq(run.status, 1, "a forged verdict passed:\n%s", run.out);
    cr_expect_eq(count_of(run.out, "sent a verdict kvcmp does not know"), entries_in(p.cases, NULL), "%s", run.out);
    cr_expect_eq(run.bait_bytes, 0, "the candidate wrote into a descriptor kvcmp inherited");
    cr_expect_eq(run.leftovers, 0);
    free_child_run(&run);
    support_remove_tree(p.dir);
}

/* ---- the parent's check of each worker message ------------------------ */

#include "harness/fuzz/supervise.h"

static const char *check(int type, int64_t index, int phase, int complete) {
    static char why[300];
    kvc_worker_view view = {.phase = phase, .index = 4, .next_index = 6, .complete = complete, .variants = 3, .families = 2};
    kvc_worker_message m = {.type = type, .index = index, .variant = 2, .family = 1, .threads = 1, .other_threads = 0};
    return kvc_protocol_error(&m, &view, why, sizeof why);
}

static void expect_refused(const char *why, const char *needle) {
    cr_expect(why && strstr(why, needle), "expected '%s', got '%s'", needle, why ? why : "(accepted)");
}

Test(protocol, each_message_in_its_turn_is_accepted) {
    cr_expect_null(check(KVC_MSG_START, 6, KVC_JOB_IDLE, 0));
    cr_expect_null(check(KVC_MSG_RESULT, 4, KVC_JOB_RUNNING, 0));
    cr_expect_null(check(KVC_MSG_SAVED, 4, KVC_JOB_SHRINKING, 0));
    cr_expect_null(check(KVC_MSG_DONE, 0, KVC_JOB_IDLE, 1));
    cr_expect_null(check(KVC_MSG_RETIRE, 0, KVC_JOB_IDLE, 0));
    cr_expect_null(check(KVC_MSG_PHASE, 4, KVC_JOB_RUNNING, 0));
    cr_expect_null(check(KVC_MSG_PHASE, 4, KVC_JOB_SHRINKING, 0));
}

Test(protocol, a_message_out_of_turn_is_refused) {
    expect_refused(check(KVC_MSG_START, 7, KVC_JOB_IDLE, 0), "it started case 7 out of turn (expected case 6)");
    expect_refused(check(KVC_MSG_START, 6, KVC_JOB_RUNNING, 0), "out of turn (expected case 6 after the one it was running)");
    expect_refused(check(KVC_MSG_RESULT, 4, KVC_JOB_IDLE, 0), "a result for case 4, which it was not running");
    expect_refused(check(KVC_MSG_RESULT, 5, KVC_JOB_RUNNING, 0), "a result for case 5, which it was not running");
    expect_refused(check(KVC_MSG_SAVED, 4, KVC_JOB_IDLE, 0), "saving case 4, which it was not shrinking");
    expect_refused(check(KVC_MSG_SAVED, 3, KVC_JOB_SHRINKING, 0), "saving case 3, which it was not shrinking");
    expect_refused(check(KVC_MSG_DONE, 0, KVC_JOB_IDLE, 0), "it ended its job at case 6, before its cases were done");
    expect_refused(check(KVC_MSG_DONE, 0, KVC_JOB_RUNNING, 1), "before its cases were done");
    expect_refused(check(KVC_MSG_RETIRE, 0, KVC_JOB_RUNNING, 0), "it retired in the middle of case 4");
    /* A phase (a Python worker's start-up or first call) belongs to the case running. */
    expect_refused(check(KVC_MSG_PHASE, 4, KVC_JOB_IDLE, 0), "it sent a phase (0) for case 4, which it was not running");
    expect_refused(check(KVC_MSG_PHASE, 5, KVC_JOB_RUNNING, 0), "for case 5, which it was not running");
    expect_refused(check(KVC_MSG_PHASE + 1, 0, KVC_JOB_IDLE, 1), "unknown type 6");
    expect_refused(check(-1, 0, KVC_JOB_IDLE, 1), "unknown type -1");
}

Test(protocol, a_result_out_of_range_is_refused) {
    kvc_worker_view view = {.phase = KVC_JOB_RUNNING, .index = 4, .variants = 3, .families = 2};
    kvc_worker_message bad[] = {
        {.type = KVC_MSG_RESULT, .index = 4, .variant = 3}, {.type = KVC_MSG_RESULT, .index = 4, .variant = -1},
        {.type = KVC_MSG_RESULT, .index = 4, .family = 2},  {.type = KVC_MSG_RESULT, .index = 4, .threads = -1},
        {.type = KVC_MSG_RESULT, .index = 4, .other_threads = -8},
    };
    char why[300];
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        expect_refused(kvc_protocol_error(&bad[i], &view, why, sizeof why), "names no variant, family or thread count kvcmp knows");
}
