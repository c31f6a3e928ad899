/* A campaign's failures by signature: see signature_list.h. */
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

int kvc_signature_claim(kvc_signature_claims *claims, const char *key) {
    uint64_t h = kvc_fuzz_signature_hash(key);
    for (int probe = 0; probe < KVC_SIGNATURE_SLOTS; probe++) {
        int i = (int)((h + (uint64_t)probe) % KVC_SIGNATURE_SLOTS);
        uint64_t expected = 0;
        if (__atomic_load_n(&claims->hash[i], __ATOMIC_ACQUIRE) == h ||
            __atomic_compare_exchange_n(&claims->hash[i], &expected, h, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE) ||
            expected == h)
            return __atomic_add_fetch(&claims->count[i], 1, __ATOMIC_ACQ_REL);
    }
    return INT32_MAX;
}

static void group_and_fold(kvc_signature_list *list);

static kvc_signature_entry *listing(kvc_signature_list *list, kvc_signature_entry *e) {
    while (e->group != (int)(e - list->entries)) e = &list->entries[e->group];
    return e;
}

kvc_signature_entry *kvc_signature_list_find(kvc_signature_list *list, const char *key) {
    for (int i = 0; i < list->count; i++)
        if (strcmp(list->entries[i].raw_key, key) == 0) return listing(list, &list->entries[i]);
    return NULL;
}

kvc_signature_entry *kvc_signature_list_get(kvc_signature_list *list, const kvc_fuzz_signature *s, int64_t index) {
    kvc_signature_entry *e = kvc_signature_list_find(list, s->key);
    if (e) {
        kvc_locus_add(&e->locus, &s->locus);
        return e;
    }
    if (list->count == list->capacity) {
        int capacity = list->capacity ? 2 * list->capacity : 16;
        kvc_signature_entry *grown = realloc(list->entries, (size_t)capacity * sizeof *grown);
        if (!grown) return NULL;
        list->entries = grown;
        list->capacity = capacity;
    }
    e = &list->entries[list->count];
    memset(e, 0, sizeof *e);
    e->signature = *s;
    e->signature.diagnosed = 0;
    e->signature.explained_by[0] = e->signature.refuted[0] = 0;
    e->signature.proof_cases = 0;
    e->locus = s->locus;
    snprintf(e->raw_key, sizeof e->raw_key, "%s", s->key);
    snprintf(e->stages, sizeof e->stages, "%s", s->stage);
    e->group = list->count++;
    e->first_case = index;
    e->minimal_case = -1;
    return e;
}

int kvc_signature_list_distinct(const kvc_signature_list *list) {
    int n = 0;
    for (int i = 0; i < list->count; i++) n += list->entries[i].group == i;
    return n;
}

const char *const kvc_root_cause_rule =
    "signatures explained by a shared deviation are one root cause; an unexplained one is one per stage and place where its first "
    "wrong value arises (or per check and cause when no value differs)";

void kvc_signature_root_key(const kvc_signature_entry *e, char *out, size_t size) {
    const kvc_fuzz_signature *s = &e->signature;
    const char *origin = "";
    int unclassed = strcmp(s->cause, "last bit") == 0 || strncmp(s->cause, "wrong values", 12) == 0;
    if (strcmp(s->check, "bytes") == 0 && unclassed) {
        origin = kvc_locus_origin(&e->locus, s->stage);
        if (!origin[0]) origin = kvc_locus_dims(&e->locus);
    }
    if (origin[0]) snprintf(out, size, "%s | %s%s", s->stage, origin, s->rejected_input ? " | rejected input" : "");
    else snprintf(out, size, "%s | %s: %s%s", s->stage, s->check, s->cause[0] ? s->cause : s->regions, s->rejected_input ? " | rejected input" : "");
}


int kvc_signature_list_root_causes(const kvc_signature_list *list, int *root) {
    int n = list->count, roots = 0;
    int *parent = malloc((size_t)(n ? n : 1) * sizeof *parent);
    char (*keys)[300] = malloc((size_t)(n ? n : 1) * sizeof *keys);
    if (!parent || !keys) { free(parent); free(keys); return kvc_signature_list_distinct(list); }
    for (int i = 0; i < n; i++) {
        parent[i] = i;
        const kvc_signature_entry *e = &list->entries[i];
        if (e->group == i && !e->signature.explained_by[0]) kvc_signature_root_key(e, keys[i], sizeof keys[i]);
        else keys[i][0] = 0;
    }
    /* Union of the listed entries that share a deviation or, unexplained, a root key. */
    for (int i = 0; i < n; i++) {
        const kvc_signature_entry *e = &list->entries[i];
        if (e->group != i) continue;
        for (int j = 0; j < i; j++) {
            const kvc_signature_entry *o = &list->entries[j];
            if (o->group != j) continue;
            int same = e->signature.explained_by[0] ? o->signature.explained_by[0] &&
                                                          names_share(e->signature.explained_by, o->signature.explained_by, ',')
                                                    : !o->signature.explained_by[0] && strcmp(keys[i], keys[j]) == 0;
            if (!same) continue;
            int a = i, b = j;
            while (parent[a] != a) a = parent[a];
            while (parent[b] != b) b = parent[b];
            if (a != b) parent[a > b ? a : b] = a < b ? a : b;
        }
    }
    int *number = root ? root : NULL;
    for (int i = 0; i < n; i++) {
        int r = i;
        while (parent[r] != r) r = parent[r];
        if (list->entries[i].group != i) { if (number) number[i] = 0; continue; }
        if (r == i) roots++;
        if (number) number[i] = r == i ? roots : number[r];
    }
    free(parent);
    free(keys);
    return roots;
}

void kvc_signature_list_compact(kvc_signature_list *list) {
    group_and_fold(list);
    int kept = 0;
    for (int i = 0; i < list->count; i++) {
        kvc_signature_entry *e = &list->entries[i];
        if (e->group != i) {
            for (int k = 0; k < e->num_saved; k++) free(e->saved_dirs[k]);
            free(e->saved_dirs);
            continue;
        }
        list->entries[kept] = *e;
        list->entries[kept].group = kept;
        kept++;
    }
    list->count = kept;
}

/* "explained by NAMES" while explained, else the byte-class key. */
static void explained_key(kvc_signature_entry *e) {
    if (e->signature.explained_by[0]) snprintf(e->signature.key, sizeof e->signature.key, "explained by %s", e->signature.explained_by);
    else snprintf(e->signature.key, sizeof e->signature.key, "%s", e->raw_key);
}

/* The names of `names` that `kept` lacks become refuted. */
static void refute_missing(kvc_signature_entry *e, const char *names, const char *kept) {
    char item[200];
    for (const char *p = names; names_next(&p, ',', item, sizeof item);)
        if (!names_has(kept, item, ',') && !names_has(e->signature.refuted, item, ','))
            names_append(e->signature.refuted, sizeof e->signature.refuted, item, ',');
}

/* e's explanation narrowed to the names `other` also proved: the rest are refuted. */
static void narrow(kvc_signature_entry *e, const char *other) {
    char kept[sizeof e->signature.explained_by] = "", item[200];
    for (const char *p = e->signature.explained_by; names_next(&p, ',', item, sizeof item);)
        if (names_has(other, item, ',')) names_append(kept, sizeof kept, item, ',');
    refute_missing(e, e->signature.explained_by, kept);
    refute_missing(e, other, kept);
    snprintf(e->signature.explained_by, sizeof e->signature.explained_by, "%s", kept);
}

/* drop's failures are listed under keep from now on. */
static void merge(kvc_signature_list *list, kvc_signature_entry *keep, kvc_signature_entry *drop) {
    int from = (int)(drop - list->entries), to = (int)(keep - list->entries);
    keep->count += drop->count;
    if (drop->first_case < keep->first_case) {
        keep->first_case = drop->first_case;
        snprintf(keep->first_repro, sizeof keep->first_repro, "%s", drop->first_repro);
    }
    if (drop->minimal_case >= 0 && (keep->minimal_case < 0 || drop->minimal_tokens < keep->minimal_tokens)) {
        keep->minimal_case = drop->minimal_case;
        keep->minimal_tokens = drop->minimal_tokens;
        snprintf(keep->minimal_saved, sizeof keep->minimal_saved, "%s", drop->minimal_saved);
        snprintf(keep->minimal_repro, sizeof keep->minimal_repro, "%s", drop->minimal_repro);
    }
    char **grown = realloc(keep->saved_dirs, (size_t)(keep->num_saved + drop->num_saved + 1) * sizeof *grown);
    if (grown) {
        keep->saved_dirs = grown;
        for (int i = 0; i < drop->num_saved; i++) keep->saved_dirs[keep->num_saved++] = drop->saved_dirs[i];
        free(drop->saved_dirs);
        drop->saved_dirs = NULL;
        drop->num_saved = 0;
    }
    names_union(keep->stages, sizeof keep->stages, drop->stages, '+');
    names_union(keep->signature.regions, sizeof keep->signature.regions, drop->signature.regions, '+');
    names_union(keep->signature.refuted, sizeof keep->signature.refuted, drop->signature.refuted, ',');
    narrow(keep, drop->signature.explained_by);
    kvc_locus_add(&keep->locus, &drop->locus);
    keep->proof_failing += drop->proof_failing;
    keep->proof_held += drop->proof_held;
    keep->from_summaries |= drop->from_summaries;
    keep->passing_elsewhere += drop->passing_elsewhere;
    /* A passing case both were checked on counts once. */
    keep->proof_passing = keep->passing_elsewhere;
    for (int v = 0; v < KVC_SAMPLED_VARIANTS; v++) {
        keep->passing_checked[v] |= drop->passing_checked[v];
        keep->proof_passing += __builtin_popcount(keep->passing_checked[v]);
    }
    keep->unproven += drop->unproven;
    explained_key(keep);
    for (int i = 0; i < list->count; i++)
        if (list->entries[i].group == from) list->entries[i].group = to;
}

void kvc_signature_list_explain(kvc_signature_list *list, const char *key, const kvc_fuzz_signature *diagnosed) {
    kvc_signature_entry *e = kvc_signature_list_find(list, key);
    if (!e) return;
    if (!diagnosed->diagnosed) {
        /* A byte or status failure kept without a diagnosis: its bytes were never checked. */
        if (strcmp(diagnosed->check, "bytes") == 0 || strcmp(diagnosed->check, "status") == 0) e->unproven++;
        return;
    }
    e->proof_failing += diagnosed->proof_cases;
    names_union(e->signature.refuted, sizeof e->signature.refuted, diagnosed->refuted, ',');
    if (!e->signature.diagnosed) {
        e->signature.diagnosed = 1;
        snprintf(e->signature.explained_by, sizeof e->signature.explained_by, "%s", diagnosed->explained_by);
    } else {
        narrow(e, diagnosed->explained_by);
    }
    /* A name proven on one failure and refuted on another stays refuted. */
    char kept[sizeof e->signature.explained_by] = "", item[200];
    for (const char *p = e->signature.explained_by; names_next(&p, ',', item, sizeof item);)
        if (!names_has(e->signature.refuted, item, ',')) names_append(kept, sizeof kept, item, ',');
    snprintf(e->signature.explained_by, sizeof e->signature.explained_by, "%s", kept);
    explained_key(e);
}

void kvc_signature_list_add_proof(kvc_signature_list *list, const char *key, const kvc_fuzz_signature *diagnosed, int64_t passing,
                                  int64_t held, int64_t not_diagnosed) {
    kvc_signature_entry *e = kvc_signature_list_find(list, key);
    if (!e) return;
    kvc_signature_list_explain(list, key, diagnosed);
    e->from_summaries = 1;
    e->proof_passing += passing;
    e->passing_elsewhere += passing;
    e->proof_held += held;
    e->unproven += (int)not_diagnosed;
}

void kvc_signature_list_settle(kvc_signature_list *list) {
    for (int i = 0; i < list->count; i++) {
        kvc_signature_entry *e = &list->entries[i];
        if (!e->from_summaries || !e->signature.explained_by[0]) continue;
        if (e->unproven || e->proof_held < e->proof_failing + e->proof_passing) {
            refute_missing(e, e->signature.explained_by, "");
            e->signature.explained_by[0] = 0;
            explained_key(e);
        }
    }
}

void kvc_signature_list_passed(kvc_signature_list *list, int variant, int64_t index) {
    if (variant < 0 || variant >= KVC_SAMPLED_VARIANTS) return;
    int64_t *kept = list->passing[variant];
    int *n = &list->passing_count[variant];
    if (*n == KVC_PASSING_SAMPLE && index >= kept[*n - 1]) return;
    int at = *n < KVC_PASSING_SAMPLE ? (*n)++ : *n - 1;
    while (at > 0 && kept[at - 1] > index) { kept[at] = kept[at - 1]; at--; }
    kept[at] = index;
}

/* ---- the proof on passing cases, the groups, the saved cases' diagnosis ---- */

/* Cases of the variant run the stage (a forward, both of its stages). */
static int variant_runs(const kvc_variant_info *v, const char *stage) {
    if (v->stage < 0) return 0;
    const char *name = kvc_stage_name(v->stage);
    if (strcmp(name, stage) == 0) return 1;
    if (strcmp(name, "v4.forward") == 0) return strcmp(stage, "v4.save_partial_states") == 0 || strcmp(stage, "v4.compress") == 0;
    if (strcmp(name, "v41.forward") == 0)
        return strcmp(stage, "v41.save_compress_norm") == 0 || strcmp(stage, "v41.rope_quant_insert") == 0;
    return 0;
}

/* Each name of e's explanation planted on the sampled passing cases of
 * e's stage: one that changes the contract's bytes there is refuted. */
static void prove_on_passing(kvc_signature_list *list, kvc_signature_entry *e, const kvc_gen_config *gen) {
    char names[sizeof e->signature.explained_by], item[200];
    snprintf(names, sizeof names, "%s", e->signature.explained_by);
    for (int v = 0; v < kvc_variant_count() && v < KVC_SAMPLED_VARIANTS; v++) {
        if (!variant_runs(kvc_variant(v), e->signature.stage)) continue;
        for (int k = 0; k < list->passing_count[v]; k++) {
            kvc_gen_case g;
            if (kvc_gen_make(gen, list->passing[v][k], &g)) continue;
            if (!g.history) {
                kvc_run_options options = {.canary = 0xA5};
                kvc_run_result contract;
                kvc_run_case(&kvc_reference_backend, &g.c, &options, &contract);
                char kept[sizeof names] = "";
                for (const char *p = names; names_next(&p, ',', item, sizeof item);) {
                    int set[KVC_DIAGNOSIS_DEPTH], size = kvc_explanation_parse(item, set);
                    if (size > 0 && kvc_explanation_holds(&g.c, &options, &contract, set, size)) names_append(kept, sizeof kept, item, ',');
                    else if (!names_has(e->signature.refuted, item, ',')) names_append(e->signature.refuted, sizeof e->signature.refuted, item, ',');
                }
                snprintf(names, sizeof names, "%s", kept);
                e->passing_checked[v] |= (uint8_t)(1u << k);
                kvc_run_result_free(&contract);
            }
            kvc_gen_free(&g);
        }
    }
    snprintf(e->signature.explained_by, sizeof e->signature.explained_by, "%s", names);
}

/* Entries whose proven explanations share a deviation become one
 * signature (the first listed keeps it), once. */
static void group_and_fold(kvc_signature_list *list) {
    if (list->folded) return;
    list->folded = 1;
    for (int i = 0; i < list->count; i++) {
        kvc_signature_entry *e = &list->entries[i];
        if (e->group != i || !e->signature.explained_by[0]) continue;
        for (int j = 0; j < i; j++) {
            kvc_signature_entry *other = &list->entries[j];
            if (other->group != j || !other->signature.explained_by[0]) continue;
            char shared[sizeof e->signature.explained_by];
            snprintf(shared, sizeof shared, "%s", other->signature.explained_by);
            if (!names_intersect(shared, sizeof shared, e->signature.explained_by, ',')) continue;
            merge(list, other, e);
            break;
        }
    }
}

/* The listed entry's diagnosis as a saved case's meta "diagnosis". */
static cJSON *diagnosis_json(const kvc_signature_entry *e) {
    cJSON *d = cJSON_CreateObject(), *names = cJSON_AddArrayToObject(d, "explained_by"), *refuted = cJSON_AddArrayToObject(d, "refuted");
    char item[200];
    cJSON_AddStringToObject(d, "signature", e->signature.key);
    for (const char *p = e->signature.explained_by; names_next(&p, ',', item, sizeof item);) cJSON_AddItemToArray(names, cJSON_CreateString(item));
    for (const char *p = e->signature.refuted; names_next(&p, ',', item, sizeof item);) cJSON_AddItemToArray(refuted, cJSON_CreateString(item));
    cJSON_AddNumberToObject(d, "failing_cases_checked", (double)e->proof_failing);
    cJSON_AddNumberToObject(d, "passing_cases_checked", (double)e->proof_passing);
    return d;
}

static void write_diagnosis(const char *dir, const kvc_signature_entry *e) {
    char path[1200], error[600];
    snprintf(path, sizeof path, "%s/case.json", dir);
    FILE *f = fopen(path, "rb");
    if (!f) return;
    char *text = NULL;
    size_t size = 0, used = 0;
    for (;;) {
        if (used + 4096 + 1 > size) {
            char *grown = realloc(text, size = 2 * size + 4096 + 1);
            if (!grown) break;
            text = grown;
        }
        size_t got = fread(text + used, 1, 4096, f);
        used += got;
        if (got < 4096) break;
    }
    fclose(f);
    if (!text) return;
    text[used] = 0;
    cJSON *root = cJSON_Parse(text);
    free(text);
    if (!root) return;
    cJSON *meta = cJSON_GetObjectItemCaseSensitive(root, "meta");
    if (!cJSON_IsObject(meta)) {
        cJSON_DeleteItemFromObjectCaseSensitive(root, "meta");
        meta = cJSON_AddObjectToObject(root, "meta");
    }
    cJSON_DeleteItemFromObjectCaseSensitive(meta, "diagnosis");
    cJSON_AddItemToObject(meta, "diagnosis", diagnosis_json(e));
    kvc_write_json_file(path, root, error, sizeof error);
}

void kvc_signature_list_prove(kvc_signature_list *list, const kvc_gen_config *gen, int exact_policy, int kept) {
    list->kept_per_signature = kept;
    for (int i = 0; i < list->count; i++) {
        kvc_signature_entry *e = &list->entries[i];
        if (e->unproven && e->signature.explained_by[0]) {
            refute_missing(e, e->signature.explained_by, "");
            e->signature.explained_by[0] = 0;
        }
        if (exact_policy && e->signature.explained_by[0]) prove_on_passing(list, e, gen);
        for (int v = 0; v < KVC_SAMPLED_VARIANTS; v++) e->proof_passing += __builtin_popcount(e->passing_checked[v]);
        explained_key(e);
    }
    group_and_fold(list);
    for (int i = 0; i < list->count; i++) {
        const kvc_signature_entry *e = &list->entries[i];
        if (e->group != i || !e->signature.diagnosed) continue;
        for (int k = 0; k < e->num_saved; k++) write_diagnosis(e->saved_dirs[k], e);
    }
    list->proven = 1;
}

void kvc_signature_list_saved(kvc_signature_entry *e, int64_t index, int64_t tokens, const char *dir, const char *repro) {
    char **grown = dir[0] ? realloc(e->saved_dirs, (size_t)(e->num_saved + 1) * sizeof *grown) : NULL;
    if (grown) {
        e->saved_dirs = grown;
        if ((e->saved_dirs[e->num_saved] = strdup(dir))) e->num_saved++;
    }
    if (e->minimal_case >= 0 && tokens >= e->minimal_tokens) return;
    e->minimal_case = index;
    e->minimal_tokens = tokens;
    snprintf(e->minimal_saved, sizeof e->minimal_saved, "%s", dir);
    snprintf(e->minimal_repro, sizeof e->minimal_repro, "%s", repro);
}

void kvc_signature_list_free(kvc_signature_list *list) {
    for (int i = 0; i < list->count; i++) {
        for (int k = 0; k < list->entries[i].num_saved; k++) free(list->entries[i].saved_dirs[k]);
        free(list->entries[i].saved_dirs);
    }
    free(list->entries);
    memset(list, 0, sizeof *list);
}
