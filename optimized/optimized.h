/* The AVX-512 + OpenMP backend.  kvc_optimized_backend_get returns NULL
 * (with the reason) on a machine without AVX-512F/BW/VL. */
#ifndef KVCMP_OPTIMIZED_H
#define KVCMP_OPTIMIZED_H

#include <stddef.h>

#include "kvcmp/kvcmp.h"

const kvc_backend *kvc_optimized_backend_get(char *error, size_t error_size);

#endif
