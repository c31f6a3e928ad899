/* C++ plug-ins (the .cpp kinds of tests/plugins): the loader finds an entry point
 * defined after including kvcmp/plugin.h, and names the mistake when one
 * was compiled with C++ linkage. */
#include "tests/test_support.h"

#include "harness/backends/plugin.h"
#include "kvcmp/backends.h"

/* A C++ test candidate, e.g. "mangled" for mangled.so. */
static void cpp_plugin(const char *kind, char *out, size_t size) {
    const char *dir = getenv("KVCMP_TEST_PLUGINS");
    snprintf(out, size, "%s/%s.so", dir && dir[0] ? dir : "build/test-plugins", kind);
    cr_assert(support_file_exists(out), "%s is missing: make test builds tests/plugins/%s.cpp into it (or set KVCMP_TEST_PLUGINS)",
              out, kind);
}

Test(cpp_plugin, mangled_entry_point_is_named) {
    char path[512], error[512] = "";
    cpp_plugin("mangled", path, sizeof path);
    cr_expect_null(kvc_plugin_load(path, error, sizeof error), "%s was accepted as a candidate", path);
    cr_expect(strstr(error, path) != NULL, "%s", error);
    cr_expect(strstr(error, "exports kvcmp_plugin_entry with C++ linkage (a mangled name): declare it extern \"C\" or include "
                            "kvcmp/plugin.h before defining it") != NULL,
              "%s", error);
    cr_expect(strstr(error, "exports no") == NULL, "%s", error);
}

Test(cpp_plugin, entry_point_after_the_header_has_c_linkage) {
    char path[512], error[512] = "";
    cpp_plugin("cpp_entry", path, sizeof path);
    const kvc_backend *backend = kvc_plugin_load(path, error, sizeof error);
    cr_assert_not_null(backend, "%s", error);
    cr_expect_str_eq(backend->name, "C++ entry point");
    cr_expect_not_null(backend->v41_rope_plain_insert);
    cr_expect_null(backend->v4_compress);
    kvc_error err = {0};
    cr_expect_eq(backend->v41_rope_plain_insert(&(kvc_v41_insert_args){0}, &err), KVC_OK);
}
