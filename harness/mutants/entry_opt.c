/* Plug-in entry of an optimized-backend mutant: one ISA's (patched)
 * stages behind the plug-in ABI.  Built by mk/fuzz.mk from a copy of
 * optimized/ with one file patched, this file compiled with that ISA's
 * flags (so the stage names below are its own, optimized/isa.h); it
 * refuses to load on a CPU without that ISA, like the backend itself. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvcmp/plugin.h"
#include "optimized/optimized.h"
#include "optimized/stages.h"

/* Each stage under the team rule the fuzzer drew for the call
 * (KVCMP_CANDIDATE_TEAM_RULE, plugin.h), as the built-in backend runs. */
static void follow_the_team_rule(void) {
    const char *rule = getenv("KVCMP_CANDIDATE_TEAM_RULE");
    if (rule) kvc_optimized_set_team_rule(strcmp(rule, "spinning") == 0);
}
static int save(const kvc_v4_save_args *a, kvc_error *e) { follow_the_team_rule(); return opt_v4_save_partial_states(a, e); }
static int compress(const kvc_v4_compress_args *a, kvc_error *e) { follow_the_team_rule(); return opt_v4_compress(a, e); }
static int norm(const kvc_v41_norm_args *a, kvc_error *e) { follow_the_team_rule(); return opt_v41_save_compress_norm(a, e); }
static int quant_insert(const kvc_v41_insert_args *a, kvc_error *e) { follow_the_team_rule(); return opt_v41_rope_quant_insert(a, e); }
static int plain_insert(const kvc_v41_insert_args *a, kvc_error *e) { follow_the_team_rule(); return opt_v41_rope_plain_insert(a, e); }

static const kvcmp_plugin mutant = {
    .abi_version = KVCMP_PLUGIN_ABI_VERSION,
    .struct_size = sizeof(kvcmp_plugin),
    .name = "mutant " KVC_MUTANT_NAME,
    .v4_save_partial_states = save,
    .v4_compress = compress,
    .v41_save_compress_norm = norm,
    .v41_rope_quant_insert = quant_insert,
    .v41_rope_plain_insert = plain_insert,
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
