/* Failure signatures: what a failure is, independent of the case that
 * showed it, so that a campaign can list each distinct failure once and
 * the shrinker can keep the failure it started from.
 *
 * A signature names the stage whose output differs first (a forward's
 * difference is blamed on its first stage that differs), the check that
 * failed (bytes, status, padding, threads, permutation ...), the regions
 * whose elements fail, and the cause class of the first failing tensor's
 * differences (harness/compare/causes.c kvc_cause_class: "wrong values"
 * for any mix of causes without a class of its own, localised by the
 * dims it is in: "wrong values in RoPE dims only", harness/diagnose/
 * locate.h).  The key groups failures: stage, check and cause (regions
 * when there is no comparison to classify), and whether the input was
 * one the contract rejects (an input corrupted on purpose): a kernel's
 * failure on a valid input is never grouped with its failures on inputs
 * it should have refused. */
#ifndef KVCMP_FUZZ_SIGNATURE_H
#define KVCMP_FUZZ_SIGNATURE_H

#include "harness/fuzz/run.h"

typedef struct {
    char stage[40];
    char check[32];
    char regions[120];        /* "NoPE code+scale byte", "" when no comparison */
    char cause[64];           /* "scale floor", "NaN to fp8" ... or "" */
    char key[200];            /* what failures are grouped by */
    int rejected_input;       /* the contract rejects the case's input */
    kvc_locus locus;          /* where a byte failure's differences are */
    int diagnosed;            /* the deviations were run on a (minimal) case */
    char explained_by[120];   /* the deviations that explain it, comma-separated
                                 ("bf16-half-away", a pair "a+b"); "" none */
    char refuted[120];        /* those that wrote the candidate's bytes on one case
                                 of the failure but not on another */
    int proof_cases;          /* the failing cases explained_by was checked on (and
                                 held): the minimal case and the one it was shrunk from */
} kvc_fuzz_signature;

/* The signature of a failing verdict on case c. */
void kvc_fuzz_signature_of(const kvc_case *c, const kvc_fuzz_verdict *v, kvc_fuzz_signature *s);
/* The signature of a case whose worker was lost: kind "crash",
 * "timeout" or "memory", cause how it ended ("signal 11", "exit status
 * 3", or ""); whether the contract rejects c is asked of the reference. */
void kvc_fuzz_signature_of_lost(const kvc_case *c, const char *kind, const char *cause, kvc_fuzz_signature *s);
/* Runs the catalogue of deviations (include/kvcmp/deviations.h) on case
 * c, which failed as verdict v under the target's candidate: fills
 * s->explained_by and sets s->diagnosed.  Only byte and status failures
 * are diagnosed (a deviation is a wrong result, not a thread or page
 * dependence); the pairs get at most `seconds`. */
void kvc_fuzz_signature_diagnose(const kvc_fuzz_target *target, const kvc_case *c, const kvc_fuzz_verdict *v, double seconds,
                                 kvc_fuzz_signature *s);
/* The diagnosis of a shrunk failure as a claim proven on both cases:
 * the explanations of `minimal` (which failed as `after`), each kept
 * only when, planted alone, it also writes the candidate's bytes on
 * `unshrunk` (the case it was shrunk from, which failed as `before`;
 * NULL: none); when none is kept, those of the unshrunk case that also
 * write the minimal case's bytes.  Fills s->explained_by (what held on
 * both), s->refuted (what fitted one and not the other), s->proof_cases
 * and s->diagnosed.  Only byte and status failures are diagnosed. */
void kvc_fuzz_signature_prove(const kvc_fuzz_target *target, const kvc_case *unshrunk, const kvc_fuzz_verdict *before,
                              const kvc_case *minimal, const kvc_fuzz_verdict *after, double seconds, kvc_fuzz_signature *s);
/* 64-bit FNV-1a of the key, never 0 (0 marks a free slot of a table). */
uint64_t kvc_fuzz_signature_hash(const char *key);

#endif
