/* The optimized backend's threads under ThreadSanitizer (make race-check):
 * generated cases, each run by every optimized path this CPU has at team
 * sizes 2, 3, 4 and 8 (more threads than a small machine has cores, so
 * threads are preempted mid-phase) under both team rules, with every
 * allowed thread used however small the call; each run is compared with
 * the reference's bytes.  ThreadSanitizer (with LLVM's Archer tool for
 * OpenMP's own synchronisation) reports races on the scalar and memcpy
 * accesses (the token checks' tables, copied rows); it does not see
 * 32- and 64-byte vector accesses, so races on the kernels' vector data
 * show through the comparison, under teams larger than the machine's
 * cores, which preempt threads between a stage's phases.  Exit 0 when every run matched and no race was reported (the
 * sanitizer's own exit status otherwise), 1 on a difference, 2 on usage.
 *
 *   race-check [--cases N] [--seed S]                                     */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvcmp/compare.h"
#include "kvcmp/generate.h"
#include "kvcmp/run.h"
#include "optimized/optimized.h"

static const int team_sizes[] = {2, 3, 4, 8};

int main(int argc, char **argv) {
    long long cases = 300;
    unsigned long long seed = 1;
    for (int i = 1; i < argc; i++) {
        if (i + 1 < argc && strcmp(argv[i], "--cases") == 0) cases = atoll(argv[++i]);
        else if (i + 1 < argc && strcmp(argv[i], "--seed") == 0) seed = strtoull(argv[++i], NULL, 0);
        else {
            fprintf(stderr, "usage: race-check [--cases N] [--seed S]\n");
            return 2;
        }
    }
    const kvc_backend *paths[2];
    int num_paths = 0;
    const char *isas[] = {"avx512", "avx2"};
    for (int i = 0; i < 2; i++) {
        char why[256];
        const kvc_backend *b = kvc_optimized_backend_for(isas[i], why, sizeof why);
        if (b) paths[num_paths++] = b;
        else printf("race-check: SKIPPED the %s path: %s\n", isas[i], why);
    }
    if (!num_paths) {
        fprintf(stderr, "race-check: no optimized path runs on this CPU: nothing to check\n");
        return 1;
    }
    kvc_optimized_set_thread_work(0);
    kvc_gen_config config = {.seed = seed, .invalid_per_mille = KVC_GEN_DEFAULT_INVALID_PER_MILLE};
    long long runs = 0, differences = 0;
    for (long long index = 0; index < cases; index++) {
        kvc_gen_case g;
        if (kvc_gen_make(&config, index, &g)) continue;
        if (g.history) { kvc_gen_free(&g); continue; }
        kvc_run_options options = {.page_padding = 64, .canary = 0xA5};
        kvc_run_result expected;
        omp_set_num_threads(1);
        int expected_status = kvc_run_case(&kvc_reference_backend, &g.c, &options, &expected);
        for (int p = 0; p < num_paths; p++)
            for (int spinning = 0; spinning < 2; spinning++)
                for (size_t t = 0; t < sizeof team_sizes / sizeof *team_sizes; t++) {
                    kvc_optimized_set_team_rule(spinning);
                    omp_set_num_threads(team_sizes[t]);
                    kvc_run_result got;
                    int status = kvc_run_case(paths[p], &g.c, &options, &got);
                    kvc_compare_report report;
                    memset(&report, 0, sizeof report);
                    int differs = status != expected_status;
                    if (!differs && status == 0) {
                        kvc_compare_results(&g.c, &expected, &got, KVC_POLICY_EXACT, &report);
                        differs = kvc_report_failed(&report);
                    }
                    if (differs) {
                        char summary[600] = "";
                        if (status == expected_status) kvc_report_summary(&report, summary, sizeof summary);
                        printf("race-check: DIFFERS case %lld (%s) on %s, %d threads, %s team rule: status %d (reference %d) %s\n"
                               "  __REPRO: kvcmp fuzz --candidate opt-%s --seed %llu --only %lld --threads %d\n",
                               index, kvc_variant(g.variant)->name, paths[p]->name, team_sizes[t], spinning ? "spinning" : "sleeping",
                               status, expected_status, summary, kvc_optimized_isa(paths[p]), seed, index, team_sizes[t]);
                        differences++;
                    }
                    runs++;
                    kvc_run_result_free(&got);
                }
        kvc_run_result_free(&expected);
        kvc_gen_free(&g);
    }
    printf("race-check: %lld cases, %lld runs (%d path%s x 2 team rules x 4 team sizes): %lld difference%s\n", cases, runs, num_paths,
           num_paths == 1 ? "" : "s", differences, differences == 1 ? "" : "s");
    return differences ? 1 : 0;
}
