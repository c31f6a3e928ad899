/* A campaign's failures by signature: see signature_list.h. */
#include "harness/fuzz/signature_list.h"
#include "harness/replay/replay.h"

#include <stdlib.h>
#include <string.h>

#include "kvcmp/deviations.h"

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
    if (e) return e;
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
    e->signature.explained_by[0] = 0;
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

void kvc_signature_list_compact(kvc_signature_list *list) {
    int kept = 0;
    for (int i = 0; i < list->count; i++)
        if (list->entries[i].group == i) {
            list->entries[kept] = list->entries[i];
            list->entries[kept].group = kept;
            kept++;
        }
    list->count = kept;
}

/* The next item of a sep-separated list at *p, into item; 0 at the end. */
static int next_item(const char **p, char sep, char *item, size_t size) {
    if (!**p) return 0;
    size_t len = strcspn(*p, (char[]){sep, 0});
    snprintf(item, size, "%.*s", (int)len, *p);
    *p += len + ((*p)[len] == sep);
    return 1;
}

/* 1 when the sep-separated list holds the item. */
static int list_has(const char *list, const char *item, char sep) {
    char x[200];
    for (const char *p = list; next_item(&p, sep, x, sizeof x);)
        if (strcmp(x, item) == 0) return 1;
    return 0;
}

static void list_append(char *into, size_t size, const char *item, char sep) {
    size_t n = strlen(into);
    if (n + strlen(item) + 2 <= size) snprintf(into + n, size - n, "%s%s", n ? (char[]){sep, 0} : "", item);
}

/* into += the items of `more` it lacks. */
static void list_union(char *into, size_t size, const char *more, char sep) {
    char item[200];
    for (const char *p = more; next_item(&p, sep, item, sizeof item);)
        if (!list_has(into, item, sep)) list_append(into, size, item, sep);
}

/* into = the items of into that `other` also has; 0 when none is left
 * (into unchanged). */
static int list_intersect(char *into, size_t size, const char *other, char sep) {
    char kept[200] = "", item[200];
    for (const char *p = into; next_item(&p, sep, item, sizeof item);)
        if (list_has(other, item, sep)) list_append(kept, sizeof kept, item, sep);
    if (!kept[0]) return 0;
    snprintf(into, size, "%s", kept);
    return 1;
}

static void explained_key(kvc_signature_entry *e) {
    snprintf(e->signature.key, sizeof e->signature.key, "explained by %s", e->signature.explained_by);
}

/* drop's failures are listed under keep from now on. */
static void merge(kvc_signature_list *list, kvc_signature_entry *keep, kvc_signature_entry *drop) {
    int from = (int)(drop - list->entries), to = (int)(keep - list->entries);
    keep->count += drop->count;
    if (drop->first_case < keep->first_case) {
        keep->first_case = drop->first_case;
        snprintf(keep->first_repro, sizeof keep->first_repro, "%s", drop->first_repro);
    }
    if (drop->minimal_case >= 0) kvc_signature_list_saved(keep, drop->minimal_case, drop->minimal_tokens, drop->minimal_saved, drop->minimal_repro);
    list_union(keep->stages, sizeof keep->stages, drop->stages, '+');
    list_union(keep->signature.regions, sizeof keep->signature.regions, drop->signature.regions, '+');
    list_intersect(keep->signature.explained_by, sizeof keep->signature.explained_by, drop->signature.explained_by, ',');
    explained_key(keep);
    for (int i = 0; i < list->count; i++)
        if (list->entries[i].group == from) list->entries[i].group = to;
}

void kvc_signature_list_explain(kvc_signature_list *list, const char *key, const kvc_fuzz_signature *diagnosed) {
    kvc_signature_entry *e = kvc_signature_list_find(list, key);
    if (!e || !diagnosed->diagnosed) return;
    if (!e->signature.diagnosed) {
        e->signature.diagnosed = 1;
        snprintf(e->signature.explained_by, sizeof e->signature.explained_by, "%s", diagnosed->explained_by);
    } else if (!list_intersect(e->signature.explained_by, sizeof e->signature.explained_by, diagnosed->explained_by, ',')) {
        return;   /* explained otherwise, or not at all: the first diagnosis stands */
    }
    if (!e->signature.explained_by[0]) return;
    explained_key(e);
    /* Into the first listed entry that shares a deviation, then every
     * later one that does. */
    for (int i = 0; i < list->count; i++) {
        kvc_signature_entry *other = &list->entries[i];
        if (other->group != i || other == e || !other->signature.explained_by[0]) continue;
        char shared[sizeof e->signature.explained_by];
        snprintf(shared, sizeof shared, "%s", e->signature.explained_by);
        if (!list_intersect(shared, sizeof shared, other->signature.explained_by, ',')) continue;
        if (other < e) { merge(list, other, e); e = other; }
        else merge(list, e, other);
    }
}

void kvc_explanation_text(const char *explained_by, char *out, size_t size) {
    char item[200], name[100];
    out[0] = 0;
    for (const char *p = explained_by; next_item(&p, ',', item, sizeof item);) {
        /* A pair "a+b": the SPEC place of each. */
        char spec[200] = "";
        for (const char *q = item; next_item(&q, '+', name, sizeof name);) {
            const char *where = kvc_deviation_spec(kvc_deviation_find(name));
            list_append(spec, sizeof spec, where ? where : "?", ';');
        }
        size_t n = strlen(out);
        snprintf(out + n, size - n, "%s%s (%s)", n ? ", " : "", item, spec);
    }
}

void kvc_signature_list_saved(kvc_signature_entry *e, int64_t index, int64_t tokens, const char *dir, const char *repro) {
    if (e->minimal_case >= 0 && tokens >= e->minimal_tokens) return;
    e->minimal_case = index;
    e->minimal_tokens = tokens;
    snprintf(e->minimal_saved, sizeof e->minimal_saved, "%s", dir);
    snprintf(e->minimal_repro, sizeof e->minimal_repro, "%s", repro);
}

void kvc_signature_entry_text(int number, const kvc_signature_entry *e, char *out, size_t size) {
    int merged = strcmp(e->stages, e->signature.stage) != 0;
    char key[4 * sizeof e->signature.key];   /* a candidate's words (an exception's class) escaped */
    int n = snprintf(out, size, "  [%d] %s  (%lld failure%s; %s%s%sregions: %s)\n", number,
                     kvc_escape_text(e->signature.key, key, sizeof key), (long long)e->count,
                     e->count == 1 ? "" : "s", merged ? "stages: " : "", merged ? e->stages : "", merged ? "; " : "",
                     e->signature.regions[0] ? e->signature.regions : "-");
    if (n < 0 || (size_t)n >= size) return;
    if (e->signature.diagnosed) {
        char explanation[600];
        kvc_explanation_text(e->signature.explained_by, explanation, sizeof explanation);
        if (explanation[0]) n += snprintf(out + n, size - (size_t)n, "      explained by: %s\n", explanation);
        else n += snprintf(out + n, size - (size_t)n, "      unexplained: no deviation of the catalogue (include/kvcmp/deviations.h), alone or "
                                                      "composed (up to 4), writes these bytes; the cause class is read from the bytes\n");
        if ((size_t)n >= size) return;
    }
    n += snprintf(out + n, size - (size_t)n, "      first: case %lld  __REPRO: %s\n", (long long)e->first_case, e->first_repro);
    if ((size_t)n >= size) return;
    if (e->minimal_case >= 0)
        snprintf(out + n, size - (size_t)n, "      minimal: case %lld, %lld token%s, %s\n      __REPRO: %s\n", (long long)e->minimal_case,
                 (long long)e->minimal_tokens, e->minimal_tokens == 1 ? "" : "s", e->minimal_saved, e->minimal_repro);
    else snprintf(out + n, size - (size_t)n, "      minimal: none saved\n");
}

void kvc_signature_list_print(FILE *f, const kvc_signature_list *list) {
    if (!list->count) return;
    fprintf(f, "distinct failures (signatures): %d\n", kvc_signature_list_distinct(list));
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
    for (const char *p = explained_by; next_item(&p, ',', item, sizeof item);) cJSON_AddItemToArray(array, cJSON_CreateString(item));
    return array;
}

cJSON *kvc_signature_list_json(const kvc_signature_list *list) {
    cJSON *array = cJSON_CreateArray();
    for (int i = 0; i < list->count; i++) {
        const kvc_signature_entry *e = &list->entries[i];
        if (e->group != i) continue;
        cJSON *item = cJSON_CreateObject();
        cJSON_AddStringToObject(item, "signature", e->signature.key);
        cJSON_AddStringToObject(item, "stage", e->signature.stage);
        cJSON_AddStringToObject(item, "stages", e->stages);
        cJSON_AddStringToObject(item, "check", e->signature.check);
        cJSON_AddStringToObject(item, "regions", e->signature.regions);
        cJSON_AddStringToObject(item, "cause", e->signature.cause);
        cJSON_AddItemToObject(item, "explained_by", explained_json(e->signature.explained_by));
        cJSON_AddBoolToObject(item, "diagnosed", e->signature.diagnosed);
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
    return array;
}

void kvc_signature_list_free(kvc_signature_list *list) {
    free(list->entries);
    memset(list, 0, sizeof *list);
}
