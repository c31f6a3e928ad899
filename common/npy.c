/* Strict .npy 1.0 reader / writer: see npy.h. */
#include "kvcmp/npy.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const descrs[] = {"<f4", "<i8", "<i4", "<u2", "|u1"};
static const int sizes[] = {4, 8, 4, 2, 1};

int kvc_dtype_size(kvc_dtype dtype) { return sizes[dtype]; }
const char *kvc_dtype_descr(kvc_dtype dtype) { return descrs[dtype]; }

#define FAIL(...) do { snprintf(error, error_size, __VA_ARGS__); return -1; } while (0)

/* Skip spaces in the header dictionary. */
static const char *skip_space(const char *p, const char *end) {
    while (p < end && *p == ' ') p++;
    return p;
}

static int parse_shape(const char *p, const char *end, kvc_array *out, char *error, size_t error_size) {
    if (p >= end || *p != '(') FAIL("header: 'shape' is not a tuple");
    p++;
    out->ndim = 0;
    out->count = 1;
    for (;;) {
        p = skip_space(p, end);
        if (p < end && *p == ')') break;
        if (out->ndim == KVC_NPY_MAX_DIMS) FAIL("header: more than %d dimensions", KVC_NPY_MAX_DIMS);
        if (p >= end || *p < '0' || *p > '9') FAIL("header: bad shape entry");
        int64_t v = 0;
        while (p < end && *p >= '0' && *p <= '9') {
            if (v > (INT64_C(1) << 40)) FAIL("header: shape entry too large");
            v = v * 10 + (*p++ - '0');
        }
        out->shape[out->ndim++] = v;
        if (v != 0 && out->count > (INT64_C(1) << 40) / v) FAIL("header: array too large");
        out->count *= v;
        p = skip_space(p, end);
        if (p < end && *p == ',') { p++; continue; }
        if (p < end && *p == ')') break;
        FAIL("header: bad shape tuple");
    }
    return 0;
}

/* Find `'key':` in the dictionary text and return the value's start. */
static const char *find_key(const char *dict, const char *end, const char *key) {
    size_t n = strlen(key);
    for (const char *p = dict; p + n + 3 <= end; p++)
        if (p[0] == '\'' && memcmp(p + 1, key, n) == 0 && p[n + 1] == '\'' ) {
            const char *q = skip_space(p + n + 2, end);
            if (q < end && *q == ':') return skip_space(q + 1, end);
        }
    return NULL;
}

int kvc_npy_parse(const uint8_t *bytes, size_t size, kvc_array *out, char *error, size_t error_size) {
    memset(out, 0, sizeof *out);
    if (size < 10 || memcmp(bytes, "\x93NUMPY", 6) != 0) FAIL("not a .npy file (bad magic)");
    if (bytes[6] != 1 || bytes[7] != 0) FAIL("unsupported .npy version %d.%d (only 1.0)", bytes[6], bytes[7]);
    size_t header_len = (size_t)bytes[8] | ((size_t)bytes[9] << 8);
    if (10 + header_len > size) FAIL("truncated header (%zu bytes declared, %zu in file)", header_len, size - 10);
    const char *dict = (const char *)bytes + 10, *end = dict + header_len;
    if (header_len == 0 || dict[0] != '{' || end[-1] != '\n') FAIL("header is not a dictionary ending in a newline");
    const char *descr = find_key(dict, end, "descr");
    const char *fortran = find_key(dict, end, "fortran_order");
    const char *shape = find_key(dict, end, "shape");
    if (!descr || !fortran || !shape) FAIL("header lacks descr, fortran_order or shape");
    if (end - fortran < 5 || memcmp(fortran, "False", 5) != 0) FAIL("fortran_order arrays are not supported");
    int dtype = -1;
    for (int i = 0; i < 5; i++)
        if (end - descr >= 5 && descr[0] == '\'' && memcmp(descr + 1, descrs[i], 3) == 0 && descr[4] == '\'') dtype = i;
    if (dtype < 0) FAIL("unsupported dtype (need <f4, <i8, <i4, <u2 or |u1)");
    out->dtype = (kvc_dtype)dtype;
    if (parse_shape(shape, end, out, error, error_size)) return -1;
    size_t data_bytes = (size_t)out->count * (size_t)sizes[dtype];
    size_t offset = 10 + header_len;
    if (size - offset < data_bytes) FAIL("truncated data: %zu bytes, shape needs %zu", size - offset, data_bytes);
    if (size - offset > data_bytes) FAIL("%zu trailing bytes after the data", size - offset - data_bytes);
    out->data = malloc(data_bytes ? data_bytes : 1);
    if (!out->data) FAIL("out of memory");
    memcpy(out->data, bytes + offset, data_bytes);
    return 0;
}

int kvc_npy_read(const char *path, kvc_array *out, char *error, size_t error_size) {
    memset(out, 0, sizeof *out);
    FILE *f = fopen(path, "rb");
    if (!f) FAIL("cannot open %s: %s", path, strerror(errno));
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    if (size < 0) { fclose(f); FAIL("cannot size %s", path); }
    uint8_t *bytes = malloc((size_t)size + 1);
    if (!bytes) { fclose(f); FAIL("out of memory reading %s", path); }
    size_t got = fread(bytes, 1, (size_t)size, f);
    fclose(f);
    char inner[256];
    int rc = got == (size_t)size ? kvc_npy_parse(bytes, got, out, inner, sizeof inner) : -1;
    if (got != (size_t)size) snprintf(inner, sizeof inner, "short read");
    free(bytes);
    if (rc) FAIL("%s: %s", path, inner);
    return 0;
}

int kvc_npy_write(const char *path, const kvc_array *array, char *error, size_t error_size) {
    char dict[256];
    int n = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (", descrs[array->dtype]);
    for (int i = 0; i < array->ndim; i++)
        n += snprintf(dict + n, sizeof dict - (size_t)n, array->ndim == 1 ? "%lld," : (i ? ", %lld" : "%lld"),
                      (long long)array->shape[i]);
    n += snprintf(dict + n, sizeof dict - (size_t)n, "), }");
    /* Pad so that magic + length + header is a multiple of 64. */
    int total = 10 + n + 1;
    int pad = (64 - total % 64) % 64;
    FILE *f = fopen(path, "wb");
    if (!f) FAIL("cannot create %s: %s", path, strerror(errno));
    uint16_t header_len = (uint16_t)(n + pad + 1);
    uint8_t prefix[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (uint8_t)header_len, (uint8_t)(header_len >> 8)};
    fwrite(prefix, 1, 10, f);
    fwrite(dict, 1, (size_t)n, f);
    for (int i = 0; i < pad; i++) fputc(' ', f);
    fputc('\n', f);
    size_t bytes = (size_t)array->count * (size_t)sizes[array->dtype];
    size_t wrote = fwrite(array->data, 1, bytes, f);
    if (fclose(f) != 0 || wrote != bytes) FAIL("cannot write %s", path);
    return 0;
}

void kvc_array_free(kvc_array *array) {
    free(array->data);
    memset(array, 0, sizeof *array);
}

int kvc_array_alloc(kvc_array *array, kvc_dtype dtype, int ndim, const int64_t *shape) {
    memset(array, 0, sizeof *array);
    array->dtype = dtype;
    array->ndim = ndim;
    array->count = 1;
    for (int i = 0; i < ndim; i++) { array->shape[i] = shape[i]; array->count *= shape[i]; }
    array->data = calloc((size_t)(array->count ? array->count : 1), (size_t)sizes[dtype]);
    return array->data ? 0 : -1;
}
