"""Triton kernels of the V4 stages, written from SPEC.md 4.1 and 4.2; the
host side (examples/triton/v4.py) launches them.  examples/triton/v4_twin.py
is their NumPy twin: the same steps in the same order with the same bit
tricks, which runs on a CPU, so that the arithmetic is proven by a
campaign without a GPU.  Change one, change the other.

Every fp32 operation below is an IEEE one with subnormals kept: Triton
lowers +, -, * and tl.fma to the IEEE instructions (launched with
enable_fp_fusion=False, so no multiply and add are contracted into an
fma), tl.div_rn and tl.sqrt_rn to the correctly rounded division and
square root (a plain / is an approximate division in Triton); the
conversions to bf16, fp8 and the block scales are done on the bits, not
by a hardware conversion.
"""
import triton
import triton.language as tl
from triton.language.extra import libdevice


@triton.jit
def _bits(x):
    """fp32 -> its int32 bits."""
    return x.to(tl.int32, bitcast=True)


@triton.jit
def _f32(bits):
    """int32 bits -> fp32."""
    return bits.to(tl.float32, bitcast=True)


@triton.jit
def _bf16_bits(x):
    """bf16(x) of SPEC.md 1 as int32 bits: RNE on the low 16 bits, NaN -> 0x7FC0."""
    u = x.to(tl.uint32, bitcast=True)
    rounded = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return tl.where(x != x, 0x7FC0, rounded.to(tl.int32))


@triton.jit
def _widen(bits):
    """bf16 bits (int32, 0 .. 0xFFFF) -> fp32, exact."""
    return (bits << 16).to(tl.float32, bitcast=True)


@triton.jit
def _negate(x):
    """-x on the sign bit: a plain -x may be lowered to 0 - x, which turns
    -(+0) into +0."""
    return (x.to(tl.uint32, bitcast=True) ^ 0x80000000).to(tl.float32, bitcast=True)


@triton.jit
def _max_nan(a, b):
    """max of SPEC.md 1: NaN if either is NaN (the NaN's bits do not matter:
    it only flows into arithmetic, and what is stored is canonical)."""
    return tl.where(a != a, a, tl.where(b != b, b, tl.where(a > b, a, b)))


@triton.jit
def _clamp448(x):
    """clamp(x, -448, 448), NaN stays NaN."""
    return tl.where(x > 448.0, 448.0, tl.where(x < -448.0, -448.0, x))


@triton.jit
def _fp8(x):
    """fp8 e4m3fn code of fp32 x as int32 (SPEC.md 1), on the bits: RNE,
    subnormals m * 2^-9, the sign of a zero kept, NaN and infinity -> 0x7F,
    a magnitude that rounds past 448 -> 0x7F."""
    u = _bits(x)
    sign = (u >> 24) & 0x80
    a = u & 0x7FFFFFFF
    field = a >> 23
    sig = tl.where(field != 0, (a & 0x7FFFFF) | 0x800000, a & 0x7FFFFF)   # value = sig * 2^(ex - 23)
    ex = tl.maximum(field, 1) - 127
    # Below 2^-6 the codes are m * 2^-9: m = sig * 2^(ex - 14) rounded to
    # nearest even (round bit, then the bits below it).  The shift is >= 21
    # there; from 25 on the result is 0, and clamping it at 26 keeps every
    # shift inside the 32-bit word.
    sh = tl.minimum(tl.maximum(14 - ex, 21), 26)
    kept = sig >> sh
    above = sig >> (sh - 1)
    below = sig - (above << (sh - 1))
    small = kept + (((above & 1) == 1) & ((below != 0) | ((kept & 1) == 1))).to(tl.int32)
    # From 2^-6 up: 3 fraction bits of the 23, rounded to nearest even; a
    # carry out of the fraction (16) bumps the exponent.
    kept_n = sig >> 20
    kept_n = kept_n + ((((sig >> 19) & 1) == 1) & (((sig & 0x7FFFF) != 0) | ((kept_n & 1) == 1))).to(tl.int32)
    e8 = ex + 7 + (kept_n >> 4)
    kept_n = tl.where(kept_n == 16, 8, kept_n)
    normal = (e8 << 3) | (kept_n - 8)
    past_max = (ex >= -6) & ((e8 > 15) | ((e8 == 15) & (kept_n == 15)))
    code = tl.where(ex < -6, small, normal)
    return tl.where((a >= 0x7F800000) | past_max, 0x7F, code | sign)


@triton.jit
def _block_scale(q):
    """SPEC.md 4.2 step 9 from q = a / 448 (> 0, +inf or NaN; a >= 1e-4 makes
    a finite q a normal number): e = ceil(log2(q)) from q's bits.  Returns
    (UE8M0 byte, bits of the multiplier 2^-e, bits of the scale 2^e): for
    an infinite q 255, +0, +inf; for NaN 255, NaN, NaN.  A finite e lies in
    [-22, 120], so 2^-e and 2^e are normal fp32 numbers, built from bits."""
    qb = _bits(q)
    field = (qb >> 23) & 0xFF
    e = field - 127 + ((qb & 0x7FFFFF) != 0).to(tl.int32)
    finite = field < 255
    is_nan = (qb & 0x7FFFFFFF) > 0x7F800000
    byte = tl.where(finite, tl.minimum(tl.maximum(e + 127, 0), 255), 255)
    multiplier = tl.where(finite, (127 - e) << 23, tl.where(is_nan, 0x7FC00000, 0))
    scale = tl.where(finite, (127 + e) << 23, tl.where(is_nan, 0x7FC00000, 0x7F800000))
    return byte, multiplier, scale


@triton.jit
def _exp_cr(x):
    """The correctly rounded fp32 exp of x <= 0 (or NaN) of SPEC.md 1: e^x in
    double (libdevice's exp, error below 1 ulp of double), rounded once to
    fp32.  That is correctly rounded for every fp32 x <= 0: e^x is never
    within 1.26 ulp of double of an fp32 rounding midpoint there (the
    closest is x = -14.567090034484863, at 1.265 ulp; every other input of
    harness/fuzz/exp_boundaries.inc, all of [-87, 0) within 2^-22 fp32 ulp,
    is over 2.4 ulp away, and [-104.5, -87) comes no closer than 36), so
    the double lands on the right side of every midpoint and the one
    rounding (RNE, subnormals kept) gives the nearest fp32.  Only an exp
    with an error of 1.265 double ulp or more could round one input wrong;
    below -104 e^x rounds to +0, exp(-inf) = +0 and exp(NaN) = NaN."""
    return libdevice.exp(x.to(tl.float64)).to(tl.float32)


@triton.jit
def _lane(lanes, j, k):
    """lanes[k] as a scalar: a sum of it and zeros, exact (a lane is >= +0,
    +inf or NaN, never -0)."""
    return tl.sum(tl.where(j == k, lanes, 0.0), axis=0)


@triton.jit
def save_partial_states(kv, score, ape, ints, state, R: tl.constexpr, W: tl.constexpr, BS: tl.constexpr,
                        STRIDE: tl.constexpr):
    """SPEC.md 4.1, one program per token.  kv, score [T, W] and ape [R, W]
    as int32 bits; ints [T, 2] = (position, slot); state: the state cache's
    pages as int32 bits, STRIDE words apart (padding included), rows of 2W."""
    t = tl.program_id(0)
    p = tl.load(ints + 2 * t)
    slot = tl.load(ints + 2 * t + 1)
    if slot >= 0:
        i = tl.arange(0, W)
        row = state + (slot // BS) * STRIDE + (slot % BS) * (2 * W)
        # S1: the kv half, bit for bit.
        tl.store(row + i, tl.load(kv + t * W + i))
        # S2: one fp32 add; a NaN sum is stored as 0x7FC00000.
        total = _f32(tl.load(score + t * W + i)) + _f32(tl.load(ape + (p % R) * W + i))
        tl.store(row + W + i, tl.where(total != total, 0x7FC00000, _bits(total)))


@triton.jit
def compress(state, block_table, ints, weight, cos_sin, kv_cache, scratch, eps, R: tl.constexpr,
             D: tl.constexpr, W: tl.constexpr, WIN: tl.constexpr, H2: tl.constexpr, BS: tl.constexpr,
             KB: tl.constexpr, KV_STRIDE: tl.constexpr):
    """SPEC.md 4.2, one program per token.  state: the state cache as int32
    bits, pages of BS rows of 2W packed (no padding: it is only read);
    ints [T, 4] = (position, state slot, kv slot, token_to_req * max_blocks);
    weight [D]; cos_sin [P, 64]; kv_cache: the fp8 cache's pages as bytes,
    KV_STRIDE apart (padding included); scratch [T, D] fp32 for the pooled
    values.  WIN = coff * R window entries; H2 = D for R = 4 (the current
    group's columns), else 0."""
    t = tl.program_id(0)
    p = tl.load(ints + 4 * t)
    slot = tl.load(ints + 4 * t + 1)
    kv_slot = tl.load(ints + 4 * t + 2)
    bt_row = tl.load(ints + 4 * t + 3)
    if (slot >= 0) & (kv_slot >= 0) & ((p + 1) % R == 0):
        d = tl.arange(0, D)
        # The window: entry w is position q = p - WIN + 1 + w, valid iff
        # q >= 0, so the valid entries are w = first .. WIN-1, in order.
        first = tl.maximum(WIN - 1 - p, 0).to(tl.int32)
        # Step 1: NaN-propagating maximum of the valid scores.
        m = tl.zeros([D], tl.float32) - float("inf")
        for w in range(first, WIN):
            q = p - (WIN - 1) + w
            page = tl.load(block_table + bt_row + q // BS).to(tl.int64)
            row = state + page * (BS * 2 * W) + (q % BS) * (2 * W) + tl.where(w >= R, H2, 0)
            m = _max_nan(m, _f32(tl.load(row + W + d)))
        # Step 2: both sums from +0, increasing w; exp correctly rounded to
        # fp32 (see _exp_cr).  Step 3: one IEEE division.
        denom = tl.zeros([D], tl.float32)
        acc = tl.zeros([D], tl.float32)
        for w in range(first, WIN):
            q = p - (WIN - 1) + w
            page = tl.load(block_table + bt_row + q // BS).to(tl.int64)
            row = state + page * (BS * 2 * W) + (q % BS) * (2 * W) + tl.where(w >= R, H2, 0)
            e = _exp_cr(_f32(tl.load(row + W + d)) - m)
            denom = denom + e
            acc = tl.fma(e, _f32(tl.load(row + d)), acc)
        tl.store(scratch + t * D + d, tl.div_rn(acc, denom))
        tl.debug_barrier()   # the pooled row is read back below in other layouts
        pooled = scratch + t * D
        # Step 4: 16 lanes, lane j takes d = j, j+16, ... in order ...
        j = tl.arange(0, 16)
        lanes = tl.zeros([16], tl.float32)
        for r in tl.static_range(D // 16):
            v = tl.load(pooled + r * 16 + j)
            lanes = tl.fma(v, v, lanes)
        # ... folded j += j+8, j += j+4, j += j+2, 0 += 1.
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
        # Step 5: division, addition, sqrt, division, each rounded once.
        inv = tl.div_rn(1.0, tl.sqrt_rn(tl.div_rn(sum_of_squares, D * 1.0) + eps))
        # Step 7's inputs: the un-rounded normed values of the last 64 dims
        # as GPT-J pairs (x[N+2i], x[N+2i+1]), rotated with cos_sin row
        # (p / R) * R; step 6 is (pooled * inv) * weight, two roundings.
        N = D - 64
        i = tl.arange(0, 32)
        xe = (tl.load(pooled + N + 2 * i) * inv) * tl.load(weight + N + 2 * i)
        xo = (tl.load(pooled + N + 1 + 2 * i) * inv) * tl.load(weight + N + 1 + 2 * i)
        cs = cos_sin + ((p // R) * R) * 64
        c = tl.load(cs + i)
        s = tl.load(cs + 32 + i)
        ye = tl.fma(xe, c, _negate(xo * s))
        yo = tl.fma(xo, c, xe * s)
        kv_page = kv_cache + (kv_slot // KB) * KV_STRIDE
        if D == 512:
            # fp8_ds_mla row: 448 codes, 64 bf16 RoPE values, then (after
            # the page's KB token rows) 7 scale bytes and a 0.
            kv_row = kv_page + (kv_slot % KB) * 576
            b = tl.arange(0, 8)
            dn = b[:, None] * 64 + tl.arange(0, 64)[None, :]      # NoPE d as 8 blocks of 64 (block 7 unused)
            nope = dn < 448
            x = (tl.load(pooled + dn, mask=nope, other=0.0) * inv) * tl.load(weight + dn, mask=nope, other=0.0)
            # Step 8: y = bf16(normed) widened.  Step 9, per block:
            # a = max(max |y|, 1e-4) on the bits (non-negative floats order
            # as integers; a NaN's magnitude bits exceed +inf's), q = a / 448.
            y = _widen(_bf16_bits(x))
            magnitude = tl.where(nope, _bits(y) & 0x7FFFFFFF, 0)
            a = tl.maximum(tl.max(magnitude, axis=1), 0x38D1B717)   # fp32(1e-4)
            a = _f32(tl.where(a > 0x7F800000, 0x7FC00000, a))
            byte, multiplier, _ = _block_scale(tl.div_rn(a, tl.full([8], 448.0, tl.float32)))
            codes = _fp8(_clamp448(y * _f32(multiplier)[:, None]))
            tl.store(kv_row + dn, codes.to(tl.uint8), mask=nope)
            tl.store(kv_page + KB * 576 + (kv_slot % KB) * 8 + b, tl.where(b < 7, byte, 0).to(tl.uint8))
            # The 64 rotated values as little-endian bf16.
            be = _bf16_bits(ye)
            bo = _bf16_bits(yo)
            tl.store(kv_row + 448 + 4 * i, (be & 0xFF).to(tl.uint8))
            tl.store(kv_row + 449 + 4 * i, (be >> 8).to(tl.uint8))
            tl.store(kv_row + 450 + 4 * i, (bo & 0xFF).to(tl.uint8))
            tl.store(kv_row + 451 + 4 * i, (bo >> 8).to(tl.uint8))
        else:
            # fp8_indexer row: 128 codes; after the page's KB token rows, one
            # little-endian fp32 scale per row.  RoPE came first (fp32), then
            # every dim is rounded to bf16: z.
            kv_row = kv_page + (kv_slot % KB) * 128
            dn = tl.arange(0, 64)
            zn = _widen(_bf16_bits((tl.load(pooled + dn) * inv) * tl.load(weight + dn)))
            ze = _widen(_bf16_bits(ye))
            zo = _widen(_bf16_bits(yo))
            a = tl.maximum(tl.max(_bits(zn) & 0x7FFFFFFF, axis=0), tl.max(_bits(ze) & 0x7FFFFFFF, axis=0))
            a = tl.maximum(tl.maximum(a, tl.max(_bits(zo) & 0x7FFFFFFF, axis=0)), 0x38D1B717)
            a = _f32(tl.where(a > 0x7F800000, 0x7FC00000, a))
            _, multiplier, scale = _block_scale(tl.div_rn(a, 448.0))
            mult = _f32(multiplier)
            tl.store(kv_row + dn, _fp8(_clamp448(zn * mult)).to(tl.uint8))
            tl.store(kv_row + 64 + 2 * i, _fp8(_clamp448(ze * mult)).to(tl.uint8))
            tl.store(kv_row + 65 + 2 * i, _fp8(_clamp448(zo * mult)).to(tl.uint8))
            k = tl.arange(0, 4)
            tl.store(kv_page + KB * 128 + (kv_slot % KB) * 4 + k, ((scale >> (8 * k)) & 0xFF).to(tl.uint8))
