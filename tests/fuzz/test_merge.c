/* kvcmp merge: the summaries of a campaign's shards make the signature
 * list of the unsharded campaign; files that are not summaries, summaries
 * of different campaigns and edited counts are refused with exit status
 * 2; a missing shard, or one whose run is no evidence, is no verdict
 * (exit status 4). */
#include "tests/cli/cli_support.h"

#include <cjson/cJSON.h>
#include <sys/wait.h>

/* BUILD: the build the tests run from, beside $KVCMP_TEST_PLUGINS
 * (BUILD/test-plugins), else build. */
static void build_dir(char *out, size_t size) {
    const char *plugins = getenv("KVCMP_TEST_PLUGINS");
    if (plugins && plugins[0] && strrchr(plugins, '/')) snprintf(out, size, "%.*s", (int)(strrchr(plugins, '/') - plugins), plugins);
    else snprintf(out, size, "build");
}

/* The campaigns run in BUILD/kvcmp, not in this sanitized process: under
 * ASan the multi-bug candidate's out-of-bounds writes crash or not
 * depending on the heap's layout, so a case's signature would vary from
 * run to run; in the plain binary a campaign is deterministic. */
static void campaign(const char *kvcmp, const char *candidate, const char *shard, const char *json, const char *save) {
    char log[300];
    snprintf(log, sizeof log, "%s.log", json);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) { dup2(fd, 1); dup2(fd, 2); }
        /* Not v4.compress or v4.forward: the multi-bug candidate compresses
         * tokens whose state slot is negative (state_slot_ignored), whose
         * windows may read outside the state cache, and whether that read
         * faults depends on the memory layout, not on the seed. */
        execl(kvcmp, kvcmp, "fuzz", "--seed", "1", "--cases", "1500", "--jobs", "2", "--candidate", candidate, "--max-failures", "50",
              "--shrink-seconds", "1", "--shard", shard, "--stage", "v41,v4.save_partial_states", "--save", save, "--json", json, "--quiet",
              (char *)NULL);
        _exit(127);
    }
    int status;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    char *text = support_read_file(log);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 1, "shard %s of the multi-bug candidate: status %d\n%s", shard, status, text);
    free(text);
}

static cJSON *read_json(const char *path) {
    char *text = support_read_file(path);
    cJSON *root = cJSON_Parse(text);
    free(text);
    cr_assert_not_null(root, "%s is not JSON", path);
    return root;
}

/* The signature keys, sorted, one a line; *total: their summed counts;
 * with `counts`, "KEY\tCOUNT" lines instead. */
static char *signature_table(const cJSON *summary, int counts, double *total) {
    const cJSON *sig;
    int n = cJSON_GetArraySize(cJSON_GetObjectItem(summary, "signatures")), k = 0;
    char **lines = calloc((size_t)n + 1, sizeof *lines);
    if (total) *total = 0;
    cJSON_ArrayForEach(sig, cJSON_GetObjectItem(summary, "signatures")) {
        lines[k] = malloc(300);
        double count = cJSON_GetObjectItem(sig, "count")->valuedouble;
        if (counts) snprintf(lines[k], 300, "%s\t%.0f\n", cJSON_GetObjectItem(sig, "signature")->valuestring, count);
        else snprintf(lines[k], 300, "%s\n", cJSON_GetObjectItem(sig, "signature")->valuestring);
        if (total) *total += count;
        k++;
    }
    for (int i = 0; i < k; i++)
        for (int j = i + 1; j < k; j++)
            if (strcmp(lines[j], lines[i]) < 0) { char *t = lines[i]; lines[i] = lines[j]; lines[j] = t; }
    char *table = calloc((size_t)k * 300 + 1, 1);
    for (int i = 0; i < k; i++) { strcat(table, lines[i]); free(lines[i]); }
    free(lines);
    return table;
}

/* The count of signature key in a summary (0 when absent). */
static double count_of(const cJSON *summary, const char *key) {
    const cJSON *sig;
    cJSON_ArrayForEach(sig, cJSON_GetObjectItem(summary, "signatures"))
        if (strcmp(cJSON_GetObjectItem(sig, "signature")->valuestring, key) == 0) return cJSON_GetObjectItem(sig, "count")->valuedouble;
    return 0;
}

static int occurrences(const char *text, const char *needle) {
    int n = 0;
    for (const char *p = strstr(text, needle); p; p = strstr(p + 1, needle)) n++;
    return n;
}

Test(merge, shards_merge_to_the_unsharded_signature_list, .timeout = 300) {
    char build[256], mutant[300], kvcmp[300];
    build_dir(build, sizeof build);
    snprintf(mutant, sizeof mutant, "%s/mutants/multi/multi_bug.so", build);
    snprintf(kvcmp, sizeof kvcmp, "%s/kvcmp", build);
    if (!support_file_exists(mutant) || !support_file_exists(kvcmp))
        cr_skip_test("%s or %s not built (make multi-bug builds the candidate)", mutant, kvcmp);
    char dir[64], s0[128], s1[128], all[128], merged[128], junit[128], save[128];
    support_temp_dir(dir, sizeof dir);
    snprintf(s0, sizeof s0, "%s/s0.json", dir);
    snprintf(s1, sizeof s1, "%s/s1.json", dir);
    snprintf(all, sizeof all, "%s/all.json", dir);
    snprintf(merged, sizeof merged, "%s/merged.json", dir);
    snprintf(junit, sizeof junit, "%s/merged.xml", dir);
    snprintf(save, sizeof save, "%s/saved", dir);
    campaign(kvcmp, mutant, "0/2", s0, save);
    campaign(kvcmp, mutant, "1/2", s1, save);
    campaign(kvcmp, mutant, "0/1", all, save);
    char *argv[] = {s1, s0, "--json", merged, "--junit", junit};
    captured_run run = support_capture(kvc_cmd_merge, ARGC(argv), argv);
    cr_expect_eq(run.status, 1, "merged failures exit 1: %s%s", run.out, run.err);
    expect_contains(run.out, "merge: 2 summaries (shards 0/2, 1/2), seed 1", "stdout");
    cJSON *whole = read_json(all), *sum = read_json(merged), *first = read_json(s0), *second = read_json(s1);
    /* The keys are the unsharded campaign's, and so are the counts: per
     * signature the shards' sum. */
    double whole_total, merged_total;
    char *want = signature_table(whole, 0, &whole_total), *got = signature_table(sum, 0, &merged_total);
    cr_expect_str_eq(got, want, "merged signature keys differ from the unsharded campaign's");
    cr_expect_gt(strlen(want), 0, "the unsharded campaign found nothing");
    cr_expect_eq(merged_total, whole_total, "failures counted under signatures");
    char *want_counts = signature_table(whole, 1, NULL), *got_counts = signature_table(sum, 1, NULL);
    cr_expect_str_eq(got_counts, want_counts, "merged counts differ from the unsharded campaign's");
    free(want_counts);
    free(got_counts);
    /* Both shards contributed, and each key is printed once. */
    cr_expect_gt(cJSON_GetArraySize(cJSON_GetObjectItem(first, "signatures")), 0);
    cr_expect_gt(cJSON_GetArraySize(cJSON_GetObjectItem(second, "signatures")), 0);
    cr_expect_eq(cJSON_GetObjectItem(sum, "cases")->valuedouble,
                 cJSON_GetObjectItem(first, "cases")->valuedouble + cJSON_GetObjectItem(second, "cases")->valuedouble);
    cr_expect_eq(cJSON_GetObjectItem(sum, "cases")->valuedouble, cJSON_GetObjectItem(whole, "cases")->valuedouble);
    const cJSON *sig;
    cJSON_ArrayForEach(sig, cJSON_GetObjectItem(sum, "signatures")) {
        char line[300];
        snprintf(line, sizeof line, "] %s  (", cJSON_GetObjectItem(sig, "signature")->valuestring);
        cr_expect_eq(occurrences(run.out, line), 1, "'%s' not printed once:\n%s", line, run.out);
        /* The first case is the lowest index either shard saw (the
         * unsharded campaign, with two jobs, lists whichever came back
         * first: no lower). */
        const char *key = cJSON_GetObjectItem(sig, "signature")->valuestring;
        cr_expect_eq(cJSON_GetObjectItem(sig, "count")->valuedouble, count_of(first, key) + count_of(second, key), "count of %s", key);
        double lowest = -1;
        const cJSON *summaries[] = {first, second, whole}, *w;
        for (int k = 0; k < 3; k++)
            cJSON_ArrayForEach(w, cJSON_GetObjectItem(summaries[k], "signatures")) {
                if (strcmp(cJSON_GetObjectItem(w, "signature")->valuestring, key) != 0) continue;
                double index = cJSON_GetObjectItem(w, "first_case")->valuedouble;
                if (k < 2 && (lowest < 0 || index < lowest)) lowest = index;
                if (k == 2) cr_expect_leq(cJSON_GetObjectItem(sig, "first_case")->valuedouble, index, "first case of %s", key);
            }
        cr_expect_eq(cJSON_GetObjectItem(sig, "first_case")->valuedouble, lowest, "first case of %s", key);
        cr_expect(strstr(cJSON_GetObjectItem(sig, "first_repro")->valuestring, "--only") != NULL);
    }
    /* JUnit: a failed testcase per signature. */
    char *xml = support_read_file(junit);
    cr_expect_eq(occurrences(xml, "<failure "), cJSON_GetArraySize(cJSON_GetObjectItem(sum, "signatures")), "%s", xml);
    free(xml);
    support_free_run(&run);
    /* A merged summary merges again, alone, to the same list. */
    char again[128];
    snprintf(again, sizeof again, "%s/again.json", dir);
    char *twice[] = {merged, "--json", again};
    run = support_capture(kvc_cmd_merge, ARGC(twice), twice);
    cr_expect_eq(run.status, 1, "%s", run.err);
    cJSON *re = read_json(again);
    char *re_table = signature_table(re, 1, NULL), *merged_table = signature_table(sum, 1, NULL);
    cr_expect_str_eq(re_table, merged_table);
    free(merged_table);
    free(re_table);
    cJSON_Delete(re);
    support_free_run(&run);
    /* Errors: one shard twice, another seed, a file that is not a summary. */
    char *dup[] = {s0, s0};
    run = support_capture(kvc_cmd_merge, ARGC(dup), dup);
    cr_expect_eq(run.status, 2);
    expect_contains(run.err, "shard 0/2 is already in an earlier summary", "stderr");
    support_free_run(&run);
    char other[128];
    snprintf(other, sizeof other, "%s/other-seed.json", dir);
    cJSON *identity = cJSON_GetObjectItem(second, "campaign");
    cJSON_ReplaceItemInObject(identity, "seed", cJSON_CreateString("2"));
    cJSON_ReplaceItemInObject(second, "seed", cJSON_CreateNumber(2));
    char *text = cJSON_Print(second);
    support_write_text(other, text);
    free(text);
    char out[128];
    snprintf(out, sizeof out, "%s/never.json", dir);
    char *seeds[] = {s0, other, "--json", out};
    run = support_capture(kvc_cmd_merge, ARGC(seeds), seeds);
    cr_expect_eq(run.status, 2);
    expect_contains(run.err, "other-seed.json: --seed 2 differs from the first summary's 1", "stderr");
    cr_expect_not(support_file_exists(out), "a refused merge wrote %s", out);
    support_free_run(&run);
    cJSON_ReplaceItemInObject(identity, "seed", cJSON_CreateString("1"));
    cJSON_ReplaceItemInObject(second, "seed", cJSON_CreateNumber(1));
    cJSON_ReplaceItemInObject(identity, "candidate", cJSON_CreateString("opt"));
    cJSON_ReplaceItemInObject(second, "candidate", cJSON_CreateString("opt"));
    text = cJSON_Print(second);
    support_write_text(other, text);
    free(text);
    run = support_capture(kvc_cmd_merge, ARGC(seeds), seeds);
    cr_expect_eq(run.status, 2);
    expect_contains(run.err, "--candidate opt differs from the first summary's ", "stderr");
    cr_expect_not(support_file_exists(out));
    support_free_run(&run);
    support_write_text(other, "{\"format\": \"kvcmp-mutants/1\", \"mutants\": []}");
    run = support_capture(kvc_cmd_merge, ARGC(seeds), seeds);
    cr_expect_eq(run.status, 2);
    expect_contains(run.err, "other-seed.json: not a kvcmp fuzz summary (\"format\" is \"kvcmp-mutants/1\"", "stderr");
    support_free_run(&run);
    support_write_text(other, "not json");
    run = support_capture(kvc_cmd_merge, ARGC(seeds), seeds);
    cr_expect_eq(run.status, 2);
    expect_contains(run.err, "other-seed.json: cannot be read as JSON", "stderr");
    cr_expect_not(support_file_exists(out));
    support_free_run(&run);
    char *none[] = {"--json", out};
    run = support_capture(kvc_cmd_merge, ARGC(none), none);
    cr_expect_eq(run.status, 2);
    expect_contains(run.err, "no SUMMARY.json to merge", "stderr");
    support_free_run(&run);
    free(want);
    free(got);
    cJSON_Delete(whole);
    cJSON_Delete(sum);
    cJSON_Delete(first);
    cJSON_Delete(second);
    support_remove_tree(dir);
}

/* ---- completeness ------------------------------------------------------ */

/* A shard of the reference's campaign of `cases` cases, in process: its
 * exit status (its summary at json). */
static int reference_shard(const char *shard, const char *cases, const char *json, const char *junit, const char *invalid_rate) {
    char *argv[] = {"--seed", "5", "--cases", (char *)cases, "--shard", (char *)shard, "--jobs", "1", "--candidate", "ref", "--stage",
                    "v41.rope_plain_insert", "--invalid-rate", (char *)invalid_rate, "--save", "", "--json", (char *)json,
                    "--junit", (char *)junit, "--quiet"};
    setenv("OMP_WAIT_POLICY", "passive", 1);
    captured_run run = support_capture(kvc_cmd_fuzz, ARGC(argv), argv);
    int status = run.status;
    support_free_run(&run);
    return status;
}

static captured_run merge_files(char **files, int n, const char *json, const char *junit) {
    char *argv[n + 4];
    for (int i = 0; i < n; i++) argv[i] = files[i];
    int argc = n;
    if (json) { argv[argc++] = "--json"; argv[argc++] = (char *)json; }
    if (junit) { argv[argc++] = "--junit"; argv[argc++] = (char *)junit; }
    return support_capture(kvc_cmd_merge, argc, argv);
}

static void expect_merge_refused(char **files, int n, const char *out, const char *needle) {
    captured_run run = merge_files(files, n, out, NULL);
    cr_expect_eq(run.status, 2, "exit status %d for '%s':\n%s%s", run.status, needle, run.out, run.err);
    expect_contains(run.err, needle, "stderr");
    cr_expect_not(support_file_exists(out), "a refused merge wrote %s", out);
    support_free_run(&run);
}

/* A copy of summary `from` with edit applied to its JSON, at `to`. */
static void edited_copy(const char *from, const char *to, void (*edit)(cJSON *root)) {
    cJSON *root = read_json(from);
    edit(root);
    char *text = cJSON_Print(root);
    support_write_text(to, text);
    free(text);
    cJSON_Delete(root);
}

static void drop_failures(cJSON *root) { cJSON_DeleteItemFromObject(root, "failures"); }
static void failures_as_text(cJSON *root) { cJSON_ReplaceItemInObject(root, "failures", cJSON_CreateString("0")); }
static void negative_skipped(cJSON *root) { cJSON_ReplaceItemInObject(root, "skipped", cJSON_CreateNumber(-3)); }
static void failures_without_signatures(cJSON *root) {
    cJSON_ReplaceItemInObject(root, "failures", cJSON_CreateNumber(1));
    cJSON_ReplaceItemInObject(root, "exit_status", cJSON_CreateNumber(1));
    cJSON_ReplaceItemInObject(root, "verdict", cJSON_CreateString("fail"));
}
static void fewer_cases(cJSON *root) {
    /* As a shard run with fewer cases would say it, every count consistent. */
    double cases = cJSON_GetNumberValue(cJSON_GetObjectItem(root, "cases")) - 1;
    cJSON_ReplaceItemInObject(root, "cases", cJSON_CreateNumber(cases));
    cJSON_ReplaceItemInObject(root, "compared", cJSON_CreateNumber(cases - cJSON_GetNumberValue(cJSON_GetObjectItem(root, "skipped"))));
    cJSON *variant = cJSON_GetObjectItem(root, "per_variant")->child;
    cJSON_ReplaceItemInObject(variant, "cases", cJSON_CreateNumber(cJSON_GetNumberValue(cJSON_GetObjectItem(variant, "cases")) - 1));
}
static void other_version(cJSON *root) {
    cJSON_ReplaceItemInObject(cJSON_GetObjectItem(root, "campaign"), "kvcmp_version", cJSON_CreateString("kvcmp 0.9.0"));
}
static void no_identity(cJSON *root) { cJSON_DeleteItemFromObject(root, "campaign"); }
static void seed_not_decimal(cJSON *root) {
    cJSON_ReplaceItemInObject(cJSON_GetObjectItem(root, "campaign"), "seed", cJSON_CreateString("0x5"));
}
static void shard_past_count(cJSON *root) {
    cJSON_ReplaceItemInObject(cJSON_GetObjectItem(root, "campaign"), "shard_index", cJSON_CreateNumber(3));
}
static void top_candidate_edited(cJSON *root) { cJSON_ReplaceItemInObject(root, "candidate", cJSON_CreateString("opt")); }
static void single_case(cJSON *root) {
    cJSON *identity = cJSON_GetObjectItem(root, "campaign");
    cJSON_DeleteItemFromObject(identity, "cases");
    cJSON_AddNumberToObject(identity, "only", 4);
}
static void interrupted(cJSON *root) {
    /* What an interrupted run writes: kvcmp fuzz's own fields for SIGINT. */
    cJSON_ReplaceItemInObject(root, "interrupted", cJSON_CreateTrue());
    cJSON_AddStringToObject(root, "signal", "SIGINT");
    cJSON_ReplaceItemInObject(root, "exit_status", cJSON_CreateNumber(130));
    cJSON_ReplaceItemInObject(root, "verdict", cJSON_CreateString("interrupted"));
    cJSON_ReplaceItemInObject(root, "stopped_by", cJSON_CreateString("interrupted"));
}

Test(merge, proves_the_campaign_complete, .timeout = 120) {
    char dir[64], s[3][128], junit[128], out[128], xml[128], bad[128];
    support_temp_dir(dir, sizeof dir);
    snprintf(junit, sizeof junit, "%s/shard.xml", dir);
    snprintf(out, sizeof out, "%s/merged.json", dir);
    snprintf(xml, sizeof xml, "%s/merged.xml", dir);
    snprintf(bad, sizeof bad, "%s/bad.json", dir);
    for (int i = 0; i < 3; i++) {
        char shard[16];
        snprintf(shard, sizeof shard, "%d/3", i);
        snprintf(s[i], sizeof s[i], "%s/s%d.json", dir, i);
        cr_assert_eq(reference_shard(shard, "30", s[i], junit, "20"), 0, "shard %s", shard);
    }
    /* Every shard: a verdict. */
    char *all[] = {s[0], s[1], s[2]};
    captured_run run = merge_files(all, 3, out, xml);
    cr_expect_eq(run.status, 0, "%s%s", run.out, run.err);
    expect_contains(run.out, "merge: 3 summaries (shards 0/3, 1/3, 2/3), seed 5, candidate ref, policy exact: 30 cases, 0 failures", "stdout");
    cJSON *root = read_json(out);
    cr_expect_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(root, "verdict")), "pass");
    cr_expect_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetObjectItem(root, "campaign"), "seed")), "5");
    cJSON_Delete(root);
    support_free_run(&run);
    remove(out);
    /* A shard missing: no verdict (exit status 4), said everywhere. */
    char *two[] = {s[0], s[2]};
    run = merge_files(two, 2, out, xml);
    cr_expect_eq(run.status, 4, "%s%s", run.out, run.err);
    expect_contains(run.out, "merge: 1 of 3 shards missing (1/3): the campaign is incomplete", "stdout");
    expect_contains(run.out, "merge: NO VERDICT (exit status 4)", "stdout");
    root = read_json(out);
    cr_expect_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(root, "verdict")), "no-verdict");
    cr_expect_eq(cJSON_GetNumberValue(cJSON_GetObjectItem(root, "exit_status")), 4);
    cr_expect(strstr(cJSON_GetStringValue(cJSON_GetObjectItem(root, "no_verdict")), "1 of 3 shards missing") != NULL);
    cJSON_Delete(root);
    char *text = support_read_file(xml);
    expect_contains(text, "<testcase classname=\"fuzz.campaign\" name=\"every shard merged\"", "junit");
    expect_contains(text, "<failure type=\"no-verdict\" message=\"1 of 3 shards missing (1/3)", "junit");
    free(text);
    support_free_run(&run);
    remove(out);
    /* Other campaigns: other --cases, --invalid-rate, kvcmp version. */
    char other[128];
    snprintf(other, sizeof other, "%s/other.json", dir);
    cr_assert_eq(reference_shard("1/3", "31", other, junit, "20"), 0);
    char *mixed[] = {s[0], other, s[2]};
    expect_merge_refused(mixed, 3, out, "other.json: --cases 31 differs from the first summary's 30: only shards of one campaign merge");
    cr_assert_eq(reference_shard("1/3", "30", other, junit, "100"), 0);
    expect_merge_refused(mixed, 3, out, "other.json: --invalid-rate 100 differs from the first summary's 20");
    edited_copy(s[1], other, other_version);
    expect_merge_refused(mixed, 3, out, "other.json: kvcmp version kvcmp 0.9.0 differs from the first summary's kvcmp ");
    /* One shard twice. */
    char *twice[] = {s[0], s[1], s[1], s[2]};
    expect_merge_refused(twice, 4, out, "s1.json: shard 1/3 is already in an earlier summary");
    /* Edited counts. */
    char *with_bad[] = {s[0], bad, s[2]};
    edited_copy(s[1], bad, drop_failures);
    expect_merge_refused(with_bad, 3, out, "bad.json: \"failures\" must be a whole number of at least 0, found nothing");
    edited_copy(s[1], bad, failures_as_text);
    expect_merge_refused(with_bad, 3, out, "bad.json: \"failures\" must be a whole number of at least 0, found another type");
    edited_copy(s[1], bad, negative_skipped);
    expect_merge_refused(with_bad, 3, out, "bad.json: \"skipped\" must be a whole number of at least 0, found another number");
    edited_copy(s[1], bad, failures_without_signatures);
    expect_merge_refused(with_bad, 3, out, "bad.json: its signatures count 0 failures, its \"failures\" 1");
    edited_copy(s[1], bad, fewer_cases);
    expect_merge_refused(with_bad, 3, out, "bad.json: \"cases\" differs from the cases of its shards");
    /* An identity missing, malformed, or at odds with the fields around it. */
    edited_copy(s[1], bad, no_identity);
    expect_merge_refused(with_bad, 3, out, "bad.json: no \"campaign\" object");
    edited_copy(s[1], bad, seed_not_decimal);
    expect_merge_refused(with_bad, 3, out, "bad.json: the campaign's \"seed\" must be a decimal string");
    edited_copy(s[1], bad, shard_past_count);
    expect_merge_refused(with_bad, 3, out, "bad.json: the campaign's \"shard_index\" 3 is not below its shard count 3");
    edited_copy(s[1], bad, top_candidate_edited);
    expect_merge_refused(with_bad, 3, out, "bad.json: its \"candidate\" disagrees with its \"campaign\" object");
    edited_copy(s[1], bad, single_case);
    expect_merge_refused(with_bad, 3, out, "bad.json: the summary of a single case (--only), not of a shard");
    /* A key twice: read by its first value, it would hide the second. */
    text = support_read_file(s[1]);
    char *at = strstr(text, "\"failures\":");
    cr_assert_not_null(at);
    size_t head = (size_t)(at - text);
    char *doubled = malloc(strlen(text) + 64);
    snprintf(doubled, strlen(text) + 64, "%.*s\"failures\": 7, %s", (int)head, text, at);
    support_write_text(bad, doubled);
    free(doubled);
    free(text);
    expect_merge_refused(with_bad, 3, out, "bad.json: the key \"failures\" appears twice in one object");
    /* An interrupted shard is no evidence of its cases. */
    edited_copy(s[1], bad, interrupted);
    run = merge_files(with_bad, 3, out, NULL);
    cr_expect_eq(run.status, 4, "%s%s", run.out, run.err);
    expect_contains(run.out, "merge: shard 1/3 (", "stdout");
    expect_contains(run.out, "bad.json) was interrupted (exit status 130)", "stdout");
    support_free_run(&run);
    remove(out);
    /* Not regular files: a FIFO is never waited on, a link to a device never read. */
    char fifo[128], zero[128];
    snprintf(fifo, sizeof fifo, "%s/fifo.json", dir);
    snprintf(zero, sizeof zero, "%s/zero.json", dir);
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    cr_assert_eq(symlink("/dev/zero", zero), 0);
    char *with_fifo[] = {s[0], fifo};
    expect_merge_refused(with_fifo, 2, out, "fifo.json: not a regular file (a FIFO)");
    char *with_zero[] = {s[0], zero};
    expect_merge_refused(with_zero, 2, out, "zero.json: not a regular file (a device)");
    support_remove_tree(dir);
}

/* Shards whose own runs gave no verdict or failed to write: the merge
 * has none either. */
Test(merge, shards_without_a_verdict_leave_none, .timeout = 120) {
    char dir[64], s[3][128], junit[128], out[128];
    support_temp_dir(dir, sizeof dir);
    snprintf(junit, sizeof junit, "%s/shard.xml", dir);
    snprintf(out, sizeof out, "%s/merged.json", dir);
    /* A 2-case campaign in 3 shards: shard 2/3 gets no case (exit status 4). */
    for (int i = 0; i < 3; i++) {
        char shard[16];
        snprintf(shard, sizeof shard, "%d/3", i);
        snprintf(s[i], sizeof s[i], "%s/s%d.json", dir, i);
        cr_assert_eq(reference_shard(shard, "2", s[i], junit, "20"), i == 2 ? 4 : 0, "shard %s", shard);
    }
    char *all[] = {s[0], s[1], s[2]};
    captured_run run = merge_files(all, 3, out, NULL);
    cr_expect_eq(run.status, 4, "%s%s", run.out, run.err);
    expect_contains(run.out, "s2.json) gave no verdict: shard 2/3 of a 2-case campaign gets no case", "stdout");
    support_free_run(&run);
    /* A shard that could not write its JUnit (its run exited 3). */
    cr_assert_eq(reference_shard("1/3", "2", s[1], "/proc/kvcmp-no/f.xml", "20"), 3);
    run = merge_files(all, 3, out, NULL);
    cr_expect_eq(run.status, 4, "%s%s", run.out, run.err);
    expect_contains(run.out, "s1.json) could not write a case, its summary or its JUnit (exit status 3)", "stdout");
    expect_contains(run.out, "s2.json) gave no verdict: ", "stdout");
    support_free_run(&run);
    support_remove_tree(dir);
}

/* More shards than any fixed table holds: each counted, a missing one named. */
Test(merge, hundreds_of_shards, .timeout = 120) {
    enum { SHARDS = 300 };
    char dir[64], first[128], junit[128], out[128];
    support_temp_dir(dir, sizeof dir);
    snprintf(first, sizeof first, "%s/s0.json", dir);
    snprintf(junit, sizeof junit, "%s/shard.xml", dir);
    snprintf(out, sizeof out, "%s/merged.json", dir);
    char shard[16], total[16];
    snprintf(shard, sizeof shard, "0/%d", SHARDS);
    snprintf(total, sizeof total, "%d", SHARDS);
    cr_assert_eq(reference_shard(shard, total, first, junit, "20"), 0);
    /* Shard i of a SHARDS-case campaign runs one case, as shard 0 did:
     * its summary is shard 0's with the shard renamed. */
    char *paths[SHARDS];
    cJSON *root = read_json(first);
    for (int i = 0; i < SHARDS; i++) {
        paths[i] = malloc(128);
        snprintf(paths[i], 128, "%s/s%d.json", dir, i);
        char name[32];
        snprintf(name, sizeof name, "%d/%d", i, SHARDS);
        cJSON_ReplaceItemInObject(root, "shard", cJSON_CreateString(name));
        cJSON_ReplaceItemInObject(cJSON_GetObjectItem(root, "campaign"), "shard_index", cJSON_CreateNumber(i));
        char *text = cJSON_Print(root);
        support_write_text(paths[i], text);
        free(text);
    }
    cJSON_Delete(root);
    captured_run run = merge_files(paths, SHARDS, out, NULL);
    cr_expect_eq(run.status, 0, "%s", run.err);
    expect_contains(run.out, "7/300, ... 300 in all), seed 5, candidate ref, policy exact: 300 cases, 0 failures", "stdout");
    support_free_run(&run);
    /* Without shard 257. */
    char *kept = paths[257];
    paths[257] = paths[SHARDS - 1];
    run = merge_files(paths, SHARDS - 1, out, NULL);
    cr_expect_eq(run.status, 4, "%s", run.err);
    expect_contains(run.out, "merge: 1 of 300 shards missing (257/300)", "stdout");
    support_free_run(&run);
    paths[257] = kept;
    for (int i = 0; i < SHARDS; i++) free(paths[i]);
    support_remove_tree(dir);
}

/* ---- the shards' proofs ---------------------------------------------- */

/* A shard of a campaign of the fp8-subnormals-flushed mutant, whose
 * failures the catalogue's fp8-subnormals-flushed explains. */
static void flushed_shard(const char *mutant, const char *shard, const char *json, const char *save) {
    char *argv[] = {"--seed", "1", "--cases", "300", "--shard", (char *)shard, "--jobs", "1", "--candidate", (char *)mutant, "--stage",
                    "v41.rope_plain_insert", "--max-failures", "5", "--shrink-seconds", "1", "--save", (char *)save, "--json",
                    (char *)json, "--quiet"};
    setenv("OMP_WAIT_POLICY", "passive", 1);
    captured_run run = support_capture(kvc_cmd_fuzz, ARGC(argv), argv);
    cr_assert_eq(run.status, 1, "shard %s: exit %d\n%s%s", shard, run.status, run.out, run.err);
    support_free_run(&run);
}

static const cJSON *only_signature(const cJSON *summary) {
    const cJSON *list = cJSON_GetObjectItem(summary, "signatures");
    cr_assert_eq(cJSON_GetArraySize(list), 1, "one signature expected");
    return cJSON_GetArrayItem(list, 0);
}

static double proof_count(const cJSON *signature, const char *key) {
    const cJSON *proof = cJSON_GetObjectItem(signature, "explanation_proof");
    cr_assert_not_null(proof, "no explanation_proof");
    return cJSON_GetNumberValue(cJSON_GetObjectItem(proof, key));
}

/* What a shard whose proof failed writes: no name, the name refuted, held on none of its cases. */
static void explanation_refuted(cJSON *root) {
    cJSON *sig = cJSON_GetArrayItem(cJSON_GetObjectItem(root, "signatures"), 0);
    const char *name = cJSON_GetArrayItem(cJSON_GetObjectItem(sig, "explained_by"), 0)->valuestring;
    cJSON *proof = cJSON_GetObjectItem(sig, "explanation_proof");
    cJSON_AddItemToArray(cJSON_GetObjectItem(proof, "refuted"), cJSON_CreateString(name));
    cJSON_ReplaceItemInObject(sig, "explained_by", cJSON_CreateArray());
    cJSON_ReplaceItemInObject(sig, "signature", cJSON_CreateString(cJSON_GetObjectItem(sig, "byte_class")->valuestring));
    cJSON_ReplaceItemInObject(proof, "cases_held", cJSON_CreateNumber(0));
}

/* A shard that names the explanation although it did not hold on one case it checked. */
static void explanation_short_of_a_case(cJSON *root) {
    cJSON *proof = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(root, "signatures"), 0), "explanation_proof");
    cJSON_ReplaceItemInObject(proof, "cases_held", cJSON_CreateNumber(cJSON_GetNumberValue(cJSON_GetObjectItem(proof, "cases_checked")) - 1));
}

static void held_past_checked(cJSON *root) {
    cJSON *proof = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(root, "signatures"), 0), "explanation_proof");
    cJSON_ReplaceItemInObject(proof, "cases_held", cJSON_CreateNumber(cJSON_GetNumberValue(cJSON_GetObjectItem(proof, "cases_checked")) + 1));
}

/* The merge keeps each shard's explanation_proof (cases checked and
 * held, summed per signature), and never names a signature whose proof
 * failed in any shard: a name refuted in one shard is unexplained in the
 * merge, with how far the proof held. */
Test(merge, keeps_the_shards_proofs_and_never_names_a_refuted_explanation, .timeout = 240) {
    char build[256], mutant[300];
    build_dir(build, sizeof build);
    snprintf(mutant, sizeof mutant, "%s/mutants/fp8_subnormals_flushed.so", build);
    if (!support_file_exists(mutant)) cr_skip_test("%s not built (make mutants)", mutant);
    char dir[64], s0[128], s1[128], bad[128], out[128], save[128];
    support_temp_dir(dir, sizeof dir);
    snprintf(s0, sizeof s0, "%s/s0.json", dir);
    snprintf(s1, sizeof s1, "%s/s1.json", dir);
    snprintf(bad, sizeof bad, "%s/bad.json", dir);
    snprintf(out, sizeof out, "%s/merged.json", dir);
    snprintf(save, sizeof save, "%s/saved", dir);
    flushed_shard(mutant, "0/2", s0, save);
    flushed_shard(mutant, "1/2", s1, save);
    cJSON *first = read_json(s0), *second = read_json(s1);
    const cJSON *a = only_signature(first), *b = only_signature(second);
    const char *name = "explained by fp8-subnormals-flushed";
    cr_assert_str_eq(cJSON_GetObjectItem(a, "signature")->valuestring, name);
    cr_assert_str_eq(cJSON_GetObjectItem(b, "signature")->valuestring, name);
    cr_assert_gt(proof_count(a, "failing_cases_checked"), 0);
    cr_assert_gt(proof_count(b, "passing_cases_checked"), 0);
    /* Both proofs held: named, with the counts of both. */
    char *both[] = {s0, s1};
    captured_run run = merge_files(both, 2, out, NULL);
    cr_expect_eq(run.status, 1, "%s%s", run.out, run.err);
    cJSON *merged = read_json(out);
    const cJSON *m = only_signature(merged);
    cr_expect_str_eq(cJSON_GetObjectItem(m, "signature")->valuestring, name);
    const char *keys[] = {"failing_cases_checked", "passing_cases_checked", "cases_checked", "cases_held"};
    for (int k = 0; k < 4; k++)
        cr_expect_eq(proof_count(m, keys[k]), proof_count(a, keys[k]) + proof_count(b, keys[k]), "%s: not the shards' sum", keys[k]);
    char held[200];
    snprintf(held, sizeof held, "explained by: fp8-subnormals-flushed (SPEC ");
    expect_contains(run.out, held, "stdout");
    snprintf(held, sizeof held, "; held on %.0f failing cases and %.0f passing ones",
             proof_count(a, "failing_cases_checked") + proof_count(b, "failing_cases_checked"),
             proof_count(a, "passing_cases_checked") + proof_count(b, "passing_cases_checked"));
    expect_contains(run.out, held, "stdout");
    cJSON_Delete(merged);
    support_free_run(&run);
    /* Refuted in shard 1: one signature (its byte class), unexplained, the name refuted, in either order. */
    edited_copy(s1, bad, explanation_refuted);
    for (int order = 0; order < 2; order++) {
        char *files[] = {order ? bad : s0, order ? s0 : bad};
        run = merge_files(files, 2, out, NULL);
        cr_expect_eq(run.status, 1, "%s%s", run.out, run.err);
        cr_expect_null(strstr(run.out, name), "a name refuted in a shard is named:\n%s", run.out);
        expect_contains(run.out, "unexplained: no deviation of the catalogue", "stdout");
        expect_contains(run.out, "refuted: fp8-subnormals-flushed (SPEC ", "stdout");
        snprintf(held, sizeof held, "proof across the summaries merged: held on %.0f of the %.0f cases checked",
                 proof_count(a, "cases_held"), proof_count(a, "cases_checked") + proof_count(b, "cases_checked"));
        expect_contains(run.out, held, "stdout");
        merged = read_json(out);
        m = only_signature(merged);
        cr_expect_str_eq(cJSON_GetObjectItem(m, "signature")->valuestring, cJSON_GetObjectItem(a, "byte_class")->valuestring);
        cr_expect_eq(cJSON_GetArraySize(cJSON_GetObjectItem(m, "explained_by")), 0);
        cr_expect_str_eq(cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(m, "explanation_proof"), "refuted"), 0)->valuestring,
                         "fp8-subnormals-flushed");
        cr_expect_eq(proof_count(m, "cases_held"), proof_count(a, "cases_held"));
        cr_expect_eq(cJSON_GetObjectItem(m, "count")->valuedouble,
                     cJSON_GetObjectItem(a, "count")->valuedouble + cJSON_GetObjectItem(b, "count")->valuedouble);
        cJSON_Delete(merged);
        support_free_run(&run);
    }
    /* Still named by shard 1, but not held on every case it checked: unexplained too. */
    edited_copy(s1, bad, explanation_short_of_a_case);
    char *short_of_one[] = {s0, bad};
    run = merge_files(short_of_one, 2, out, NULL);
    cr_expect_eq(run.status, 1, "%s%s", run.out, run.err);
    cr_expect_null(strstr(run.out, name), "a proof short of a case is named:\n%s", run.out);
    support_free_run(&run);
    /* Proof counts that cannot be: refused. */
    edited_copy(s1, bad, held_past_checked);
    remove(out);
    expect_merge_refused(short_of_one, 2, out, "bad.json: a signature's explanation_proof counts disagree");
    cJSON_Delete(first);
    cJSON_Delete(second);
    support_remove_tree(dir);
}
