/* Relative paths for reports: see paths.h. */
#include "harness/report/paths.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Length of the common leading directories of two absolute paths. */
static size_t common_prefix(const char *a, const char *b) {
    size_t last = 0, i = 0;
    for (; a[i] && a[i] == b[i]; i++)
        if (a[i] == '/') last = i;
    if ((a[i] == 0 || a[i] == '/') && (b[i] == 0 || b[i] == '/')) last = i;
    return last;
}

void kvc_relative_path(const char *path, char *out, size_t size) {
    /* A relative path is already what the user typed; an absolute one is
     * taken as written (not through realpath: a symlinked ../shared should
     * stay ../shared, not become the place the link points to). */
    char full[PATH_MAX], here[PATH_MAX];
    if (path[0] != '/' || !getcwd(here, sizeof here)) { snprintf(out, size, "%s", path); return; }
    snprintf(full, sizeof full, "%s", path);
    size_t length = strlen(full);
    while (length > 1 && full[length - 1] == '/') full[--length] = 0;
    if (strcmp(full, here) == 0) { snprintf(out, size, "."); return; }
    size_t common = common_prefix(full, here), n = 0;
    out[0] = 0;
    /* One ".." for every directory of here below the common part. */
    for (const char *p = here + common; *p && n < size; p++)
        if (*p == '/') n += (size_t)snprintf(out + n, size - n, "../");
    const char *rest = full + common + (full[common] == '/');
    if (n < size) snprintf(out + n, size - n, "%s", rest);
    if (n && !rest[0] && n - 1 < size) out[n - 1] = 0;   /* "../.." rather than "../../" */
}
