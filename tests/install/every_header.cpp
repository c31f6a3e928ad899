// Built by `make install-check` against the installed libkvcmp alone
// (pkg-config --cflags --libs kvcmp): every public header compiles as
// C++17 and links, and a reference stage runs through the library.
// The expectations come from SPEC.md 5.3 (rope_plain_insert, bf16 cache)
// with an identity rotation: every dim is stored as it came, a NaN as
// 0x7FC0, a skipped token's row is untouched, an out-of-range slot is
// refused with nothing written.
#include <kvcmp/backends.h>
#include <kvcmp/case.h>
#include <kvcmp/compare.h>
#include <kvcmp/formats.h>
#include <kvcmp/generate.h>
#include <kvcmp/kvcmp.h>
#include <kvcmp/layout.h>
#include <kvcmp/npy.h>
#include <kvcmp/plugin.h>
#include <kvcmp/reference.h>
#include <kvcmp/reference_steps.h>
#include <kvcmp/rng.h>
#include <kvcmp/run.h>
#include <kvcmp/shrink.h>
#include <kvcmp/validate.h>

#include <cstdio>
#include <cstring>
#include <type_traits>
#include <vector>

// kvcmp/plugin.h declares the plug-ins' entry point (a plug-in defines it,
// libkvcmp does not), so a C++ plug-in's definition gets C linkage.
static_assert(std::is_same_v<decltype(&kvcmp_plugin_entry), kvcmp_plugin_entry_fn>,
              "kvcmp/plugin.h declares kvcmp_plugin_entry as kvcmp_plugin_entry_fn");

static int failures = 0;
static void expect(bool ok, const char *what) {
    if (!ok) {
        std::fprintf(stderr, "every_header: %s\n", what);
        failures++;
    }
}

int main() {
    const int rows = 4, dims = KVC_V41_HEAD_DIM;
    std::vector<uint16_t> latent(2 * dims);
    for (int i = 0; i < 2 * dims; i++) latent[i] = static_cast<uint16_t>(0x3F80 + (i % 127));  // 1.0 .. 1.98
    latent[5] = 0x7FFF;                                                // a non-canonical NaN
    std::vector<float> cos_sin(2 * KVC_ROPE_DIMS, 0.0f);
    for (int row = 0; row < 2; row++)
        for (int j = 0; j < KVC_ROPE_DIMS / 2; j++) cos_sin[row * KVC_ROPE_DIMS + j] = 1.0f;  // cos 1, sin 0
    std::vector<uint16_t> cache(rows * dims, 0xABCD);
    const int64_t positions[2] = {0, 1};
    int64_t slots[2] = {2, -1};

    kvc_v41_insert_args a{};
    a.num_tokens = 2;
    a.compress_ratio = 1;
    a.cache_dtype = KVC_CACHE_BF16;
    a.latent = latent.data();
    a.positions = positions;
    a.slot_mapping = slots;
    a.cos_sin = cos_sin.data();
    a.cos_sin_rows = 2;
    a.kv_cache = kvc_paged_cache{cache.data(), 1, rows, rows * dims * 2, rows * dims * 2};
    kvc_error err{};
    const kvc_backend *ref = &kvc_reference_backend;
    expect(ref->v41_rope_plain_insert(&a, &err) == KVC_OK, err.message);
    for (int d = 0; d < dims; d++) {
        uint16_t want = d == 5 ? 0x7FC0 : latent[d];
        if (cache[2 * dims + d] != want) { expect(false, "row 2 is not the latent of token 0"); break; }
    }
    bool untouched = true;
    for (int r : {0, 1, 3})
        for (int d = 0; d < dims; d++) untouched = untouched && cache[r * dims + d] == 0xABCD;
    expect(untouched, "a row no valid token names was written");

    std::vector<uint16_t> before = cache;
    slots[1] = rows;  // one past the cache
    a.positions = positions;
    int status = ref->v41_rope_plain_insert(&a, &err);
    expect(status == KVC_ERR_INDEX, "an out-of-range slot was not refused as an index error");
    expect(std::strlen(err.message) > 0, "the refusal has no message");
    expect(before == cache, "a refused call wrote into the cache");
    expect(std::strcmp(kvc_status_name(KVC_ERR_INDEX), "") != 0, "kvc_status_name is empty");
    expect(kvc_stage_from_name(kvc_stage_name(KVC_STAGE_V4_COMPRESS)) == KVC_STAGE_V4_COMPRESS, "stage names do not round-trip");
    if (failures) return 1;
    std::printf("every_header: C++17 over every public header, reference rope_plain_insert through the installed library: ok\n");
    return 0;
}
