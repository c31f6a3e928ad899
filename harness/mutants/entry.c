/* Plug-in entry of a mutant: the (patched) reference stages behind the
 * plug-in ABI.  Copied next to the patched sources by mk/fuzz.mk. */
#include "kvcmp/reference.h"
#include "kvcmp/plugin.h"

static const kvcmp_plugin mutant = {
    .abi_version = KVCMP_PLUGIN_ABI_VERSION,
    .struct_size = sizeof(kvcmp_plugin),
    .name = "mutant " KVC_MUTANT_NAME,
    .v4_save_partial_states = ref_v4_save_partial_states,
    .v4_compress = ref_v4_compress,
    .v41_save_compress_norm = ref_v41_save_compress_norm,
    .v41_rope_quant_insert = ref_v41_rope_quant_insert,
    .v41_rope_plain_insert = ref_v41_rope_plain_insert,
};

KVCMP_PLUGIN_EXPORT const kvcmp_plugin *kvcmp_plugin_entry(void) { return &mutant; }
