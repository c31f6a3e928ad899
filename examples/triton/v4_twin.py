"""The NumPy twin of examples/triton/v4_triton.py: each kernel's program,
step for step, in the same order, with the same bit tricks, on the CPU.
A campaign of the twin (KVCMP_TRITON_TWIN=1, see examples/triton/v4.py)
proves the kernels' arithmetic where no GPU is at hand; the kernels
mirror it line by line, so what is left to a GPU run is Triton itself.

`kernel[grid](*args, **constexprs)` runs the program once per program id,
as a launch does.  Pointers are flat arrays plus offsets.  Two operations
have no NumPy form and are built from exact pieces: fma (the product of
two fp32 values is exact in double; the sum's rounding error comes from
TwoSum and settles the one case a double sum can get wrong, an fp32
rounding midpoint) and exp (the C library's double exp, error below 1 ulp
of double, rounded once: correct for every fp32 x <= 0, see _exp_cr in
v4_triton.py).
"""
import math

import numpy as np

F32, I32, U32 = np.float32, np.int32, np.uint32


def _bits(x):
    return np.asarray(x, F32).view(I32)


def _f32(bits):
    return np.asarray(bits, I32).view(F32)


def _bf16_bits(x):
    x = np.asarray(x, F32)
    u = x.view(U32)
    rounded = (u + U32(0x7FFF) + ((u >> U32(16)) & U32(1))) >> U32(16)
    return np.where(x != x, I32(0x7FC0), rounded.astype(I32))


def _widen(bits):
    return _f32(np.asarray(bits, I32) << I32(16))


def _negate(x):
    return (np.asarray(x, F32).view(U32) ^ U32(0x80000000)).view(F32)


def _max_nan(a, b):
    return np.where(a != a, a, np.where(b != b, b, np.where(a > b, a, b)))


def _clamp448(x):
    return np.where(x > F32(448.0), F32(448.0), np.where(x < F32(-448.0), F32(-448.0), x)).astype(F32)


def _fp8(x):
    u = _bits(x)
    sign = (u >> 24) & 0x80
    a = u & 0x7FFFFFFF
    field = a >> 23
    sig = np.where(field != 0, (a & 0x7FFFFF) | 0x800000, a & 0x7FFFFF).astype(I32)
    ex = np.maximum(field, 1) - 127
    sh = np.minimum(np.maximum(14 - ex, 21), 26).astype(I32)
    kept = sig >> sh
    above = sig >> (sh - 1)
    below = sig - (above << (sh - 1))
    small = kept + (((above & 1) == 1) & ((below != 0) | ((kept & 1) == 1))).astype(I32)
    kept_n = sig >> 20
    kept_n = kept_n + ((((sig >> 19) & 1) == 1) & (((sig & 0x7FFFF) != 0) | ((kept_n & 1) == 1))).astype(I32)
    e8 = ex + 7 + (kept_n >> 4)
    kept_n = np.where(kept_n == 16, 8, kept_n)
    normal = (e8 << 3) | (kept_n - 8)
    past_max = (ex >= -6) & ((e8 > 15) | ((e8 == 15) & (kept_n == 15)))
    code = np.where(ex < -6, small, normal)
    return np.where((a >= 0x7F800000) | past_max, 0x7F, code | sign).astype(I32)


def _block_scale(q):
    qb = _bits(q)
    field = (qb >> 23) & 0xFF
    e = field - 127 + ((qb & 0x7FFFFF) != 0).astype(I32)
    finite = field < 255
    is_nan = (qb & 0x7FFFFFFF) > 0x7F800000
    with np.errstate(over="ignore"):
        byte = np.where(finite, np.minimum(np.maximum(e + 127, 0), 255), 255).astype(I32)
        multiplier = np.where(finite, (127 - e) << 23, np.where(is_nan, 0x7FC00000, 0)).astype(I32)
        scale = np.where(finite, (127 + e).astype(I32) << I32(23), np.where(is_nan, 0x7FC00000, 0x7F800000)).astype(I32)
    return byte, multiplier, scale


def _exp_cr(x):
    """libdevice's double exp on the GPU, the C library's here (both within
    1 ulp of double); one rounding to fp32."""
    x64 = np.asarray(x, F32).astype(np.float64)
    y = np.array([math.exp(v) if v < 700.0 else math.inf for v in x64.ravel().tolist()], np.float64)
    return y.reshape(x64.shape).astype(F32)


def fma(a, b, c):
    """fp32 fma(a, b, c): one rounding of the exact a * b + c."""
    a, b, c = np.broadcast_arrays(np.asarray(a, F32), np.asarray(b, F32), np.asarray(c, F32))
    p = a.astype(np.float64) * b.astype(np.float64)        # exact: 24 x 24 significand bits
    c64 = c.astype(np.float64)
    with np.errstate(all="ignore"):
        s = p + c64
        bv = s - p
        err = (p - (s - bv)) + (c64 - bv)                   # TwoSum: p + c = s + err exactly
        r = s.astype(F32)
        r64 = np.where(np.isinf(r) & np.isfinite(s), np.copysign(2.0 ** 128, s), r.astype(np.float64))
        other = np.nextafter(r, np.where(s > r64, F32(np.inf), F32(-np.inf)).astype(F32))
        midpoint = (r64 + other.astype(np.float64)) / 2
        # s on an fp32 midpoint while the exact sum is not: err says which side.
        tie = np.isfinite(s) & (s != r64) & (s == midpoint) & (err != 0)
        toward_other = (err > 0) == (other.astype(np.float64) > r64)
        return np.where(tie & toward_other, other, r).astype(F32)


def _div(a, b):
    with np.errstate(all="ignore"):
        return (np.asarray(a, F32) / np.asarray(b, F32)).astype(F32)


def _lane(lanes, j, k):
    return np.where(j == k, lanes, F32(0.0)).astype(F32).sum(dtype=F32)


class _Kernel:
    """kernel[grid](*args, **constexprs): one call of the program per id."""

    def __init__(self, program):
        self.program = program

    def __getitem__(self, grid):
        def launch(*args, enable_fp_fusion=False, num_warps=None, **constexprs):
            with np.errstate(all="ignore"):                 # IEEE overflow, inf - inf ...: as on the GPU
                for pid in range(grid[0]):
                    self.program(pid, *args, **constexprs)
        return launch


def _save_partial_states(t, kv, score, ape, ints, state, R, W, BS, STRIDE):
    p = int(ints[2 * t])
    slot = int(ints[2 * t + 1])
    if slot >= 0:
        i = np.arange(W)
        row = (slot // BS) * STRIDE + (slot % BS) * (2 * W)
        state[row + i] = kv[t * W + i]
        total = _f32(score[t * W + i]) + _f32(ape[(p % R) * W + i])
        state[row + W + i] = np.where(total != total, I32(0x7FC00000), _bits(total))


def _compress(t, state, block_table, ints, weight, cos_sin, kv_cache, scratch, eps, R, D, W, WIN, H2, BS, KB,
              KV_STRIDE):
    p = int(ints[4 * t])
    slot = int(ints[4 * t + 1])
    kv_slot = int(ints[4 * t + 2])
    bt_row = int(ints[4 * t + 3])
    if slot >= 0 and kv_slot >= 0 and (p + 1) % R == 0:
        eps = F32(eps)
        d = np.arange(D)
        first = max(WIN - 1 - p, 0)
        m = np.full(D, -np.inf, F32)
        for w in range(first, WIN):
            q = p - (WIN - 1) + w
            page = int(block_table[bt_row + q // BS])
            row = page * (BS * 2 * W) + (q % BS) * (2 * W) + (H2 if w >= R else 0)
            m = _max_nan(m, _f32(state[row + W + d]))
        denom = np.zeros(D, F32)
        acc = np.zeros(D, F32)
        for w in range(first, WIN):
            q = p - (WIN - 1) + w
            page = int(block_table[bt_row + q // BS])
            row = page * (BS * 2 * W) + (q % BS) * (2 * W) + (H2 if w >= R else 0)
            e = _exp_cr(_f32(state[row + W + d]) - m)
            denom = (denom + e).astype(F32)
            acc = fma(e, _f32(state[row + d]), acc)
        scratch[t * D + d] = _div(acc, denom)
        pooled = t * D
        j = np.arange(16)
        lanes = np.zeros(16, F32)
        for r in range(D // 16):
            v = scratch[pooled + r * 16 + j]
            lanes = fma(v, v, lanes)
        with np.errstate(all="ignore"):
            a0 = _lane(lanes, j, 0) + _lane(lanes, j, 8)
            a1 = _lane(lanes, j, 1) + _lane(lanes, j, 9)
            a2 = _lane(lanes, j, 2) + _lane(lanes, j, 10)
            a3 = _lane(lanes, j, 3) + _lane(lanes, j, 11)
            a4 = _lane(lanes, j, 4) + _lane(lanes, j, 12)
            a5 = _lane(lanes, j, 5) + _lane(lanes, j, 13)
            a6 = _lane(lanes, j, 6) + _lane(lanes, j, 14)
            a7 = _lane(lanes, j, 7) + _lane(lanes, j, 15)
            b0 = a0 + a4
            b1 = a1 + a5
            b2 = a2 + a6
            b3 = a3 + a7
            c0 = b0 + b2
            c1 = b1 + b3
            sum_of_squares = c0 + c1
            inv = _div(F32(1.0), np.sqrt(_div(sum_of_squares, F32(D)) + eps, dtype=F32))
            N = D - 64
            i = np.arange(32)
            xe = ((scratch[pooled + N + 2 * i] * inv) * weight[N + 2 * i]).astype(F32)
            xo = ((scratch[pooled + N + 1 + 2 * i] * inv) * weight[N + 1 + 2 * i]).astype(F32)
            cs = ((p // R) * R) * 64
            c = cos_sin[cs + i]
            s = cos_sin[cs + 32 + i]
            ye = fma(xe, c, _negate((xo * s).astype(F32)))
            yo = fma(xo, c, (xe * s).astype(F32))
            kv_page = (kv_slot // KB) * KV_STRIDE
            if D == 512:
                kv_row = kv_page + (kv_slot % KB) * 576
                b = np.arange(8)
                dn = b[:, None] * 64 + np.arange(64)[None, :]
                nope = dn < 448
                dsafe = np.where(nope, dn, 0)
                x = ((np.where(nope, scratch[pooled + dsafe], F32(0.0)) * inv) *
                     np.where(nope, weight[dsafe], F32(0.0))).astype(F32)
                y = _widen(_bf16_bits(x))
                magnitude = np.where(nope, _bits(y) & 0x7FFFFFFF, 0)
                a = np.maximum(magnitude.max(axis=1), 0x38D1B717)
                a = _f32(np.where(a > 0x7F800000, 0x7FC00000, a).astype(I32))
                byte, multiplier, _ = _block_scale(_div(a, np.full(8, 448.0, F32)))
                codes = _fp8(_clamp448((y * _f32(multiplier)[:, None]).astype(F32)))
                kv_cache[(kv_row + dn)[nope]] = codes[nope].astype(np.uint8)
                kv_cache[kv_page + KB * 576 + (kv_slot % KB) * 8 + b] = np.where(b < 7, byte, 0).astype(np.uint8)
                be = _bf16_bits(ye)
                bo = _bf16_bits(yo)
                kv_cache[kv_row + 448 + 4 * i] = (be & 0xFF).astype(np.uint8)
                kv_cache[kv_row + 449 + 4 * i] = (be >> 8).astype(np.uint8)
                kv_cache[kv_row + 450 + 4 * i] = (bo & 0xFF).astype(np.uint8)
                kv_cache[kv_row + 451 + 4 * i] = (bo >> 8).astype(np.uint8)
            else:
                kv_row = kv_page + (kv_slot % KB) * 128
                dn = np.arange(64)
                zn = _widen(_bf16_bits(((scratch[pooled + dn] * inv) * weight[dn]).astype(F32)))
                ze = _widen(_bf16_bits(ye))
                zo = _widen(_bf16_bits(yo))
                a = np.maximum((_bits(zn) & 0x7FFFFFFF).max(), (_bits(ze) & 0x7FFFFFFF).max())
                a = np.maximum(np.maximum(a, (_bits(zo) & 0x7FFFFFFF).max()), 0x38D1B717)
                a = _f32(np.where(a > 0x7F800000, 0x7FC00000, a).astype(I32))
                _, multiplier, scale = _block_scale(_div(a, F32(448.0)))
                mult = _f32(multiplier)
                kv_cache[kv_row + dn] = _fp8(_clamp448((zn * mult).astype(F32))).astype(np.uint8)
                kv_cache[kv_row + 64 + 2 * i] = _fp8(_clamp448((ze * mult).astype(F32))).astype(np.uint8)
                kv_cache[kv_row + 65 + 2 * i] = _fp8(_clamp448((zo * mult).astype(F32))).astype(np.uint8)
                k = np.arange(4)
                kv_cache[kv_page + KB * 128 + (kv_slot % KB) * 4 + k] = ((scale >> (8 * k)) & 0xFF).astype(np.uint8)


save_partial_states = _Kernel(_save_partial_states)
compress = _Kernel(_compress)
