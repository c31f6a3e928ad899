/* libFuzzer entry point: the input bytes drive the scenario generator
 * (harness/fuzz/gen.c reads its random draws from them, then from a fixed
 * stream when they run out), so coverage guidance steers variants,
 * families, sizes and metadata.  Each input is one case run through the
 * reference and the optimized backend (or, where the optimized backend
 * cannot run, the reference against itself with 2 threads and page
 * padding) and compared byte for byte; a difference aborts with the
 * classified report.  History inputs run the chunking check.
 *
 * Built by `make libfuzzer` or fuzz/build.sh (OSS-Fuzz style); a plain
 * driver (fuzz/replay_corpus.c) replays inputs without libFuzzer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvcmp/backends.h"
#include "kvcmp/generate.h"
#include "harness/fuzz/run.h"
#include "harness/fuzz/history.h"

static kvc_fuzz_target target;

static void init_once(void) {
    if (target.reference) return;
    char error[512];
    target.reference = &kvc_reference_backend;
    target.candidate = kvc_backend_by_name("opt", error, sizeof error);
    target.threads = 2;
    target.metamorphic_per_mille = 100;
    if (!target.candidate) {
        fprintf(stderr, "kvcmp libfuzzer: optimized backend unavailable (%s); fuzzing the reference against itself\n", error);
        target.candidate = &kvc_reference_backend;
    }
}

static void check_history(kvc_rng *r, const kvc_gen_case *g) {
    kvc_history h;
    kvc_history_generate(r, kvc_variant(g->variant)->head_dim ? 41 : 4, 0, 0,
                         g->family == KVC_FAM_ROUNDING_PROBE ? KVC_FAM_NORMAL : g->family, &h);
    kvc_history_result expected, got;
    kvc_error err = {0};
    int rc = kvc_history_feed(target.reference, &h, KVC_FEED_PREFILL, 1, &expected, &err);
    rc |= kvc_history_feed(target.candidate, &h, KVC_FEED_SPECULATIVE, 1, &got, &err);
    char detail[600];
    if (rc || kvc_history_compare(&h, &expected, &got, detail, sizeof detail)) {
        fprintf(stderr, "kvcmp libfuzzer: chunking invariance broken: %s\n", rc ? err.message : detail);
        abort();
    }
    kvc_history_result_free(&expected);
    kvc_history_result_free(&got);
    kvc_history_free(&h);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    init_once();
    kvc_rng r;
    kvc_rng_seed(&r, 0x6B76636D70ull, size);
    r.bytes = data;
    r.bytes_left = size;
    kvc_gen_config config = {.seed = 0, .invalid_per_mille = 50};
    kvc_gen_case g;
    kvc_gen_make_from(&config, &r, &g);
    if (g.history) {
        check_history(&r, &g);
    } else {
        kvc_fuzz_verdict verdict;
        if (kvc_fuzz_check_case(&target, &g.c, 1, &verdict) == KVC_FUZZ_FAIL) {
            fprintf(stderr, "kvcmp libfuzzer: %s on %s (family %s): %s\n", verdict.kind, kvc_variant(g.variant)->name,
                    kvc_family_name(g.family), verdict.detail);
            abort();
        }
    }
    kvc_gen_free(&g);
    return 0;
}
