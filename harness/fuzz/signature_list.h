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
#include "kvcmp/generate.h"

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

/* Passing cases sampled per variant: the lowest case indices. */
#define KVC_PASSING_SAMPLE 8
#define KVC_SAMPLED_VARIANTS 64
_Static_assert(KVC_PASSING_SAMPLE <= 8, "a variant's sampled cases are the bits of one byte");

/* An entry per byte-class key (raw_key, what the workers claim and the
 * shrinker keeps).  An explanation is a claim to prove: a deviation (or
 * composition) names an entry only when, planted alone, it wrote the
 * candidate's bytes on every failing case of the entry that was kept and
 * diagnosed (each before and after shrinking: kvc_fuzz_signature_prove)
 * and the contract's bytes on the sampled passing cases of its stages
 * (kvc_signature_list_prove).  A diagnosed entry so explained is listed
 * under "explained by NAMES"; once proven, entries whose explanations
 * share a deviation are one signature: all but the first point to it
 * (group) and are not listed. */
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
    kvc_locus locus;                /* where its failures' differences are, summed */
    int64_t proof_failing;          /* failing cases its explanation was checked on */
    int64_t proof_passing;          /* passing cases of its stages it was checked on */
    uint8_t passing_checked[KVC_SAMPLED_VARIANTS];    /* which: bit k of [v], the k-th sampled case of variant v */
    int unproven;                   /* kept byte failures that were not diagnosed */
    int from_summaries;             /* read from campaign summaries (kvcmp merge): the proof counts are theirs */
    int64_t passing_elsewhere;      /* passing cases checked in the summaries merged (not in passing_checked) */
    int64_t proof_held;             /* from_summaries: the cases on which the summaries' explanations held */
    char **saved_dirs;              /* every case saved for it (owned) */
    int num_saved;
} kvc_signature_entry;

typedef struct {
    kvc_signature_entry *entries;
    int count, capacity;
    int64_t passing[KVC_SAMPLED_VARIANTS][KVC_PASSING_SAMPLE];
    int passing_count[KVC_SAMPLED_VARIANTS];
    int folded;                     /* the groups were formed (their entries' failures summed) */
    int proven;                     /* kvc_signature_list_prove ran */
    int kept_per_signature;         /* the failures of each byte class it kept (for the summary) */
} kvc_signature_list;

/* The entry of s (added with count 0 and first_case `index` if new);
 * s's locus is added to the entry's. */
kvc_signature_entry *kvc_signature_list_get(kvc_signature_list *list, const kvc_fuzz_signature *s, int64_t index);
/* The entry that lists the failures of byte-class key `key`. */
kvc_signature_entry *kvc_signature_list_find(kvc_signature_list *list, const char *key);
/* The diagnosis of a failure of byte-class key `key` (the worker's
 * kvc_fuzz_signature_prove): the first names its entry's explanation;
 * each later one keeps only the names it shares (the others are
 * refuted: they did not write that failure's bytes), so that an entry
 * with one unexplained failure is unexplained.  A byte or status failure
 * saved without a diagnosis leaves the entry unproven. */
void kvc_signature_list_explain(kvc_signature_list *list, const char *key, const kvc_fuzz_signature *diagnosed);
/* A summary's diagnosis of byte-class key `key` (kvcmp merge: its
 * "explained_by" and "explanation_proof"): as kvc_signature_list_explain
 * (names refuted there stay refuted), and the proof counts added: the
 * passing cases checked, the cases on which the explanation held, the
 * failures not diagnosed.  An entry whose summaries' explanation did not
 * hold on every case checked is unexplained (kvc_signature_list_settle). */
void kvc_signature_list_add_proof(kvc_signature_list *list, const char *key, const kvc_fuzz_signature *diagnosed, int64_t passing,
                                  int64_t held, int64_t not_diagnosed);
/* The end of a merge: each entry read from summaries is explained only
 * when every summary's proof held on every case it checked and every
 * failure kept was diagnosed; else its names are refuted. */
void kvc_signature_list_settle(kvc_signature_list *list);
/* Case `index` of `variant` passed: kept when among the variant's
 * KVC_PASSING_SAMPLE lowest. */
void kvc_signature_list_passed(kvc_signature_list *list, int variant, int64_t index);
/* The end of a campaign: each entry's explanations planted on the
 * sampled passing cases of its stages (regenerated from gen; none under
 * a policy other than exact, where a pass need not be the contract's
 * bytes) must write the contract's bytes there, or are refuted; an
 * unproven entry is unexplained; then entries sharing a deviation are
 * grouped, and every saved case's case.json gets its signature's final
 * diagnosis (meta "diagnosis", which `kvcmp replay` follows).  kept: the
 * failures of each byte class the campaign shrank and diagnosed. */
void kvc_signature_list_prove(kvc_signature_list *list, const kvc_gen_config *gen, int exact_policy, int kept);
/* Listed signatures (entries not merged into another). */
int kvc_signature_list_distinct(const kvc_signature_list *list);
/* Root causes: the listed signatures as the diagnosis so far groups
 * them, what --max-failures counts.  Signatures whose explanations (the
 * deviations that wrote the candidate's bytes) share a deviation are one
 * root cause; a signature without an explanation (undiagnosed, not yet
 * diagnosed, or unexplained) is one per stage, input validity and
 * localisation (kvc_signature_root_key).  The grouping is computed on the
 * fly (entries are not merged); root[i], when given, gets entry i's root
 * cause number (1, 2 ... in list order; 0 for an entry merged into
 * another). */
int kvc_signature_list_root_causes(const kvc_signature_list *list, int *root);
/* The localisation that groups a signature without an explanation: a
 * value difference with no class of its own ("wrong values ...", "last
 * bit") is named by the step its first wrong value arises in
 * (kvc_locus_origin: "v4.compress | before step 7, ..."); a named cause
 * class, a status, a crash ... by its check and cause. */
void kvc_signature_root_key(const kvc_signature_entry *e, char *out, size_t size);
/* The rule kvc_signature_list_root_causes applies, in words. */
extern const char *const kvc_root_cause_rule;
/* Groups the entries sharing a deviation (when not yet grouped) and
 * drops those merged into others (their byte-class keys are no longer
 * found): every entry is then listed, and may be reordered. */
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
#define KVC_SIGNATURE_TEXT 4000
void kvc_signature_entry_text(int number, const kvc_signature_entry *e, char *out, size_t size);
void kvc_signature_list_print(FILE *f, const kvc_signature_list *list);
/* A JSON array of the entries (the caller owns it). */
cJSON *kvc_signature_list_json(const kvc_signature_list *list);
void kvc_signature_list_free(kvc_signature_list *list);

#endif
