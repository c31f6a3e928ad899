/* Paths as a reader should see them in a report: relative to the
 * directory the command ran in, so that a report committed or uploaded
 * from CI names files of the checkout, not of one machine. */
#ifndef KVCMP_REPORT_PATHS_H
#define KVCMP_REPORT_PATHS_H

#include <stddef.h>

/* An absolute path relative to the current directory ("fixtures/x",
 * "../shared/y"); a relative path is copied as given. */
void kvc_relative_path(const char *path, char *out, size_t size);

#endif
