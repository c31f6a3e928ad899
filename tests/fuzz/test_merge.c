/* kvcmp merge: the summaries of a campaign's shards make the signature
 * list of the unsharded campaign; files that are not summaries, and
 * summaries of different campaigns, are refused with exit status 2. */
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
    cJSON_ReplaceItemInObject(second, "seed", cJSON_CreateNumber(2));
    char *text = cJSON_Print(second);
    support_write_text(other, text);
    free(text);
    char out[128];
    snprintf(out, sizeof out, "%s/never.json", dir);
    char *seeds[] = {s0, other, "--json", out};
    run = support_capture(kvc_cmd_merge, ARGC(seeds), seeds);
    cr_expect_eq(run.status, 2);
    expect_contains(run.err, "other-seed.json: seed 2 differs from the first summary's 1", "stderr");
    cr_expect_not(support_file_exists(out), "a refused merge wrote %s", out);
    support_free_run(&run);
    cJSON_ReplaceItemInObject(second, "seed", cJSON_CreateNumber(1));
    cJSON_ReplaceItemInObject(second, "candidate", cJSON_CreateString("opt"));
    text = cJSON_Print(second);
    support_write_text(other, text);
    free(text);
    run = support_capture(kvc_cmd_merge, ARGC(seeds), seeds);
    cr_expect_eq(run.status, 2);
    expect_contains(run.err, "candidate opt differs from the first summary's ", "stderr");
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
