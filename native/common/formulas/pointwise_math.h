/* formulas/pointwise_math.h: the per-element formulas of PyTorch's pointwise math catalog
 * (log1p ... atan2, hypot, fmod, remainder, rounding, logit, xlogy, logaddexp), written once for
 * the stub and CUDA; ops.yaml names them (`formula:`) and codegen emits both backends' loops.
 *
 * The transcendental functions are tl_math.h's and tl_math_more.h's correctly rounded ones
 * (README "Reproducibility levels", rule 2); fmod, remainder, copysign and the rounding
 * functions are exact; the compositions (logit, xlogy, logaddexp, the derivatives) are fixed
 * sequences of those, each stage rounded, in PyTorch's stage order, so every mode gives the
 * same bits on both libraries.
 */
#ifndef TL_FORMULAS_POINTWISE_MATH_H
#define TL_FORMULAS_POINTWISE_MATH_H

#include "tl_math_more.h"

#define TLF_LN2 0.693147180559945309f
#define TLF_LN10 2.30258509299404568f
#define TLF_INV_LN2 1.44269504088896341f

/* ---- correctly rounded functions ---- */
TLM_HD float tlf_log1p(float x) { return tlm_log1p(x); }
TLM_HD float tlf_expm1(float x) { return tlm_expm1(x); }
TLM_HD float tlf_log2(float x) { return tlm_log2(x); }
TLM_HD float tlf_log10(float x) { return tlm_log10(x); }
TLM_HD float tlf_exp2(float x) { return tlm_exp2(x); }
TLM_HD float tlf_sinh(float x) { return tlm_sinh(x); }
TLM_HD float tlf_cosh(float x) { return tlm_cosh(x); }
TLM_HD float tlf_asinh(float x) { return tlm_asinh(x); }
TLM_HD float tlf_acosh(float x) { return tlm_acosh(x); }
TLM_HD float tlf_atanh(float x) { return tlm_atanh(x); }
TLM_HD float tlf_atan(float x) { return tlm_atan(x); }
TLM_HD float tlf_asin(float x) { return tlm_asin(x); }
TLM_HD float tlf_acos(float x) { return tlm_acos(x); }
TLM_HD float tlf_sin(float x) { return tlm_sin(x); }
TLM_HD float tlf_cos(float x) { return tlm_cos(x); }
TLM_HD float tlf_tan(float x) { return tlm_tan(x); }
#define TLF_PI 3.14159265358979324f
/* sin(pi x) / (pi x), 1 at 0, torch's stages */
TLM_HD float tlf_sinc(float x) {
    float px = tlm_mul(TLF_PI, x);
    return x == 0.0f ? 1.0f : tlm_div(tlm_sin(px), px);
}
TLM_HD float tlf_atan2(float y, float x) { return tlm_atan2(y, x); }
TLM_HD float tlf_hypot(float a, float b) { return tlm_hypot(a, b); }

/* ---- their derivatives times g, stagewise ---- */
TLM_HD float tlf_log1p_backward(float x, float g) { return tlm_div(g, tlm_add(x, 1.0f)); }
TLM_HD float tlf_expm1_backward(float x, float g) { return tlm_mul(g, tlm_exp(x)); }
TLM_HD float tlf_log2_backward(float x, float g) { return tlm_div(g, tlm_mul(x, TLF_LN2)); }
TLM_HD float tlf_log10_backward(float x, float g) { return tlm_div(g, tlm_mul(x, TLF_LN10)); }
TLM_HD float tlf_exp2_backward(float x, float g) { return tlm_mul(tlm_mul(g, tlm_exp2(x)), TLF_LN2); }
TLM_HD float tlf_sin_backward(float x, float g) { return tlm_mul(g, tlm_cos(x)); }
TLM_HD float tlf_cos_backward(float x, float g) { return -tlm_mul(g, tlm_sin(x)); }
/* g (1 + tan^2 x), torch's form */
TLM_HD float tlf_tan_backward(float x, float g) {
    float t = tlm_tan(x);
    return tlm_mul(g, tlm_add(1.0f, tlm_mul(t, t)));
}
/* g (cos(pi x) - sinc(x)) / x, 0 at x = 0 (sinc'(0) = 0) */
TLM_HD float tlf_sinc_backward(float x, float g) {
    float d = tlm_div(tlm_sub(tlm_cos(tlm_mul(TLF_PI, x)), tlf_sinc(x)), x);
    return x == 0.0f ? 0.0f : tlm_mul(g, d);
}
TLM_HD float tlf_sinh_backward(float x, float g) { return tlm_mul(g, tlm_cosh(x)); }
TLM_HD float tlf_cosh_backward(float x, float g) { return tlm_mul(g, tlm_sinh(x)); }
/* 1 / sqrt(x^2 + 1) as 1 / hypot(x, 1): no overflow for large x */
TLM_HD float tlf_asinh_backward(float x, float g) { return tlm_div(g, tlm_hypot(x, 1.0f)); }
/* 1 / sqrt(x^2 - 1) as 1 / (sqrt(x - 1) sqrt(x + 1)) */
TLM_HD float tlf_acosh_backward(float x, float g) {
    return tlm_div(g, tlm_mul(tlm_sqrt(tlm_sub(x, 1.0f)), tlm_sqrt(tlm_add(x, 1.0f))));
}
TLM_HD float tlf_atanh_backward(float x, float g) { return tlm_div(g, tlm_sub(1.0f, tlm_mul(x, x))); }
TLM_HD float tlf_atan_backward(float x, float g) { return tlm_div(g, tlm_add(1.0f, tlm_mul(x, x))); }
TLM_HD float tlf_asin_backward(float x, float g) {
    return tlm_div(g, tlm_sqrt(tlm_sub(1.0f, tlm_mul(x, x))));
}
TLM_HD float tlf_acos_backward(float x, float g) { return -tlf_asin_backward(x, g); }

/* d atan2(y, x): g x / (x^2 + y^2) for y (wrt = 0), -g y / (x^2 + y^2) for x (wrt = 1) */
TLM_HD float tlf_atan2_backward(float y, float x, float g, float wrt) {
    float d = tlm_add(tlm_mul(x, x), tlm_mul(y, y));
    return tlm_div(tlm_mul(g, wrt == 0.0f ? x : -y), d);
}
/* d hypot(a, b): g a / h for a (wrt = 0), g b / h for b (wrt = 1); 0 where h = 0 (PyTorch's
 * masked form) */
TLM_HD float tlf_hypot_backward(float a, float b, float g, float wrt) {
    float h = tlm_hypot(a, b);
    float d = tlm_div(tlm_mul(g, wrt == 0.0f ? a : b), h);
    return h == 0.0f ? 0.0f : d;
}

/* ---- exact functions ---- */

/* (0 < x) - (x < 0): +0 for +-0 and NaN, as PyTorch */
TLM_HD float tlf_sign(float x) { return (float)((0.0f < x) - (x < 0.0f)); }
TLM_HD float tlf_signbit(float x) { return (float)(tlm_to_bits(x) < 0); }
/* round half to even for |x| < 2^23: (|x| + 2^23) - 2^23 is exact and rounds so; larger values,
 * inf and NaN are whole already; the sign is copied back (round(-0.4) = -0) */
TLM_HD float tlf_round(float x) {
    float a = tlm_abs(x);
    float r = tlm_sub(tlm_add(a, 8388608.0f), 8388608.0f);
    return tlm_copysign(a < 8388608.0f ? r : a, x);
}
TLM_HD float tlf_trunc(float x) {
    float a = tlm_abs(x), r = tlf_round(a);
    r = tlm_sub(r, r > a ? 1.0f : 0.0f);
    return tlm_copysign(a < 8388608.0f ? r : a, x);
}
TLM_HD float tlf_ceil(float x) {
    float t = tlf_trunc(x);
    return t < x ? tlm_add(t, 1.0f) : t;   /* t + 1 for x > 0 not whole; ceil(-0.5) = -0 */
}
/* x - trunc(x) (PyTorch: frac(+-inf) = NaN) */
TLM_HD float tlf_frac(float x) { return tlm_sub(x, tlf_trunc(x)); }
TLM_HD float tlf_copysign(float a, float b) { return tlm_copysign(a, b); }
/* d copysign(a, b) / da times g: g where the sign was kept, -g where flipped, 0 at a = 0 */
TLM_HD float tlf_copysign_backward(float a, float b, float g) {
    float s = (tlm_to_bits(a) ^ tlm_to_bits(b)) < 0 ? -1.0f : 1.0f;
    return a == 0.0f ? 0.0f : tlm_mul(g, s);
}

/* C fmod, exact: |a| = ma 2^ea, |b| = mb 2^eb with 24-bit integer significands (subnormals
 * normalised), r = ma 2^(ea - eb) mod mb by 64-bit integer steps of up to 32 bits, the result
 * r 2^eb (exact) with a's sign. fmod(a, +-inf) = a; b = 0, a infinite or NaN: NaN. */
TLM_HD float tlf_fmod(float a, float b) {
    float aa = tlm_abs(a), ab = tlm_abs(b);
    int32_t bad = !(aa <= TLM_FLT_MAX) | !(ab > 0.0f) | (b != b);
    int32_t small = aa < ab;                           /* includes b infinite */
    int32_t ba = tlm_to_bits(tlm_sel(bad | small, 1.0f, aa));
    int32_t bb = tlm_to_bits(tlm_sel(bad | small, 1.0f, ab));
    int32_t ea = (ba >> 23) & 0xff, eb = (bb >> 23) & 0xff;
    uint64_t ma = (uint64_t)(ba & 0x7fffff), mb = (uint64_t)(bb & 0x7fffff);
    ma = ea ? (ma | 0x800000) : ma;
    mb = eb ? (mb | 0x800000) : mb;
    ea = ea ? ea : 1;                                  /* subnormal: exponent of the smallest normal */
    eb = eb ? eb : 1;
    while (mb < 0x800000) { mb <<= 1; eb--; }          /* normalise b (a need not be) */
    uint64_t r = ma % mb;
    int32_t d = ea - eb;                               /* >= 0 since |a| >= |b| */
    while (d > 0) {
        int32_t s = d < 32 ? d : 32;
        r = (r << s) % mb;
        d -= s;
    }
    float y = tlm_d2f(tlm_dmul((double)r, tlm_pow2d(eb - 150)));
    y = tlm_sel(small, aa, y);
    y = tlm_sel(bad, TLM_NANF, y);
    return tlm_nan_pass(b, tlm_nan_pass(a, tlm_copysign(y, a)));
}
/* PyTorch's remainder: m = fmod(a, b), then m + b where m != 0 and m, b differ in sign (one
 * rounding), so the result takes b's sign */
TLM_HD float tlf_remainder(float a, float b) {
    float m = tlf_fmod(a, b);
    return (m != 0.0f && ((b < 0.0f) != (m < 0.0f))) ? tlm_add(m, b) : m;
}

/* -g trunc(a / b) and -g floor(a / b): the gradients of fmod and remainder for b (PyTorch's,
 * over the rounded quotient) */
TLM_HD float tlf_fmod_backward_b(float a, float b, float g) {
    return -tlm_mul(g, tlf_trunc(tlm_div(a, b)));
}
TLM_HD float tlf_remainder_backward_b(float a, float b, float g) {
    float q = tlm_div(a, b), t = tlf_trunc(q);
    return -tlm_mul(g, t > q ? tlm_sub(t, 1.0f) : t);
}

/* ---- compositions, PyTorch's stage order ---- */

/* log(z / (1 - z)), z = x clamped to [eps, 1 - eps] when eps >= 0 (eps < 0: no clamp) */
TLM_HD float tlf_logit(float x, float eps) {
    float z = eps < 0.0f ? x : tlm_clampf(x, eps, tlm_sub(1.0f, eps));
    z = tlm_nan_pass(x, z);
    return tlm_log(tlm_div(z, tlm_sub(1.0f, z)));
}
/* g / (x (1 - x)); 0 outside [eps, 1 - eps] when eps >= 0 */
TLM_HD float tlf_logit_backward(float x, float g, float eps) {
    float d = tlm_div(g, tlm_mul(x, tlm_sub(1.0f, x)));
    int32_t out = (eps >= 0.0f) & ((x < eps) | (x > tlm_sub(1.0f, eps)));
    return out ? 0.0f : d;
}
/* a log(b), 0 where a == 0 and b is not NaN */
TLM_HD float tlf_xlogy(float a, float b) {
    float y = tlm_mul(a, tlm_log(b));
    return (a == 0.0f && b == b) ? 0.0f : y;
}
TLM_HD float tlf_xlog1py(float a, float b) {
    float y = tlm_mul(a, tlm_log1p(b));
    return (a == 0.0f && b == b) ? 0.0f : y;
}
/* d/da: g log(b) (g log1p(b)); d/db: g a / b (g a / (1 + b)), selected by wrt */
TLM_HD float tlf_xlogy_backward(float a, float b, float g, float wrt) {
    return wrt == 0.0f ? tlm_mul(g, tlm_log(b)) : tlm_div(tlm_mul(g, a), b);
}
TLM_HD float tlf_xlog1py_backward(float a, float b, float g, float wrt) {
    return wrt == 0.0f ? tlm_mul(g, tlm_log1p(b)) : tlm_div(tlm_mul(g, a), tlm_add(1.0f, b));
}
/* log(e^a + e^b) = m + log1p(e^-|a - b|), m = max(a, b); a where both are the same infinity */
TLM_HD float tlf_logaddexp(float a, float b) {
    float m = a > b ? a : b;
    float y = tlm_add(m, tlm_log1p(tlm_exp(-tlm_abs(tlm_sub(a, b)))));
    y = (tlm_abs(m) == TLM_INFF && a == b) ? a : y;
    return tlm_nan_pass(b, tlm_nan_pass(a, y));
}
/* log2(2^a + 2^b) = m + log1p(2^-|a - b|) / ln2 */
TLM_HD float tlf_logaddexp2(float a, float b) {
    float m = a > b ? a : b;
    float y = tlm_add(m, tlm_mul(tlm_log1p(tlm_exp2(-tlm_abs(tlm_sub(a, b)))), TLF_INV_LN2));
    y = (tlm_abs(m) == TLM_INFF && a == b) ? a : y;
    return tlm_nan_pass(b, tlm_nan_pass(a, y));
}
/* d logaddexp / da = g / (1 + e^(b - a)) (wrt = 0), the same with a, b swapped (wrt = 1);
 * base 2: 2^ in place of e^ */
TLM_HD float tlf_logaddexp_backward(float a, float b, float g, float wrt) {
    float d = wrt == 0.0f ? tlm_sub(b, a) : tlm_sub(a, b);
    return tlm_div(g, tlm_add(1.0f, tlm_exp(d)));
}
TLM_HD float tlf_logaddexp2_backward(float a, float b, float g, float wrt) {
    float d = wrt == 0.0f ? tlm_sub(b, a) : tlm_sub(a, b);
    return tlm_div(g, tlm_add(1.0f, tlm_exp2(d)));
}
/* NaN -> nan, +inf -> posinf, -inf -> neginf (the values already rounded to float32) */
TLM_HD float tlf_nan_to_num(float x, float nan, float posinf, float neginf) {
    float y = x != x ? nan : x;
    y = x == TLM_INFF ? posinf : y;
    return x == -TLM_INFF ? neginf : y;
}
TLM_HD float tlf_nan_to_num_backward(float x, float g) {
    return tlm_abs(x) <= TLM_FLT_MAX ? g : 0.0f;
}

#endif /* TL_FORMULAS_POINTWISE_MATH_H */
