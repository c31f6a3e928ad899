/* The version of this build: KVCMP_VERSION and, when the build knew it,
 * KVCMP_COMMIT come from the Makefile (-D). */
#include "harness/options/options.h"
#include "harness/report/run_info.h"

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

/* The pieces, for the run metadata (harness/report/run_info.c). */
const char *kvc_build_version(void) { return KVCMP_VERSION; }

const char *kvc_build_commit(void) {
#ifdef KVCMP_COMMIT
    return KVCMP_COMMIT;
#else
    return "unknown";
#endif
}

#ifndef KVCMP_BUILD_FLAGS
#define KVCMP_BUILD_FLAGS "unknown"
#define KVCMP_SANITIZED_FLAGS "unknown"
#endif

/* The test objects are built with the sanitizers, the release ones without. */
const char *kvc_build_flags(void) {
#if defined(__SANITIZE_ADDRESS__)
    return KVCMP_SANITIZED_FLAGS;
#else
    return KVCMP_BUILD_FLAGS;
#endif
}
