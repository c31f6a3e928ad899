// A C++17 candidate: the wrapper of examples/wrap_reference/wrap_reference.c
// written as a C++ kernel library would write it.
//
// The two "kernels" below take raw base pointers, element strides and
// gather slots that the caller resolved beforehand, the way vLLM's CPU
// kernels do; here they compute with the reference's own steps, so the
// candidate must pass.  The adapters under them put the kernels behind the
// plug-in ABI (kvcmp/plugin.h): validate with the shared validators,
// resolve slots and strides, call.  Stages not wrapped here are passed
// straight through from the reference.
//
// What C++ needs:
// - include kvcmp/plugin.h before defining kvcmp_plugin_entry: its
//   extern "C" declaration gives the definition C linkage, so the library
//   exports the plain name the loader looks for (a definition that did
//   not see it would export a mangled one, which kvcmp refuses by name);
// - the cache pointers of the argument structs are void * (and the layout
//   helpers return uint8_t *): C++ wants a cast to float * where C
//   converts silently;
// - the stage functions must not throw: they are called from C.
//
// Build it against an installed libkvcmp (make install-check does this),
// in one line:
//   c++ -std=c++17 -O1 -fPIC -shared -fvisibility=hidden cpp_plugin.cpp
//       $(pkg-config --cflags kvcmp) $(pkg-config --variable=plugin_cflags kvcmp)
//       $(pkg-config --libs kvcmp) -o cpp_plugin.so
// plugin_cflags (-ffp-contract=off -fno-fast-math) because the kernels
// call the reference's steps and inline helpers, whose arithmetic must
// not be contracted into fma.
// Fuzz it:  kvcmp fuzz --candidate ./cpp_plugin.so
#include <kvcmp/formats.h>
#include <kvcmp/layout.h>
#include <kvcmp/plugin.h>
#include <kvcmp/reference.h>
#include <kvcmp/reference_steps.h>
#include <kvcmp/validate.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace {

// ---- kernels in vLLM's calling convention -------------------------------

// state[slot] = [kv | score + ape[p % R]]; state_stride = floats per page.
void save_states_kernel(float *state, int64_t state_stride, int64_t block_size, const float *kv, const float *score,
                        const float *ape, const int64_t *positions, const int64_t *slots, int64_t tokens, int64_t width,
                        int64_t ratio) noexcept {
    for (int64_t t = 0; t < tokens; t++) {
        if (slots[t] < 0) continue;
        float *row = state + slots[t] / block_size * state_stride + slots[t] % block_size * 2 * width;
        std::memcpy(row, kv + t * width, static_cast<size_t>(width) * sizeof(float));
        for (int64_t i = 0; i < width; i++)
            row[width + i] = kvc_canonical_f32(score[t * width + i] + ape[positions[t] % ratio * width + i]);
    }
}

constexpr int kMaxWindow = 256;

// One compressed row from a pre-resolved window: rows[w] is the state row
// of window entry w (nullptr = before position 0), half[w] its column
// offset.
void compress_row_kernel(const std::array<const float *, kMaxWindow> &rows, const std::array<int64_t, kMaxWindow> &half,
                         int window, int64_t width, int head_dim, float eps, const float *weight, const float *cos_sin_row,
                         uint8_t *token, uint8_t *scales) noexcept {
    std::array<float, 512> pooled{}, normed{};
    std::array<float, kMaxWindow> kv{}, sc{};
    for (int d = 0; d < head_dim; d++) {
        int n = 0;
        for (int w = 0; w < window; w++)
            if (rows[w]) {
                kv[n] = rows[w][half[w] + d];
                sc[n++] = rows[w][width + half[w] + d];
            }
        pooled[d] = ref_softmax_pool(kv.data(), sc.data(), n);
    }
    ref_rms_norm(pooled.data(), weight, head_dim, eps, normed.data());
    const int nope = head_dim - KVC_ROPE_DIMS;
    if (head_dim == 512) {   // fp8_ds_mla: NoPE rounded to bf16 first, RoPE on fp32
        for (int d = 0; d < nope; d++) pooled[d] = kvc_f32_from_bf16(kvc_bf16_from_f32(normed[d]));
        ref_rope(normed.data() + nope, cos_sin_row);
        ref_store_ds_mla(pooled.data(), normed.data() + nope, token, scales);
        return;
    }
    ref_rope(normed.data() + nope, cos_sin_row);   // indexer: RoPE, bf16, one fp32 power-of-two scale
    float a = 1e-4f;
    for (int d = 0; d < head_dim; d++) {
        normed[d] = kvc_f32_from_bf16(kvc_bf16_from_f32(normed[d]));
        a = kvc_max_nan(a, std::fabs(normed[d]));
    }
    const kvc_block_scale s = kvc_block_scale_from_quotient(a / KVC_FP8_MAX);
    for (int d = 0; d < head_dim; d++) token[d] = kvc_fp8_from_f32(kvc_clamp_fp8_range(normed[d] * kvc_scale_multiplier(s)));
    kvc_store_f32(scales, kvc_scale_value(s));
}

// ---- adapters: kvcmp arguments -> the kernels' convention ---------------

int wrap_save(const kvc_v4_save_args *a, kvc_error *err) noexcept {
    if (int rc = kvc_validate_v4_save(a, err)) return rc;
    const int64_t width = static_cast<int64_t>(kvc_v4_coff(a->compress_ratio)) * a->head_dim;
    save_states_kernel(static_cast<float *>(a->state_cache.data), a->state_cache.page_stride / 4, a->state_cache.page_rows,
                       a->kv, a->score, a->ape, a->positions, a->slot_mapping, a->num_tokens, width, a->compress_ratio);
    return KVC_OK;
}

int wrap_compress(const kvc_v4_compress_args *a, kvc_error *err) noexcept {
    if (int rc = kvc_validate_v4_compress(a, err)) return rc;
    const int R = a->compress_ratio, coff = kvc_v4_coff(R), window = coff * R;
    const int64_t width = static_cast<int64_t>(coff) * a->head_dim;
    std::array<int64_t, kMaxWindow> half{};
    std::array<const float *, kMaxWindow> rows{};
    for (int64_t t = 0; t < a->num_tokens; t++) {
        const int64_t p = a->positions[t];
        if (a->slot_mapping[t] < 0 || a->kv_slot_mapping[t] < 0 || !kvc_is_closing(p, R)) continue;
        for (int w = 0; w < window; w++) {   // resolve the gather slots
            const int64_t q = p - window + 1 + w;
            rows[w] = q < 0 ? nullptr
                            : reinterpret_cast<const float *>(
                                  kvc_plain_row(&a->state_cache, kvc_v4_state_slot(a, a->token_to_req[t], q), 2 * width * 4));
            half[w] = R == 4 && w >= R ? a->head_dim : 0;
        }
        const int64_t slot = a->kv_slot_mapping[t];
        const bool ds_mla = a->head_dim == 512;
        compress_row_kernel(rows, half, window, width, a->head_dim, a->eps, a->norm_weight, a->cos_sin + p / R * R * 64,
                            ds_mla ? kvc_ds_mla_token(&a->kv_cache, slot) : kvc_indexer_token(&a->kv_cache, slot),
                            ds_mla ? kvc_ds_mla_scales(&a->kv_cache, slot) : kvc_indexer_scale(&a->kv_cache, slot));
    }
    return KVC_OK;
}

// C++17 has no designated initializers: the table is filled member by
// member, once, at load time.
const kvcmp_plugin wrapped = [] {
    kvcmp_plugin t{};
    t.abi_version = KVCMP_PLUGIN_ABI_VERSION;
    t.struct_size = sizeof(kvcmp_plugin);
    t.name = "cpp_plugin (C++17 vLLM-style kernels around the reference)";
    t.v4_save_partial_states = wrap_save;
    t.v4_compress = wrap_compress;
    t.v41_save_compress_norm = ref_v41_save_compress_norm;
    t.v41_rope_quant_insert = ref_v41_rope_quant_insert;
    t.v41_rope_plain_insert = ref_v41_rope_plain_insert;
    return t;
}();

}  // namespace

// C linkage from the declaration in kvcmp/plugin.h.
const kvcmp_plugin *kvcmp_plugin_entry(void) { return &wrapped; }
