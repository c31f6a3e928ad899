/* kvcmp report mutants: the mutant check's verdict from the campaigns'
 * summaries, as JSON and JUnit, on a synthetic directory (two mutants
 * caught, one survivor, one without a summary at all). */
#include <criterion/criterion.h>
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/report/report.h"
#include "tests/test_support.h"

#define ARGC(a) (int)(sizeof(a) / sizeof(a)[0])

static void write_in(const char *dir, const char *name, const char *text) {
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    support_write_text(path, text);
}

static const char *const caught_summary =
    "{\"seed\": 1, \"failures\": 1, \"first_failure_seconds\": 0.04,"
    " \"failure_list\": [{\"case\": 7, \"variant\": \"v4.compress/d512/r4\", \"family\": \"normal\", \"kind\": \"bytes\"}]}";

static void make_mutant_dir(char *dir, size_t size) {
    support_temp_dir(dir, size);
    write_in(dir, "a_caught.so", "");
    write_in(dir, "a_caught.json", caught_summary);
    write_in(dir, "b_late.so", "");   /* caught, but after the limit */
    write_in(dir, "b_late.json", "{\"seed\": 1, \"failures\": 1, \"first_failure_seconds\": 12.5, \"failure_list\": []}");
    write_in(dir, "c_no_summary.so", "");
}

Test(report_mutants, survivors_fail_the_check_and_every_mutant_is_a_testcase) {
    char dir[64], json[128], junit[128];
    make_mutant_dir(dir, sizeof dir);
    snprintf(json, sizeof json, "%s/out/mutants.json", dir);
    snprintf(junit, sizeof junit, "%s/out/mutants.xml", dir);
    char *argv[] = {"--limit", "10", dir, "--json", json, "--junit", junit};
    captured_run run = support_capture(kvc_report_mutants, ARGC(argv), argv);
    cr_expect_eq(run.status, 1, "%s%s", run.out, run.err);
    cr_expect(strstr(run.out, "a_caught") && strstr(run.out, "caught") && strstr(run.out, "bytes on v4.compress/d512/r4 (normal)"), "%s",
              run.out);
    cr_expect(strstr(run.out, "b_late ") && strstr(run.out, "SURVIVED"), "%s", run.out);
    cr_expect(strstr(run.err, "survived") && strstr(run.err, "Reproduce with: build/kvcmp fuzz --candidate"), "%s", run.err);
    char *text = support_read_file(json);
    cJSON *root = cJSON_Parse(text);
    cr_assert_not_null(root, "%s", text);
    cJSON *list = cJSON_GetObjectItem(root, "mutants");
    cr_assert_eq(cJSON_GetArraySize(list), 3);
    cr_expect(cJSON_IsTrue(cJSON_GetObjectItem(cJSON_GetArrayItem(list, 0), "caught")));
    cr_expect(cJSON_IsFalse(cJSON_GetObjectItem(cJSON_GetArrayItem(list, 1), "caught")));
    cr_expect(cJSON_IsFalse(cJSON_GetObjectItem(cJSON_GetArrayItem(list, 2), "caught")));
    cr_expect_str_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(root, "run"), "seed")->valuestring, "1");
    cJSON_Delete(root);
    free(text);
    text = support_read_file(junit);
    cr_expect(strstr(text, "tests=\"3\" failures=\"2\""), "%s", text);
    cr_expect(strstr(text, "<testcase classname=\"mutants\" name=\"a_caught\" time=\"0.040\"/>"), "%s", text);
    cr_expect(strstr(text, "__REPRO: build/kvcmp fuzz --candidate "), "%s", text);
    free(text);
    support_free_run(&run);
    support_remove_tree(dir);
}

Test(report_mutants, all_caught_passes) {
    char dir[64], json[128];
    support_temp_dir(dir, sizeof dir);
    write_in(dir, "a_caught.so", "");
    write_in(dir, "a_caught.json", caught_summary);
    snprintf(json, sizeof json, "%s/mutants.json", dir);
    char *argv[] = {"--json", json, "--limit", "0.5", dir};
    captured_run run = support_capture(kvc_report_mutants, ARGC(argv), argv);
    cr_expect_eq(run.status, 0, "%s%s", run.out, run.err);
    cr_expect(strstr(run.out, "mutants: all 1 caught within 0.5 s each"), "%s", run.out);
    support_free_run(&run);
    support_remove_tree(dir);
}

Test(report_mutants, usage_errors_exit_2) {
    char *no_limit[] = {"/tmp"}, *bad_limit[] = {"--limit", "ten", "/tmp"}, *unknown[] = {"--limit", "1", "--nope", "/tmp"},
         *two_dirs[] = {"--limit", "1", "/tmp", "/var"}, *no_value[] = {"/tmp", "--limit"}, *empty[] = {"--limit", "1", "/proc/self"},
         *help[] = {"--help"};
    struct {
        char **argv;
        int argc, status;
        const char *says;
    } cases[] = {
        {no_limit, ARGC(no_limit), 2, "give --limit SECONDS and one directory"},
        {bad_limit, ARGC(bad_limit), 2, "--limit takes a positive number of seconds, not 'ten'"},
        {unknown, ARGC(unknown), 2, "unknown option or one without its value: --nope"},
        {two_dirs, ARGC(two_dirs), 2, "give --limit SECONDS and one directory"},
        {no_value, ARGC(no_value), 2, "--limit"},
        {empty, ARGC(empty), 2, "no mutant (NAME.so) in /proc/self; build them with make mutants"},
        {help, ARGC(help), 0, "usage: kvcmp report mutants"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        captured_run run = support_capture(kvc_report_mutants, cases[i].argc, cases[i].argv);
        cr_expect_eq(run.status, cases[i].status, "case %zu: status %d: %s", i, run.status, run.err);
        cr_expect(strstr(cases[i].status ? run.err : run.out, cases[i].says), "case %zu: %s%s", i, run.out, run.err);
        support_free_run(&run);
    }
}

Test(report_mutants, unwritable_outputs_are_named) {
    char dir[64];
    support_temp_dir(dir, sizeof dir);
    write_in(dir, "a_caught.so", "");
    write_in(dir, "a_caught.json", caught_summary);
    char *argv[] = {"--limit", "10", "--json", "/proc/kvcmp-no/m.json", "--junit", "/proc/kvcmp-no/m.xml", dir};
    captured_run run = support_capture(kvc_report_mutants, ARGC(argv), argv);
    cr_expect_eq(run.status, 1);
    cr_expect(strstr(run.err, "cannot write /proc/kvcmp-no/m.json") && strstr(run.err, "cannot write /proc/kvcmp-no/m.xml"), "%s", run.err);
    support_free_run(&run);
    support_remove_tree(dir);
}
