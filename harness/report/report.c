/* kvcmp report: the command line of the precision and parity reports. */
#include "harness/report/report.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/commands.h"

#define DEFAULT_CASES_PER_FAMILY 2
#define DEFAULT_SEED 20261129u

typedef struct {
    const char *out_dir;
    int cases_per_family;
    uint64_t seed;
    const char *paths[8];
    int num_paths;
} report_options;

static void usage(void) {
    fprintf(stderr,
            "usage: kvcmp report precision [--out DIR] [--cases N] [--seed S]\n"
            "       kvcmp report parity [--out DIR] PATH...\n"
            "       kvcmp report [--out DIR] [--cases N] [--seed S] [PATH...]   (both)\n"
            "  precision: the reference against an MPFR oracle on a seeded corpus,\n"
            "             N cases per stage variant and value family (default %d).\n"
            "  parity:    upstream cases (a case directory or a tree) against the reference;\n"
            "             default $KVCMP_SHARED/vllm-cases, else ../shared/vllm-cases.\n"
            "  Writes DIR/precision.{md,html,json} and DIR/parity.{md,html,json} (DIR default: reports).\n",
            DEFAULT_CASES_PER_FAMILY);
}

static int parse(int argc, char **argv, report_options *o) {
    *o = (report_options){.out_dir = "reports", .cases_per_family = DEFAULT_CASES_PER_FAMILY, .seed = DEFAULT_SEED};
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--out") == 0 && i + 1 < argc) o->out_dir = argv[++i];
        else if (strcmp(argv[i], "--cases") == 0 && i + 1 < argc) o->cases_per_family = atoi(argv[++i]);
        else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc) o->seed = strtoull(argv[++i], NULL, 0);
        else if (argv[i][0] == '-') return -1;
        else if (o->num_paths < 8) o->paths[o->num_paths++] = argv[i];
        else return -1;
    }
    return o->cases_per_family >= 1 ? 0 : -1;
}

static int run_precision(const report_options *o) {
    kvc_precision_report report;
    fprintf(stderr, "kvcmp report precision: seed %llu, %d case(s) per variant and family\n", (unsigned long long)o->seed,
            o->cases_per_family);
    int rc = kvc_precision_run(o->seed, o->cases_per_family, o->out_dir, &report);
    if (rc == 0) rc = kvc_render_precision(&report, o->out_dir);
    kvc_precision_free(&report);
    if (rc == 0) printf("wrote %s/precision.md, %s/precision.html, %s/precision.json\n", o->out_dir, o->out_dir, o->out_dir);
    return rc ? 1 : 0;
}

static int run_parity(const report_options *o) {
    kvc_parity_report report;
    memset(&report, 0, sizeof report);
    char default_path[512];
    const char *paths[8];
    int n = o->num_paths;
    memcpy(paths, o->paths, sizeof paths);
    if (n == 0) {
        const char *shared = getenv("KVCMP_SHARED");
        snprintf(default_path, sizeof default_path, "%s/vllm-cases", shared && shared[0] ? shared : "../shared");
        paths[n++] = default_path;
    }
    int rc = 0;
    for (int i = 0; i < n; i++) rc |= kvc_parity_add_path(&report, paths[i]) != 0;
    if (rc == 0) rc = kvc_render_parity(&report, o->out_dir);
    if (rc == 0)
        printf("parity: %d cases, %d identical to the reference; wrote %s/parity.md, %s/parity.html, %s/parity.json\n", report.cases,
               report.cases_identical, o->out_dir, o->out_dir, o->out_dir);
    kvc_parity_free(&report);
    return rc ? 1 : 0;
}

int kvc_cmd_report(int argc, char **argv) {
    int which = 0;   /* 0 both, 1 precision, 2 parity */
    if (argc > 0 && strcmp(argv[0], "precision") == 0) which = 1;
    else if (argc > 0 && strcmp(argv[0], "parity") == 0) which = 2;
    else if (argc > 0 && (strcmp(argv[0], "--help") == 0 || strcmp(argv[0], "-h") == 0)) { usage(); return 0; }
    report_options o;
    if (parse(argc - (which ? 1 : 0), argv + (which ? 1 : 0), &o)) { usage(); return 2; }
    if (which == 1 && o.num_paths) { usage(); return 2; }
    mkdir(o.out_dir, 0777);
    int rc = 0;
    if (which != 2) rc |= run_precision(&o);
    if (which != 1) rc |= run_parity(&o);
    return rc;
}
