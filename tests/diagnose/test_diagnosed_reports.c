/* The diagnosis where a failure is reported (include/kvcmp/deviations.h):
 * replay's FAIL lines, outside outputs, the parity report and the
 * campaign's summary.  A deviation's own outputs stand for a candidate
 * with that bug; one flipped byte for a bug no deviation explains. */
#include <sys/stat.h>

#include "tests/cli/cli_support.h"

#include "harness/report/report.h"
#include "kvcmp/campaign.h"
#include "kvcmp/deviations.h"

/* Case `index` of a variant saved under root/name with the reference's
 * outputs as NAME.out, and the outputs of deviation `deviation` (-1:
 * the contract) as NAME.got, one byte flipped when flip. */
static void save_with_outputs(const char *root, const char *name, const char *variant, int64_t index, int deviation, int flip, char *dir,
                              size_t size, kvc_case *c) {
    char error[512];
    support_make_case(variant, KVC_FAM_NORMAL, 1, index, c);
    cr_assert_eq(kvc_fuzz_add_expected(&kvc_reference_backend, c), 0);
    kvc_run_options options = {.canary = 0xA5};
    kvc_run_result got;
    cr_assert_eq(kvc_deviation_run_case(deviation, -1, c, &options, &got), KVC_OK);
    for (int i = 0; i < got.num_outputs; i++) {
        char tensor[64];
        snprintf(tensor, sizeof tensor, "%.40s.got", got.outputs[i].name);
        if (flip && i == 0) ((uint8_t *)got.outputs[i].array.data)[0] ^= 0x40;
        cr_assert_eq(kvc_case_put(c, tensor, &got.outputs[i].array), 0);
        got.outputs[i].array.data = NULL;
    }
    kvc_run_result_free(&got);
    snprintf(dir, size, "%s/%s", root, name);
    cr_assert_eq(kvc_case_save(dir, c, error, sizeof error), 0, "%s", error);
}

/* c saved as an upstream case under root/name: its NAME.got become NAME.out. */
static void as_upstream(const kvc_case *c, const char *root, const char *name) {
    kvc_case u;
    cr_assert_eq(kvc_case_copy(&u, c), 0);
    for (int i = 0; i < u.num_tensors; i++) {
        size_t n = strlen(u.tensors[i].name);
        if (n > 4 && strcmp(u.tensors[i].name + n - 4, ".out") == 0) snprintf(u.tensors[i].name, 48, "ignored_%d", i);
    }
    for (int i = 0; i < u.num_tensors; i++) {
        size_t n = strlen(u.tensors[i].name);
        if (n > 4 && strcmp(u.tensors[i].name + n - 4, ".got") == 0) memcpy(u.tensors[i].name + n - 4, ".out", 4);
    }
    char dir[300], error[512];
    snprintf(dir, sizeof dir, "%s/%s", root, name);
    cr_assert_eq(kvc_case_save(dir, &u, error, sizeof error), 0, "%s", error);
    kvc_case_free(&u);
}

/* The first normal case of seed 1 of the bf16 plain insert whose bytes
 * bf16-truncation changes (which index follows the generator's draws). */
static int64_t truncation_case_index(void) {
    int truncation = kvc_deviation_find("bf16-truncation");
    kvc_run_options options = {.canary = 0xA5};
    for (int64_t index = 0; index < 50; index++) {
        kvc_case c;
        support_make_case("v41.rope_plain_insert/bf16", KVC_FAM_NORMAL, 1, index, &c);
        kvc_run_result contract, planted;
        cr_assert_eq(kvc_deviation_run_case(-1, -1, &c, &options, &contract), KVC_OK);
        cr_assert_eq(kvc_deviation_run_case(truncation, -1, &c, &options, &planted), KVC_OK);
        int differ = 0;
        for (int i = 0; i < contract.num_outputs && !differ; i++)
            differ = memcmp(contract.outputs[i].array.data, planted.outputs[i].array.data,
                            (size_t)contract.outputs[i].array.count * (size_t)kvc_dtype_size(contract.outputs[i].array.dtype)) != 0;
        kvc_run_result_free(&contract);
        kvc_run_result_free(&planted);
        kvc_case_free(&c);
        if (differ) return index;
    }
    cr_assert_fail("bf16-truncation changes none of the first 50 cases");
    return -1;
}

static captured_run replay(const char *impl, const char *dir) {
    char *argv[] = {"--impl", (char *)impl, (char *)dir};
    return support_capture(kvc_cmd_replay, ARGC(argv), argv);
}

/* The case's own NAME.got outputs judged (an outside run kept in the case). */
static captured_run replay_outside(const char *dir) {
    char *argv[] = {"--outputs-in-case", (char *)dir};
    return support_capture(kvc_cmd_replay, ARGC(argv), argv);
}

Test(diagnosed_reports, replay_names_the_deviation_or_says_unexplained) {
    char root[64], dir[256];
    support_temp_dir(root, sizeof root);
    kvc_case c;
    save_with_outputs(root, "case", "v41.rope_plain_insert/bf16", truncation_case_index(), -1, 0, dir, sizeof dir, &c);
    /* The .got tensors would make it an outside case: keep the inputs and NAME.out only. */
    char got[300];
    for (int i = 0; i < c.num_tensors; i++) {
        size_t n = strlen(c.tensors[i].name);
        if (n > 4 && strcmp(c.tensors[i].name + n - 4, ".got") == 0) {
            snprintf(got, sizeof got, "%s/%s.npy", dir, c.tensors[i].name);
            cr_assert_eq(unlink(got), 0);
        }
    }
    captured_run run = replay("deviation:bf16-truncation", dir);
    cr_expect_eq(run.status, 1, "%s", run.out);
    cr_expect(strstr(run.out, "; explained by: bf16-truncation (SPEC 1 bf16)") != NULL, "%s", run.out);
    support_free_run(&run);
    /* One NoPE byte off in the expected outputs: the reference itself fails, and nothing explains it. */
    kvc_array *expected = kvc_case_get(&c, "kv_cache.out");
    ((uint8_t *)expected->data)[0] ^= 0x40;
    char error[512];
    snprintf(dir, sizeof dir, "%s/flipped", root);
    kvc_case stripped;
    cr_assert_eq(kvc_case_copy(&stripped, &c), 0);
    for (int i = 0; i < stripped.num_tensors; i++) {
        size_t n = strlen(stripped.tensors[i].name);
        if (n > 4 && strcmp(stripped.tensors[i].name + n - 4, ".got") == 0) snprintf(stripped.tensors[i].name, 48, "ignored_%d", i);
    }
    cr_assert_eq(kvc_case_save(dir, &stripped, error, sizeof error), 0, "%s", error);
    run = replay("ref", dir);
    cr_expect_eq(run.status, 1, "%s", run.out);
    cr_expect(strstr(run.out, "; unexplained by the deviation catalogue") != NULL, "%s", run.out);
    support_free_run(&run);
    kvc_case_free(&stripped);
    kvc_case_free(&c);
    support_remove_tree(root);
}

Test(diagnosed_reports, outside_outputs_and_parity_are_diagnosed) {
    char root[64], explained[256], unexplained[256];
    support_temp_dir(root, sizeof root);
    kvc_case a, b;
    save_with_outputs(root, "explained", "v41.rope_plain_insert/bf16", truncation_case_index(), kvc_deviation_find("bf16-truncation"), 0, explained,
                      sizeof explained, &a);
    save_with_outputs(root, "unexplained", "v41.rope_plain_insert/bf16", truncation_case_index(), -1, 1, unexplained, sizeof unexplained, &b);
    char status[300];
    snprintf(status, sizeof status, "%s/status.got.json", explained);
    support_write_text(status, "{\"status\": \"ran\", \"message\": \"\"}\n");
    snprintf(status, sizeof status, "%s/status.got.json", unexplained);
    support_write_text(status, "{\"status\": \"ran\", \"message\": \"\"}\n");
    captured_run run = replay_outside(explained);
    cr_expect(strstr(run.out, "explained by: bf16-truncation (SPEC 1 bf16)") != NULL, "%s", run.out);
    support_free_run(&run);
    run = replay_outside(unexplained);
    cr_expect(strstr(run.out, "unexplained by the deviation catalogue") != NULL, "%s", run.out);
    support_free_run(&run);

    /* The parity report: the same outputs as the upstream side (NAME.out). */
    char upstream[128];
    snprintf(upstream, sizeof upstream, "%s/upstream", root);
    as_upstream(&a, upstream, "explained");
    as_upstream(&b, upstream, "unexplained");
    kvc_parity_report report;
    memset(&report, 0, sizeof report);
    cr_assert_eq(kvc_parity_add_path(&report, upstream), 0);
    cr_assert_eq(report.num_groups, 1);
    const kvc_parity_group *g = &report.groups[0];
    cr_expect_eq(g->unexplained_cases, 1);
    int found = 0;
    for (int k = 0; k < g->num_explanations; k++) found |= strcmp(g->explanation[k], "bf16-truncation") == 0 && g->explained_cases[k] == 1;
    cr_expect(found, "bf16-truncation does not explain one case");
    char out[128];
    snprintf(out, sizeof out, "%s/reports", root);
    cr_assert_eq(mkdir(out, 0777), 0);
    cr_assert_eq(kvc_render_parity(&report, out), 0);
    char md[200];
    snprintf(md, sizeof md, "%s/parity.md", out);
    char *text = support_read_file(md);
    cr_expect(strstr(text, "| bf16-truncation | 1 |") != NULL && strstr(text, "| (unexplained) | 1 |") != NULL, "%s", text);
    free(text);
    kvc_parity_free(&report);
    kvc_case_free(&a);
    kvc_case_free(&b);
    support_remove_tree(root);
}

Test(diagnosed_reports, campaign_summary_and_junit_carry_the_explanation, .timeout = 120) {
    char root[64], junit[128];
    support_temp_dir(root, sizeof root);
    snprintf(junit, sizeof junit, "%s/fuzz.xml", root);
    kvc_campaign_options o;
    kvc_campaign_options_init(&o);
    o.candidate = "deviation:clamp-nan-to-minus-448";
    o.cases = 40;
    o.jobs = 2;
    o.quiet = 1;
    o.shrink_seconds = 2;
    o.out_dir = root;
    o.junit_path = junit;
    kvc_campaign_summary s;
    fflush(stdout);
    int saved = dup(STDOUT_FILENO), null = open("/dev/null", O_WRONLY);
    dup2(null, STDOUT_FILENO);
    int rc = kvc_campaign_run(&o, &s);
    fflush(stdout);
    dup2(saved, STDOUT_FILENO);
    close(saved);
    close(null);
    cr_assert_eq(rc, 1);
    cr_assert_eq(s.num_signatures, 1);
    cr_expect_eq(s.signatures[0].diagnosed, 1);
    cr_expect_str_eq(s.signatures[0].explained_by, "clamp-nan-to-minus-448");
    cr_expect_str_eq(s.signatures[0].key, "explained by clamp-nan-to-minus-448");
    char *xml = support_read_file(junit);
    cr_expect(strstr(xml, "message=\"explained by: clamp-nan-to-minus-448 (SPEC 1 clamp); ") != NULL, "%s", xml);
    free(xml);
    kvc_campaign_summary_free(&s);
    support_remove_tree(root);
}
