// A C++17 candidate that includes kvcmp/plugin.h and then defines the
// entry point like any function: the header's extern "C" declaration
// gives it C linkage, so the loader finds it by its plain name
// (tests/backends/test_cpp_plugin.c).  One stage, which writes nothing.
#include "kvcmp/plugin.h"

namespace {
int insert_nothing(const kvc_v41_insert_args *args, kvc_error *error) {
    (void)args;
    (void)error;
    return KVC_OK;
}

const kvcmp_plugin table = [] {
    kvcmp_plugin t{};
    t.abi_version = KVCMP_PLUGIN_ABI_VERSION;
    t.struct_size = sizeof(kvcmp_plugin);
    t.name = "C++ entry point";
    t.v41_rope_plain_insert = insert_nothing;
    return t;
}();
}  // namespace

const kvcmp_plugin *kvcmp_plugin_entry(void) { return &table; }
