/* The catalogue of deviations (include/kvcmp/deviations.h): bugs kernel
 * authors write, each a wrong version of one or a few of the reference's
 * steps (reference/steps.h).  A deviation's variant is the reference's
 * step table with the steps it varies replaced by the wrong versions
 * (harness/diagnose/deviations.c), the rest of every stage the
 * reference's own: never a copy of the reference.  A diagnosis composes
 * up to four; the reference itself knows none of them.
 *
 * X(ID, name, SPEC.md place, what the variant does, in SPEC.md's terms). */
#ifndef KVCMP_HARNESS_DEVIATIONS_H
#define KVCMP_HARNESS_DEVIATIONS_H

#define KVC_DEVIATION_LIST(X)                                                                                                      \
    X(WINDOW_EARLY, "window-starts-early", "SPEC 4.2 window",                                                                      \
      "the window starts one row early: entry w is position q = p - coff*R + w, so the token itself is left out")                  \
    X(WINDOW_LATE, "window-starts-late", "SPEC 4.2 window",                                                                        \
      "the window starts one row late: entry w is position q = p - coff*R + 2 + w, so its oldest entry is left out")               \
    X(R4_HALVES_SWAPPED, "r4-halves-swapped", "SPEC 4.2 window",                                                                   \
      "for R = 4 the previous group reads the second half (h = D) and the current group the first (h = 0)")                        \
    X(STATE_SLOT_IGNORED, "state-slot-ignored", "SPEC 4.2",                                                                        \
      "a closing token with a negative state slot (slot_mapping[t] < 0) is still compressed")                                      \
    X(SOFTMAX_UNFUSED, "softmax-unfused", "SPEC 4.2 step 2", "acc = acc + e * kv_w, two roundings, instead of fma(e, kv_w, acc)") \
    X(SOFTMAX_REVERSED, "softmax-reversed", "SPEC 4.2 step 2", "the window is summed in decreasing w instead of increasing w")     \
    X(SOFTMAX_SUM_FROM_NEGATIVE_ZERO, "softmax-sum-from-negative-zero", "SPEC 4.2 step 2",                                         \
      "acc starts at -0 instead of +0 (a sum over the products alone), so a window whose products are all -0 pools -0, not +0")    \
    X(EXP_VIA_EXP2, "exp-via-exp2", "SPEC 1 exp", "exp(x) is exp2(x * log2(e)) with the product rounded to fp32, not the correctly rounded exponential")          \
    X(EXP_OTHER_FAITHFUL, "exp-other-faithful", "SPEC 1 exp",                                                                      \
      "exp(x) is the other faithful fp32 value, the neighbour of the nearest one across e^x (faithful, not correctly rounded)")   \
    X(SUMSQ_SEQUENTIAL, "sumsq-sequential", "SPEC 4.2 step 4",                                                                     \
      "the sum of squares is one accumulator over d = 0, 1, 2 ... instead of 16 lanes folded by halving")                          \
    X(SUMSQ_REVERSED, "sumsq-reversed", "SPEC 4.2 step 4", "the sum of squares is one accumulator over d = D-1, D-2 ... 0")        \
    X(SUMSQ_PAIRWISE, "sumsq-pairwise", "SPEC 4.2 step 4",                                                                         \
      "the sum of squares adds rounded squares v*v pairwise (d with d + D/2, halving) instead of 16 fma lanes")                     \
    X(EPS_AFTER_SQRT, "eps-after-sqrt", "SPEC 4.2 step 5", "inv = 1 / (sqrt(sumsq / D) + eps): eps added after the square root")  \
    X(RSQRT_ROUNDED_ONCE, "rsqrt-rounded-once", "SPEC 4.2 step 5",                                                                 \
      "inv = rsqrt(sumsq / D + eps) rounded once, instead of a rounded sqrt and then a rounded division")                          \
    X(NORM_WEIGHT_FIRST, "norm-weight-first", "SPEC 4.2 step 6", "normed[d] = pooled[d] * (inv * weight[d]) instead of (pooled[d] * inv) * weight[d]") \
    X(ROPE_UNFUSED, "rope-unfused", "SPEC 4.2 step 7", "RoPE rounds each product and the sum separately instead of using fma")    \
    X(ROPE_HALVES, "rope-halves", "SPEC 4.2 step 7",                                                                               \
      "RoPE rotates the pairs (x[i], x[i+32]) (halves, NeoX style) instead of the interleaved (x[2i], x[2i+1])")                    \
    X(ROPE_INVERSE, "rope-inverse", "SPEC 4.2 step 7",                                                                             \
      "RoPE rotates by -angle: x_e' = fma(x_e, c, x_o * s), x_o' = fma(x_o, c, -(x_e * s))")                                       \
    X(ROPE_ROW_P, "rope-row-p", "SPEC 4.2 step 7", "RoPE uses cos_sin row p instead of the group start (p / R) * R")               \
    X(ROPE_ON_ROUNDED, "rope-on-rounded", "SPEC 4.2 step 8",                                                                       \
      "RoPE takes the bf16-rounded normed values of the D = 512 store instead of the un-rounded fp32 ones")                        \
    X(BF16_TRUNCATION, "bf16-truncation", "SPEC 1 bf16", "bf16(x) keeps the upper 16 bits (truncation) instead of rounding to nearest even") \
    X(BF16_HALF_AWAY, "bf16-half-away", "SPEC 1 bf16", "bf16(x) rounds ties away from zero instead of to even")                   \
    X(BF16_SUBNORMALS_FLUSHED, "bf16-subnormals-flushed", "SPEC 1 bf16", "bf16(x) of a subnormal x is a signed zero")              \
    X(BF16_NAN_PAYLOAD_KEPT, "bf16-nan-payload-kept", "SPEC 1 bf16",                                                               \
      "bf16(NaN) keeps the NaN's sign and upper payload bits (quieted) instead of 0x7FC0")                                         \
    X(BF16_NEGATIVE_ZERO_FLUSHED, "bf16-negative-zero-flushed", "SPEC 1 bf16", "bf16(-0) is +0 (0x0000) instead of 0x8000")        \
    X(FP8_TRUNCATION, "fp8-truncation", "SPEC 1 fp8", "fp8(x) truncates towards zero instead of rounding to nearest even")        \
    X(FP8_TIES_AWAY, "fp8-ties-away", "SPEC 1 fp8", "fp8(x) rounds a tie away from zero instead of to the even code")              \
    X(FP8_SUBNORMAL_TIES_AWAY, "fp8-subnormal-ties-away", "SPEC 1 fp8",                                                           \
      "fp8(x) rounds a tie below the smallest normal 2^-6 away from zero instead of to the even code (normal ties stay even)")     \
    X(FP8_SUBNORMALS_FLUSHED, "fp8-subnormals-flushed", "SPEC 1 fp8", "fp8(x) below the smallest normal 2^-6 is a signed zero")    \
    X(FP8_NEGATIVE_ZERO_FLUSHED, "fp8-negative-zero-flushed", "SPEC 1 fp8", "a zero fp8 code is always 0x00: -0 and negative underflows lose their sign") \
    X(FP8_NAN_SIGN_KEPT, "fp8-nan-sign-kept", "SPEC 1 fp8", "fp8(NaN) keeps the NaN's sign: a negative NaN becomes 0xFF instead of 0x7F") \
    X(FP8_NO_SATURATION, "fp8-no-saturation", "SPEC 5.3", "fp8 codes are rounded without the clamp to [-448, 448], so magnitudes above 464 become NaN") \
    X(CLAMP_NAN_TO_MINUS_448, "clamp-nan-to-minus-448", "SPEC 1 clamp",                                                          \
      "clamp(x, -448, 448) is min(max(x, -448), 448) with IEEE max and min, so NaN becomes -448 (0xFE) instead of NaN")            \
    X(CLAMP_NAN_TO_PLUS_448, "clamp-nan-to-plus-448", "SPEC 1 clamp",                                                            \
      "clamp(x, -448, 448) is max(min(x, 448), -448) with IEEE max and min, so NaN becomes +448 (0x7E) instead of NaN")            \
    X(MAX_X86_ORDER, "max-x86-order", "SPEC 1 max",                                                                                \
      "max(a, b) in steps 1 and 9 is a > b ? a : b (x86 maxps), so a NaN survives only as the last operand instead of propagating") \
    X(BLOCK_MAX_DROPS_NAN, "block-max-drops-nan", "SPEC 4.2 step 9",                                                               \
      "the block magnitude a = max |y_j| skips NaN values instead of propagating them")                                            \
    X(SCALE_FLOOR_AFTER_DIVISION, "scale-floor-after-division", "SPEC 4.2 step 9",                                                 \
      "the 1e-4 floor is applied to q = a / 448 instead of to a before the division")                                              \
    X(SCALE_EXPONENT_FLOOR, "scale-exponent-floor", "SPEC 4.2 step 9", "the scale exponent is floor(log2(q)) instead of ceil")      \
    X(SCALE_EXPONENT_ROUND, "scale-exponent-round", "SPEC 4.2 step 9",                                                             \
      "the scale exponent is log2(q) rounded to the nearest integer instead of ceil")                                               \
    X(SAVE_NAN_PAYLOAD_KEPT, "save-nan-payload-kept", "SPEC 4.1 S2",                                                               \
      "a NaN score sum keeps its own sign and payload instead of the canonical 0x7FC00000")                                        \
    X(SAVE_KV_NAN_CANONICAL, "save-kv-nan-canonical", "SPEC 4.1 S1",                                                              \
      "the kv half of a state row turns NaNs into 0x7FC00000 instead of copying their bits")                                        \
    X(RING_ROW_P, "ring-row-p", "SPEC 5.1 R = 2", "a chunk's first token pools with ring row p mod CAP instead of (p - 1) mod CAP") \
    X(RING_STORED_BEFORE_READS, "ring-stored-before-reads", "SPEC 5.1 ring store",                                                 \
      "the ring rows are stored before the pooling reads of the call instead of after all of them")                                \
    X(RING_TAIL_SKIPPED_AFTER_PADDING, "ring-tail-skipped-after-padding", "SPEC 5.1 ring store",                                   \
      "a request whose chunk starts with a padding token (slot < 0) stores no ring rows")                                          \
    X(PLAIN_FP8_DIVIDES, "plain-fp8-divides", "SPEC 5.3", "the fp8 plain row stores fp8(clamp(v / scale)) instead of fp8(clamp(v * r)) with r = 1 / scale rounded") \
    X(PLAIN_FP8_SKIPS_BF16, "plain-fp8-skips-bf16", "SPEC 5.3",                                                                   \
      "the fp8 plain row quantises the rotated fp32 value instead of its bf16 rounding v")                                        \
    X(PLAIN_FP8_APPROXIMATE_RECIPROCAL, "plain-fp8-approximate-reciprocal", "SPEC 5.3",                                            \
      "r = 1 / scale is the other faithful fp32 value, the neighbour of the nearest one across the exact quotient (a faithful division)") \
    X(CLOSING_OFF_BY_ONE, "closing-test-off-by-one", "SPEC 2 closing",                                                             \
      "a token closes its group when p mod R = 0 instead of (p + 1) mod R = 0")                                                    \
    X(POSITIONS_INT32, "positions-int32", "SPEC 2 positions",                                                                      \
      "positions are read as int32 (the low 32 bits, sign-extended): a position of 2^31 or more wraps, negative ones are out of range") \
    X(ROPE_ON_NOPE, "rope-on-nope", "SPEC 4.2 step 7", "RoPE rotates the first 64 dims instead of the last 64")                    \
    X(NOPE_PAIR_ROTATED, "nope-pair-rotated", "SPEC 5.3",                                                                          \
      "the plain insert also rotates each NoPE pair with step 7's fmas at cos 1, sin 0, so an inf or NaN makes its neighbour NaN") \
    X(NAN_ALL_ONES, "nan-all-ones", "SPEC 1 canonical NaN",                                                                        \
      "a NaN a stage computes is written 0x7FFF (bf16) and 0x7FFFFFFF (fp32), all payload bits set, instead of 0x7FC0 / 0x7FC00000")

typedef enum {
    KVC_DEV_NONE = 0,
#define KVC_DEVIATION_ENUM(id, name, spec, text) KVC_DEV_##id,
    KVC_DEVIATION_LIST(KVC_DEVIATION_ENUM)
#undef KVC_DEVIATION_ENUM
    KVC_DEV_END
} kvc_deviation_id;

/* exp(x) (SPEC.md 1) as the deviations active on the calling thread
 * compute it in steps 1-3 (the correctly rounded one when none of the
 * exp deviations is). */
float kvc_deviation_exp(float x);

#endif
