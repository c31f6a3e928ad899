"""A straightforward PyTorch eager implementation of two compressor
stages, written from SPEC.md (sections 1-5) the way a model developer
would write it: whole-tensor torch ops, torch.exp, torch.sum, no fused
multiply-adds.  It is a kvcmp candidate (see python/kvcmp/__init__.py):

    candidate(case) -> outputs

It takes its tensors from case.to_torch(device), as vLLM's callers pass
them (paged uint8 caches [pages, rows, bytes] with padding between pages
through strides, block tables and slot mappings on the device), and
hands back the TorchCase, whose outputs kvcmp reads back.

Stages: v4.compress (D = 512 fp8_ds_mla and D = 128 fp8_indexer, R = 4
and 128) and v41.rope_quant_insert.  The device is $KVCMP_DEVICE (cpu by
default); see README.md for what differs from the reference and why.
"""
import os

import torch

import kvcmp

DEVICE = os.environ.get("KVCMP_DEVICE", "cpu")
PAGE_PADDING = 64        # bytes after every cache page, canary-filled by kvcmp
ROPE = 64
FP8_MAX = 448.0


# ---- number formats (SPEC.md 1) ---------------------------------------

def fp8_e4m3(x):
    """fp32 tensor (already clamped to [-448, 448] or NaN) -> uint8 e4m3fn
    codes, round to nearest even, subnormals kept, NaN -> 0x7F."""
    ax = x.abs()
    _, exponent = torch.frexp(ax)              # ax = m * 2^exponent, m in [0.5, 1)
    e = torch.clamp(exponent - 1, min=-6)      # binade, subnormals share -6
    step = torch.ldexp(torch.ones_like(ax), e - 3)
    m = torch.round(ax / step)                 # exact division; round half to even
    carry = m >= 16
    e = torch.where(carry, e + 1, e)
    m = torch.where(carry, m / 2, m)
    normal = m >= 8
    code = torch.where(normal, ((e + 7) << 3) + (m.to(torch.int32) - 8), m.to(torch.int32))
    code = code | torch.where(torch.signbit(x), 0x80, 0)
    code = torch.where(torch.isnan(x), torch.full_like(code, 0x7F), code)
    return code.to(torch.uint8)


def bf16_round(x):
    """fp32 -> bf16 -> fp32 (torch's conversion rounds to nearest even)."""
    return x.to(torch.bfloat16).to(torch.float32)


def bf16_bytes(x):
    """fp32 -> the little-endian bytes of its bf16 rounding."""
    return x.to(torch.bfloat16).view(torch.int16).view(torch.uint8)


def block_exponent(a):
    """e = ceil(log2(a / 448)) of each block magnitude (SPEC.md 4.2 step 9)."""
    return torch.ceil(torch.log2(a / FP8_MAX))


def ue8m0(e):
    byte = torch.clamp(e + 127, 0, 255)
    return torch.where(torch.isnan(e), torch.full_like(byte, 255), byte).to(torch.uint8)


def quantise_blocks(y):
    """448 bf16-valued NoPE dims -> 448 fp8 codes and 7 UE8M0 bytes."""
    blocks = y.view(7, 64)
    a = torch.clamp(blocks.abs().amax(dim=1), min=1e-4)          # NaN propagates through amax
    a = torch.where(torch.isnan(blocks).any(dim=1), torch.full_like(a, float("nan")), a)
    e = block_exponent(a)
    codes = fp8_e4m3(torch.clamp(blocks * torch.exp2(-e)[:, None], -FP8_MAX, FP8_MAX))
    return codes.view(-1), ue8m0(e)


def rope(x, cos_sin_row):
    """GPT-J interleaved rotation of the last 64 dims."""
    c, s = cos_sin_row[:32], cos_sin_row[32:]
    even, odd = x[-ROPE::2], x[-ROPE + 1::2]
    out = x.clone()
    out[-ROPE::2] = even * c - odd * s
    out[-ROPE + 1::2] = odd * c + even * s
    return out


# ---- stores (SPEC.md 3, 4.2) ---------------------------------------------

def store_ds_mla(kv_cache, slot, normed_nope_bf16, rope_values):
    """One fp8_ds_mla row: 448 codes + 64 bf16 RoPE values, then 7 scale bytes and a 0."""
    rows = kv_cache.shape[1]
    page, row = slot // rows, slot % rows
    page_bytes = kv_cache[page].reshape(-1)    # a view: the page's rows are contiguous
    codes, scales = quantise_blocks(normed_nope_bf16)
    token = page_bytes[row * 576:(row + 1) * 576]
    token[:448] = codes
    token[448:] = bf16_bytes(rope_values)
    scale = page_bytes[rows * 576 + row * 8:rows * 576 + row * 8 + 8]
    scale[:7] = scales
    scale[7] = 0


def store_indexer(kv_cache, slot, z):
    rows = kv_cache.shape[1]
    page, row = slot // rows, slot % rows
    page_bytes = kv_cache[page].reshape(-1)
    a = torch.clamp(z.abs().amax(), min=1e-4)
    if torch.isnan(z).any():
        a = torch.tensor(float("nan"), device=z.device)
    e = block_exponent(a)
    page_bytes[row * 128:(row + 1) * 128] = fp8_e4m3(torch.clamp(z * torch.exp2(-e), -FP8_MAX, FP8_MAX))
    page_bytes[rows * 128 + row * 4:rows * 128 + row * 4 + 4] = torch.exp2(e).reshape(1).view(torch.uint8)


# ---- v4.compress (SPEC.md 4.2) -------------------------------------------

def v4_compress(case):
    t = case.to_torch(DEVICE, page_padding=PAGE_PADDING)
    R, D, eps = case.params["compress_ratio"], case.params["head_dim"], case.params["eps"]
    coff = 2 if R == 4 else 1
    state = t.state_cache                     # [pages, BS, 2 * coff * D] float32
    BS = state.shape[1]
    positions, slots, kv_slots = t.positions.tolist(), t.slot_mapping.tolist(), t.kv_slot_mapping.tolist()
    requests, block_table = t.token_to_req.tolist(), t.block_table
    for i, p in enumerate(positions):
        if (p + 1) % R or slots[i] < 0 or kv_slots[i] < 0:
            continue
        kv_rows, score_rows = [], []
        for w in range(coff * R):
            q = p - coff * R + 1 + w
            if q < 0:
                continue
            h = D if R == 4 and w >= R else 0
            row = state[block_table[requests[i], q // BS], q % BS]
            kv_rows.append(row[h:h + D])
            score_rows.append(row[coff * D + h:coff * D + h + D])
        kv, score = torch.stack(kv_rows), torch.stack(score_rows)
        weights = torch.exp(score - score.max(dim=0).values)
        pooled = (weights * kv).sum(dim=0) / weights.sum(dim=0)
        normed = pooled * torch.rsqrt(pooled.pow(2).mean() + eps) * t.norm_weight
        cos_sin = t.cos_sin[(p // R) * R]
        if D == 512:
            rotated = rope(normed, cos_sin)
            store_ds_mla(t.kv_cache, kv_slots[i], bf16_round(normed[:448]), rotated[448:])
        else:
            store_indexer(t.kv_cache, kv_slots[i], bf16_round(rope(normed, cos_sin)))
    return t


# ---- v41.rope_quant_insert (SPEC.md 5.2) ---------------------------------

def v41_rope_quant_insert(case):
    t = case.to_torch(DEVICE, page_padding=PAGE_PADDING)
    R = case.params["compress_ratio"]
    latent = t.latent.to(torch.float32)       # bf16 widened exactly
    for i, (p, slot) in enumerate(zip(t.positions.tolist(), t.slot_mapping.tolist())):
        if slot < 0 or (p + 1) % R:
            continue
        x = latent[i]
        rotated = rope(x, t.cos_sin[(p // R) * R])
        store_ds_mla(t.kv_cache, slot, x[:448], rotated[448:])
    return t


STAGES = {"v4.compress": v4_compress, "v41.rope_quant_insert": v41_rope_quant_insert}


def candidate(case):
    """The kvcmp candidate: dispatch on the stage."""
    if case.stage not in STAGES:
        raise NotImplementedError("eager example has no %s" % case.stage)
    return STAGES[case.stage](case)


candidate.stages = list(STAGES)   # the campaign skips the stages it does not offer


if __name__ == "__main__":
    # It does not reject corrupted inputs (SPEC.md 8): fuzz valid cases only.
    print(kvcmp.fuzz(candidate, cases=200, invalid_rate=0, policy="vllm").report())
