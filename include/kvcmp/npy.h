/* A small, strict reader and writer of NumPy .npy files, version 1.0,
 * C order, little-endian dtypes <f4 <i8 <i4 <u2 |u1 only. */
#ifndef KVCMP_NPY_H
#define KVCMP_NPY_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KVC_NPY_MAX_DIMS 4

typedef enum { KVC_DT_F4, KVC_DT_I8, KVC_DT_I4, KVC_DT_U2, KVC_DT_U1 } kvc_dtype;

typedef struct {
    kvc_dtype dtype;
    int ndim;
    int64_t shape[KVC_NPY_MAX_DIMS];
    int64_t count;      /* product of shape */
    void *data;         /* malloc'ed, count * item size bytes */
} kvc_array;

int kvc_dtype_size(kvc_dtype dtype);
const char *kvc_dtype_descr(kvc_dtype dtype);

/* Parse a whole .npy image.  Returns 0, or -1 with a message naming the
 * problem in `error` (size error_size). */
int kvc_npy_parse(const uint8_t *bytes, size_t size, kvc_array *out, char *error, size_t error_size);
/* Reads a whole regular file into a malloc'ed buffer (NUL-terminated,
 * *size without the NUL); a directory, FIFO or device is refused without
 * blocking, with a message naming the path and what it is. */
int kvc_read_regular_file(const char *path, uint8_t **bytes, size_t *size, char *error, size_t error_size);
int kvc_npy_read(const char *path, kvc_array *out, char *error, size_t error_size);
int kvc_npy_write(const char *path, const kvc_array *array, char *error, size_t error_size);
void kvc_array_free(kvc_array *array);
/* Allocate a zeroed array of the given dtype and shape. */
int kvc_array_alloc(kvc_array *array, kvc_dtype dtype, int ndim, const int64_t *shape);

#ifdef __cplusplus
}
#endif

#endif
