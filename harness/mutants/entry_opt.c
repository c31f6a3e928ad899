/* Plug-in entry of an optimized-backend mutant: one ISA's (patched)
 * stages behind the plug-in ABI.  Built by mk/fuzz.mk from a copy of
 * optimized/ with one file patched, this file compiled with that ISA's
 * flags (so the stage names below are its own, optimized/isa.h); it
 * refuses to load on a CPU without that ISA, like the backend itself. */
#include <stdio.h>

#include "kvcmp/plugin.h"
#include "optimized/optimized.h"
#include "optimized/stages.h"

static const kvcmp_plugin mutant = {
    .abi_version = KVCMP_PLUGIN_ABI_VERSION,
    .struct_size = sizeof(kvcmp_plugin),
    .name = "mutant " KVC_MUTANT_NAME,
    .v4_save_partial_states = opt_v4_save_partial_states,
    .v4_compress = opt_v4_compress,
    .v41_save_compress_norm = opt_v41_save_compress_norm,
    .v41_rope_quant_insert = opt_v41_rope_quant_insert,
    .v41_rope_plain_insert = opt_v41_rope_plain_insert,
};

KVCMP_PLUGIN_EXPORT const kvcmp_plugin *kvcmp_plugin_entry(void) {
    char why[256];
    if (!kvc_optimized_backend_for(OPT_ISA_STRING, why, sizeof why)) {
        fprintf(stderr, "mutant %s: %s\n", KVC_MUTANT_NAME, why);
        return NULL;
    }
    return &mutant;
}

/* As the fuzzer runs the built-in backend (harness/fuzz/run.c): every
 * allowed thread on every call, so that a race or a partition bug of a
 * small call shows at the thread counts the fuzzer draws. */
__attribute__((constructor)) static void use_every_allowed_thread(void) { kvc_optimized_set_thread_work(0); }
