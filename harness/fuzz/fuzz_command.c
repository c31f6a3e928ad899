/* `kvcmp fuzz`: its command line into kvc_campaign_options, then the
 * campaign (harness/fuzz/fuzz.c, include/kvcmp/campaign.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/commands.h"
#include "common/atomic_file.h"
#include "harness/fuzz/coverage.h"
#include "harness/fuzz/dimensions.h"
#include "harness/fuzz/supervise.h"
#include "harness/options/options.h"
#include "kvcmp/deviations.h"
#include "kvcmp/campaign.h"
#include "kvcmp/generate.h"

#define MAX_JOBS 16

static void usage(FILE *out) {
    fprintf(out,
            "usage: kvcmp fuzz [--seed S] [--cases N | --seconds T] [--stage LIST] [--threads K] [--jobs J]\n"
            "                  [--shard I/N] [--out DIR] [--save DIR] [--policy exact|vllm]\n"
            "                  [--candidate opt|ref|LIB.so|py:FILE.py:FUNCTION|py:MODULE:FUNCTION] [--python PATH]\n"
            "                  [--family LIST] [--only I] [--max-failures N] [--max-failures-per-signature N]\n"
            "                  [--invalid-rate PER_MILLE] [--metamorphic-rate PER_MILLE] [--geometry-pool N]\n"
            "                  [--shrink-seconds T] [--timeout SECONDS] [--startup-timeout SECONDS]\n"
            "                  [--compile-timeout SECONDS] [--rss-limit-mb MB] [--json FILE]\n"
            "                  [--junit FILE] [--regressions DIR] [--regressions-skip LIST] [--quiet] [--list]\n"
            "  Runs generated cases through the reference and the candidate and compares every byte.\n"
            "  Defaults: --seed 1 --seconds 60 --candidate opt (else the reference against itself),\n"
            "  --out kvcmp-out: failing cases under OUT/failures/seedS-TIME-PID (--save DIR elsewhere),\n"
            "  the summary in OUT/fuzz-summary.json (--json FILE elsewhere, --json '' none);\n"
            "  --jobs = cores (at most %d), threads drawn per case (1-8) unless --threads K.\n"
            "  Of --cases and --seconds the one given last counts.  --regressions DIR: after the\n"
            "  campaign, replay your kept cases (a tree of case directories) through the candidate;\n"
            "  an entry of it that is not a case fails the run unless --regressions-skip LIST names it\n"
            "  (kvcmp replay --skip).\n"
            "  --stage takes variant name prefixes (see --list), e.g. v4.compress,v41.forward, or\n"
            "  offered: every variant of the stages the candidate offers (all cases go to them).\n"
            "  A Python candidate (py:FILE.py:FUNCTION, FUNCTION(case) -> outputs, see\n"
            "  python/kvcmp/__init__.py) runs in a worker interpreter: --python PATH, else\n"
            "  $KVCMP_PYTHON, else python3; it needs numpy and the kvcmp package.  Its exceptions,\n"
            "  crashes and lost devices (sticky CUDA errors) each fail one case with a signature of\n"
            "  their own, and a fresh worker runs the next case.\n"
            "  Each failure gets a signature (stage, check, regions, cause class); --max-failures N\n"
            "  (default 10) stops the campaign once N distinct root causes are in (signatures a shared\n"
            "  deviation explains count once; unexplained ones once per stage and place where the\n"
            "  first wrong value arises); --max-failures-per-\n"
            "  signature N (default 3) prints, shrinks and saves the first N failures of each.\n"
            "  Each shrunk case is diagnosed: the deviations of the catalogue (--list), alone or up\n"
            "  to 4 at once, whose outputs equal the candidate's bytes explain it (\"explained by:\n"
            "  NAME (SPEC place)\"), and failures explained by a shared deviation are one signature.\n"
            "  --geometry-pool N (default 4 for a py: candidate, else 0 = off) draws every size a kernel\n"
            "  could specialise on from N values fixed per campaign: page rows and padding (a slot of N\n"
            "  per case), block-table columns, pages, kv and cos_sin rows (a size tier of N, spare rows\n"
            "  unused); token and request counts stay free. A JIT (Triton constexprs, torch.compile)\n"
            "  then compiles a few times, not per case (the summary counts the geometries per stage);\n"
            "  it trades coverage for speed: run without it (--geometry-pool 0) nightly.\n"
            "  A py: candidate's workers compile Triton kernels into OUT/triton-cache (unless\n"
            "  TRITON_CACHE_DIR is set), and its __REPRO lines carry TRITON_CACHE_DIR to reuse them.\n"
            "  --junit FILE: JUnit XML for CI, a failed testcase per failure signature (its first case's\n"
            "  difference, its count and __REPRO lines), a passed one per variant without failures, a\n"
            "  skipped one per variant the candidate does not offer.\n"
            "  --timeout S (default %g): a case that takes longer kills its worker and fails as timeout;\n"
            "  --rss-limit-mb M (default %d): a worker (with its Python interpreter) past it after a case\n"
            "  fails that case as memory.  Either way the case is saved and a new worker carries on.\n"
            "  A py: candidate's worker: its start-up (the interpreter and the candidate's import) may\n"
            "  take --startup-timeout S (default %g; past it the case fails as startup-timeout), and\n"
            "  its first call of each geometry key (sizes and strides, the class of the token count:\n"
            "  what a JIT compiles for) --compile-timeout S (default %g, 0 none) on top of --timeout (past both the case\n"
            "  fails as compile-timeout, not timeout).\n"
            "  SIGHUP/SIGINT/SIGTERM stop the workers, keep the failures found and write the summary marked\n"
            "  interrupted (exit 129/130/143; a second signal stops at once).\n"
            "  The candidate's start-up counts against --seconds.  The summary says why the campaign\n"
            "  stopped (every case ran, --seconds ran out, --max-failures reached, interrupted).\n"
            "  Exit status: 0 no failure, 1 failures, 2 bad options or a candidate that offers no stage,\n"
            "  3 a case or the summary could not be written, 4 no verdict (no case compared, fewer than\n"
            "  asked, or a --stage item whose cases were all skipped).\n",
            MAX_JOBS, KVC_DEFAULT_TIMEOUT_SECONDS, KVC_DEFAULT_RSS_LIMIT_MB, KVC_DEFAULT_STARTUP_TIMEOUT_SECONDS,
            KVC_DEFAULT_COMPILE_TIMEOUT_SECONDS);
}

/* KVC_OPTIONS_HELP after --help or --list, 2 after a bad option. */
static int parse_options(int argc, char **argv, kvc_campaign_options *o, const char **regressions, const char **regressions_skip) {
    int shard[2] = {0, 1}, cases_given = 0, seconds_given = 0, threads_given = 0, list = 0;
    int64_t cases = o->cases;
    const kvc_option options[] = {
        {"seed", KVC_OPT_UINT64, .target = &o->seed},
        {"cases", KVC_OPT_INT64, .target = &cases, .min = 0, .max = INT64_MAX, .given = &cases_given},
        {"seconds", KVC_OPT_DOUBLE, .target = &o->seconds, .low = 0.001, .high = 1e7, .given = &seconds_given},
        {"only", KVC_OPT_INT64, .target = &o->only, .min = 0, .max = INT64_MAX},
        {"threads", KVC_OPT_INT, .target = &o->threads, .min = 1, .max = 1024, .given = &threads_given},
        {"jobs", KVC_OPT_INT, .target = &o->jobs, .min = 1, .max = 1024},
        {"max-failures", KVC_OPT_INT, .target = &o->max_failures, .min = 1, .max = INT32_MAX},
        {"max-failures-per-signature", KVC_OPT_INT, .target = &o->max_per_signature, .min = 1, .max = INT32_MAX},
        {"invalid-rate", KVC_OPT_INT, .target = &o->invalid_per_mille, .min = 0, .max = 1000},
        {"metamorphic-rate", KVC_OPT_INT, .target = &o->metamorphic_per_mille, .min = 0, .max = 1000},
        {"geometry-pool", KVC_OPT_INT, .target = &o->geometry_pool, .min = 0, .max = 64},
        {"shrink-seconds", KVC_OPT_DOUBLE, .target = &o->shrink_seconds, .low = 0, .high = 1e7},
        {"timeout", KVC_OPT_DOUBLE, .target = &o->timeout_seconds, .low = 0.001, .high = 1e7},
        {"startup-timeout", KVC_OPT_DOUBLE, .target = &o->startup_timeout_seconds, .low = 0.001, .high = 1e7},
        {"compile-timeout", KVC_OPT_DOUBLE, .target = &o->compile_timeout_seconds, .low = 0, .high = 1e7},
        {"rss-limit-mb", KVC_OPT_INT64, .target = &o->rss_limit_mb, .min = 1, .max = INT64_C(1) << 30},
        {"out", KVC_OPT_STRING, .target = &o->out_dir},
        {"regressions", KVC_OPT_STRING, .target = regressions},
        {"regressions-skip", KVC_OPT_STRING, .target = regressions_skip},
        {"save", KVC_OPT_STRING, .target = &o->save_dir},
        {"json", KVC_OPT_STRING, .target = &o->json_path},
        {"junit", KVC_OPT_STRING, .target = &o->junit_path},
        {"candidate", KVC_OPT_STRING, .target = &o->candidate},
        {"python", KVC_OPT_STRING, .target = &o->python},
        {"stage", KVC_OPT_STRING, .target = &o->stages},
        {"family", KVC_OPT_STRING, .target = &o->families},
        {"shard", KVC_OPT_CUSTOM, .target = shard, .parse = kvc_option_shard},
        {"policy", KVC_OPT_CUSTOM, .target = &o->policy, .parse = kvc_option_policy},
        {"quiet", KVC_OPT_FLAG, .target = &o->quiet},
        {"list", KVC_OPT_FLAG, .target = &list},
        {NULL},
    };
    const kvc_command_line line = {"fuzz", options, usage, 0};
    int status = kvc_parse_command_line(&line, argc, argv, NULL, &(int){0});
    if (status) return status;
    if (list) {
        printf("variants (--stage):\n");
        for (int v = 0; v < kvc_variant_count(); v++) printf("  %s\n", kvc_variant(v)->name);
        printf("value families (--family):\n");
        for (int f = 0; f < KVC_FAM_COUNT; f++) printf("  %s\n", kvc_family_name(f));
        printf("deviations (what a signature is explained by; --candidate deviation:NAME plants one):\n");
        for (int d = 0; d < kvc_deviation_count(); d++)
            printf("  %-32s %-18s %s\n", kvc_deviation_name(d), kvc_deviation_spec(d), kvc_deviation_description(d));
        return KVC_OPTIONS_HELP;
    }
    char why[4300];
    if (o->json_path && o->json_path[0] && kvc_output_target_refused(o->json_path, why, sizeof why))
        return kvc_usage_error(&line, "--json: %s", why);
    if (o->junit_path && kvc_output_target_refused(o->junit_path, why, sizeof why))
        return kvc_usage_error(&line, "--junit: %s", why);
    o->shard_index = shard[0];
    o->shard_count = shard[1];
    o->cases = seconds_given > cases_given ? -1 : cases;
    if (!threads_given) o->threads = 0;
    if (o->jobs > MAX_JOBS) o->jobs = MAX_JOBS;
    return 0;
}

int kvc_campaign_main(const char *command, int argc, char **argv) {
    kvc_campaign_options o;
    kvc_campaign_options_init(&o);
    if (command) kvc_set_invocation(command);
    o.command = kvc_invocation();
    const char *regressions = NULL, *regressions_skip = NULL;
    int rc = parse_options(argc, argv, &o, &regressions, &regressions_skip);
    if (rc) return rc == KVC_OPTIONS_HELP ? 0 : rc;
    kvc_campaign_summary summary;
    kvc_become_subreaper();
    rc = kvc_campaign_run(&o, &summary);
    kvc_reap_descendants(NULL, 0);
    kvc_campaign_summary_free(&summary);
    if (regressions && (rc == 0 || rc == 1)) {
        /* A user's kept cases, replayed through the same candidate. */
        /* After "--" the folder is a path, whatever its name. */
        char *replay_argv[8];
        int n = 0;
        replay_argv[n++] = "--impl";
        replay_argv[n++] = (char *)(o.candidate ? o.candidate : "opt");
        replay_argv[n++] = "--quiet";
        if (regressions_skip) { replay_argv[n++] = "--skip"; replay_argv[n++] = (char *)regressions_skip; }
        replay_argv[n++] = "--";
        replay_argv[n++] = (char *)regressions;
        replay_argv[n] = NULL;
        printf("fuzz: replaying the regressions in %s\n", regressions);
        fflush(stdout);
        int replayed = kvc_cmd_replay(n, replay_argv);
        if (replayed > rc) rc = replayed;
    }
    kvc_reap_descendants(NULL, 0);
    return rc;
}

/* libgomp's idle threads spin for a while after every parallel region;
 * with a worker per core that steals the other workers' cores.  The wait
 * policy is read once at start-up, so the command re-executes itself
 * with OMP_WAIT_POLICY=passive unless the user chose a policy. */
static void prefer_passive_openmp(char **argv) {
    if (getenv("OMP_WAIT_POLICY")) return;
    setenv("OMP_WAIT_POLICY", "passive", 1);
    kvc_coverage_flush();
    execv("/proc/self/exe", argv - 2);   /* argv is main's argv + 2: "kvcmp fuzz ..." */
}

int kvc_cmd_fuzz(int argc, char **argv) {
    prefer_passive_openmp(argv);
    return kvc_campaign_main(kvc_invocation(), argc, argv);
}
