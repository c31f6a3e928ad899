/* Strict .npy 1.0 reader / writer: see npy.h. */
#include "kvcmp/npy.h"

#include "common/atomic_file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <fcntl.h>

static const char *const descrs[] = {"<f4", "<i8", "<i4", "<u2", "|u1"};
static const int sizes[] = {4, 8, 4, 2, 1};

int kvc_dtype_size(kvc_dtype dtype) { return sizes[dtype]; }
const char *kvc_dtype_descr(kvc_dtype dtype) { return descrs[dtype]; }

#define FAIL(...) do { snprintf(error, error_size, __VA_ARGS__); return -1; } while (0)

/* The header is a Python dict literal, as numpy writes it:
 *   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
 * followed by spaces and a newline.  It is parsed as that literal, not
 * searched: exactly the three keys, each once, in any order, strings in
 * single or double quotes without escapes, fortran_order True or False,
 * shape a tuple of non-negative decimal integers (one element needs its
 * trailing comma, as in Python); anything else is refused by name. */
typedef struct {
    const char *start, *p, *end;   /* start: the dictionary, at byte 10 of the file */
    char *error;
    size_t error_size;
} header_cursor;

#define HFAIL(h, ...) do { snprintf((h)->error, (h)->error_size, __VA_ARGS__); return -1; } while (0)

/* Where the cursor is, as a byte offset in the file: messages name
 * places, never the file's own bytes. */
static ptrdiff_t byte_at(const header_cursor *h) { return 10 + (h->p - h->start); }

static void skip_space(header_cursor *h) {
    while (h->p < h->end && *h->p == ' ') h->p++;
}

static int at(header_cursor *h, char ch) {
    skip_space(h);
    return h->p < h->end && *h->p == ch;
}

/* A quoted string into out (NUL-terminated); -1 if there is none. */
static int parse_string(header_cursor *h, char *out, size_t size) {
    skip_space(h);
    if (h->p >= h->end || (*h->p != '\'' && *h->p != '"')) return -1;
    char quote = *h->p++;
    size_t n = 0;
    while (h->p < h->end && *h->p != quote) {
        if (*h->p == '\\' || *h->p == '\n' || n + 1 >= size) return -1;
        out[n++] = *h->p++;
    }
    if (h->p >= h->end) return -1;
    h->p++;
    out[n] = 0;
    return 0;
}

/* The word at the cursor (letters, digits, _), for naming bad values. */
static void word_at(const header_cursor *h, char *out, size_t size) {
    size_t n = 0;
    for (const char *q = h->p; q < h->end && n + 1 < size && *q != ',' && *q != '}' && *q != ' '; q++) out[n++] = *q;
    out[n] = 0;
}

static int parse_descr(header_cursor *h, kvc_array *out) {
    char value[32];
    char word[32];
    word_at(h, word, sizeof word);
    if (parse_string(h, value, sizeof value)) HFAIL(h, "header: 'descr' is %s, not a string: unsupported dtype", word);
    for (int i = 0; i < 5; i++)
        if (strcmp(value, descrs[i]) == 0) { out->dtype = (kvc_dtype)i; return 0; }
    HFAIL(h, "header: unsupported dtype '%s' (need <f4, <i8, <i4, <u2 or |u1)", value);
}

static int parse_fortran_order(header_cursor *h) {
    skip_space(h);
    char word[32];
    word_at(h, word, sizeof word);
    if (strcmp(word, "False") == 0) { h->p += 5; return 0; }
    if (strcmp(word, "True") == 0) HFAIL(h, "header: fortran_order arrays are not supported (write the array in C order)");
    HFAIL(h, "header: 'fortran_order' is %s, must be True or False", word[0] ? word : "missing");
}

static int parse_shape(header_cursor *h, kvc_array *out) {
    if (!at(h, '(')) HFAIL(h, "header: 'shape' is not a tuple");
    h->p++;
    out->ndim = 0;
    out->count = 1;
    int trailing_comma = 0;
    while (!at(h, ')')) {
        if (out->ndim == KVC_NPY_MAX_DIMS) HFAIL(h, "header: more than %d dimensions", KVC_NPY_MAX_DIMS);
        if (h->p >= h->end || *h->p < '0' || *h->p > '9') HFAIL(h, "header: bad shape entry (need a non-negative integer)");
        if (*h->p == '0' && h->p + 1 < h->end && h->p[1] >= '0' && h->p[1] <= '9')
            HFAIL(h, "header: bad shape entry (leading zero)");
        int64_t v = 0;
        while (h->p < h->end && *h->p >= '0' && *h->p <= '9') {
            if (v > (INT64_C(1) << 40)) HFAIL(h, "header: shape entry too large");
            v = v * 10 + (*h->p++ - '0');
        }
        out->shape[out->ndim++] = v;
        if (v != 0 && out->count > (INT64_C(1) << 40) / v) HFAIL(h, "header: array too large");
        out->count *= v;
        trailing_comma = at(h, ',');
        if (trailing_comma) { h->p++; continue; }
        if (!at(h, ')')) HFAIL(h, "header: bad shape tuple");
    }
    if (out->ndim == 1 && !trailing_comma) HFAIL(h, "header: 'shape' (%lld) is not a tuple (a 1-tuple needs its comma)", (long long)out->shape[0]);
    h->p++;
    return 0;
}

/* The dictionary: keys descr, fortran_order and shape, each exactly once. */
static int parse_header(header_cursor *h, kvc_array *out) {
    static const char *const keys[3] = {"descr", "fortran_order", "shape"};
    int seen[3] = {0, 0, 0};
    if (!at(h, '{')) HFAIL(h, "header is not a dictionary ending in a newline");
    h->p++;
    while (!at(h, '}')) {
        char key[32];
        if (parse_string(h, key, sizeof key)) HFAIL(h, "header: expected a quoted key at byte %td", byte_at(h));
        int k = 0;
        while (k < 3 && strcmp(key, keys[k]) != 0) k++;
        if (k == 3) HFAIL(h, "header: unexpected key '%s' (only descr, fortran_order and shape)", key);
        if (seen[k]++) HFAIL(h, "header: key '%s' appears twice", key);
        if (!at(h, ':')) HFAIL(h, "header: no ':' after '%s'", key);
        h->p++;
        int rc = k == 0 ? parse_descr(h, out) : k == 1 ? parse_fortran_order(h) : parse_shape(h, out);
        if (rc) return -1;
        if (at(h, ',')) { h->p++; continue; }
        if (!at(h, '}')) HFAIL(h, "header: expected ',' or '}' after '%s' at byte %td", key, byte_at(h));
    }
    h->p++;
    if (!seen[0] || !seen[1] || !seen[2]) HFAIL(h, "header lacks descr, fortran_order or shape");
    skip_space(h);
    if (h->p != h->end - 1 || *h->p != '\n') HFAIL(h, "header: byte %td is after the dictionary (only spaces and a newline may follow)", byte_at(h));
    return 0;
}

/* The magic, version and header dictionary at the start of bytes; the
 * data begins at *offset. */
static int parse_prefix(const uint8_t *bytes, size_t size, kvc_array *out, size_t *offset, char *error, size_t error_size) {
    memset(out, 0, sizeof *out);
    if (size < 10 || memcmp(bytes, "\x93NUMPY", 6) != 0) FAIL("not a .npy file (bad magic)");
    if (bytes[6] != 1 || bytes[7] != 0) FAIL("unsupported .npy version %d.%d (only 1.0)", bytes[6], bytes[7]);
    size_t header_len = (size_t)bytes[8] | ((size_t)bytes[9] << 8);
    if (10 + header_len > size) FAIL("truncated header (%zu bytes declared, %zu in file)", header_len, size - 10);
    const char *dict = (const char *)bytes + 10, *end = dict + header_len;
    if (header_len == 0 || dict[0] != '{' || end[-1] != '\n') FAIL("header is not a dictionary ending in a newline");
    if (memchr(dict, 0, header_len)) FAIL("header holds a NUL byte");
    header_cursor h = {.start = dict, .p = dict, .end = end, .error = error, .error_size = error_size};
    if (parse_header(&h, out)) { memset(out, 0, sizeof *out); return -1; }
    *offset = 10 + header_len;
    return 0;
}

/* The data bytes the header's shape needs against what the file holds
 * after the header: they must be equal. */
static int check_data_size(size_t held, size_t needed, char *error, size_t error_size) {
    if (held < needed) FAIL("truncated data: %zu bytes, shape needs %zu", held, needed);
    if (held > needed) FAIL("%zu trailing bytes after the data", held - needed);
    return 0;
}

static size_t data_size(const kvc_array *a) { return (size_t)a->count * (size_t)sizes[a->dtype]; }

int kvc_npy_parse(const uint8_t *bytes, size_t size, kvc_array *out, char *error, size_t error_size) {
    size_t offset;
    if (parse_prefix(bytes, size, out, &offset, error, error_size)) return -1;
    size_t data_bytes = data_size(out);
    if (check_data_size(size - offset, data_bytes, error, error_size)) { memset(out, 0, sizeof *out); return -1; }
    out->data = malloc(data_bytes ? data_bytes : 1);
    if (!out->data) FAIL("out of memory");
    memcpy(out->data, bytes + offset, data_bytes);
    return 0;
}

/* What a path that is not a regular file is, for the error message. */
static const char *file_type_name(mode_t mode) {
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISFIFO(mode)) return "a FIFO";
    if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
    if (S_ISSOCK(mode)) return "a socket";
    return "not a regular file";
}

/* Opens path for reading as a regular file, its type checked on the
 * descriptor (the file cannot change under us).  O_NONBLOCK: a FIFO must
 * not wait for a writer; O_NOFOLLOW: a case tree cannot point kvcmp at a
 * file outside it through a symlink. */
static int open_regular(const char *path, struct stat *st, char *error, size_t error_size) {
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0 && errno == ELOOP)
        FAIL("%s is a symbolic link: kvcmp reads case files only as regular files, never through a link (copy the file in)", path);
    if (fd < 0) FAIL("cannot open %s: %s", path, strerror(errno));
    if (fstat(fd, st) != 0) { int e = errno; close(fd); FAIL("cannot stat %s: %s", path, strerror(e)); }
    if (!S_ISREG(st->st_mode)) { close(fd); FAIL("%s is %s, not a regular file", path, file_type_name(st->st_mode)); }
    return fd;
}

/* Reads size bytes from fd into buffer; 0, or -1 with the reason. */
static int read_exactly(int fd, const char *path, uint8_t *buffer, size_t size, char *error, size_t error_size) {
    size_t got = 0;
    while (got < size) {
        ssize_t n = read(fd, buffer + got, size - got);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) FAIL("cannot read %s: %s", path, strerror(errno));
        if (n == 0) FAIL("cannot read %s: the file shrank while being read", path);
        got += (size_t)n;
    }
    return 0;
}

int kvc_read_regular_file(const char *path, uint8_t **bytes_out, size_t *size_out, char *error, size_t error_size) {
    *bytes_out = NULL;
    *size_out = 0;
    struct stat st;
    int fd = open_regular(path, &st, error, error_size);
    if (fd < 0) return -1;
    uint8_t *bytes = malloc((size_t)st.st_size + 1);
    if (!bytes) { close(fd); FAIL("out of memory reading %s (%lld bytes)", path, (long long)st.st_size); }
    int rc = read_exactly(fd, path, bytes, (size_t)st.st_size, error, error_size);
    close(fd);
    if (rc) { free(bytes); return -1; }
    bytes[st.st_size] = 0;
    *bytes_out = bytes;
    *size_out = (size_t)st.st_size;
    return 0;
}

/* The header is read and checked first, then the file's size against
 * the size its shape needs: a header that claims more (or less) than the
 * file holds is refused before anything that large is allocated, and the
 * data is read once, straight into the array. */
int kvc_npy_read(const char *path, kvc_array *out, char *error, size_t error_size) {
    memset(out, 0, sizeof *out);
    struct stat st;
    int fd = open_regular(path, &st, error, error_size);
    if (fd < 0) return -1;
    uint8_t head[10 + 65535];   /* the largest header version 1.0 can declare */
    size_t head_size = (size_t)st.st_size < sizeof head ? (size_t)st.st_size : sizeof head, offset = 0;
    char inner[256];
    int rc = read_exactly(fd, path, head, head_size, error, error_size);
    if (!rc && (parse_prefix(head, head_size, out, &offset, inner, sizeof inner) ||
                check_data_size((size_t)st.st_size - offset, data_size(out), inner, sizeof inner))) {
        snprintf(error, error_size, "%s: %s", path, inner);
        rc = -1;
    }
    size_t data_bytes = rc ? 0 : data_size(out), in_head = head_size - offset;
    if (!rc && !(out->data = malloc(data_bytes ? data_bytes : 1))) {
        snprintf(error, error_size, "%s: out of memory for %zu data bytes", path, data_bytes);
        rc = -1;
    }
    if (!rc) {
        memcpy(out->data, head + offset, in_head);
        rc = read_exactly(fd, path, (uint8_t *)out->data + in_head, data_bytes - in_head, error, error_size);
    }
    close(fd);
    if (rc) kvc_array_free(out);
    return rc;
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
    kvc_atomic_file a;
    if (kvc_atomic_open(&a, path, error, error_size)) return -1;
    uint16_t header_len = (uint16_t)(n + pad + 1);
    uint8_t prefix[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (uint8_t)header_len, (uint8_t)(header_len >> 8)};
    fwrite(prefix, 1, 10, a.f);
    fwrite(dict, 1, (size_t)n, a.f);
    for (int i = 0; i < pad; i++) fputc(' ', a.f);
    fputc('\n', a.f);
    fwrite(array->data, 1, (size_t)array->count * (size_t)sizes[array->dtype], a.f);
    /* A full disk shows in a write or only in the flush; the commit reports either. */
    return kvc_atomic_commit(&a, error, error_size);
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
