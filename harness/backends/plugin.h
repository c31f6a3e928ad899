/* External kernels: load a candidate shared library as a backend. */
#ifndef KVCMP_PLUGIN_H
#define KVCMP_PLUGIN_H

#include <stddef.h>

#include "kvcmp/kvcmp.h"

const kvc_backend *kvc_plugin_load(const char *path, char *error, size_t error_size);

#endif
