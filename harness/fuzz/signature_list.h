/* A campaign's failures grouped by signature (harness/fuzz/signature.h):
 * the workers' shared claim table, which decides which failures are
 * shrunk and saved (the first few of each signature), and the parent's
 * list, which the summary and the JSON report print. */
#ifndef KVCMP_FUZZ_SIGNATURE_LIST_H
#define KVCMP_FUZZ_SIGNATURE_LIST_H

#include <stdint.h>
#include <stdio.h>

#include <cjson/cJSON.h>

#include "harness/fuzz/signature.h"

/* In memory shared by the workers (MAP_SHARED): failures claimed per
 * signature hash.  Open addressing; a full table claims nothing new. */
#define KVC_SIGNATURE_SLOTS 1024
typedef struct {
    uint64_t hash[KVC_SIGNATURE_SLOTS];
    int count[KVC_SIGNATURE_SLOTS];
} kvc_signature_claims;

/* Counts one more failure of key; returns how many there are now (1 for
 * the first), or INT32_MAX when the table is full. */
int kvc_signature_claim(kvc_signature_claims *claims, const char *key);

/* An entry per byte-class key (raw_key, what the workers claim and the
 * shrinker keeps).  A diagnosed entry explained by deviations is listed
 * under "explained by NAMES"; entries whose explanations share a
 * deviation are one signature: all but the first point to it (group)
 * and are not listed. */
typedef struct {
    kvc_fuzz_signature signature;
    char raw_key[200];
    int group;                      /* the entry that lists this one's failures */
    char stages[160];               /* the stages of the entries merged into it, "+"-joined */
    int64_t count;
    int64_t first_case;
    char first_repro[800];          /* regenerates the first case */
    int64_t minimal_case;           /* -1 until a case is saved */
    int64_t minimal_tokens;
    char minimal_saved[400];
    char minimal_repro[900];        /* replays the minimal saved case */
} kvc_signature_entry;

typedef struct {
    kvc_signature_entry *entries;
    int count, capacity;
} kvc_signature_list;

/* The entry of s (added with count 0 and first_case `index` if new). */
kvc_signature_entry *kvc_signature_list_get(kvc_signature_list *list, const kvc_fuzz_signature *s, int64_t index);
/* The entry that lists the failures of byte-class key `key`. */
kvc_signature_entry *kvc_signature_list_find(kvc_signature_list *list, const char *key);
/* The diagnosis of a failure of byte-class key `key` (the worker's
 * kvc_fuzz_signature_diagnose): the first names its entry's explanation
 * (later ones narrow it to the deviations they share); an explained
 * entry is merged with every listed entry whose explanation shares a
 * deviation. */
void kvc_signature_list_explain(kvc_signature_list *list, const char *key, const kvc_fuzz_signature *diagnosed);
/* Listed signatures (entries not merged into another). */
int kvc_signature_list_distinct(const kvc_signature_list *list);
/* Drops the entries merged into others (their byte-class keys are no
 * longer found): every entry is then listed, and may be reordered. */
void kvc_signature_list_compact(kvc_signature_list *list);
/* "bf16-half-away (SPEC 1 bf16), a+b (SPEC ...; SPEC ...)" for an
 * explained_by list. */
void kvc_explanation_text(const char *explained_by, char *out, size_t size);
/* A saved case of the signature; kept as the minimal one when it has
 * fewer tokens than the one so far. */
void kvc_signature_list_saved(kvc_signature_entry *e, int64_t index, int64_t tokens, const char *dir, const char *repro);
/* "  [number] KEY  (N failures; regions: ...)", the first case's and the
 * minimal saved case's __REPRO lines (what the summary prints, and the
 * text of a signature's JUnit testcase). */
#define KVC_SIGNATURE_TEXT 2400
void kvc_signature_entry_text(int number, const kvc_signature_entry *e, char *out, size_t size);
void kvc_signature_list_print(FILE *f, const kvc_signature_list *list);
/* A JSON array of the entries (the caller owns it). */
cJSON *kvc_signature_list_json(const kvc_signature_list *list);
void kvc_signature_list_free(kvc_signature_list *list);

#endif
