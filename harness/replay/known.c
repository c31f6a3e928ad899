/* Known upstream differences: see known.h. */
#include "harness/replay/known.h"

#include "harness/report/run_info.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

/* Class names and label wording of the corpora, by the words they contain
 * (the cause slugs themselves are matched first). */
static const struct {
    const char *contains;
    kvc_parity_cause cause;
} label_words[] = {
    {"save-nan-payload", KVC_CAUSE_NAN_PAYLOAD},
    {"exp-last-bit", KVC_CAUSE_LAST_BIT},
    {"contract NaN, Triton +-448", KVC_CAUSE_NAN_TO_448},
    {"contract NaN, Triton finite", KVC_CAUSE_NAN_TO_448},
    {"contract 255 (NaN/inf block)", KVC_CAUSE_NAN_TO_448},
    {"0x7fff", KVC_CAUSE_NAN_ALL_ONES},
    {"1 step", KVC_CAUSE_LAST_BIT},
    {"1 ulp", KVC_CAUSE_LAST_BIT},
    {"ring row: contract writes, Triton leaves untouched", KVC_CAUSE_RING_AFTER_PADDING},
    {"plain NoPE bf16: Triton NaN, contract finite", KVC_CAUSE_NOPE_PAIR_ROTATED},
    {"plain fp8 NoPE: ", KVC_CAUSE_NOPE_PAIR_ROTATED},
};

kvc_parity_cause kvc_cause_from_label(const char *label) {
    for (int k = 0; k < KVC_CAUSE_COUNT; k++)
        if (strcmp(label, kvc_cause_slug((kvc_parity_cause)k)) == 0) return (kvc_parity_cause)k;
    for (size_t i = 0; i < sizeof label_words / sizeof label_words[0]; i++)
        if (strstr(label, label_words[i].contains)) return label_words[i].cause;
    return KVC_CAUSE_COUNT;
}

/* The mask of one class entry: a name, or a list of labels. */
static unsigned class_mask(const cJSON *entry, char *label, size_t label_size) {
    unsigned mask = 0;
    size_t used = 0;
    int count = cJSON_IsArray(entry) ? cJSON_GetArraySize(entry) : 1;
    for (int i = 0; i < count; i++) {
        const char *text = cJSON_GetStringValue(cJSON_IsArray(entry) ? cJSON_GetArrayItem(entry, i) : entry);
        kvc_parity_cause cause = text ? kvc_cause_from_label(text) : KVC_CAUSE_COUNT;
        if (cause == KVC_CAUSE_COUNT) { label[0] = 0; return 0; }
        mask |= 1u << cause;
        if (used < label_size) used += (size_t)snprintf(label + used, label_size - used, "%s%s", i ? "; " : "", text);
    }
    return mask;
}

unsigned kvc_known_causes(const char *case_dir, char *label, size_t label_size) {
    char full[4096], dir[4096];
    label[0] = 0;
    snprintf(full, sizeof full, "%s", case_dir);
    size_t length = strlen(full);
    while (length > 1 && full[length - 1] == '/') full[--length] = 0;
    memcpy(dir, full, length + 1);
    /* Up to three levels up; the key is the path below that directory. */
    for (int level = 1; level <= 3; level++) {
        char *slash = strrchr(dir, '/');
        if (!slash) return 0;
        *slash = 0;
        const char *key = full + (slash - dir) + 1;
        char path[4200];
        snprintf(path, sizeof path, "%s/classes.json", dir);
        cJSON *classes = kvc_read_json_file(path);
        const cJSON *entry = cJSON_GetObjectItemCaseSensitive(classes, key);
        unsigned mask = entry ? class_mask(entry, label, label_size) : 0;
        cJSON_Delete(classes);
        if (entry) return mask;
    }
    return 0;
}

int kvc_differences_known(const int64_t counts[KVC_CAUSE_COUNT], unsigned known, int tolerant) {
    unsigned allowed = known | 1u << KVC_CAUSE_SCALE_FOLLOWS, found = 0;
    if (tolerant) allowed |= 1u << KVC_CAUSE_LAST_BIT | 1u << KVC_CAUSE_NAN_ALL_ONES | 1u << KVC_CAUSE_NAN_PAYLOAD;
    for (int k = 0; k < KVC_CAUSE_COUNT; k++)
        if (counts[k]) found |= 1u << k;
    return (found & known) != 0 && (found & ~allowed) == 0;
}
