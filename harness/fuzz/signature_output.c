/* A campaign's failures by signature, written out: the summary's text
 * and the JSON (see signature_list.h). */
#include "harness/fuzz/signature_list.h"
#include "harness/fuzz/name_list.h"
#include "harness/replay/replay.h"

#include <stdlib.h>
#include <string.h>

#include "harness/diagnose/diagnose.h"
#include "harness/diagnose/locate.h"
#include "harness/report/run_info.h"
#include "kvcmp/backends.h"
#include "kvcmp/deviations.h"
#include "kvcmp/generate.h"
#include "kvcmp/validate.h"

void kvc_explanation_text(const char *explained_by, char *out, size_t size) {
    char item[200], name[100];
    out[0] = 0;
    for (const char *p = explained_by; names_next(&p, ',', item, sizeof item);) {
        /* A pair "a+b": the SPEC place of each. */
        char spec[200] = "";
        for (const char *q = item; names_next(&q, '+', name, sizeof name);) {
            const char *where = kvc_deviation_spec(kvc_deviation_find(name));
            names_append(spec, sizeof spec, where ? where : "?", ';');
        }
        size_t n = strlen(out);
        snprintf(out + n, size - n, "%s%s (%s)", n ? ", " : "", item, spec);
    }
}

void kvc_signature_entry_text(int number, const kvc_signature_entry *e, char *out, size_t size) {
    int merged = strcmp(e->stages, e->signature.stage) != 0;
    /* A candidate's words (an exception's class), and what kvcmp merge
     * read from summaries (paths, commands): escaped for the terminal. */
    char key[4 * sizeof e->signature.key], stages[4 * sizeof e->stages], regions[4 * sizeof e->signature.regions];
    int n = snprintf(out, size, "  [%d] %s  (%lld failure%s; %s%s%sregions: %s)\n", number,
                     kvc_escape_text(e->signature.key, key, sizeof key), (long long)e->count,
                     e->count == 1 ? "" : "s", merged ? "stages: " : "", merged ? kvc_escape_text(e->stages, stages, sizeof stages) : "",
                     merged ? "; " : "", e->signature.regions[0] ? kvc_escape_text(e->signature.regions, regions, sizeof regions) : "-");
    if (n < 0 || (size_t)n >= size) return;
    if (e->signature.diagnosed) {
        char explanation[600], proof[160] = "";
        kvc_explanation_text(e->signature.explained_by, explanation, sizeof explanation);
        if (e->proof_failing || e->proof_passing)
            snprintf(proof, sizeof proof, "; held on %lld failing case%s and %lld passing one%s", (long long)e->proof_failing,
                     e->proof_failing == 1 ? "" : "s", (long long)e->proof_passing, e->proof_passing == 1 ? "" : "s");
        if (explanation[0]) n += snprintf(out + n, size - (size_t)n, "      explained by: %s%s\n", explanation, proof);
        else n += snprintf(out + n, size - (size_t)n, "      unexplained: no deviation of the catalogue (include/kvcmp/deviations.h), alone or "
                                                      "composed (up to 4), writes these bytes on every case checked%s\n",
                           e->unproven ? " (some failures could not be diagnosed)" : "");
        if ((size_t)n >= size) return;
        int64_t checked = e->proof_failing + e->proof_passing;
        if (e->from_summaries && !explanation[0] && e->proof_held < checked)
            n += snprintf(out + n, size - (size_t)n, "      proof across the summaries merged: held on %lld of the %lld cases checked\n",
                          (long long)e->proof_held, (long long)checked);
        if ((size_t)n >= size) return;
        if (e->signature.refuted[0]) {
            char refuted[600];
            kvc_explanation_text(e->signature.refuted, refuted, sizeof refuted);
            n += snprintf(out + n, size - (size_t)n, "      refuted: %s: each wrote the candidate's bytes on one case and not on another\n", refuted);
            if ((size_t)n >= size) return;
        }
    }
    if (e->locus.cases) {
        char where[900];
        kvc_locus_text(&e->locus, e->signature.stage, where, sizeof where);
        if (where[0]) n += snprintf(out + n, size - (size_t)n, "      where: %s\n", where);
        if ((size_t)n >= size) return;
    }
    char first[4 * sizeof e->first_repro], saved[4 * sizeof e->minimal_saved], repro[4 * sizeof e->minimal_repro];
    n += snprintf(out + n, size - (size_t)n, "      first: case %lld  __REPRO: %s\n", (long long)e->first_case,
                  kvc_escape_text(e->first_repro, first, sizeof first));
    if ((size_t)n >= size) return;
    if (e->minimal_case >= 0)
        snprintf(out + n, size - (size_t)n, "      minimal: case %lld, %lld token%s, %s\n      __REPRO: %s\n", (long long)e->minimal_case,
                 (long long)e->minimal_tokens, e->minimal_tokens == 1 ? "" : "s", kvc_escape_text(e->minimal_saved, saved, sizeof saved),
                 kvc_escape_text(e->minimal_repro, repro, sizeof repro));
    else snprintf(out + n, size - (size_t)n, "      minimal: none saved\n");
}

void kvc_signature_list_print(FILE *f, const kvc_signature_list *list) {
    if (!list->count) return;
    fprintf(f, "distinct failures (signatures): %d\n", kvc_signature_list_distinct(list));
    if (list->proven)
        fprintf(f, "explanations are proven: a deviation names a signature only if, planted alone, it writes the candidate's bytes on "
                   "each failure kept (the first %d of each byte class, before and after shrinking) and the contract's on up to %d "
                   "passing cases per variant of its stages\n",
                list->kept_per_signature, KVC_PASSING_SAMPLE);
    for (int i = 0, number = 0; i < list->count; i++) {
        if (list->entries[i].group != i) continue;
        char text[KVC_SIGNATURE_TEXT];
        kvc_signature_entry_text(++number, &list->entries[i], text, sizeof text);
        fputs(text, f);
    }
}

/* ["bf16-half-away", "a+b"] of an explained_by list. */
static cJSON *explained_json(const char *explained_by) {
    cJSON *array = cJSON_CreateArray();
    char item[200];
    for (const char *p = explained_by; names_next(&p, ',', item, sizeof item);) cJSON_AddItemToArray(array, cJSON_CreateString(item));
    return array;
}

cJSON *kvc_signature_list_json(const kvc_signature_list *list) {
    cJSON *array = cJSON_CreateArray();
    int *root = calloc((size_t)(list->count ? list->count : 1), sizeof *root);
    if (root) kvc_signature_list_root_causes(list, root);
    for (int i = 0; i < list->count; i++) {
        const kvc_signature_entry *e = &list->entries[i];
        if (e->group != i) continue;
        cJSON *item = cJSON_CreateObject();
        cJSON_AddStringToObject(item, "signature", e->signature.key);
        /* What kvcmp merge matches signatures of shards by. */
        cJSON_AddStringToObject(item, "byte_class", e->raw_key);
        if (root) cJSON_AddNumberToObject(item, "root_cause", root[i]);
        cJSON_AddStringToObject(item, "stage", e->signature.stage);
        cJSON_AddStringToObject(item, "stages", e->stages);
        cJSON_AddStringToObject(item, "check", e->signature.check);
        cJSON_AddStringToObject(item, "regions", e->signature.regions);
        cJSON_AddStringToObject(item, "cause", e->signature.cause);
        cJSON_AddItemToObject(item, "explained_by", explained_json(e->signature.explained_by));
        cJSON_AddBoolToObject(item, "diagnosed", e->signature.diagnosed);
        cJSON_AddStringToObject(item, "input", e->signature.rejected_input ? "rejected by the contract" : "valid");
        if (e->signature.diagnosed) {
            /* On how many cases the explanation was checked, and held. */
            cJSON *proof = cJSON_AddObjectToObject(item, "explanation_proof");
            int64_t checked = e->proof_failing + e->proof_passing;
            cJSON_AddNumberToObject(proof, "failing_cases_checked", (double)e->proof_failing);
            cJSON_AddNumberToObject(proof, "passing_cases_checked", (double)e->proof_passing);
            cJSON_AddNumberToObject(proof, "cases_checked", (double)checked);
            /* Read from summaries: what held there, summed (an entry whose
             * explanation failed in one is unexplained, kvc_signature_list_settle). */
            int64_t held = e->from_summaries ? e->proof_held : e->signature.explained_by[0] ? checked : 0;
            cJSON_AddNumberToObject(proof, "cases_held", (double)held);
            cJSON_AddNumberToObject(proof, "failures_not_diagnosed", e->unproven);
            cJSON_AddItemToObject(proof, "refuted", explained_json(e->signature.refuted));
        }
        if (e->locus.cases) cJSON_AddItemToObject(item, "where", kvc_locus_json(&e->locus, e->signature.stage));
        cJSON_AddNumberToObject(item, "count", (double)e->count);
        cJSON_AddNumberToObject(item, "first_case", (double)e->first_case);
        cJSON_AddStringToObject(item, "first_repro", e->first_repro);
        if (e->minimal_case >= 0) {
            cJSON_AddNumberToObject(item, "minimal_case", (double)e->minimal_case);
            cJSON_AddNumberToObject(item, "minimal_tokens", (double)e->minimal_tokens);
            cJSON_AddStringToObject(item, "minimal_saved", e->minimal_saved);
            cJSON_AddStringToObject(item, "minimal_repro", e->minimal_repro);
        } else {
            cJSON_AddNullToObject(item, "minimal_case");
        }
        cJSON_AddItemToArray(array, item);
    }
    free(root);
    return array;
}
