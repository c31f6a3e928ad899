/* Plug-in libraries the loader must refuse. */
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

/* ---- plug-in loading -------------------------------------------------------- */

Test(plugin_errors, not_a_file) {
    char error[512] = "";
    cr_expect_null(kvc_plugin_load("/nonexistent/candidate.so", error, sizeof error));
    cr_expect(strstr(error, "cannot load candidate /nonexistent/candidate.so") != NULL, "%s", error);
    /* A bare name is a file in the current directory, never a library-path search. */
    cr_expect_null(kvc_plugin_load("libm.so.6", error, sizeof error));
    cr_expect(strstr(error, "cannot load candidate libm.so.6") && strstr(error, "./libm.so.6"), "%s", error);
    /* A text file is not a shared object. */
    char dir[64], path[128];
    support_temp_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/fake.so", dir);
    support_write_text(path, "not ELF\n");
    cr_expect_null(kvc_backend_by_name(path, error, sizeof error));
    cr_expect(strstr(error, "cannot load candidate") != NULL, "%s", error);
    support_remove_tree(dir);
}

Test(plugin_errors, library_without_the_entry_symbol) {
    /* libcjson is loaded already, wherever it lives on this machine. */
    Dl_info info;
    cr_assert(dladdr((void *)cJSON_Version, &info) && info.dli_fname, "cannot locate libcjson");
    char error[512] = "";
    cr_expect_null(kvc_plugin_load(info.dli_fname, error, sizeof error));
    cr_expect(strstr(error, "exports no kvcmp_plugin_entry()") != NULL, "%s", error);
}

Test(plugin_errors, unknown_implementation_name) {
    char error[512] = "";
    cr_expect_null(kvc_backend_by_name("fast", error, sizeof error));
    cr_expect(strstr(error, "unknown implementation 'fast'") != NULL, "%s", error);
    cr_expect_eq(kvc_backend_by_name("reference", error, sizeof error), &kvc_reference_backend);
    const kvc_backend *opt = kvc_backend_by_name("optimized", error, sizeof error);
    cr_expect(opt == NULL ? strstr(error, "this CPU has neither") != NULL : strncmp(opt->name, "opt (", 5) == 0, "%s", error);
}

/* A built candidate, when make test has built one: loads with its name. */
Test(plugin_errors, built_candidate_loads) {
    const char *path = "build/examples/wrap_reference.so";
    if (!support_file_exists(path)) cr_skip_test("%s not built (make examples)", path);
    char error[512] = "";
    const kvc_backend *b = kvc_plugin_load(path, error, sizeof error);
    cr_assert_not_null(b, "%s", error);
    cr_expect_not_null(b->v4_compress);
    cr_expect_not_null(b->name);
}
