/* Cases in the interchange format (SPEC.md section 8): a directory with
 * case.json and one .npy per tensor; expected results as NAME.out.npy. */
#ifndef KVCMP_CASE_IO_H
#define KVCMP_CASE_IO_H

#include "kvcmp.h"
#include "npy.h"

#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    KVC_STAGE_V4_SAVE_PARTIAL_STATES,
    KVC_STAGE_V4_COMPRESS,
    KVC_STAGE_V4_FORWARD,
    KVC_STAGE_V41_SAVE_COMPRESS_NORM,
    KVC_STAGE_V41_ROPE_QUANT_INSERT,
    KVC_STAGE_V41_ROPE_PLAIN_INSERT,
    KVC_STAGE_V41_FORWARD,
    KVC_STAGE_COUNT
} kvc_stage;

const char *kvc_stage_name(kvc_stage stage);
int kvc_stage_from_name(const char *name);   /* -1 if unknown */
const char *kvc_cache_dtype_name(kvc_cache_dtype dtype);
int kvc_cache_dtype_from_name(const char *name);

#define KVC_CASE_MAX_TENSORS 32

typedef struct {
    char name[48];          /* role, e.g. "kv_cache" or "kv_cache.out" */
    kvc_array array;
} kvc_named_array;

typedef struct {
    kvc_stage stage;
    int32_t compress_ratio;
    int32_t head_dim;
    float eps;
    int has_cache_dtype;
    kvc_cache_dtype cache_dtype;
    char source[1024];
    char *meta_json;        /* the case's "meta" object as JSON text, or NULL */
    int num_tensors;
    kvc_named_array tensors[KVC_CASE_MAX_TENSORS];
} kvc_case;

int kvc_case_load(const char *dir, kvc_case *c, char *error, size_t error_size);
/* Writes case.json and every tensor as the directory dir (parents
 * created), whole or not at all: written aside and renamed into place.
 * An existing case directory (or an empty one) is replaced whole; a
 * symbolic link, a file or a directory holding anything else is refused.
 * Tensor names must be plain file names (no '/', "..", leading '.'). */
int kvc_case_save(const char *dir, const kvc_case *c, char *error, size_t error_size);
/* Saves a new case as parent/name without ever replacing one: written
 * into a hidden temporary directory and renamed into place, so a case is
 * never half-written; when the name is taken, name-2, name-3 ... The path
 * written goes to `saved`.  Errors carry the path and errno's reason. */
int kvc_case_save_new(const char *parent, const char *name, const kvc_case *c, char *saved, size_t saved_size, char *error,
                      size_t error_size);
/* Removes what a save by process `pid` left in parent when that process
 * was killed mid-write. */
void kvc_case_remove_partial_saves(const char *parent, pid_t pid);
/* rm -r (no symlinks followed); 0 or -1. */
int kvc_remove_tree(const char *path);
void kvc_case_free(kvc_case *c);
kvc_array *kvc_case_get(const kvc_case *c, const char *name);
/* Adds or replaces a tensor; the case takes ownership of array->data. */
int kvc_case_put(kvc_case *c, const char *name, kvc_array *array);
/* Deep copy. */
int kvc_case_copy(kvc_case *dst, const kvc_case *src);
/* 1 if dir/case.json exists as a regular file or a symlink (which then
 * fails to load: a case file is never read through a link). */
int kvc_is_case_dir(const char *dir);

#ifdef __cplusplus
}
#endif

#endif
