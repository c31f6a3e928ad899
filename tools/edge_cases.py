#!/usr/bin/env python3
"""Writes fixtures/edge-cases: conformance cases at the edges of SPEC.md's
rules, with expected outputs that do not come from kvcmp.

Every expected byte here is worked out by this file from SPEC.md alone,
with exact rational arithmetic and an explicit rounding to binary32 (a
second implementation of the few steps these cases need, written from
the text, sharing no code with kvcmp), or written down by hand where a
case is small enough; each case's case.json says which in meta.notes.
Cases without NAME.out tensors record an input every implementation must
refuse without writing (SPEC.md 8); meta.expect names the status.

Standard library only (no numpy): the .npy files are written by hand.

    python3 tools/edge_cases.py [OUT]     (default fixtures/edge-cases)
"""
import json
import math
import os
import shutil
import struct
import sys
from fractions import Fraction as F

# ---- binary32 by hand -------------------------------------------------------

F32_MAX = F(2 ** 24 - 1, 2 ** 24) * F(2) ** 128


def rn32(x, zero_negative=False):
    """The binary32 value nearest the rational x (ties to even), as a
    Python float (which holds every binary32 value exactly)."""
    if x == 0:
        return -0.0 if zero_negative else 0.0
    sign = -1 if x < 0 else 1
    a = abs(x)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if F(2) ** e > a:
        e -= 1
    quantum = F(2) ** (max(e, -126) - 23)   # 24-bit significands; subnormals 2^-149 apart
    q = a / quantum
    m = q.numerator // q.denominator
    rest = q - m
    if rest > F(1, 2) or (rest == F(1, 2) and m % 2 == 1):
        m += 1
    value = m * quantum
    if value > F32_MAX:
        return sign * math.inf
    return sign * float(value)


def f32(v):
    """A Python float that must already be a binary32 value."""
    assert rn32(F(v)) == v or v != v or math.isinf(v), v
    return v


def neg(z):
    return math.copysign(1.0, z) < 0


def add(a, b):
    exact = F(a) + F(b)
    return rn32(exact, zero_negative=exact == 0 and a == 0 and b == 0 and neg(a) and neg(b))


def mul(a, b):
    return rn32(F(a) * F(b), zero_negative=neg(a) != neg(b))


def div(a, b):
    return rn32(F(a) / F(b), zero_negative=neg(a) != neg(b))


def fma(a, b, c):
    """a * b + c with one rounding (SPEC.md 1)."""
    exact = F(a) * F(b) + F(c)
    product_zero = a == 0 or b == 0
    return rn32(exact, zero_negative=exact == 0 and product_zero and c == 0 and (neg(a) != neg(b)) and neg(c))


def sqrt32(a):
    """Correctly rounded binary32 square root of a binary32 a > 0: the
    root to 120 bits, then one rounding (a binary32 midpoint squared has
    more bits than a binary32, so the root is never on a tie)."""
    x = F(a)
    scale = 2 ** 240
    n = x.numerator * scale * scale // x.denominator
    return rn32(F(math.isqrt(n), scale))


def bits32(v):
    return struct.unpack('<I', struct.pack('<f', v))[0]


def from_bits32(u):
    return struct.unpack('<f', struct.pack('<I', u))[0]


def bf16(v):
    """SPEC.md 1: the upper 16 bits after round-to-nearest-even; NaN -> 0x7FC0."""
    if v != v:
        return 0x7FC0
    u = bits32(v)
    u += 0x7FFF + ((u >> 16) & 1)
    return (u >> 16) & 0xFFFF


def widen_bf16(h):
    return from_bits32(h << 16)


def fp8(x):
    """OCP e4m3fn (SPEC.md 1): NaN -> 0x7F, above 464 -> NaN, ties to even."""
    if x != x:
        return 0x7F
    sign = 0x80 if neg(x) else 0
    a = F(abs(x))
    if a > 464:
        return 0x7F
    if a < F(1, 64):   # subnormal: m * 2^-9
        q = a * 512
        m = q.numerator // q.denominator
        rest = q - m
        if rest > F(1, 2) or (rest == F(1, 2) and m % 2 == 1):
            m += 1
        return sign | m   # m = 8 is 0x08, the smallest normal
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if F(2) ** e > a:
        e -= 1
    q = a / F(2) ** (e - 3)
    m = q.numerator // q.denominator
    rest = q - m
    if rest > F(1, 2) or (rest == F(1, 2) and m % 2 == 1):
        m += 1
    if m == 16:
        m, e = 8, e + 1
    return sign | (e + 7) << 3 | (m - 8)


def clamp448(x):
    if x != x:
        return x
    return max(-448.0, min(448.0, x))


def ceil_log2_exact(q):
    """e = ceil(log2(q)) from q's bits: 2^k gives k, anything above k+1."""
    a = F(q)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if F(2) ** e > a:
        e -= 1
    return e if F(2) ** e == a else e + 1


# ---- the steps of SPEC.md 4.2 that these cases need --------------------------

def pool(entries):
    """Steps 1-3 over [(kv, score)] in order.  The cases keep every score
    equal, so each exp is exp(0) = 1 exactly (SPEC.md 1)."""
    m = entries[0][1]
    for _, s in entries:
        assert s == m, "these cases only need exp(0)"
        m = m if m >= s else s
    denom, acc = 0.0, 0.0
    for kv, s in entries:
        e = 1.0   # exp(s - m) = exp(0)
        denom = add(denom, e)
        acc = fma(e, kv, acc)
    return div(acc, denom)


def rms_norm(pooled, weight, eps):
    """Steps 4-6: 16 lane sums, the fold, inv = 1 / sqrt(sumsq / D + eps),
    normed = (pooled * inv) * weight."""
    D = len(pooled)
    lanes = [0.0] * 16
    for d in range(D):
        lanes[d % 16] = fma(pooled[d], pooled[d], lanes[d % 16])
    for width in (8, 4, 2, 1):
        for j in range(width):
            lanes[j] = add(lanes[j], lanes[j + width])
    inv = div(1.0, sqrt32(add(div(lanes[0], float(D)), rn32(F(eps)))))
    return [mul(mul(pooled[d], inv), weight[d]) for d in range(D)]


def rope(x, cos, sin):
    """Step 7 on the last 64 values of x (GPT-J pairs)."""
    out = list(x)
    n = len(x) - 64
    for i in range(32):
        xe, xo = x[n + 2 * i], x[n + 2 * i + 1]
        out[n + 2 * i] = fma(xe, cos[i], -mul(xo, sin[i]))
        out[n + 2 * i + 1] = fma(xo, cos[i], mul(xe, sin[i]))
    return out


def indexer_row(normed, cos, sin):
    """SPEC.md 4.2, store for D = 128: RoPE, bf16, one block scale 2^e."""
    z = [widen_bf16(bf16(v)) for v in rope(normed, cos, sin)]
    a = rn32(F(1, 10000))
    for v in z:
        a = a if a >= abs(v) else abs(v)
    e = ceil_log2_exact(div(a, 448.0))
    multiplier = float(F(2) ** -e)
    codes = [fp8(clamp448(mul(v, multiplier))) for v in z]
    return bytes(codes) + struct.pack('<f', float(F(2) ** e))


# ---- .npy files and cases ----------------------------------------------------

FORMATS = {'<f4': 'f', '<i8': 'q', '<i4': 'i', '<u2': 'H', '|u1': 'B'}


def npy(path, descr, shape, values):
    count = 1
    for s in shape:
        count *= s
    assert len(values) == count, (path, len(values), count)
    shape_text = '(%s)' % (', '.join(str(s) for s in shape) + (',' if len(shape) == 1 else ''))
    header = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, shape_text)
    pad = (64 - (10 + len(header) + 1) % 64) % 64
    header = header + ' ' * pad + '\n'
    with open(path, 'wb') as f:
        f.write(b'\x93NUMPY\x01\x00' + struct.pack('<H', len(header)) + header.encode('latin1'))
        f.write(struct.pack('<%d%s' % (count, FORMATS[descr]), *values))


class Case:
    def __init__(self, root, stage, name, params, notes, expect=None):
        self.dir = os.path.join(root, stage, name)
        os.makedirs(self.dir)
        meta = {'generator': 'tools/edge_cases.py', 'notes': notes}
        if expect:
            meta['expect'] = expect
        doc = {'format': 'dsv4c-case/1', 'stage': stage, 'params': params,
               'source': 'edge-cases written from SPEC.md (tools/edge_cases.py), not by kvcmp', 'meta': meta}
        with open(os.path.join(self.dir, 'case.json'), 'w') as f:
            json.dump(doc, f, indent=1)
            f.write('\n')

    def put(self, name, descr, shape, values):
        npy(os.path.join(self.dir, name + '.npy'), descr, shape, values)


def f32_bits_list(values):
    return [bits32(v) for v in values]


def ring_filler(rows):
    """Ring rows no correct kernel reads or writes: distinct bytes, kept."""
    out = []
    for r in range(rows):
        out.extend(float(F(r * 1024 + i + 1, 4096)) for i in range(1024))
    return out


# ---- the cases ---------------------------------------------------------------

BY_RULES = ('expected outputs computed by tools/edge_cases.py from SPEC.md sections 1 and 4-5 with exact rational '
            'arithmetic and one explicit binary32 rounding per step (an implementation written from the text, '
            'sharing no code with kvcmp)')
ONES_BF16 = [0x3F80] * 512


def v41_norm_r1(root, name, positions, eps, notes, expect=None, rows=None):
    T = len(positions)
    rows = rows or [[1.0] * 512 for _ in range(T)]
    params = {'compress_ratio': 1, 'head_dim': 512, 'eps': eps}
    c = Case(root, 'v41.save_compress_norm', name, params, notes, expect)
    c.put('kv_score', '<f4', (T, 512), [v for row in rows for v in row])
    c.put('positions', '<i8', (T,), positions)
    c.put('slot_mapping', '<i8', (T,), list(range(T)))
    c.put('norm_weight', '<u2', (512,), ONES_BF16)
    latent_in = [0xA5A5] * (T * 512)
    c.put('latent', '<u2', (T, 512), latent_in)
    if expect:
        return c
    weight = [widen_bf16(h) for h in ONES_BF16]
    latent = []
    for t in range(T):
        latent.extend(bf16(v) for v in rms_norm(rows[t], weight, eps))
    if eps == 1.0:   # the hand derivation in the notes
        assert latent == [0x3F35] * (T * 512), latent[:4]
    c.put('latent.out', '<u2', (T, 512), latent)
    return c


def v41_norm_r2(root, name, positions, slots, kv_rows, notes, expect=None, cap=8, blocks=1, ring=None):
    """One request whose chunk is the whole batch; score halves 0."""
    T = len(positions)
    params = {'compress_ratio': 2, 'head_dim': 512, 'eps': 1e-06}
    c = Case(root, 'v41.save_compress_norm', name, params, notes, expect)
    kv_score = []
    for t in range(T):
        kv_score.extend(kv_rows[t] + [0.0] * 512)
    c.put('kv_score', '<f4', (T, 1024), kv_score)
    c.put('positions', '<i8', (T,), positions)
    c.put('slot_mapping', '<i8', (T,), slots)
    c.put('norm_weight', '<u2', (512,), ONES_BF16)
    c.put('latent', '<u2', (T, 512), [0xA5A5] * (T * 512))
    c.put('query_start_loc', '<i4', (2,), [0, T])
    c.put('token_to_req', '<i4', (T,), [0] * T)
    ring = ring or ring_filler(blocks * cap)
    c.put('state_cache', '<f4', (blocks, cap, 1024), ring)
    if expect:
        return c
    weight = [widen_bf16(h) for h in ONES_BF16]
    latent = [0xA5A5] * (T * 512)
    for t in range(T):
        if slots[t] < 0 or positions[t] % 2 == 0:
            continue
        assert t > 0, "these cases pool with batch row t - 1"
        pooled = [pool([(kv_rows[t - 1][d], 0.0), (kv_rows[t][d], 0.0)]) for d in range(512)]
        latent[t * 512:(t + 1) * 512] = [bf16(v) for v in rms_norm(pooled, weight, 1e-06)]
    c.put('latent.out', '<u2', (T, 512), latent)
    # SPEC.md 5.1 ring store: the last min(n, CAP) rows with a slot, bit for bit.
    out = list(ring)
    for t in range(T - min(T, cap), T):
        if slots[t] >= 0:
            out[slots[t] * 1024:(slots[t] + 1) * 1024] = kv_score[t * 1024:(t + 1) * 1024]
    c.put('state_cache.out', '<f4', (blocks, cap, 1024), out)
    return c


def v4_save(root, name, positions, notes, expect=None):
    """D = 128, R = 4: W = 256; one state row per token, BS 2."""
    T, W, R = len(positions), 256, 4
    params = {'compress_ratio': R, 'head_dim': 128, 'eps': 1e-06}
    c = Case(root, 'v4.save_partial_states', name, params, notes, expect)
    kv = [float(t * 1000 + i) for t in range(T) for i in range(W)]
    score = [float(-(t + 1) * 2 - i % 7) for t in range(T) for i in range(W)]
    ape = [float(r * 16 + i % 5) for r in range(R) for i in range(W)]
    slots = [2 * t + 1 for t in range(T)]   # odd rows of BS-2 pages
    pages = T
    cache = [float(F(-1 - k, 8)) for k in range(pages * 2 * 2 * W)]
    c.put('kv', '<f4', (T, W), kv)
    c.put('score', '<f4', (T, W), score)
    c.put('ape', '<f4', (R, W), ape)
    c.put('positions', '<i8', (T,), positions)
    c.put('slot_mapping', '<i8', (T,), slots)
    c.put('state_cache', '<f4', (pages, 2, 2 * W), cache)
    if expect:
        return c
    out = list(cache)
    for t in range(T):
        row = slots[t] * 2 * W
        out[row:row + W] = kv[t * W:(t + 1) * W]                                           # S1
        r = positions[t] % R
        out[row + W:row + 2 * W] = [add(score[t * W + i], ape[r * W + i]) for i in range(W)]   # S2
    c.put('state_cache.out', '<f4', (pages, 2, 2 * W), out)
    return c


def v4_compress_d128(root, name, eps, tokens, notes, expect=None, kv_row=None):
    """D = 128, R = 4, one request at positions 0..3 (BS 4, one state
    page holding rows 0..3 = kv_row, by default kv 1.0 everywhere, scores
    0): token p = 3 closes.  `tokens` adds (position, slot, kv_slot,
    token_to_req) rows that must be ignored.  cos_sin row 0: cos 1, sin 0."""
    D, W = 128, 256
    params = {'compress_ratio': 4, 'head_dim': D, 'eps': eps, 'cache_dtype': 'fp8_indexer'}
    c = Case(root, 'v4.compress', name, params, notes, expect)
    rows = [(0, 0, -1, 0), (1, 1, -1, 0), (2, 2, -1, 0), (3, 3, 0, 0)] + tokens
    T = len(rows)
    c.put('positions', '<i8', (T,), [r[0] for r in rows])
    c.put('slot_mapping', '<i8', (T,), [r[1] for r in rows])
    c.put('kv_slot_mapping', '<i8', (T,), [r[2] for r in rows])
    c.put('token_to_req', '<i4', (T,), [r[3] for r in rows])
    c.put('block_table', '<i4', (1, 1), [0])
    kv_row = kv_row or [1.0] * W
    state = (kv_row + [0.0] * W) * 4
    c.put('state_cache', '<f4', (1, 4, 2 * W), state)
    c.put('norm_weight', '<f4', (D,), [1.0] * D)
    c.put('cos_sin', '<f4', (1, 64), [1.0] * 32 + [0.0] * 32)
    cache_in = [0x5A] * 132 + [0x3C] * 132
    c.put('kv_cache', '|u1', (1, 2, 132), cache_in)
    if expect:
        return c
    # Window w = 4..7 (q = 0..3) reads the second half, h = D: score 0.
    pooled = [pool([(kv_row[D + d], 0.0)] * 4) for d in range(D)]
    normed = rms_norm(pooled, [1.0] * D, eps)
    row = indexer_row(normed, [1.0] * 32, [0.0] * 32)
    out = list(cache_in)
    # Row 0 of the page: codes at 0 * 128, the scale at 2 * 128 + 0 * 4.
    out[0:128] = row[:128]
    out[2 * 128:2 * 128 + 4] = row[128:]
    out[128:256] = cache_in[128:256]
    c.put('kv_cache.out', '|u1', (1, 2, 132), _page_bytes(out))
    return c


def _page_bytes(flat):
    return flat


def v41_plain_fp8(root, name, scale, notes, expect=None):
    """R = 1, fp8_e4m3 rows, one token at position 0 (cos 1, sin 0)."""
    params = {'compress_ratio': 1, 'head_dim': 512, 'eps': 1e-06, 'cache_dtype': 'fp8_e4m3'}
    c = Case(root, 'v41.rope_plain_insert', name, params, notes, expect)
    # NoPE and RoPE values: +-1.5 * 2^k, some zeros of both signs.
    latent = []
    for d in range(512):
        if d % 9 == 0:
            latent.append(0x0000 if d % 2 == 0 else 0x8000)
        else:
            latent.append(bf16(math.ldexp(1.5 if d % 2 else -1.5, d % 11 - 5)))
    c.put('latent', '<u2', (1, 512), latent)
    c.put('positions', '<i8', (1,), [0])
    c.put('slot_mapping', '<i8', (1,), [1])
    c.put('cos_sin', '<f4', (1, 64), [1.0] * 32 + [0.0] * 32)
    c.put('fp8_scale', '<f4', (1,), [scale])
    cache_in = [0x11] * 512 + [0x22] * 512
    c.put('kv_cache', '|u1', (1, 2, 512), cache_in)
    if expect:
        return c
    x = [widen_bf16(h) for h in latent]
    v = [widen_bf16(bf16(y)) for y in rope(x, [1.0] * 32, [0.0] * 32)]
    r = div(1.0, scale)   # RN(1 / scale): 2^149 rounds to +inf
    # With r = +inf the fp32 product is +-inf, or NaN for a zero.
    codes = [fp8(clamp448(y * r if math.isinf(r) else mul(y, r))) for y in v]
    if math.isinf(r):   # the hand derivation in the notes
        assert all(code == (0x7F if y == 0 else 0xFE if y < 0 else 0x7E) for code, y in zip(codes, v)), codes
    out = cache_in[:512] + codes
    c.put('kv_cache.out', '|u1', (1, 2, 512), out)
    return c


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else 'fixtures/edge-cases'
    for stage in ('v4.save_partial_states', 'v4.compress', 'v41.save_compress_norm', 'v41.rope_plain_insert'):
        shutil.rmtree(os.path.join(root, stage), ignore_errors=True)
    P = 2 ** 40

    # eps: 1 is inside [0, 1], the next binary32 above is not (SPEC.md 8, 9.10).
    v41_norm_r1(root, 'r1_eps_1', [5, 6], 1.0,
                'eps = 1, the inclusive upper bound of [0, 1]: accepted.  kv 1.0 everywhere, weight 1: sumsq = 512, '
                'inv = 1 / sqrt(512 / 512 + 1) = RN(1 / RN(sqrt 2)) = 0.70710677, latent bf16 0x3F35 in every dim '
                '(with eps = 1e-6 it would be 0x3F80).  ' + BY_RULES + '; 0x3F35 also by hand.')
    v41_norm_r1(root, 'r1_eps_above_1', [5, 6], 1.0000001192092896,
                'eps = the binary32 after 1 (1 + 2^-23): outside [0, 1], bad-parameter, nothing written (written by hand).',
                expect='rejected: bad-parameter')
    v4_compress_d128(root, 'd128_r4_eps_1', 1.0, [],
                     'eps = 1 in v4.compress: accepted.  Window of p = 3: four entries kv 1, score 0, so pooled = 4 / 4 = 1; '
                     'inv = RN(1 / RN(sqrt 2)); the identity rotation; z = bf16 0x3F35 = 0.70703125 in all 128 dims; '
                     'a = 0.70703125, q = a / 448 in (2^-10, 2^-9], e = -9, scale 2^-9 (bytes 00 00 00 3b), every code '
                     'fp8(362) = 352 = 0x7b.  ' + BY_RULES + '; the same bytes by hand.')

    # Positions: 2^40 is the inclusive bound, 2^40 + 1 is past it.
    v41_norm_r1(root, 'r1_positions_up_to_2p40', [P - 1, P], 1e-06,
                'valid tokens at positions 2^40 - 1 and 2^40, the inclusive bound: accepted; kv rows 2.0 and 0.5 '
                'everywhere.  ' + BY_RULES + '.', rows=[[2.0] * 512, [0.5] * 512])
    v41_norm_r1(root, 'r1_position_2p40_plus_1', [P - 1, P + 1], 1e-06,
                'a valid token at position 2^40 + 1: index-out-of-range, nothing written (by hand).',
                expect='rejected: index-out-of-range')
    v4_save(root, 'd128_r4_positions_up_to_2p40', [P - 1, P, 6],
            'tokens at positions 2^40 - 1 (ape row 3) and 2^40 (ape row 0), the inclusive bound: accepted.  '
            'S1 copies kv; S2 adds small integers exactly.  Expected rows by hand (and ' + BY_RULES + ').')
    v4_save(root, 'd128_r4_position_2p40_plus_1', [P - 1, P + 1, 6],
            'a token with a slot at position 2^40 + 1: index-out-of-range, nothing written (by hand).',
            expect='rejected: index-out-of-range')

    kv_ring = [[float(2 ** (t - 5))] * 512 for t in range(12)]
    v41_norm_r2(root, 'r2_positions_up_to_2p40', [P - 2, P - 1, P], [(P - 2) % 8, (P - 1) % 8, P % 8], kv_ring[:3],
                'R = 2, one chunk at positions 2^40 - 2 .. 2^40 (ring rows p mod 8 = 6, 7, 0): accepted; 2^40 - 1 closes '
                'and pools with batch row 0.  ' + BY_RULES + '.')
    v41_norm_r2(root, 'r2_position_2p40_plus_1', [P - 1, P, P + 1], [(P - 1) % 8, P % 8, (P + 1) % 8], kv_ring[:3],
                'R = 2, a chunk whose last valid token is at 2^40 + 1: index-out-of-range, nothing written (by hand).',
                expect='rejected: index-out-of-range')

    # A gap between a chunk's first two positions (SPEC.md 8: positions
    # not consecutive within a request's chunk); ring rows stay p mod CAP.
    v41_norm_r2(root, 'r2_gap_between_first_two_positions', [4, 6, 7, 8], [4, 6, 7, 0], kv_ring[:4],
                'R = 2, one chunk at positions 4, 6, 7, 8: the first two are not consecutive (each ring slot is still '
                'p mod CAP): inconsistent-metadata, nothing written (by hand).', expect='rejected: inconsistent-metadata')

    # A chunk longer than CAP with padding in its last CAP rows (SPEC.md
    # 5.1: padding rows count towards min(n, CAP) and write nothing).
    positions = list(range(11))
    slots = [p % 8 for p in positions]
    slots[7] = -1
    slots[10] = -1
    v41_norm_r2(root, 'r2_chunk_past_cap_padding_in_last_rows', positions, slots, kv_ring[:11],
                'R = 2, CAP 8, one chunk of 11 tokens at positions 0..10, tokens 7 and 10 padding (slot -1).  The ring '
                'store copies rows t in [3, 11) with a slot: tokens 3, 4, 5, 6, 8, 9 to ring rows 3, 4, 5, 6, 0, 1; ring '
                'rows 2 and 7 keep their bytes (a store of the last CAP rows *with a slot* would copy token 2 to row 2).  '
                'Latents of the valid closing tokens 1, 3, 5, 9 (7 is padding): kv rows 2^(t-5) everywhere, scores 0.  '
                'Ring by hand; ' + BY_RULES + '.')

    # A pooled sum of zeros is +0 (SPEC.md 4.2 step 2: acc starts at +0).
    zeros = [[-0.0 if d % 2 == 0 else 1.0 for d in range(512)] for _ in range(2)]
    v41_norm_r2(root, 'r2_pooled_negative_zeros_are_positive_zero', [0, 1], [0, 1], zeros,
                'R = 2, positions 0 and 1, kv -0 in every even dim (1.0 in odd dims), scores 0.  Step 2: acc = +0, '
                'fma(1, -0, +0) = +0 twice, pooled = +0 / 2 = +0, so every even dim of latent row 1 is 0x0000 (an '
                'accumulator started at -0 gives -0, 0x8000).  Even dims by hand; ' + BY_RULES + '.')

    # fp8_scale: finite and > 0 (SPEC.md 5.3, 8).
    v41_plain_fp8(root, 'fp8_scale_zero', 0.0,
                  'fp8_scale = 0: not > 0, bad-parameter, nothing written (by hand).', expect='rejected: bad-parameter')
    v41_plain_fp8(root, 'fp8_scale_negative_zero', -0.0,
                  'fp8_scale = -0: not > 0, bad-parameter, nothing written (by hand).', expect='rejected: bad-parameter')
    v41_plain_fp8(root, 'fp8_scale_smallest_positive', math.ldexp(1.0, -149),
                  'fp8_scale = 2^-149, the smallest positive binary32: accepted.  r = RN(1 / 2^-149) = +inf, so every '
                  'nonzero value clamps to +-448 (0x7e / 0xfe) and every zero is 0 * inf = NaN (0x7f).  By hand; '
                  + BY_RULES + '.')

    # v4.compress: a slotted token that does not close is read for its
    # position only (SPEC.md 8: its other metadata is never checked).
    v4_compress_d128(root, 'd128_r4_unset_metadata_of_non_closing_tokens', 1e-06,
                     [(5, 1, 1, -1), (6, 0, 5, 2 ** 31 - 1), (P, 2, 1, -7)],
                     'three extra tokens that do not close (positions 5, 6 and 2^40), with both slots, token_to_req '
                     '-1, 2^31 - 1 and -7, and a kv slot past the cache: accepted and ignored; only p = 3 writes.  '
                     + BY_RULES + '.')
    v4_compress_d128(root, 'd128_r4_non_closing_token_at_2p40_plus_1', 1e-06, [(P + 1, 2, 1, 0)],
                     'a token with both slots at position 2^40 + 1 (it does not close): its position is still checked, '
                     'index-out-of-range, nothing written (by hand).', expect='rejected: index-out-of-range')

    # A pooled sum of zeros is +0 in v4.compress too (SPEC.md 4.2 step 2).
    v4_compress_d128(root, 'd128_r4_pooled_negative_zeros_are_positive_zero', 1e-06, [],
                     'kv -0 in every even dim of the state rows (1.0 in odd dims), scores 0; p = 3 closes a window of '
                     'four such rows.  Step 2: acc = +0, fma(1, -0, +0) = +0 four times, pooled = +0 / 4 = +0 in every '
                     'even dim; normed +0 * inv * 1 = +0; RoPE keeps it (fma(+0, 1, -(1 * 0)) = +0 + -0 = +0); bf16 '
                     '0x0000, so every even code of the stored row is 0x00 (an accumulator started at -0 gives -0 all '
                     'the way, code 0x80).  Odd dims: pooled 1, sumsq = 64, inv = RN(1 / RN(sqrt(RN(64 / 128) + '
                     'RN(1e-6)))).  Even codes by hand; ' + BY_RULES + '.',
                     kv_row=[-0.0 if d % 2 == 0 else 1.0 for d in range(256)])


if __name__ == '__main__':
    main()
