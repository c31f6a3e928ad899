/* Backend lookup: see backends.h. */
#include "kvcmp/backends.h"
#include "kvcmp/deviations.h"

#include <stdio.h>
#include <string.h>

#include "optimized/optimized.h"
#include "harness/backends/plugin.h"
#include "harness/backends/pyworker.h"

const kvc_backend *kvc_backend_by_name(const char *name, char *error, size_t error_size) {
    if (strcmp(name, "ref") == 0 || strcmp(name, "reference") == 0) return &kvc_reference_backend;
    if (strcmp(name, "opt") == 0 || strcmp(name, "optimized") == 0) return kvc_optimized_backend_get(error, error_size);
    if (strncmp(name, "opt-", 4) == 0) return kvc_optimized_backend_for(name + 4, error, error_size);
    if (strncmp(name, "deviation:", 10) == 0) {
        const kvc_backend *variant = kvc_deviation_backend(kvc_deviation_find(name + 10));
        if (!variant) snprintf(error, error_size, "unknown deviation '%s' (kvcmp fuzz --list names them)", name + 10);
        return variant;
    }
    if (strncmp(name, "py:", 3) == 0) return kvc_pyworker_backend(name + 3, error, error_size);
    if (strchr(name, '/') || strstr(name, ".so")) return kvc_plugin_load(name, error, error_size);
    snprintf(error, error_size, "unknown implementation '%s' (ref, opt, opt-avx512, opt-avx2, deviation:NAME, a path to a candidate .so, or py:FILE.py:FUNCTION)", name);
    return NULL;
}
