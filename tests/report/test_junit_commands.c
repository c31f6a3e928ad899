/* --junit of kvcmp replay and kvcmp fuzz: one testcase per case (replay)
 * or per failure signature and per clean variant (fuzz), counts that match the
 * run's own summary, the difference and the __REPRO line in each failure,
 * all read back with python3's XML parser. */
#include <cjson/cJSON.h>

#include "tests/cli/cli_support.h"

/* "tests failures skipped" as python3's parser reads them, then the
 * message and the text of the first failure. */
static char *junit_summary(const char *path) {
    char dir[64], script[128], out[128], command[512];
    support_temp_dir(dir, sizeof dir);
    snprintf(script, sizeof script, "%s/read.py", dir);
    snprintf(out, sizeof out, "%s/out.txt", dir);
    support_write_text(script,
                       "import sys, xml.etree.ElementTree as ET\n"
                       "root = ET.parse(sys.argv[1]).getroot()\n"
                       "cases = list(root.iter('testcase'))\n"
                       "failed = [c for c in cases if c.find('failure') is not None]\n"
                       "print(len(cases), len(failed), sum(1 for c in cases if c.find('skipped') is not None), root.get('tests'), root.get('failures'))\n"
                       "for c in failed[:1]:\n"
                       "    print(c.get('classname'), '|', c.get('name'))\n"
                       "    print(c.find('failure').get('message'))\n"
                       "    print(c.find('failure').text)\n");
    snprintf(command, sizeof command, "/usr/bin/python3 %s %s > %s 2>&1", script, path, out);
    int status = system(command);
    char *text = support_read_file(out);
    cr_assert_eq(status, 0, "python3 could not parse %s: %s", path, text);
    support_remove_tree(dir);
    return text;
}

Test(junit_commands, replay_one_testcase_per_case) {
    char root[64], dir[256], junit[128];
    support_temp_dir(root, sizeof root);
    save_case(root, "good", "v41.rope_quant_insert", "unit-test", 0, dir, sizeof dir);
    save_case(root, "bad", "v41.rope_plain_insert/bf16", "unit-test", 1, dir, sizeof dir);
    /* One expected byte off: the case fails with a classified difference. */
    kvc_case c;
    char error[512];
    cr_assert_eq(kvc_case_load(dir, &c, error, sizeof error), 0, "%s", error);
    kvc_array *out = kvc_case_get(&c, "kv_cache.out");
    const int64_t *slots = kvc_case_get(&c, "slot_mapping")->data;
    int64_t t = 0;
    while (slots[t] < 0) t++;
    ((uint16_t *)out->data)[slots[t] * 512 + 3] ^= 1;
    cr_assert_eq(kvc_case_save(dir, &c, error, sizeof error), 0, "%s", error);
    kvc_case_free(&c);
    /* Beside the tree, not in it: a folder of files in a tree of cases is not a case. */
    char reports[64];
    support_temp_dir(reports, sizeof reports);
    snprintf(junit, sizeof junit, "%s/junit/replay.xml", reports);
    char *argv[] = {"--junit", junit, "--quiet", root};
    captured_run run = support_capture(kvc_cmd_replay, ARGC(argv), argv);
    cr_expect_eq(run.status, 1);
    expect_contains(run.out, "1 passed, 1 failed", "stdout");
    expect_contains(run.out, "; causes: last-bit x1", "stdout");
    char *seen = junit_summary(junit);
    expect_contains(seen, "2 1 0 2 1\n", "junit");
    expect_contains(seen, "replay.unit-test | ", "junit");
    expect_contains(seen, "/bad\n", "junit");
    expect_contains(seen, "(max 1 step); first: kv_cache ", "junit");
    expect_contains(seen, "  __REPRO: build/kvcmp replay --impl ref --policy exact ", "junit");
    free(seen);
    support_free_run(&run);
    /* The candidate's side: the case's outputs are then the contract's. */
    char *with_opt[] = {"--impl", "opt", "--junit", junit, "--quiet", dir};
    run = support_capture(kvc_cmd_replay, ARGC(with_opt), with_opt);
    if (strstr(run.err, "AVX-512") == NULL) expect_contains(run.out, "; causes: last-bit x1", "stdout");
    support_free_run(&run);
    /* A library without these stages: skipped testcases, and no verdict (a failed testcase of the run's own). */
    char partial[256];
    const char *plugins = getenv("KVCMP_TEST_PLUGINS");
    snprintf(partial, sizeof partial, "%s/partial.so", plugins && plugins[0] ? plugins : "build/test-plugins");
    if (support_file_exists(partial)) {
        char *skipping[] = {"--impl", partial, "--junit", junit, "--quiet", root};
        run = support_capture(kvc_cmd_replay, ARGC(skipping), skipping);
        cr_expect_eq(run.status, 4, "%s%s", run.out, run.err);
        seen = junit_summary(junit);
        expect_contains(seen, "3 1 2 3 1\nreplay.run | cases compared\n", "junit");
        free(seen);
        support_free_run(&run);
    }
    /* An unwritable JUnit file: named, and the exit status says so even when every case passed. */
    char good[256];
    snprintf(good, sizeof good, "%s/good", root);
    char *unwritable[] = {"--junit", "/proc/kvcmp-no/r.xml", good};
    run = support_capture(kvc_cmd_replay, ARGC(unwritable), unwritable);
    cr_expect_eq(run.status, 2);
    expect_contains(run.err, "kvcmp replay: cannot write /proc/kvcmp-no/r.xml", "stderr");
    support_free_run(&run);
    support_remove_tree(root);
    support_remove_tree(reports);
}

static void plugin_path(const char *kind, char *out, size_t size) {
    const char *dir = getenv("KVCMP_TEST_PLUGINS");
    snprintf(out, size, "%s/%s.so", dir && dir[0] ? dir : "build/test-plugins", kind);
    if (!support_file_exists(out)) cr_skip_test("%s not built", out);
}

Test(junit_commands, fuzz_clean_campaign_is_a_testcase_per_variant, .timeout = 60) {
    char dir[64], junit[128], json[128];
    support_temp_dir(dir, sizeof dir);
    snprintf(junit, sizeof junit, "%s/fuzz.xml", dir);
    snprintf(json, sizeof json, "%s/fuzz.json", dir);
    char *argv[] = {"--seed", "4", "--cases", "40", "--jobs", "1", "--candidate", "ref", "--stage", "v41.rope_quant,v4.save",
                    "--save", "", "--json", json, "--junit", junit, "--quiet"};
    captured_run run = run_fuzz(ARGC(argv), argv);
    cr_expect_eq(run.status, 0, "%s%s", run.out, run.err);
    /* Five variants match the two prefixes; every one ran without failure. */
    char *seen = junit_summary(junit);
    expect_contains(seen, "5 0 0 5 0\n", "junit");
    free(seen);
    support_free_run(&run);
    support_remove_tree(dir);
}

Test(junit_commands, fuzz_failures_and_skipped_stages, .timeout = 120) {
    char dir[64], junit[128], json[128], crash[256], partial[256];
    plugin_path("crash", crash, sizeof crash);
    plugin_path("partial", partial, sizeof partial);
    support_temp_dir(dir, sizeof dir);
    snprintf(junit, sizeof junit, "%s/fuzz.xml", dir);
    snprintf(json, sizeof json, "%s/fuzz.json", dir);
    /* The crashing candidate: every plain-insert case is a failure (kind crash),
     * all of one signature: each is listed with a per-signature limit above 6. */
    char *argv[] = {"--seed", "2", "--cases", "6", "--jobs", "1", "--candidate", crash, "--stage", "v41.rope_plain_insert/bf16",
                    "--max-failures-per-signature", "10", "--save", "/proc/kvcmp-no/saved", "--json", json, "--junit", junit, "--quiet"};
    captured_run run = run_fuzz(ARGC(argv), argv);
    cr_expect_eq(run.status, 3, "cases that could not be saved: exit status 3\n%s%s", run.out, run.err);
    char *seen = junit_summary(junit);
    char *text = support_read_file(json);
    cJSON *summary = cJSON_Parse(text);
    int failures = (int)cJSON_GetNumberValue(cJSON_GetObjectItem(summary, "failures"));
    cr_expect_gt(failures, 1);
    /* Every failure has one signature: one failed testcase, no passing variant. */
    cr_expect_eq(cJSON_GetArraySize(cJSON_GetObjectItem(summary, "signatures")), 1);
    expect_contains(seen, "1 1 0 1 1\n", "junit");
    expect_contains(seen, "fuzz.v41.rope_plain_insert/bf16 | v41.rope_plain_insert crash: ", "junit");
    expect_contains(seen, "the worker running this case died", "junit");
    char count[64];
    snprintf(count, sizeof count, "(%d failures; regions: -)", failures);
    expect_contains(seen, count, "junit");
    expect_contains(seen, "__REPRO: build/kvcmp fuzz --seed 2 --only ", "junit");
    expect_contains(seen, " saved: (not saved: cannot create /proc/kvcmp-no/saved", "junit");
    cJSON_Delete(summary);
    free(text);
    free(seen);
    support_free_run(&run);
    /* Saved where it can be: the replay line of the saved case too. */
    char saved[128];
    snprintf(saved, sizeof saved, "%s/saved", dir);
    char *saving[] = {"--seed", "2", "--cases", "1", "--jobs", "1", "--candidate", crash, "--stage", "v41.rope_plain_insert/bf16",
                      "--save", saved, "--json", "", "--junit", junit, "--quiet"};
    run = run_fuzz(ARGC(saving), saving);
    cr_expect_eq(run.status, 1, "%s%s", run.out, run.err);
    seen = junit_summary(junit);
    expect_contains(seen, "      minimal: case 0, ", "junit");
    expect_contains(seen, " --page-padding ", "junit");   /* the padding the crashing check drew */
    free(seen);
    support_free_run(&run);
    /* A --stage the candidate lacks: a skipped testcase, not a pass, and
     * no verdict (exit status 4): a failed testcase of the campaign's own. */
    char *skip[] = {"--seed", "2", "--cases", "4", "--jobs", "1", "--candidate", partial, "--stage", "v41.rope_quant",
                    "--save", "", "--json", json, "--junit", junit, "--quiet"};
    run = run_fuzz(ARGC(skip), skip);
    cr_expect_eq(run.status, 4, "%s%s", run.out, run.err);
    seen = junit_summary(junit);
    expect_contains(seen, "2 1 1 2 1\n", "junit");
    expect_contains(seen, "fuzz.campaign | cases compared\nall 4 cases were skipped: candidate ", "junit");
    free(seen);
    support_free_run(&run);
    /* An unwritable JUnit file. */
    char *unwritable[] = {"--cases", "0", "--candidate", "ref", "--json", "", "--junit", "/proc/kvcmp-no/f.xml", "--quiet"};
    run = run_fuzz(ARGC(unwritable), unwritable);
    cr_expect_eq(run.status, 3, "an unwritable result file is exit status 3 (kvcmp fuzz --help)");
    expect_contains(run.err, "kvcmp fuzz: cannot write /proc/kvcmp-no/f.xml", "stderr");
    support_free_run(&run);
    support_remove_tree(dir);
}
