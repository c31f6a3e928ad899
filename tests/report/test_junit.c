/* The JUnit writer and the run metadata: what a CI system reads must
 * parse (checked with python3's own XML parser, not ours) and carry the
 * names, messages and counts exactly. */
#include <criterion/criterion.h>
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "harness/report/junit.h"
#include "harness/report/run_info.h"
#include "tests/test_support.h"

/* Runs python3 (Debian's) on a script that reads the JUnit file at argv[1]
 * and prints what the test compares; returns its stdout. */
static char *python_reads(const char *script, const char *path) {
    char dir[64], script_path[128], out_path[128], command[512];
    support_temp_dir(dir, sizeof dir);
    snprintf(script_path, sizeof script_path, "%s/read.py", dir);
    snprintf(out_path, sizeof out_path, "%s/out.txt", dir);
    support_write_text(script_path, script);
    snprintf(command, sizeof command, "/usr/bin/python3 %s %s > %s 2>&1", script_path, path, out_path);
    int status = system(command);
    char *text = support_read_file(out_path);
    cr_assert_eq(status, 0, "python3 could not read %s: %s", path, text);
    support_remove_tree(dir);
    return text;
}

static const char *const summary_script =
    "import sys, xml.etree.ElementTree as ET\n"
    "root = ET.parse(sys.argv[1]).getroot()\n"
    "suite = root.find('testsuite')\n"
    "cases = suite.findall('testcase')\n"
    "print(root.tag, root.get('tests'), root.get('failures'), root.get('skipped'), len(cases),\n"
    "      sum(1 for c in cases if c.find('failure') is not None), sum(1 for c in cases if c.find('skipped') is not None))\n"
    "for c in cases:\n"
    "    f = c.find('failure')\n"
    "    print(repr(c.get('classname')), repr(c.get('name')), repr(f.get('message')) if f is not None else '-',\n"
    "          repr(f.text) if f is not None else '-')\n"
    "for p in suite.find('properties') if suite.find('properties') is not None else []:\n"
    "    print('property', p.get('name'), repr(p.get('value')))\n";

Test(junit, counts_names_and_escaping_survive_a_real_parser) {
    char dir[64], path[128], error[512];
    support_temp_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/sub/result.xml", dir);   /* the directory is created */
    kvc_junit *j = kvc_junit_new("kvcmp <test> & \"suite\"");
    cr_assert_not_null(j);
    kvc_junit_pass(j, "spec-cases", "a/b", 0.25);
    kvc_junit_fail(j, "vllm-cpu", "case 'x' <1>", 1.5, "bytes", "NoPE code x2 & more\nsecond line",
                   "first: a < b\n  __REPRO: build/kvcmp replay \"x\"\n\x01\xff tail \xc3\xa9");
    kvc_junit_skip(j, "partial", "v41 case", "stage not offered");
    cJSON *info = cJSON_CreateObject();
    cJSON_AddStringToObject(info, "commit", "abc");
    cJSON_AddNumberToObject(info, "jobs", 2);
    kvc_junit_properties(j, info);
    cJSON_Delete(info);
    cr_assert_eq(kvc_junit_tests(j), 3);
    cr_assert_eq(kvc_junit_failures(j), 1);
    cr_assert_eq(kvc_junit_write(j, path, error, sizeof error), 0, "%s", error);
    kvc_junit_free(j);
    char *seen = python_reads(summary_script, path);
    cr_expect(strstr(seen, "testsuites 3 1 1 3 1 1\n"), "%s", seen);
    cr_expect(strstr(seen, "'spec-cases' 'a/b' - -\n"), "%s", seen);
    /* Attribute newlines survive as character references; \x01 and the
     * stray \xff byte become visible text; valid UTF-8 stays. */
    cr_expect(strstr(seen, "'vllm-cpu' \"case 'x' <1>\" 'NoPE code x2 & more\\nsecond line' "
                           "'first: a < b\\n  __REPRO: build/kvcmp replay \"x\"\\n\\\\x01\\\\xff tail \xc3\xa9'\n"),
              "%s", seen);
    cr_expect(strstr(seen, "property commit 'abc'\nproperty jobs '2'\n"), "%s", seen);
    free(seen);
    support_remove_tree(dir);
}

Test(junit, invalid_utf8_sequences_are_made_visible) {
    static const char *const inputs[] = {"\xc0\xaf", "\xe0\x80\xaf", "\xed\xa0\x80", "\xf0\x80\x80\xaf", "\xf4\x90\x80\x80",
                                         "\xf5\x80", "\xe2\x82", "\x7f"};
    char *buffer;
    size_t size;
    for (size_t i = 0; i < sizeof inputs / sizeof inputs[0]; i++) {
        FILE *f = open_memstream(&buffer, &size);
        kvc_xml_escape(f, inputs[i], 0);
        fclose(f);
        cr_expect_eq(buffer[0], '\\', "input %zu written as '%s'", i, buffer);
        for (size_t k = 0; k < size; k++) cr_expect_lt((unsigned char)buffer[k], 0x80, "input %zu: raw byte kept", i);
        free(buffer);
    }
    FILE *f = open_memstream(&buffer, &size);
    kvc_xml_escape(f, "\xf0\x9f\x98\x80 \xe2\x82\xac", 1);   /* valid 4- and 3-byte sequences */
    fclose(f);
    cr_expect_str_eq(buffer, "\xf0\x9f\x98\x80 \xe2\x82\xac");
    free(buffer);
}

Test(junit, unwritable_path_names_the_file) {
    kvc_junit *j = kvc_junit_new("s");
    char error[512];
    cr_assert_eq(kvc_junit_write(j, "/proc/kvcmp-no/result.xml", error, sizeof error), -1);
    cr_expect(strstr(error, "cannot write /proc/kvcmp-no/result.xml") && strstr(error, "writable"), "%s", error);
    kvc_junit_free(j);
    kvc_junit_free(NULL);
}

Test(run_info, names_the_build_machine_and_run) {
    cJSON *options = cJSON_CreateObject();
    cJSON_AddStringToObject(options, "policy", "exact");
    cJSON *info = kvc_run_info(18446744073709551615ull, 1, options);
    const char *keys[] = {"kvcmp_version", "commit", "compiler", "flags", "cpu", "started", "seed"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        cJSON *item = cJSON_GetObjectItem(info, keys[i]);
        cr_assert(cJSON_IsString(item) && item->valuestring[0], "run info lacks %s", keys[i]);
    }
    cr_expect_str_eq(cJSON_GetObjectItem(info, "seed")->valuestring, "18446744073709551615");
    cr_expect_str_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(info, "options"), "policy")->valuestring, "exact");
    cr_expect_str_eq(cJSON_GetObjectItem(info, "kvcmp_version")->valuestring, kvc_build_version());
    /* The process's own arguments (here Criterion's worker). */
    cJSON *command = cJSON_GetObjectItem(info, "command_line");
    cr_assert(cJSON_IsArray(command) && cJSON_GetArraySize(command) >= 1);
    cr_expect_gt(strlen(cJSON_GetArrayItem(command, 0)->valuestring), 0);
    cr_expect(strstr(kvc_build_flags(), "-ffp-contract=off"), "%s", kvc_build_flags());
    cr_expect_neq(strcmp(kvc_build_commit(), ""), 0);
    cJSON_Delete(info);
    info = kvc_run_info(0, 0, NULL);
    cr_expect_null(cJSON_GetObjectItem(info, "seed"));
    cr_expect(cJSON_IsObject(cJSON_GetObjectItem(info, "options")));
    cJSON_Delete(info);
}

Test(run_info, json_file_written_with_its_directory_or_a_clear_error) {
    char dir[64], path[160], error[512];
    support_temp_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/a/x.json", dir);
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "k", "v\"");
    cr_assert_eq(kvc_write_json_file(path, root, error, sizeof error), 0, "%s", error);
    char *text = support_read_file(path);
    cJSON *back = cJSON_Parse(text);
    cr_assert_not_null(back, "%s", text);
    cr_expect_str_eq(cJSON_GetObjectItem(back, "k")->valuestring, "v\"");
    cJSON_Delete(back);
    free(text);
    cr_assert_eq(kvc_write_json_file("/proc/kvcmp-no/x.json", cJSON_CreateObject(), error, sizeof error), -1);
    cr_expect(strstr(error, "cannot write /proc/kvcmp-no/x.json"), "%s", error);
    support_remove_tree(dir);
}

/* tools/junit_check.py, the make test check of every JUnit file, must
 * notice a file whose counts disagree with its run. */
Test(junit, junit_check_tool_catches_disagreeing_counts) {
    char dir[64], xml[128], log[128], command[512];
    support_temp_dir(dir, sizeof dir);
    snprintf(xml, sizeof xml, "%s/r.xml", dir);
    snprintf(log, sizeof log, "%s/r.log", dir);
    kvc_junit *j = kvc_junit_new("kvcmp replay");
    kvc_junit_pass(j, "replay.x", "a", 0);
    kvc_junit_fail(j, "replay.x", "b", 0, "difference", "NoPE code x1", "NoPE code x1\n  __REPRO: build/kvcmp replay b\n");
    char error[512];
    cr_assert_eq(kvc_junit_write(j, xml, error, sizeof error), 0, "%s", error);
    kvc_junit_free(j);
    support_write_text(log, "1 passed, 1 failed, 0 skipped\n");
    snprintf(command, sizeof command, "/usr/bin/python3 tools/junit_check.py --replay %s %s > /dev/null 2>&1", xml, log);
    cr_expect_eq(system(command), 0, "the tool refused a file that agrees with its run");
    support_write_text(log, "2 passed, 1 failed, 0 skipped\n");
    cr_expect_neq(system(command), 0, "the tool accepted 2 testcases for a run of 3 cases");
    support_write_text(log, "no summary\n");
    cr_expect_neq(system(command), 0, "the tool accepted a log without a summary");
    support_remove_tree(dir);
}
