// A C++ candidate that defines its entry point without the extern "C"
// declaration of kvcmp/plugin.h: the compiler mangles the name
// (_Z18kvcmp_plugin_entryv) and the loader must say so
// (tests/backends/test_cpp_plugin.c).  It defines its own table type, as
// a plug-in that copied the struct instead of including the header would.
#include <cstdint>

struct kvcmp_plugin {
    std::uint32_t abi_version, struct_size;
    const char *name;
    void *stages[5];
};

static const kvcmp_plugin table = {1, sizeof(kvcmp_plugin), "mangled entry point", {}};

__attribute__((visibility("default"))) const kvcmp_plugin *kvcmp_plugin_entry() { return &table; }
