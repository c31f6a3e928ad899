/* Candidate libraries that are wrong on purpose, for the plug-in loader's
 * refusals and the fuzzer's crash and skip paths (tests/test_campaign.c).
 * The Makefile builds one library per kind from this file:
 *
 *   no_entry     exports no kvcmp_plugin_entry
 *   null_table   kvcmp_plugin_entry returns NULL
 *   wrong_abi    a table of ABI version 2
 *   short_table  ABI 1, but struct_size smaller than version 1's table
 *   crash        v41.rope_plain_insert only, unnamed; the worker dies in
 *                it: killed by SIGKILL on a bf16 cache, _exit(3) on fp8
 *   partial      v4.save_partial_states and v41.save_compress_norm only
 *                (neither forward is complete), which always fail */
#include <signal.h>
#include <stddef.h>
#include <unistd.h>

#include "kvcmp/plugin.h"

#if defined(KIND_crash)
static int crashing_insert(const kvc_v41_insert_args *a, kvc_error *err) {
    (void)err;
    if (a->cache_dtype == KVC_CACHE_BF16) raise(SIGKILL);
    _exit(3);
}
static const kvcmp_plugin table = {
    .abi_version = KVCMP_PLUGIN_ABI_VERSION, .struct_size = sizeof(kvcmp_plugin), .name = NULL,
    .v41_rope_plain_insert = crashing_insert,
};
#elif defined(KIND_partial)
static int refuse_save(const kvc_v4_save_args *a, kvc_error *err) { (void)a; (void)err; return KVC_ERR_UNAVAILABLE; }
static int refuse_norm(const kvc_v41_norm_args *a, kvc_error *err) { (void)a; (void)err; return KVC_ERR_UNAVAILABLE; }
static const kvcmp_plugin table = {
    .abi_version = KVCMP_PLUGIN_ABI_VERSION, .struct_size = sizeof(kvcmp_plugin), .name = "partial test candidate",
    .v4_save_partial_states = refuse_save, .v41_save_compress_norm = refuse_norm,
};
#elif defined(KIND_wrong_abi)
static const kvcmp_plugin table = {.abi_version = 2, .struct_size = sizeof(kvcmp_plugin), .name = "from the future"};
#elif defined(KIND_short_table)
static const kvcmp_plugin table = {.abi_version = KVCMP_PLUGIN_ABI_VERSION, .struct_size = 8, .name = "truncated"};
#endif

#if defined(KIND_null_table)
KVCMP_PLUGIN_EXPORT const kvcmp_plugin *kvcmp_plugin_entry(void) { return NULL; }
#elif defined(KIND_no_entry)
KVCMP_PLUGIN_EXPORT int kvcmp_plugin_entry_misspelt(void) { return 1; }
#else
KVCMP_PLUGIN_EXPORT const kvcmp_plugin *kvcmp_plugin_entry(void) { return &table; }
#endif
