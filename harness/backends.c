/* Backend lookup: see backends.h. */
#include "backends.h"

#include <stdio.h>
#include <string.h>

const kvc_backend *kvc_backend_by_name(const char *name, char *error, size_t error_size) {
    if (strcmp(name, "ref") == 0 || strcmp(name, "reference") == 0) return &kvc_reference_backend;
    snprintf(error, error_size, "unknown implementation '%s' (known: ref)", name);
    return NULL;
}
