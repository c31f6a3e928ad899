/* Run metadata for everything kvcmp writes for machines (JSON, JUnit):
 * which kvcmp (version, commit), built how (compiler, flags), on which
 * CPU, and run how (the command line, the seed and the options). */
#ifndef KVCMP_RUN_INFO_H
#define KVCMP_RUN_INFO_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

/* Defined in harness/options/version.c, with kvcmp --version's string. */
const char *kvc_build_version(void);    /* "1.0.0" */
const char *kvc_build_commit(void);     /* "e22509c1a2b3", or "unknown" outside a git checkout */
const char *kvc_build_flags(void);      /* the compile line of this object's build */

const char *kvc_build_compiler(void);   /* "gcc 12.2.0" */
void kvc_cpu_model(char *out, size_t size);   /* /proc/cpuinfo "model name", or "unknown" */

/* {"kvcmp_version", "commit", "compiler", "flags", "cpu", "command_line",
 *  "started", "seed", "options"}: options (may be NULL) becomes the
 * object's "options" (ownership passes); seed only when has_seed. */
cJSON *kvc_run_info(uint64_t seed, int has_seed, cJSON *options);

/* Creates the directory that holds path when its parent exists (reports/
 * on a fresh clone); a deeper missing tree is the caller's mistake. */
void kvc_make_parent_dir(const char *path);

/* Writes root (pretty-printed) to path, creating its directory; frees
 * root.  0, or -1 with a message naming the file, why, and what to do. */
int kvc_write_json_file(const char *path, cJSON *root, char *error, size_t error_size);

/* The JSON document in the file at path; NULL when it cannot be opened,
 * is not a regular file of at most KVC_JSON_FILE_MAX_BYTES (a FIFO is
 * never waited on, a link to a device never read), is not valid JSON or
 * holds a key twice in one object.  The caller frees it with cJSON_Delete. */
#define KVC_JSON_FILE_MAX_BYTES ((size_t)64 << 20)
/* A key that appears twice in one object of the tree, or NULL (cJSON
 * keeps the first, Python's json the last: such a file is refused). */
const char *kvc_json_duplicated_key(const cJSON *item);
cJSON *kvc_read_json_file(const char *path);
/* The same with why it was refused in error (the path first, then what
 * to do), and a size limit of the caller's. */
cJSON *kvc_read_json_file_checked(const char *path, size_t max_bytes, char *error, size_t error_size);

#endif
