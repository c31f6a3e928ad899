/* Backends by name: "ref", "opt", or a path to a candidate shared library. */
#ifndef KVCMP_BACKENDS_H
#define KVCMP_BACKENDS_H

#include "kvcmp.h"

#ifdef __cplusplus
extern "C" {
#endif

/* NULL with a message in error when the name is unknown or unavailable. */
const kvc_backend *kvc_backend_by_name(const char *name, char *error, size_t error_size);

#ifdef __cplusplus
}
#endif

#endif
