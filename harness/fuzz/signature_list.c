/* A campaign's failures by signature: see signature_list.h. */
#include "harness/fuzz/signature_list.h"

#include <stdlib.h>
#include <string.h>

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

kvc_signature_entry *kvc_signature_list_find(kvc_signature_list *list, const char *key) {
    for (int i = 0; i < list->count; i++)
        if (strcmp(list->entries[i].signature.key, key) == 0) return &list->entries[i];
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
    e = &list->entries[list->count++];
    memset(e, 0, sizeof *e);
    e->signature = *s;
    e->first_case = index;
    e->minimal_case = -1;
    return e;
}

void kvc_signature_list_saved(kvc_signature_entry *e, int64_t index, int64_t tokens, const char *dir, const char *repro) {
    if (e->minimal_case >= 0 && tokens >= e->minimal_tokens) return;
    e->minimal_case = index;
    e->minimal_tokens = tokens;
    snprintf(e->minimal_saved, sizeof e->minimal_saved, "%s", dir);
    snprintf(e->minimal_repro, sizeof e->minimal_repro, "%s", repro);
}

void kvc_signature_entry_text(int number, const kvc_signature_entry *e, char *out, size_t size) {
    int n = snprintf(out, size, "  [%d] %s  (%lld failure%s; regions: %s)\n      first: case %lld  __REPRO: %s\n", number,
                     e->signature.key, (long long)e->count, e->count == 1 ? "" : "s", e->signature.regions[0] ? e->signature.regions : "-",
                     (long long)e->first_case, e->first_repro);
    if (n < 0 || (size_t)n >= size) return;
    if (e->minimal_case >= 0)
        snprintf(out + n, size - (size_t)n, "      minimal: case %lld, %lld token%s, %s\n      __REPRO: %s\n", (long long)e->minimal_case,
                 (long long)e->minimal_tokens, e->minimal_tokens == 1 ? "" : "s", e->minimal_saved, e->minimal_repro);
    else snprintf(out + n, size - (size_t)n, "      minimal: none saved\n");
}

void kvc_signature_list_print(FILE *f, const kvc_signature_list *list) {
    if (!list->count) return;
    fprintf(f, "distinct failures (signatures): %d\n", list->count);
    for (int i = 0; i < list->count; i++) {
        char text[KVC_SIGNATURE_TEXT];
        kvc_signature_entry_text(i + 1, &list->entries[i], text, sizeof text);
        fputs(text, f);
    }
}

cJSON *kvc_signature_list_json(const kvc_signature_list *list) {
    cJSON *array = cJSON_CreateArray();
    for (int i = 0; i < list->count; i++) {
        const kvc_signature_entry *e = &list->entries[i];
        cJSON *item = cJSON_CreateObject();
        cJSON_AddStringToObject(item, "signature", e->signature.key);
        cJSON_AddStringToObject(item, "stage", e->signature.stage);
        cJSON_AddStringToObject(item, "check", e->signature.check);
        cJSON_AddStringToObject(item, "regions", e->signature.regions);
        cJSON_AddStringToObject(item, "cause", e->signature.cause);
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
