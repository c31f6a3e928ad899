/* Placeholder until the plug-in ABI lands. */
#include <stdio.h>

#include "plugin.h"

const kvc_backend *kvc_plugin_load(const char *path, char *error, size_t error_size) {
    snprintf(error, error_size, "cannot load %s: candidate libraries are not supported yet", path);
    return NULL;
}
