/* kvcmp gen: the fuzzer's generated cases written out as case
 * directories, for an implementation that runs elsewhere (a GPU kernel
 * driven from Python, another machine).  Case i of seed S is the very
 * case `kvcmp fuzz --seed S` runs as its case i (same --stage, --family
 * and --invalid-rate): both call kvc_gen_make with the same config, so a
 * failure found on either side replays on the other.  Each case gets the
 * reference's outputs as NAME.out.npy; a case the reference rejects is
 * saved without them, as an input that must be rejected. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/commands.h"
#include "harness/fuzz/run.h"
#include "kvcmp/generate.h"

typedef struct {
    uint64_t seed;
    int64_t cases;           /* -1: for `seconds` */
    double seconds;
    int shard_index, shard_count;
    const char *stage_list, *family_list, *out_dir;
    kvc_gen_config gen;
} gen_options;

static void usage(void) {
    fprintf(stderr,
            "usage: kvcmp gen --seed S (--cases N | --seconds T) --out DIR [--stage LIST] [--family LIST]\n"
            "                 [--invalid-rate PER_MILLE] [--shard I/N]\n"
            "  Writes the fuzzer's cases 0..N-1 of seed S (those of shard I of N) as case directories\n"
            "  DIR/fuzz-sS-cI-VARIANT with the reference's outputs as NAME.out.npy; a case the reference\n"
            "  rejects has no .out files (it must be rejected). Case I is the case `kvcmp fuzz --seed S`\n"
            "  runs as case I with the same --stage, --family and --invalid-rate (default %d per mille).\n"
            "  Multi-step history variants are skipped (kvcmp fuzz runs them). See kvcmp fuzz --list.\n",
            KVC_GEN_DEFAULT_INVALID_PER_MILLE);
}

static int bad_value(const char *option, const char *value, const char *want) {
    fprintf(stderr, "kvcmp gen: %s '%s' is not %s (see kvcmp gen --help)\n", option, value, want);
    return 2;
}

/* The whole text is one integer in [min, max]. */
static int parse_integer(const char *text, long long min, long long max, long long *out) {
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (errno || end == text || *end || v < min || v > max) return -1;
    *out = v;
    return 0;
}

static int parse_value(int option, const char *value, gen_options *o) {
    long long v;
    char *end;
    switch (option) {
    case 's':
        errno = 0;
        o->seed = strtoull(value, &end, 0);
        if (errno || end == value || *end || value[0] == '-') return bad_value("--seed", value, "a non-negative integer");
        return 0;
    case 'n':
        if (parse_integer(value, 0, INT64_MAX, &v)) return bad_value("--cases", value, "a non-negative integer");
        o->cases = v;
        return 0;
    case 't':
        errno = 0;
        o->seconds = strtod(value, &end);
        if (errno || end == value || *end || !isfinite(o->seconds) || o->seconds <= 0)
            return bad_value("--seconds", value, "a positive number of seconds");
        o->cases = -1;
        return 0;
    case 'i':
        if (parse_integer(value, 0, 1000, &v)) return bad_value("--invalid-rate", value, "an integer per mille in [0, 1000]");
        o->gen.invalid_per_mille = (int)v;
        return 0;
    case 'd': {
        int n = 0;
        if (sscanf(value, "%d/%d%n", &o->shard_index, &o->shard_count, &n) != 2 || value[n] || o->shard_count < 1 || o->shard_index < 0 ||
            o->shard_index >= o->shard_count)
            return bad_value("--shard", value, "I/N with 0 <= I < N, e.g. 0/4");
        return 0;
    }
    case 'S': o->stage_list = value; return 0;
    case 'f': o->family_list = value; return 0;
    default: o->out_dir = value; return 0;
    }
}

static int parse_options(int argc, char **argv, gen_options *o) {
    static const struct option long_options[] = {
        {"seed", required_argument, NULL, 's'},   {"cases", required_argument, NULL, 'n'},
        {"seconds", required_argument, NULL, 't'}, {"stage", required_argument, NULL, 'S'},
        {"family", required_argument, NULL, 'f'},  {"invalid-rate", required_argument, NULL, 'i'},
        {"shard", required_argument, NULL, 'd'},   {"out", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},          {NULL, 0, NULL, 0},
    };
    *o = (gen_options){.seed = 1, .cases = -2, .shard_count = 1, .gen.invalid_per_mille = KVC_GEN_DEFAULT_INVALID_PER_MILLE};
    /* getopt_long wants a program name first; argv starts at the options. */
    char **args = calloc((size_t)argc + 2, sizeof *args);
    if (!args) { fprintf(stderr, "kvcmp gen: out of memory\n"); return 2; }
    args[0] = "kvcmp gen";
    memcpy(args + 1, argv, (size_t)argc * sizeof *argv);
    int status = 0, option;
    optind = 0;
    opterr = 0;
    while (status == 0 && (option = getopt_long(argc + 1, args, ":h", long_options, NULL)) != -1) {
        if (option == 'h') { usage(); status = 1; }
        else if (option == '?') { fprintf(stderr, "kvcmp gen: unknown option %s (see kvcmp gen --help)\n", args[optind - 1]); status = 2; }
        else if (option == ':') { fprintf(stderr, "kvcmp gen: %s needs a value (see kvcmp gen --help)\n", args[optind - 1]); status = 2; }
        else status = parse_value(option, optarg, o);
    }
    if (status == 0 && optind < argc + 1) {
        fprintf(stderr, "kvcmp gen: unexpected argument '%s' (kvcmp gen takes options only; see kvcmp gen --help)\n", args[optind]);
        status = 2;
    }
    free(args);
    if (status) return status;
    if (o->cases == -2) { fprintf(stderr, "kvcmp gen: say how many cases, --cases N or --seconds T (see kvcmp gen --help)\n"); return 2; }
    if (!o->out_dir || !o->out_dir[0]) { fprintf(stderr, "kvcmp gen: --out DIR is required (where the case directories go)\n"); return 2; }
    char bad[128];
    if (o->stage_list && !(o->gen.variant_mask = kvc_variant_mask(o->stage_list, bad, sizeof bad))) {
        fprintf(stderr, "kvcmp gen: --stage item '%s' matches no variant (see kvcmp fuzz --list)\n", bad);
        return 2;
    }
    if (o->family_list && !(o->gen.family_mask = kvc_family_mask(o->family_list, bad, sizeof bad))) {
        fprintf(stderr, "kvcmp gen: --family item '%s' matches no value family (see kvcmp fuzz --list)\n", bad);
        return 2;
    }
    o->gen.seed = o->seed;
    return 0;
}

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct {
    int64_t written, must_reject, history;
} gen_tally;

/* Case `index` to out_dir; -1 when it cannot be written. */
static int write_case(const gen_options *o, int64_t index, gen_tally *t) {
    kvc_gen_case g;
    kvc_gen_make(&o->gen, index, &g);
    if (g.history) { t->history++; kvc_gen_free(&g); return 0; }
    int rejected = kvc_fuzz_add_expected(&kvc_reference_backend, &g.c) != 0;
    char meta[600];
    snprintf(meta, sizeof meta,
             "{\"generator\":\"kvcmp gen\",\"seed\":%llu,\"case\":%lld,\"variant\":\"%s\",\"family\":\"%s\",\"invalid\":\"%s\","
             "\"must_reject\":%s}",
             (unsigned long long)o->seed, (long long)index, kvc_variant(g.variant)->name, kvc_family_name(g.family), g.invalid,
             rejected ? "true" : "false");
    g.c.meta_json = strdup(meta);
    char name[128], dir[4096], error[512];
    kvc_gen_case_name(o->seed, index, g.variant, name, sizeof name);
    snprintf(dir, sizeof dir, "%s/%s", o->out_dir, name);
    int rc = kvc_case_save(dir, &g.c, error, sizeof error);
    kvc_gen_free(&g);
    if (rc) { fprintf(stderr, "kvcmp gen: %s (check that --out %s is writable)\n", error, o->out_dir); return -1; }
    t->written++;
    t->must_reject += rejected;
    return 0;
}

int kvc_cmd_gen(int argc, char **argv) {
    gen_options o;
    int rc = parse_options(argc, argv, &o);
    if (rc) return rc == 1 ? 0 : rc;
    gen_tally t = {0};
    double deadline = o.cases < 0 ? now_seconds() + o.seconds : 0;
    for (int64_t k = 0;; k++) {
        int64_t index = o.shard_index + (int64_t)o.shard_count * k;
        if ((o.cases >= 0 && index >= o.cases) || (deadline && now_seconds() > deadline)) break;
        if (write_case(&o, index, &t)) return 1;
    }
    printf("gen: %lld cases written to %s (%lld must be rejected: no .out files), %lld multi-step history cases skipped "
           "(kvcmp fuzz --seed %llu runs them)\n",
           (long long)t.written, o.out_dir, (long long)t.must_reject, (long long)t.history, (unsigned long long)o.seed);
    printf("gen: run your implementation on each case, write its outputs as OUT/CASE/NAME.npy, then: "
           "build/kvcmp replay --outputs OUT %s\n", o.out_dir);
    return 0;
}
