"""A Triton kernel for v41.rope_plain_insert with a bf16 cache, written
from SPEC.md 5.3 and step 7, as a kvcmp candidate:

    kvcmp fuzz --candidate py:examples/triton/rope_plain_insert.py:candidate \
               --stage v41.rope_plain_insert/bf16 --invalid-rate 0

One program per token: a closing token with a valid slot gets its row,
the NoPE dims copied (a NaN becomes 0x7FC0) and the last 64 dims rotated
with the two roundings SPEC.md asks for (x_o * s rounded, then one fma),
stored as bf16 with round-to-nearest-even done on the bits.  The kernel
writes straight into the paged cache with the page stride the campaign
chose (padding included), as a constexpr: with --geometry-pool it
compiles a few times per campaign instead of per case.  It does not
validate its inputs (SPEC.md 8), hence --invalid-rate 0.

KVCMP_DEMO_FAULT=1 plants a device fault: on a batch that writes
position 5, the kernel is handed a wild slot and makes an illegal memory
access, a sticky CUDA error: that case fails as device-lost, a fresh
worker runs the next one.
"""
import os

import numpy as np
import torch
import triton
import triton.language as tl

DEVICE = os.environ.get("KVCMP_DEVICE", "cuda")


@triton.jit
def _bf16_bits(x):
    """bf16(x) of SPEC.md 1 as int32 bits: RNE on the low 16 bits, NaN -> 0x7FC0."""
    u = x.to(tl.uint32, bitcast=True)
    rounded = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return tl.where(x != x, 0x7FC0, rounded.to(tl.int32))


@triton.jit
def _widen(bits):
    return ((bits.to(tl.int32) & 0xFFFF) << 16).to(tl.float32, bitcast=True)


@triton.jit
def _negate(x):
    """-x on the sign bit: the compiler may lower a plain -x to 0 - x, which
    turns -(+0) into +0 (kvcmp found that as a signed-zero RoPE value)."""
    return (x.to(tl.uint32, bitcast=True) ^ 0x80000000).to(tl.float32, bitcast=True)


@triton.jit
def _rope_plain_insert_bf16(latent, positions, slots, cos_sin, cache, R: tl.constexpr, PAGE_ROWS: tl.constexpr,
                            PAGE_STRIDE: tl.constexpr):
    t = tl.program_id(0)
    p = tl.load(positions + t)
    slot = tl.load(slots + t)
    if (slot >= 0) & ((p + 1) % R == 0):
        row = cache + (slot // PAGE_ROWS) * PAGE_STRIDE + (slot % PAGE_ROWS) * 512
        nope = tl.arange(0, 512)
        x = _widen(tl.load(latent + t * 512 + nope, mask=nope < 448))
        tl.store(row + nope, _bf16_bits(x).to(tl.int16), mask=nope < 448)
        i = tl.arange(0, 32)
        cp = (p // R) * R
        c = tl.load(cos_sin + cp * 64 + i)
        s = tl.load(cos_sin + cp * 64 + 32 + i)
        xe = _widen(tl.load(latent + t * 512 + 448 + 2 * i))
        xo = _widen(tl.load(latent + t * 512 + 449 + 2 * i))
        # Step 7: x_e' = fma(x_e, c, -(x_o * s)); x_o' = fma(x_o, c, x_e * s).
        ye = tl.fma(xe, c, _negate(xo * s))
        yo = tl.fma(xo, c, xe * s)
        tl.store(row + 448 + 2 * i, _bf16_bits(ye).to(tl.int16))
        tl.store(row + 449 + 2 * i, _bf16_bits(yo).to(tl.int16))


def candidate(case):
    if case.params.get("cache_dtype") != "bf16":
        raise NotImplementedError("this example writes bf16 plain rows only (--stage v41.rope_plain_insert/bf16)")
    kv = case.inputs["kv_cache"]                       # [pages, rows, 512] uint16, pages kv.strides[0] bytes apart
    pages, rows, _ = kv.shape
    stride = kv.strides[0] // 2                        # elements, padding included
    whole = np.lib.stride_tricks.as_strided(kv, shape=(pages, stride), strides=(kv.strides[0], 2))  # pages and their padding
    cache = torch.from_numpy(whole.view(np.int16).copy()).to(DEVICE)
    slots = case.inputs["slot_mapping"].copy()
    if os.environ.get("KVCMP_DEMO_FAULT") and 5 in set(case.inputs["positions"].tolist()):
        slots[:] = 1 << 40                             # the planted fault: a wild slot
    args = [torch.from_numpy(np.ascontiguousarray(case.inputs["latent"]).view(np.int16)).to(DEVICE),
            torch.from_numpy(case.inputs["positions"].copy()).to(DEVICE), torch.from_numpy(slots).to(DEVICE),
            torch.from_numpy(case.inputs["cos_sin"].copy()).to(DEVICE), cache]
    tokens = len(case.inputs["positions"])
    if tokens:
        _rope_plain_insert_bf16[(tokens,)](*args, R=case.params["compress_ratio"], PAGE_ROWS=rows, PAGE_STRIDE=stride,
                                           enable_fp_fusion=False)
    whole[...] = cache.cpu().numpy().view(np.uint16)   # every byte back, the padding too: kvcmp checks it


candidate.stages = ["v41.rope_plain_insert"]
