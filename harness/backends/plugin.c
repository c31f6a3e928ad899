/* Candidate libraries through the plug-in ABI (include/kvcmp/plugin.h). */
#include "harness/backends/plugin.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvcmp/plugin.h"

/* kvcmp_plugin_entry() as g++ and clang++ name a C++ function of that
 * signature. */
#define KVCMP_PLUGIN_ENTRY_MANGLED_SYMBOL "_Z18kvcmp_plugin_entryv"

/* Loaded libraries stay loaded for the life of the process: their
 * backend tables are handed out by pointer. */
const kvc_backend *kvc_plugin_load(const char *path, char *error, size_t error_size) {
    /* dlopen searches the library path for a bare name; a candidate is a file. */
    char resolved[4096];
    snprintf(resolved, sizeof resolved, "%s%s", strchr(path, '/') ? "" : "./", path);
    void *library = dlopen(resolved, RTLD_NOW | RTLD_LOCAL);
    if (!library) {
        snprintf(error, error_size, "cannot load candidate %s: %s (build it as a shared library, see include/kvcmp/plugin.h)", path,
                 dlerror());
        return NULL;
    }
    kvcmp_plugin_entry_fn entry;
    *(void **)&entry = dlsym(library, KVCMP_PLUGIN_ENTRY_SYMBOL);
    if (!entry) {
        /* A C++ definition that did not see the extern "C" declaration of
         * kvcmp/plugin.h exports the Itanium-mangled name instead. */
        if (dlsym(library, KVCMP_PLUGIN_ENTRY_MANGLED_SYMBOL))
            snprintf(error, error_size,
                     "candidate %s exports %s with C++ linkage (a mangled name): declare it extern \"C\" or include kvcmp/plugin.h "
                     "before defining it",
                     path, KVCMP_PLUGIN_ENTRY_SYMBOL);
        else
            snprintf(error, error_size, "candidate %s exports no %s() (see include/kvcmp/plugin.h)", path, KVCMP_PLUGIN_ENTRY_SYMBOL);
        dlclose(library);
        return NULL;
    }
    const kvcmp_plugin *table = entry();
    if (!table || table->abi_version != KVCMP_PLUGIN_ABI_VERSION || table->struct_size < sizeof(kvcmp_plugin)) {
        snprintf(error, error_size, "candidate %s speaks plug-in ABI %u (size %u); this kvcmp speaks %u: rebuild it against include/kvcmp/plugin.h",
                 path, table ? table->abi_version : 0, table ? table->struct_size : 0, KVCMP_PLUGIN_ABI_VERSION);
        dlclose(library);
        return NULL;
    }
    kvc_backend *backend = calloc(1, sizeof *backend);
    if (!backend) { snprintf(error, error_size, "out of memory loading %s", path); return NULL; }
    backend->name = table->name ? table->name : path;
    backend->v4_save_partial_states = table->v4_save_partial_states;
    backend->v4_compress = table->v4_compress;
    backend->v41_save_compress_norm = table->v41_save_compress_norm;
    backend->v41_rope_quant_insert = table->v41_rope_quant_insert;
    backend->v41_rope_plain_insert = table->v41_rope_plain_insert;
    return backend;
}
