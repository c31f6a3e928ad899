# file: reference/steps.c
# bug: exp from a Cody-Waite reduction and a degree-7 polynomial in fp32: within an ulp, not correctly rounded
/^float ref_softmax_pool(/i\
static float approximate_exp(float x) {\
    if (x != x || x > 88.0f) return x != x ? x : INFINITY;\
    if (x < -104.0f) return 0.0f;\
    float k = nearbyintf(x * 1.44269504f);\
    float r = fmaf(-k, 0.693145752f, x);\
    r = fmaf(-k, 1.42860677e-06f, r);\
    float p = 1.0f + r * (1.0f + r * (0.5f + r * (0.166666672f + r * (0.0416666679f + r * (0.00833333377f + r * (0.00138888892f + r * 0.000198412701f))))));\
    return ldexpf(p, (int)k);\
}\

s/float e = kvc_expf_cr(window_score\[w\] - m);/float e = approximate_exp(window_score[w] - m);/
