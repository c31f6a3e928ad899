/* The version of this build: KVCMP_VERSION and, when the build knew it,
 * KVCMP_COMMIT come from the Makefile (-D). */
#include "harness/options/options.h"

#ifndef KVCMP_VERSION
#define KVCMP_VERSION "unknown"
#endif

const char *kvc_version_string(void) {
#ifdef KVCMP_COMMIT
    return "kvcmp " KVCMP_VERSION " (commit " KVCMP_COMMIT ")";
#else
    return "kvcmp " KVCMP_VERSION;
#endif
}
