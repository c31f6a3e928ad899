/* kvcmp gen: the fuzzer's generated cases written out as case
 * directories, for an implementation that runs elsewhere (a GPU kernel
 * driven from Python, another machine).  Case i of seed S is the very
 * case `kvcmp fuzz --seed S` runs as its case i (same --stage, --family
 * and --invalid-rate): both call kvc_gen_make with the same config, so a
 * failure found on either side replays on the other.  Each case gets the
 * reference's outputs as NAME.out.npy; a case the reference rejects is
 * saved without them, as an input that must be rejected.  Each case is
 * written aside and renamed into place by kvc_case_save: a kill leaves no
 * torn case, and a case of the same name from an earlier run is replaced
 * whole (stale NAME.out.npy or NAME.got.npy files would judge the new
 * case by the old one's results).  Options are
 * parsed by harness/options (strict numbers, errors name the option). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/commands.h"
#include "harness/fuzz/run.h"
#include "harness/options/options.h"
#include "kvcmp/generate.h"

typedef struct {
    uint64_t seed;
    int64_t cases;           /* -1: for `seconds` */
    double seconds;
    int shard_index, shard_count;
    const char *stage_list, *family_list, *out_dir;
    kvc_gen_config gen;
} gen_options;

static void usage(FILE *out) {
    fprintf(out,
            "usage: kvcmp gen --seed S (--cases N | --seconds T) --out DIR [--stage LIST] [--family LIST]\n"
            "                 [--invalid-rate PER_MILLE] [--geometry-pool N] [--shard I/N]\n"
            "  Writes the fuzzer's cases 0..N-1 of seed S (those of shard I of N) as case directories\n"
            "  DIR/fuzz-sS-cI-VARIANT with the reference's outputs as NAME.out.npy; a case the reference\n"
            "  rejects has no .out files (it must be rejected). Case I is the case `kvcmp fuzz --seed S`\n"
            "  runs as case I with the same --stage, --family, --invalid-rate (default %d per mille) and\n"
            "  --geometry-pool (default 0; a campaign of a py: candidate uses 4).\n"
            "  Multi-step history variants are skipped (kvcmp fuzz runs them). See kvcmp fuzz --list.\n"
            "  Each case is written aside and renamed into place; an existing case directory of the same\n"
            "  name is replaced whole (no file of the old case stays), anything else there is refused.\n",
            KVC_GEN_DEFAULT_INVALID_PER_MILLE);
}

static int parse_options(int argc, char **argv, gen_options *o) {
    *o = (gen_options){.seed = 1, .cases = -1, .gen.invalid_per_mille = KVC_GEN_DEFAULT_INVALID_PER_MILLE};
    int shard[2] = {0, 1}, cases_given = 0, seconds_given = 0;
    const kvc_option options[] = {
        {"seed", KVC_OPT_UINT64, .target = &o->seed},
        {"cases", KVC_OPT_INT64, .target = &o->cases, .min = 0, .max = INT64_MAX, .given = &cases_given},
        {"seconds", KVC_OPT_DOUBLE, .target = &o->seconds, .low = 0.001, .high = 1e7, .given = &seconds_given},
        {"invalid-rate", KVC_OPT_INT, .target = &o->gen.invalid_per_mille, .min = 0, .max = 1000},
        {"geometry-pool", KVC_OPT_INT, .target = &o->gen.geometry_pool, .min = 0, .max = 64},
        {"stage", KVC_OPT_STRING, .target = &o->stage_list},
        {"family", KVC_OPT_STRING, .target = &o->family_list},
        {"shard", KVC_OPT_CUSTOM, .target = shard, .parse = kvc_option_shard},
        {"out", KVC_OPT_STRING, .target = &o->out_dir},
        {NULL},
    };
    const kvc_command_line line = {"gen", options, usage, 0};
    int status = kvc_parse_command_line(&line, argc, argv, NULL, &(int){0});
    if (status) return status;
    if (!cases_given && !seconds_given) return kvc_usage_error(&line, "say how many cases: --cases N or --seconds T");
    if (seconds_given > cases_given) o->cases = -1;   /* the later of the two counts */
    if (!o->out_dir || !o->out_dir[0]) return kvc_usage_error(&line, "--out DIR is required (where the case directories go)");
    o->shard_index = shard[0];
    o->shard_count = shard[1];
    char bad[128];
    if (o->stage_list && !(o->gen.variant_mask = kvc_variant_mask(o->stage_list, bad, sizeof bad)))
        return kvc_usage_error(&line, "--stage item '%s' matches no variant (kvcmp fuzz --list names them)", bad);
    if (o->family_list && !(o->gen.family_mask = kvc_family_mask(o->family_list, bad, sizeof bad)))
        return kvc_usage_error(&line, "--family item '%s' matches no value family (kvcmp fuzz --list names them)", bad);
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
    if (rc) return rc == KVC_OPTIONS_HELP ? 0 : rc;
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
    char quoted[4 * 4096 + 8];
    if (kvc_shell_quote(o.out_dir, quoted, sizeof quoted) >= sizeof quoted) snprintf(quoted, sizeof quoted, "CASES");
    printf("gen: run your implementation on each case, write its outputs as OUT/CASE/NAME.npy, then: "
           "%s replay --outputs OUT -- %s\n", kvc_invocation(), quoted);
    return 0;
}
