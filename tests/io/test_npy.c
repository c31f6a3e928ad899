/* Malformed .npy images: every refusal names what is wrong. */
#include <cjson/cJSON.h>
#include <dlfcn.h>
#include <omp.h>

#include "tests/test_support.h"

#include "kvcmp/npy.h"
#include "kvcmp/validate.h"
#include "kvcmp/backends.h"
#include "kvcmp/compare.h"
#include "harness/fuzz/run.h"
#include "kvcmp/shrink.h"
#include "harness/fuzz/history.h"
#include "harness/backends/plugin.h"
#include "harness/replay/replay.h"
#include "kvcmp/run.h"

/* ---- .npy images ----------------------------------------------------------- */

/* Parses and expects a refusal whose message contains `needle`. */
static void expect_npy_error(const uint8_t *bytes, size_t size, const char *needle) {
    kvc_array array;
    char error[256] = "";
    cr_assert_eq(kvc_npy_parse(bytes, size, &array, error, sizeof error), -1, "accepted, expected an error containing '%s'", needle);
    cr_expect(strstr(error, needle) != NULL, "error '%s' does not contain '%s'", error, needle);
    cr_expect_null(array.data, "a refused image left data allocated");
}

#define F4_2 "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }"

Test(npy_errors, bad_magic_and_too_short) {
    uint8_t image[256];
    size_t size = support_npy_image(image, sizeof image, F4_2, 8);
    image[1] = 'X';
    expect_npy_error(image, size, "bad magic");
    expect_npy_error((const uint8_t *)"\x93NUMPY", 6, "bad magic");
}

Test(npy_errors, version_2_0) {
    uint8_t image[256];
    size_t size = support_npy_image(image, sizeof image, F4_2, 8);
    image[6] = 2;
    expect_npy_error(image, size, "unsupported .npy version 2.0");
}

Test(npy_errors, header_longer_than_file) {
    uint8_t image[256];
    support_npy_image(image, sizeof image, F4_2, 8);
    expect_npy_error(image, 40, "truncated header");
}

Test(npy_errors, header_not_a_dictionary) {
    uint8_t image[256];
    size_t size = support_npy_image(image, sizeof image, F4_2, 8);
    image[10] = '[';
    expect_npy_error(image, size, "not a dictionary");
}

Test(npy_errors, header_missing_a_key) {
    uint8_t image[256];
    size_t size = support_npy_image(image, sizeof image, "{'descr': '<f4', 'shape': (2,), }", 8);
    expect_npy_error(image, size, "lacks descr, fortran_order or shape");
}

Test(npy_errors, fortran_order) {
    uint8_t image[256];
    size_t size = support_npy_image(image, sizeof image, "{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }", 8);
    expect_npy_error(image, size, "fortran_order arrays are not supported");
}

Test(npy_errors, unsupported_dtypes) {
    static const char *const dicts[] = {
        "{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }",   /* double */
        "{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }",   /* big-endian */
        "{'descr': '<f2', 'fortran_order': False, 'shape': (2,), }",   /* half */
        "{'descr': 7, 'fortran_order': False, 'shape': (2,), }",       /* not a string */
    };
    for (size_t i = 0; i < sizeof dicts / sizeof dicts[0]; i++) {
        uint8_t image[256];
        size_t size = support_npy_image(image, sizeof image, dicts[i], 16);
        expect_npy_error(image, size, "unsupported dtype");
    }
}

Test(npy_errors, malformed_shapes) {
    static const struct {
        const char *dict, *needle;
    } cases[] = {
        {"{'descr': '<f4', 'fortran_order': False, 'shape': 2, }", "not a tuple"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1, 1, 2), }", "more than 4 dimensions"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (x,), }", "bad shape entry"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }", "bad shape entry"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2 2), }", "bad shape tuple"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", "shape entry too large"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1048576, 1048576, 4), }", "array too large"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint8_t image[256];
        size_t size = support_npy_image(image, sizeof image, cases[i].dict, 8);
        expect_npy_error(image, size, cases[i].needle);
    }
}

Test(npy_errors, truncated_and_trailing_data) {
    uint8_t image[256];
    size_t size = support_npy_image(image, sizeof image, F4_2, 4);
    expect_npy_error(image, size, "truncated data: 4 bytes, shape needs 8");
    size = support_npy_image(image, sizeof image, F4_2, 12);
    expect_npy_error(image, size, "4 trailing bytes after the data");
}

Test(npy_errors, zero_dimensional_and_empty_arrays_parse) {
    uint8_t image[256];
    kvc_array array;
    char error[256];
    size_t size = support_npy_image(image, sizeof image, "{'descr': '<i8', 'fortran_order': False, 'shape': (), }", 8);
    cr_assert_eq(kvc_npy_parse(image, size, &array, error, sizeof error), 0, "%s", error);
    cr_expect_eq(array.ndim, 0);
    cr_expect_eq(array.count, 1);
    cr_expect_eq(array.dtype, KVC_DT_I8);
    kvc_array_free(&array);
    size = support_npy_image(image, sizeof image, "{'descr': '|u1', 'fortran_order': False, 'shape': (3, 0), }", 0);
    cr_assert_eq(kvc_npy_parse(image, size, &array, error, sizeof error), 0, "%s", error);
    cr_expect_eq(array.count, 0);
    cr_expect_eq(array.shape[0], 3);
    kvc_array_free(&array);
}

Test(npy_errors, read_names_the_file) {
    char dir[64], path[128];
    support_temp_dir(dir, sizeof dir);
    kvc_array array;
    char error[512];
    snprintf(path, sizeof path, "%s/absent.npy", dir);
    cr_assert_eq(kvc_npy_read(path, &array, error, sizeof error), -1);
    cr_expect(strstr(error, "cannot open") && strstr(error, "absent.npy"), "%s", error);
    /* A broken file: the message carries the path and the parser's reason. */
    snprintf(path, sizeof path, "%s/broken.npy", dir);
    support_write_text(path, "\x93NUMPY\x02\x01 nothing else");
    cr_assert_eq(kvc_npy_read(path, &array, error, sizeof error), -1);
    cr_expect(strstr(error, "broken.npy: unsupported .npy version 2.1") != NULL, "%s", error);
    /* A write into a missing directory fails with the path. */
    snprintf(path, sizeof path, "%s/no/such/dir/x.npy", dir);
    int64_t shape[1] = {3};
    cr_assert_eq(kvc_array_alloc(&array, KVC_DT_F4, 1, shape), 0);
    cr_expect_eq(kvc_npy_write(path, &array, error, sizeof error), -1);
    cr_expect(strstr(error, "cannot write") && strstr(error, "x.npy: No such file or directory"), "%s", error);
    kvc_array_free(&array);
    support_remove_tree(dir);
}

Test(npy_errors, write_then_read_is_bit_exact_for_every_dtype) {
    char dir[64], path[128], error[256];
    support_temp_dir(dir, sizeof dir);
    for (int dtype = KVC_DT_F4; dtype <= KVC_DT_U1; dtype++) {
        int64_t shape[3] = {2, 3, 5};
        kvc_array written, read;
        cr_assert_eq(kvc_array_alloc(&written, (kvc_dtype)dtype, 3, shape), 0);
        size_t bytes = (size_t)written.count * (size_t)kvc_dtype_size(written.dtype);
        for (size_t i = 0; i < bytes; i++) ((uint8_t *)written.data)[i] = (uint8_t)(i * 37 + 11);
        snprintf(path, sizeof path, "%s/t%d.npy", dir, dtype);
        cr_assert_eq(kvc_npy_write(path, &written, error, sizeof error), 0, "%s", error);
        cr_assert_eq(kvc_npy_read(path, &read, error, sizeof error), 0, "%s", error);
        cr_expect_eq(read.dtype, written.dtype);
        cr_expect_eq(read.ndim, 3);
        cr_expect_eq(read.shape[2], 5);
        cr_expect_eq(memcmp(read.data, written.data, bytes), 0, "dtype %s changed on the round trip", kvc_dtype_descr(written.dtype));
        kvc_array_free(&written);
        kvc_array_free(&read);
    }
    support_remove_tree(dir);
}
