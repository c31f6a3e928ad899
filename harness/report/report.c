/* kvcmp report: the command line of the precision and parity reports. */
#include "harness/report/report.h"
#include "harness/report/parity.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/commands.h"
#include "harness/options/options.h"
#include "kvcmp/backends.h"

#define DEFAULT_CASES_PER_FAMILY 2
#define DEFAULT_SEED 20261129u
#define MAX_PATHS 8

typedef struct {
    const char *out_dir;
    int cases_per_family;
    uint64_t seed;
    const char *impl;
    const char *outputs_dir;   /* parity --outputs */
    const char *paths[MAX_PATHS];
    int num_paths;
} report_options;

static void usage(FILE *out) {
    fprintf(out,
            "usage: kvcmp report precision [--out DIR] [--cases N] [--seed S] [--impl ref|opt|LIB.so]\n"
            "       kvcmp report parity [--out DIR] PATH... [--outputs OUTPUTS]\n"
            "       kvcmp report mutants --limit SECONDS [--json FILE] [--junit FILE] DIR   (see --help there)\n"
            "       kvcmp report [--out DIR] [--cases N] [--seed S] [PATH...]   (both)\n"
            "  precision: the reference against an MPFR oracle on a seeded corpus,\n"
            "             N cases per stage variant and value family (default %d);\n"
            "             --impl: a candidate's stored values against exact math instead\n"
            "             (its intermediates are not visible; stages it lacks are left out).\n"
            "  parity:    upstream cases (a case directory or a tree) against the reference;\n"
            "             default fixtures/vllm-cases (run from the repository root).\n"
            "             --outputs OUTPUTS: the other side is an outside run's outputs instead of\n"
            "             the cases' NAME.out, read as kvcmp replay --outputs reads them\n"
            "             (OUTPUTS/CASE/NAME.npy and OUTPUTS/CASE/status.json).\n"
            "  Writes DIR/precision.{md,html,json} and DIR/parity.{md,html,json} (DIR default: reports).\n",
            DEFAULT_CASES_PER_FAMILY);
}

/* which: 1 precision (no paths), 2 parity or 0 both. */
static int parse(int which, int argc, char **argv, report_options *o) {
    *o = (report_options){.out_dir = "reports", .cases_per_family = DEFAULT_CASES_PER_FAMILY, .seed = DEFAULT_SEED, .impl = "ref"};
    const kvc_option options[] = {
        {"out", KVC_OPT_STRING, .target = &o->out_dir},
        {"cases", KVC_OPT_INT, .target = &o->cases_per_family, .min = 1, .max = 1000},
        {"seed", KVC_OPT_UINT64, .target = &o->seed},
        {"impl", KVC_OPT_STRING, .target = &o->impl},
        {"outputs", KVC_OPT_STRING, .target = &o->outputs_dir},
        {NULL},
    };
    const kvc_command_line line = {which == 1 ? "report precision" : which == 2 ? "report parity" : "report", options, usage,
                                   which == 1 ? 0 : MAX_PATHS};
    return kvc_parse_command_line(&line, argc, argv, (char **)o->paths, &o->num_paths);
}

static int run_precision(const report_options *o) {
    kvc_precision_report report;
    char error[512];
    const kvc_backend *backend = kvc_backend_by_name(o->impl, error, sizeof error);
    if (!backend) { fprintf(stderr, "kvcmp report precision: %s (give --impl ref, opt or a path to a candidate .so)\n", error); return 2; }
    fprintf(stderr, "kvcmp report precision: %s, seed %llu, %d case(s) per variant and family\n", o->impl, (unsigned long long)o->seed,
            o->cases_per_family);
    int rc = kvc_precision_run_impl(backend, o->impl, o->seed, o->cases_per_family, o->out_dir, &report);
    if (rc == 0) rc = kvc_render_precision(&report, o->out_dir);
    kvc_precision_free(&report);
    if (rc == 0) printf("wrote %s/precision.md, %s/precision.html, %s/precision.json\n", o->out_dir, o->out_dir, o->out_dir);
    return rc ? 1 : 0;
}

static int run_parity(const report_options *o) {
    kvc_parity_report report;
    memset(&report, 0, sizeof report);
    const char *paths[MAX_PATHS];
    int n = o->num_paths;
    memcpy(paths, o->paths, sizeof paths);
    if (n == 0) paths[n++] = "fixtures/vllm-cases";   /* the project's copy (fixtures/README.md) */
    int rc = 0;
    for (int i = 0; i < n; i++) rc |= kvc_parity_add_outside_path(&report, paths[i], o->outputs_dir) != 0;
    if (rc == 0) rc = kvc_render_parity(&report, o->out_dir);
    if (rc == 0)
        printf("parity: %d cases, %d identical to the reference; wrote %s/parity.md, %s/parity.html, %s/parity.json\n", report.cases,
               report.cases_identical, o->out_dir, o->out_dir, o->out_dir);
    kvc_parity_free(&report);
    return rc ? 1 : 0;
}

int kvc_cmd_report(int argc, char **argv) {
    int which = 0;   /* 0 both, 1 precision, 2 parity */
    if (argc > 0 && strcmp(argv[0], "mutants") == 0) return kvc_report_mutants(argc - 1, argv + 1);
    if (argc > 0 && strcmp(argv[0], "precision") == 0) which = 1;
    else if (argc > 0 && strcmp(argv[0], "parity") == 0) which = 2;
    report_options o;
    int status = parse(which, argc - (which ? 1 : 0), argv + (which ? 1 : 0), &o);
    if (status) return status == KVC_OPTIONS_HELP ? 0 : status;
    if (which == 2 && strcmp(o.impl, "ref") != 0) {
        fprintf(stderr, "kvcmp report parity: --impl is an option of report precision (parity always runs the reference)\n");
        return 2;
    }
    if (o.outputs_dir) {
        struct stat st;
        if (which == 1) {
            fprintf(stderr, "kvcmp report precision: --outputs is an option of report parity (an outside run's outputs)\n");
            return 2;
        }
        if (stat(o.outputs_dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
            fprintf(stderr, "kvcmp report parity: --outputs %s is not a directory (give the folder holding CASE/NAME.npy and "
                    "CASE/status.json)\n", o.outputs_dir);
            return 2;
        }
    }
    mkdir(o.out_dir, 0777);
    int rc = 0;
    if (which != 2 && (rc = run_precision(&o)) == 2) return 2;
    if (which != 1) rc |= run_parity(&o);
    return rc;
}
