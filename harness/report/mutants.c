/* kvcmp report mutants: the verdict of the mutant check
 * (harness/mutants/check.sh) from the fuzz summaries it left, one per
 * planted-bug candidate: each must have been caught (a failure
 * reported) within the time limit.  Writes reports/mutants.json and,
 * when asked, JUnit XML with one testcase per mutant. */
#include <cjson/cJSON.h>
#include <getopt.h>
#include <glob.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/options/options.h"
#include "harness/report/junit.h"
#include "harness/report/report.h"
#include "harness/report/run_info.h"

typedef struct {
    const char *dir, *json_path, *junit_path;
    double limit;
} mutant_options;

typedef struct {
    char name[128];
    int caught;
    double kill_seconds;
    char first_failure[300];
    char seed[32];
    char skipped[300]; /* non-empty: not run on this CPU, and why (NAME.skipped) */
} mutant_verdict;

static void usage(FILE *f) {
    fprintf(f, "usage: kvcmp report mutants --limit SECONDS [--json FILE] [--junit FILE] DIR\n"
               "  DIR holds NAME.so (each mutant) and NAME.json (its kvcmp fuzz --json summary), as\n"
               "  harness/mutants/check.sh leaves them; a mutant is caught when its campaign reported a\n"
               "  failure within SECONDS.  NAME.skipped (an ISA this CPU lacks) lists it as skipped, with why.\n"
               "  Writes FILE (default reports/mutants.json); exit 1 if any survived.\n");
}

/* argv: the arguments after "mutants" (options may follow DIR). */
static int parse(int argc, char **argv, mutant_options *o) {
    static const struct option longs[] = {{"limit", required_argument, 0, 'l'}, {"json", required_argument, 0, 'j'},
                                          {"junit", required_argument, 0, 'u'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    *o = (mutant_options){.json_path = "reports/mutants.json", .limit = -1};
    /* getopt_long reads from argv[1]: put the command's name in front. */
    char **args = calloc((size_t)argc + 2, sizeof *args);
    if (!args) return 2;
    args[0] = "kvcmp report mutants";
    memcpy(args + 1, argv, (size_t)argc * sizeof *argv);
    optind = 0;
    opterr = 0;
    int ch, rc = 0;
    while (rc == 0 && (ch = getopt_long(argc + 1, args, "", longs, NULL)) != -1) {
        char *end;
        if (ch == 'l') {
            o->limit = strtod(optarg, &end);
            if (end == optarg || *end || !(o->limit > 0)) {
                fprintf(stderr, "kvcmp report mutants: --limit takes a positive number of seconds, not '%s'\n", optarg);
                rc = 2;
            }
        } else if (ch == 'j') o->json_path = optarg;
        else if (ch == 'u') o->junit_path = optarg;
        else if (ch == 'h') { usage(stdout); rc = 1; }
        else {
            fprintf(stderr, "kvcmp report mutants: unknown option or one without its value: %s\n", args[optind - 1]);
            usage(stderr);
            rc = 2;
        }
    }
    if (rc == 0 && (optind != argc || o->limit < 0)) {
        fprintf(stderr, "kvcmp report mutants: give --limit SECONDS and one directory\n");
        usage(stderr);
        rc = 2;
    }
    if (rc == 0) o->dir = args[optind];
    free(args);
    return rc;
}

/* Reads DIR/NAME.json into v; a missing or unreadable summary is a survivor. */
static void read_verdict(const char *dir, mutant_verdict *v, double limit) {
    char path[4096];
    snprintf(v->seed, sizeof v->seed, "?");
    snprintf(path, sizeof path, "%s/%s.skipped", dir, v->name);
    FILE *skipped = fopen(path, "r");
    if (skipped) {
        if (!fgets(v->skipped, sizeof v->skipped, skipped)) snprintf(v->skipped, sizeof v->skipped, "skipped");
        v->skipped[strcspn(v->skipped, "\n")] = 0;
        fclose(skipped);
        return;
    }
    snprintf(path, sizeof path, "%s/%s.json", dir, v->name);
    cJSON *root = kvc_read_json_file(path);
    if (!root) return;
    cJSON *kill = cJSON_GetObjectItem(root, "first_failure_seconds"), *seed = cJSON_GetObjectItem(root, "seed");
    cJSON *first = cJSON_GetArrayItem(cJSON_GetObjectItem(root, "failure_list"), 0);
    if (cJSON_IsNumber(seed)) snprintf(v->seed, sizeof v->seed, "%.0f", seed->valuedouble);
    if (cJSON_IsNumber(kill) && kill->valuedouble < limit) {
        v->caught = 1;
        v->kill_seconds = kill->valuedouble;
        const char *kind = cJSON_GetStringValue(cJSON_GetObjectItem(first, "kind"));
        const char *variant = cJSON_GetStringValue(cJSON_GetObjectItem(first, "variant"));
        const char *family = cJSON_GetStringValue(cJSON_GetObjectItem(first, "family"));
        snprintf(v->first_failure, sizeof v->first_failure, "%s on %s (%s)", kind ? kind : "?", variant ? variant : "?",
                 family ? family : "?");
    }
    cJSON_Delete(root);
}

static cJSON *verdicts_json(const mutant_options *o, const mutant_verdict *v, int count) {
    cJSON *root = cJSON_CreateObject(), *options = cJSON_CreateObject();
    cJSON_AddNumberToObject(options, "limit_seconds", o->limit);
    cJSON_AddStringToObject(options, "dir", o->dir);
    cJSON_AddStringToObject(root, "format", "kvcmp-mutants/1");
    cJSON_AddItemToObject(root, "run", kvc_run_info(count ? strtoull(v[0].seed, NULL, 10) : 0, count > 0, options));
    cJSON_AddNumberToObject(root, "limit_seconds", o->limit);
    cJSON *list = cJSON_AddArrayToObject(root, "mutants");
    for (int i = 0; i < count; i++) {
        cJSON *item = cJSON_CreateObject();
        cJSON_AddStringToObject(item, "mutant", v[i].name);
        cJSON_AddBoolToObject(item, "caught", v[i].caught);
        if (v[i].skipped[0]) cJSON_AddStringToObject(item, "skipped", v[i].skipped);
        if (v[i].caught) {
            cJSON_AddNumberToObject(item, "kill_seconds", v[i].kill_seconds);
            cJSON_AddStringToObject(item, "first_failure", v[i].first_failure);
        }
        cJSON_AddItemToArray(list, item);
    }
    return root;
}

static void repro_line(const mutant_options *o, const mutant_verdict *v, char *out, size_t size) {
    char library[PATH_MAX + 200], quoted[4 * (PATH_MAX + 200) + 8];
    snprintf(library, sizeof library, "%s/%s.so", o->dir, v->name);
    if (kvc_shell_quote(library, quoted, sizeof quoted) >= sizeof quoted) snprintf(quoted, sizeof quoted, "LIBRARY");
    int n = snprintf(out, size, "%s fuzz --candidate %s --seed %s --seconds %g", kvc_invocation(), quoted, v->seed, o->limit);
    if (n < 0 || (size_t)n >= size) snprintf(out, size, "# the command is longer than %zu bytes: fuzz the mutant %.100s", size, v->name);
}

static int write_junit(const mutant_options *o, const mutant_verdict *v, int count, const cJSON *run) {
    kvc_junit *j = kvc_junit_new("kvcmp mutants");
    if (!j) return -1;
    kvc_junit_properties(j, run);
    for (int i = 0; i < count; i++) {
        if (v[i].caught) { kvc_junit_pass(j, "mutants", v[i].name, v[i].kill_seconds); continue; }
        if (v[i].skipped[0]) { kvc_junit_skip(j, "mutants", v[i].name, v[i].skipped); continue; }
        char message[200], text[1200], repro[800];
        repro_line(o, &v[i], repro, sizeof repro);
        snprintf(message, sizeof message, "survived: no failure within %g s; the fuzzer missed a planted bug", o->limit);
        snprintf(text, sizeof text, "campaign log: %s/%s.log\n  __REPRO: %s\n", o->dir, v[i].name, repro);
        kvc_junit_fail(j, "mutants", v[i].name, o->limit, "survived", message, text);
    }
    char error[1200];
    int rc = kvc_junit_write(j, o->junit_path, error, sizeof error);
    if (rc) fprintf(stderr, "kvcmp report mutants: %s\n", error);
    kvc_junit_free(j);
    return rc;
}

int kvc_report_mutants(int argc, char **argv) {
    mutant_options o;
    int rc = parse(argc, argv, &o);
    if (rc) return rc == 1 ? 0 : rc;
    char pattern[4096];
    snprintf(pattern, sizeof pattern, "%s/*.so", o.dir);
    glob_t found;
    if (glob(pattern, 0, NULL, &found) != 0) {
        fprintf(stderr, "kvcmp report mutants: no mutant (NAME.so) in %s; build them with make mutants\n", o.dir);
        return 2;
    }
    int count = (int)found.gl_pathc, survivors = 0;
    mutant_verdict *v = calloc((size_t)count, sizeof *v);
    if (!v) { globfree(&found); return 2; }
    printf("%-32s %-8s %9s  %s\n", "mutant", "result", "kill (s)", "first failure");
    for (int i = 0; i < count; i++) {
        const char *base = strrchr(found.gl_pathv[i], '/') + 1;
        snprintf(v[i].name, sizeof v[i].name, "%.*s", (int)(strlen(base) - 3), base);
        read_verdict(o.dir, &v[i], o.limit);
        survivors += !v[i].caught && !v[i].skipped[0];
        if (v[i].skipped[0]) printf("%-32s %-8s %9s  (%s)\n", v[i].name, "skipped", "-", v[i].skipped);
        else if (v[i].caught) printf("%-32s %-8s %9.3f  %s\n", v[i].name, "caught", v[i].kill_seconds, v[i].first_failure);
        else printf("%-32s %-8s %9s  (log: %s/%s.log)\n", v[i].name, "SURVIVED", "-", o.dir, v[i].name);
    }
    globfree(&found);
    cJSON *root = verdicts_json(&o, v, count);
    int failed = o.junit_path && write_junit(&o, v, count, cJSON_GetObjectItem(root, "run"));
    char error[1200];
    if (kvc_write_json_file(o.json_path, root, error, sizeof error)) { fprintf(stderr, "kvcmp report mutants: %s\n", error); failed = 1; }
    for (int i = 0; i < count && survivors; i++) {
        if (v[i].caught || v[i].skipped[0]) continue;
        char repro[800];
        repro_line(&o, &v[i], repro, sizeof repro);
        fprintf(stderr, "mutants: %d survived; the fuzzer missed a planted bug. Reproduce with: %s\n", survivors, repro);
        break;
    }
    if (!survivors) printf("mutants: all %d caught within %g s each (%s)\n", count, o.limit, o.json_path);
    free(v);
    return survivors || failed ? 1 : 0;
}
