/* The generator reaches both sides of each bound of SPEC.md 8 a case can
 * hold (harness/fuzz/edges.c), and the reference agrees with the side:
 * cases at an accepted bound run, cases just past one are refused. */
#include <criterion/criterion.h>

#include "harness/fuzz/dimensions.h"
#include "kvcmp/generate.h"
#include "kvcmp/run.h"

/* The first `cases` cases of seed 1 (valid ones, or every one corrupted):
 * how many hold each edge, and the reference's verdict on the first few
 * of each. */
static void reach_edges(int invalid_per_mille, int64_t cases, int64_t counts[KVC_EDGE_COUNT], int refused_side) {
    kvc_gen_config config = {.seed = 1, .invalid_per_mille = invalid_per_mille};
    int checked[KVC_EDGE_COUNT] = {0};
    for (int64_t i = 0; i < cases; i++) {
        kvc_gen_case g;
        kvc_gen_make(&config, i, &g);
        for (int e = 0; e < KVC_EDGE_COUNT && !g.history; e++) {
            if (!(g.edges >> e & 1u)) continue;
            counts[e]++;
            if (kvc_edge_refused(e) != refused_side || checked[e] >= 3) continue;
            checked[e]++;
            kvc_run_result r;
            int rc = kvc_run_case(&kvc_reference_backend, &g.c, NULL, &r);
            if (refused_side) cr_expect_neq(rc, KVC_OK, "case %lld holds %s, yet the reference ran it (%s)", (long long)i, kvc_edge_name(e), g.c.source);
            else if (!g.invalid[0]) cr_expect_eq(rc, KVC_OK, "case %lld at the accepted bound %s was refused: %s (%s)", (long long)i, kvc_edge_name(e),
                                                   r.error.message, g.c.source);
            kvc_run_result_free(&r);
        }
        kvc_gen_free(&g);
    }
}

Test(edges, every_bound_reached_on_both_sides_at_seed_1, .timeout = 240) {
    int64_t valid[KVC_EDGE_COUNT] = {0}, corrupted[KVC_EDGE_COUNT] = {0};
    reach_edges(0, 6000, valid, 0);
    reach_edges(1000, 3000, corrupted, 1);
    for (int e = 0; e < KVC_EDGE_COUNT; e++) {
        if (kvc_edge_refused(e)) cr_expect_gt(corrupted[e], 0, "no corrupted case of seed 1 lies just past: %s", kvc_edge_name(e));
        else cr_expect_gt(valid[e], 0, "no valid case of seed 1 holds the bound: %s", kvc_edge_name(e));
        if (kvc_edge_refused(e)) cr_expect_eq(valid[e], 0, "a case generated valid holds the refused bound %s", kvc_edge_name(e));
    }
    /* The two the hidden bugs needed, in a good share of their stages. */
    cr_expect_gt(valid[1], 30, "position 2^40 in only %lld cases", (long long)valid[1]);
    cr_expect_gt(valid[3], 100, "unset token_to_req in only %lld cases", (long long)valid[3]);
}

Test(edges, names_and_sides) {
    cr_expect_str_eq(kvc_edge_name(KVC_EDGE_COUNT), "?");
    cr_expect_str_eq(kvc_edge_name(1), "position 2^40");
    cr_expect_str_eq(kvc_edge_name(2), "position 2^40+1");
    cr_expect_eq(kvc_edge_refused(1), 0);
    cr_expect_eq(kvc_edge_refused(2), 1);
    cr_expect_eq(kvc_edge_refused(-1), 0);
}

/* The coverage lists both sides of every bound, text and JSON. */
Test(edges, coverage_lists_both_sides_of_each_bound) {
    kvc_coverage_tally *t = calloc(1, sizeof *t);
    kvc_case_coverage a = {.max_position = (int64_t)1 << 40, .edges = KVC_EDGE_POSITION_AT | KVC_EDGE_UNSET_TOKEN_TO_REQ};
    kvc_case_coverage b = {.max_position = ((int64_t)1 << 40) + 1, .edges = KVC_EDGE_POSITION_PAST, .rule = "position-2^40+1", .rejected = 1};
    kvc_coverage_add(t, &a);
    kvc_coverage_add(t, &b);
    char *text = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&text, &size);
    kvc_coverage_print(f, t);
    fclose(f);
    cr_expect(strstr(text, "bounds, accepted side  position 2^40-1: 0 (0.0%) position 2^40: 1 (50.0%) unset token_to_req: 1 (50.0%)") != NULL,
              "%s", text);
    cr_expect(strstr(text, "bounds, refused side   position 2^40+1: 1 (50.0%) eps 1+2^-23: 0 (0.0%)") != NULL, "%s", text);
    cr_expect(strstr(text, "position-2^40+1: 1/1") != NULL, "%s", text);
    free(text);
    cJSON *j = kvc_coverage_json(t);
    cJSON *at = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "bounds"), "position 2^40");
    cr_assert_not_null(at);
    cr_expect_eq(cJSON_GetObjectItem(at, "cases")->valueint, 1);
    cr_expect(cJSON_IsFalse(cJSON_GetObjectItem(at, "refused")));
    cr_expect(cJSON_IsTrue(cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "bounds"), "position 2^40+1"), "refused")));
    cJSON_Delete(j);
    free(t);
}
