/* kvcmp plug-in ABI, version 1: how a shared library offers kernels to
 * `kvcmp fuzz --candidate LIB.so` and `kvcmp replay --impl LIB.so`.
 *
 * A candidate library exports one C function,
 *
 *     const kvcmp_plugin *kvcmp_plugin_entry(void);
 *
 * (declared below with C linkage: C++ code defines it after including
 * this header, or inside an extern "C" block of its own), returning a pointer to a static table that lives as long as the
 * library.  The table names the ABI version it was built against and
 * supplies any subset of the stages: a NULL entry means "not offered", and
 * the fuzzer skips (and counts) the cases of that stage.
 *
 * Each stage function receives the argument structs of include/kvcmp/kvcmp.h
 * (raw pointers, explicit page strides, signed slots where negative
 * means skip) and must behave exactly as SPEC.md says, including the
 * validation: reject a bad input with the same kvc_status code as the
 * reference, fill kvc_error.message, and write nothing.  The simplest way
 * is to call the shared validators of include/kvcmp/validate.h first, as
 * examples/wrap_reference/ does.  Functions may use OpenMP; the harness
 * sets the thread count with omp_set_num_threads before each call, and
 * the environment variable KVCMP_CANDIDATE_THREADS to the same count: a
 * kernel that picks its thread count (or tiling) by a work threshold of
 * its own should use that many threads whenever it is set, however small
 * the call, so that the fuzzer's 1-vs-N check reaches its parallel path.
 * KVCMP_CANDIDATE_TEAM_RULE says, per call, "spinning" or "sleeping": a
 * kernel whose split depends on how its threads wait (OMP_WAIT_POLICY,
 * which libgomp reads once per process) may take its split from it, so
 * that both splits are fuzzed in one campaign.
 *
 * Compatibility: version 1 is this layout.  A later version appends
 * members only; the loader accepts a table whose abi_version it knows
 * and whose struct_size covers the members of that version.  Build with
 * -fvisibility=hidden and export only kvcmp_plugin_entry, so the
 * library's internals never bind to the host's symbols. */
#ifndef KVCMP_PLUGIN_ABI_H
#define KVCMP_PLUGIN_ABI_H

#include <stdint.h>

#include "kvcmp.h"

#ifdef __cplusplus
extern "C" {
#endif

#define KVCMP_PLUGIN_ABI_VERSION 1u
#define KVCMP_PLUGIN_ENTRY_SYMBOL "kvcmp_plugin_entry"

typedef struct kvcmp_plugin {
    uint32_t abi_version;            /* KVCMP_PLUGIN_ABI_VERSION */
    uint32_t struct_size;            /* sizeof(kvcmp_plugin) */
    const char *name;                /* shown in reports */
    kvc_v4_save_fn v4_save_partial_states;
    kvc_v4_compress_fn v4_compress;
    kvc_v41_norm_fn v41_save_compress_norm;
    kvc_v41_insert_fn v41_rope_quant_insert;  /* cache_dtype fp8_ds_mla */
    kvc_v41_insert_fn v41_rope_plain_insert;  /* cache_dtype bf16 or fp8_e4m3 */
} kvcmp_plugin;

typedef const kvcmp_plugin *(*kvcmp_plugin_entry_fn)(void);

#if defined(__GNUC__)
#define KVCMP_PLUGIN_EXPORT __attribute__((visibility("default")))
#else
#define KVCMP_PLUGIN_EXPORT
#endif

/* The entry point a candidate library defines (libkvcmp does not).
 * Declared here, inside extern "C", so that a C++ plug-in that includes
 * this header before defining it exports the plain C name; without the
 * declaration a C++ compiler would mangle it (_Z18kvcmp_plugin_entryv)
 * and the loader would not find it. */
KVCMP_PLUGIN_EXPORT const kvcmp_plugin *kvcmp_plugin_entry(void);

#ifdef __cplusplus
}
#endif

#endif
