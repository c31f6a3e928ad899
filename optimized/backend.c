/* Placeholder until the optimized backend lands. */
#include <stdio.h>

#include "optimized.h"

const kvc_backend *kvc_optimized_backend_get(char *error, size_t error_size) {
    snprintf(error, error_size, "the optimized backend is not built yet");
    return NULL;
}
