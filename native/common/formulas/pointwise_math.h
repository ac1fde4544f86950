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
#include "tl_math_bessel.h"
#include "tl_math_airy.h"

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

/* ---- special functions (tl_math_special.h: double evaluation, one final rounding) ---- */

/* erfc; the input of 2^32 where the double value lands on the wrong side of a rounding midpoint
 * (tests/native/check_special.c, all inputs; mpmath at 50 digits) is selected. (0x401adf85,
 * listed before, missed through 1 - erf(x)'s cancellation, which tls_erfc no longer has.) */
TLM_HD float tlf_erfc(float x) {
    float y = tlm_d2f(tls_erfc((double)x));
    return tlm_fix(x, (int32_t)0xb76c9f62u, 0x3f800085, y);   /* -0x1.d93ec4p-17 */
}
/* erfcx; x = 0x1.9d9f16p+21 (tests/native/check_special.c, all inputs) is within 2^-54.2
 * (relative) of a rounding midpoint (mpmath at 50 digits: 0.4999999994 ulp above 0x1.65921ap-23),
 * closer than the double evaluation can place it: its correctly rounded value is selected */
TLM_HD float tlf_erfcx(float x) {
    float y = x != x ? x : tlm_d2f(tls_erfcx((double)x));
    return tlm_fix(x, 0x4a4ecf8b, 0x3432c90d, y);
}
/* erfinv: +-inf at +-1, NaN beyond */
TLM_HD float tlf_erfinv(float x) {
    float a = tlm_abs(x);
    float y = tlm_copysign(tlm_d2f(tls_erfinv((double)x)), x);   /* erfinv(-0) = -0 */
    y = a == 1.0f ? tlm_copysign(TLM_INFF, x) : y;
    return (a > 1.0f || x != x) ? TLM_NANF : y;
}
/* the standard normal's distribution function erfc(-x / sqrt 2) / 2 (x / sqrt 2 as a
 * double-double, tls_erfc_sqrt1_2) */
TLM_HD float tlf_ndtr(float x) {
    float y = x != x ? x : tlm_d2f(tlm_dmul(0.5, tls_erfc_sqrt1_2(-(double)x)));
    /* the 2 inputs of 2^32 where that double lands on the wrong side of a rounding midpoint
     * (tests/native/check_special.c, all inputs): their correctly rounded values. (6 more,
     * x in [-3.51, -2.59], listed before, missed through 1 - erf's cancellation in tls_erfc.) */
    y = tlm_fix(x, 0x33a06c99, 0x3f000001, y);
    return tlm_fix(x, (int32_t)0xb3206c99u, 0x3effffff, y);
}
/* its logarithm: log(erfcx(-x / sqrt 2) / 2) - x^2 / 2 below -1 (no underflow), else
 * log1p(-erfc(x / sqrt 2) / 2) (x / sqrt 2 as a double-double, tls_erfc_sqrt1_2) */
TLM_HD double tls_log_ndtr(double x) {
    if (x != x) return x;                    /* NaN: the log's bit arithmetic never sees it */
    if (x < -1.0) {
        /* -x^2 / 2 (exact: x is a float) and the log as an unevaluated sum, rounded to odd: far
         * out (|x| > 2^26) the log is below half a double ulp of x^2 / 2, yet it decides the
         * rounding when x^2 / 2 is a float32 midpoint */
        double e = tls_erfcx(-tlm_dmul(x, TLS_SQRT1_2));
        tlm_dd s = tlm_two_sum(-tlm_dmul(tlm_dmul(x, x), 0.5), tlm_dsub(tls_log(e), TLM_LN2_DHI));
        return tlm_dd_to_odd(s.hi, s.lo);
    }
    double q = tlm_dmul(0.5, tls_erfc_sqrt1_2(x));
    tlm_dd l = tlm_log_dd(tlm_two_sum(1.0, -q));
    return tlm_dadd(l.hi, l.lo);
}
TLM_HD float tlf_log_ndtr(float x) {
    float y = tlm_d2f(tls_log_ndtr((double)x));
    y = (x == TLM_INFF || y == 0.0f) ? -0.0f : y;    /* a negative value too small for float32 */
    y = x == -TLM_INFF ? x : y;
    return x != x ? x : y;
}
/* the normal quantile: -sqrt2 erfc^-1(2p) below 1/2, sqrt2 erfc^-1(2 (1 - p)) above (1 - p
 * exact); -inf at 0, inf at 1, NaN outside [0, 1] */
TLM_HD float tlf_ndtri(float p) {
    double pd = (double)p;
    int32_t up = p >= 0.5f;
    double s = tlm_dmul(2.0, up ? tlm_dsub(1.0, pd) : pd);
    tlm_dd r = tls_erfc_inv_dd(s);                      /* sqrt2 (hi + lo), rounded once */
    tlm_dd v = tlm_two_prod(TLS_SQRT2, r.hi);
    v.lo = tlm_dfma(TLS_SQRT2, r.lo, tlm_dfma(-0x1.bdd3413b26456p-54, r.hi, v.lo));
    float y = tlm_dd_round(up ? v.hi : -v.hi, up ? v.lo : -v.lo);
    y = p == 0.0f ? -TLM_INFF : (p == 1.0f ? TLM_INFF : y);
    return (p != p || p < 0.0f || p > 1.0f) ? TLM_NANF : y;
}
TLM_HD float tlf_lgamma(float x) { return tls_lgammaf(x); }
TLM_HD float tlf_digamma(float x) { return tls_digammaf(x); }
TLM_HD float tlf_polygamma(float x, float order) { return tls_polygammaf(order, x); }
TLM_HD float tlf_zeta(float x, float q) { return tlm_d2f(tls_zeta((double)x, (double)q)); }

/* derivatives times g, evaluated in double and rounded once */
TLM_HD float tlf_erfc_backward(float x, float g) {
    return tlm_d2f(tlm_dmul((double)g, tlm_dmul(-TLS_SQRT_PI_INV2, tls_exp_negsq((double)x))));
}
/* 2 x erfcx(x) - 2 / sqrt(pi) */
TLM_HD float tlf_erfcx_backward(float x, float g) {
    double d = tlm_dfma(tlm_dmul(2.0, (double)x), tls_erfcx((double)x), -TLS_SQRT_PI_INV2);
    return tlm_d2f(tlm_dmul((double)g, d));
}
/* sqrt(pi) / 2 e^(erfinv(x)^2) */
TLM_HD float tlf_erfinv_backward(float x, float g) {
    double y = tls_erfinv((double)x);
    double d = tlm_ddiv(1.0, tlm_dmul(TLS_SQRT_PI_INV2, tls_exp_negsq(y)));
    float r = tlm_d2f(tlm_dmul((double)g, d));
    r = tlm_abs(x) == 1.0f ? tlm_mul(g, TLM_INFF) : r;
    return tlm_abs(x) > 1.0f ? TLM_NANF : r;
}
/* the normal density e^(-x^2 / 2) / sqrt(2 pi) */
TLM_HD float tlf_ndtr_backward(float x, float g) {
    double d = tlm_dmul(tls_exp_negsq(tlm_dmul((double)x, TLS_SQRT1_2)), 0x1.9884533d43651p-2);
    return tlm_d2f(tlm_dmul((double)g, d));
}
/* sqrt(2 pi) e^(ndtri(p)^2 / 2) */
TLM_HD float tlf_ndtri_backward(float p, float g) {
    double y = (double)tlf_ndtri(p);
    double d = tlm_ddiv(0x1.40d931ff62706p+1, tls_exp_negsq(tlm_dmul(y, TLS_SQRT1_2)));
    return tlm_d2f(tlm_dmul((double)g, d));
}
/* density / ndtr = sqrt(2 / pi) / erfcx(-x / sqrt 2) */
TLM_HD float tlf_log_ndtr_backward(float x, float g) {
    double d = tlm_ddiv(0x1.9884533d43651p-1, tls_erfcx(-tlm_dmul((double)x, TLS_SQRT1_2)));
    return tlm_d2f(tlm_dmul((double)g, d));
}
/* d zeta(x, q) / dq = -x zeta(x + 1, q) */
TLM_HD float tlf_zeta_backward_q(float x, float q, float g) {
    double d = tlm_dmul(-(double)x, tls_zeta(tlm_dadd((double)x, 1.0), (double)q));
    return tlm_d2f(tlm_dmul((double)g, d));
}

/* ---- Bessel functions and orthogonal polynomials (tl_math_bessel.h) ---- */

TLM_HD float tlf_i0(float x) {
    float a = tlm_abs(x);
    return a == TLM_INFF ? a : tlm_d2f(tls_bessel_i((double)a, 0));
}
/* x/2 for 0 < |x| < 2^-60, where I1 = x/2 (1 + x^2/8 ...), e^-|x| I1 and J1 = x/2 (1 - ...):
 * exact from 2^-125 up; below, an odd subnormal x puts x/2 on a float32 midpoint, which the
 * neglected terms push away from zero (away = 1) or toward it */
TLM_HD float tls_tiny_half(float x, int32_t away) {
    int32_t b = tlm_to_bits(tlm_abs(x));
    float h = b < 0x01000000 ? tlm_from_bits((b >> 1) + (away & b & 1)) : tlm_mul(tlm_abs(x), 0.5f);
    return tlm_copysign(h, x);
}
TLM_HD float tlf_i1(float x) {
    float a = tlm_abs(x);
    float y = tlm_copysign(a == TLM_INFF ? a : tlm_d2f(tls_bessel_i((double)a, 1)), x);
    return a < 0x1p-60f ? tls_tiny_half(x, 1) : y;
}
TLM_HD float tlf_i0e(float x) {
    float a = tlm_abs(x);
    return a == TLM_INFF ? 0.0f : tlm_d2f(tls_bessel_ie((double)a, 0));
}
TLM_HD float tlf_i1e(float x) {
    float a = tlm_abs(x);
    float y = tlm_copysign(a == TLM_INFF ? 0.0f : tlm_d2f(tls_bessel_ie((double)a, 1)), x);
    /* the one input of 2^31 whose value sits within 2^-30 ulp of a rounding midpoint, where
     * the double evaluation falls on the wrong side (mpmath, 60 digits: 0x35d30dd5) */
    y = tlm_fix(x, 0x36530e01, 0x35d30dd5, y);
    y = tlm_fix(x, (int32_t)0xb6530e01u, (int32_t)0xb5d30dd5u, y);
    return a < 0x1p-60f ? tls_tiny_half(x, 0) : y;
}
/* K: inf at 0, NaN below; scaled = e^x K(x) */
TLM_HD float tls_bessel_kf(float x, int v, int scaled) {
    /* below 2: K itself as a double-double (not e^x K times e^-x), and e^x K = K + (e^x - 1) K,
     * e^x - 1 by tlm_expm1_core below 1/4 (its k is 0 there), each rounded once */
    double a = (double)tlm_sel((x > 0.0f) & (x < TLM_INFF), x, 1.0f);
    float y;
    if (a < 2.0) {
        tlm_dd ks = tls_bessel_k_small_dd(a, v), m;
        (void)tlm_expm1_core(a < 0.25 ? a : 0.0, &m);
        double em1 = a < 0.25 ? tlm_dadd(m.hi, m.lo) : tlm_dsub(tls_exp(a), 1.0);
        tlm_dd t = tlm_two_sum(ks.hi, tlm_dmul(ks.hi, em1));
        t = tlm_fast_two_sum(t.hi, tlm_dadd(t.lo, tlm_dfma(ks.lo, em1, ks.lo)));
        y = scaled ? tlm_dd_round(t.hi, t.lo) : tlm_dd_round(ks.hi, ks.lo);
    } else {
        double ke = tls_bessel_ke(a, v);
        y = tlm_d2f(scaled ? ke : tlm_dmul(ke, tls_exp(-a)));
    }
    /* K0 at 2.46 (0x401d95c0) sits 2^-52 (relative) from a float32 rounding midpoint, where the
     * quadrature's double falls on the wrong side (tests/native/check_special.c; the value by
     * mpmath at 60 digits) */
    y = (v == 0) & !scaled ? tlm_fix(x, 0x401d95c0, 0x3d8588d1, y) : y;
    /* e^x K1 at 0x1.37ff48p+51 (0x591bffa4): 2^-57 from a midpoint (the all-input run on the
     * GPU host's CPU; mpmath at 100 digits) */
    y = (v == 1) & scaled ? tlm_fix(x, 0x591bffa4, 0x32cd8225, y) : y;
    y = x == TLM_INFF ? 0.0f : y;
    y = x == 0.0f ? TLM_INFF : y;
    return (x < 0.0f || x != x) ? TLM_NANF : y;
}
TLM_HD float tlf_modified_bessel_k0(float x) { return tls_bessel_kf(x, 0, 0); }
TLM_HD float tlf_modified_bessel_k1(float x) { return tls_bessel_kf(x, 1, 0); }
TLM_HD float tlf_scaled_modified_bessel_k0(float x) { return tls_bessel_kf(x, 0, 1); }
TLM_HD float tlf_scaled_modified_bessel_k1(float x) { return tls_bessel_kf(x, 1, 1); }
/* J0 even, J1 odd, 0 at +-inf; Y: -inf at 0, NaN below, 0 at inf */
TLM_HD float tlf_bessel_j0(float x) {
    float a = tlm_abs(x);
    float y = a == 0.0f ? 1.0f : tlm_d2f(tls_bessel_jy(tlm_sel(a == TLM_INFF, 1.0f, a), 0, 0));
    y = a == TLM_INFF ? 0.0f : y;
    return x != x ? x : y;
}
TLM_HD float tlf_bessel_j1(float x) {
    float a = tlm_abs(x);
    float y = a < 0x1p-60f ? tls_tiny_half(a, 0) : tlm_d2f(tls_bessel_jy(tlm_sel(a == TLM_INFF, 1.0f, a), 1, 0));
    y = a == TLM_INFF ? 0.0f : y;
    return x != x ? x : (x < 0.0f ? -y : y);
}
TLM_HD float tls_bessel_yf(float x, int v) {
    float y = tlm_d2f(tls_bessel_jy(tlm_sel((x > 0.0f) & (x < TLM_INFF), x, 1.0f), v, 1));
    y = x == TLM_INFF ? 0.0f : y;
    y = x == 0.0f ? -TLM_INFF : y;
    return (x < 0.0f || x != x) ? TLM_NANF : y;
}
TLM_HD float tlf_bessel_y0(float x) { return tls_bessel_yf(x, 0); }
TLM_HD float tlf_bessel_y1(float x) { return tls_bessel_yf(x, 1); }
/* sin(x) / x, 1 at 0, 0 at +-inf */
TLM_HD float tlf_spherical_bessel_j0(float x) {
    double s, c;
    float a = tlm_abs(x);
    tls_sincos(tlm_sel(a == TLM_INFF, 1.0f, x), &s, &c);
    float y = tlm_d2f(tlm_ddiv(s, (double)x));
    /* +-0x1.550bacp+77: sin(x) / x lies 2^-55 from a float32 midpoint, where the double falls
     * on the wrong side (the all-input run; mpmath at 100 digits) */
    y = tlm_fix(a, 0x662a85d6, 0x18b75375, y);
    y = a == 0.0f ? 1.0f : (a == TLM_INFF ? 0.0f : y);
    return x != x ? x : y;
}
/* Ai: 0 at +-inf (its limits; torch gives NaN there) */
TLM_HD float tlf_airy_ai(float x) {
    float a = tlm_abs(x);
    float y = tlm_d2f(tls_airy_ai(tlm_sel(a == TLM_INFF, 1.0f, x)));
    /* -0x1.fbf1bap+1 and -0x1.bb3af8p+6: Ai lies 2^-56 and 2^-59 from a float32 midpoint, where
     * the double-double sum falls on the wrong side (the all-input run; mpmath at 60 digits) */
    y = tlm_fix(x, (int32_t)0xc07df8ddu, (int32_t)0xbdc2e317u, y);
    y = tlm_fix(x, (int32_t)0xc2dd9d7cu, (int32_t)0xbdea3067u, y);
    return x != x ? x : (a == TLM_INFF ? 0.0f : y);
}
TLM_HD float tlf_orthogonal_polynomial(float x, float n, float kind) {
    return x != x ? x : tlm_d2f(tls_orthopoly((double)x, (double)n, (int)kind));
}

/* derivatives times g: i0e' = i1e - sign(x) i0e, i1' = i0 - i1 / x, i1e' = i0e - i1e (sign(x) +
 * 1 / x) (1/2 at 0), in double */
TLM_HD float tlf_i0e_backward(float x, float g) {
    double a = (double)tlm_abs(x), sg = x < 0.0f ? -1.0 : (x > 0.0f ? 1.0 : 0.0);
    double d = tlm_dsub(tlm_dmul(sg, tls_bessel_ie(a, 1)), tlm_dmul(sg, tls_bessel_ie(a, 0)));
    return tlm_d2f(tlm_dmul((double)g, d));
}
TLM_HD float tlf_i1_backward(float x, float g) {
    double a = (double)tlm_abs(x);
    double d = tlm_dsub(tls_bessel_i(a, 0), tlm_ddiv(tls_bessel_i(a, 1), a));
    return tlm_d2f(tlm_dmul((double)g, x == 0.0f ? 0.5 : d));
}
TLM_HD float tlf_i1e_backward(float x, float g) {
    double a = (double)tlm_abs(x);
    double d = tlm_dsub(tls_bessel_ie(a, 0), tlm_dmul(tls_bessel_ie(a, 1), tlm_dadd(1.0, tlm_ddiv(1.0, a))));
    return tlm_d2f(tlm_dmul((double)g, x == 0.0f ? 0.5 : d));
}

/* ---- bit-level ops (exact) ---- */
/* the float32 next after a toward b (C's nextafterf): b when a == b, the least subnormal of b's
 * sign from +-0, NaN when either is */
TLM_HD float tlf_nextafter(float a, float b) {
    int32_t i = tlm_to_bits(a);
    uint32_t step = ((a < b) == (a > 0.0f)) ? 1u : 0xffffffffu;         /* one step of |a| */
    float y = tlm_from_bits((int32_t)((uint32_t)i + step));
    y = a == 0.0f ? tlm_from_bits(b > 0.0f ? 1 : (int32_t)0x80000001u) : y;
    y = a == b ? b : y;
    return (a != a || b != b) ? TLM_NANF : y;
}
/* frexp: x = m 2^e, 0.5 <= |m| < 1 (m = x, e = 0 for 0, +-inf and NaN, as C's frexpf); the
 * exponent as a whole float32 in [-148, 128] */
TLM_HD int32_t tls_frexp_bits(float x, int32_t *e) {
    float a = tlm_abs(x);
    int32_t sub = a < 0x1p-126f;
    int32_t b = tlm_to_bits(sub ? tlm_mul(x, 0x1p24f) : x);           /* exact */
    *e = ((b >> 23) & 0xff) - 126 - (sub ? 24 : 0);
    return (b & (int32_t)0x807fffffu) | (126 << 23);
}
TLM_HD float tlf_frexp_mantissa(float x) {
    int32_t e, m = tls_frexp_bits(x, &e);
    return (x == 0.0f || !(tlm_abs(x) <= TLM_FLT_MAX)) ? x : tlm_from_bits(m);
}
TLM_HD float tlf_frexp_exponent(float x) {
    int32_t e;
    tls_frexp_bits(x, &e);
    return (x == 0.0f || !(tlm_abs(x) <= TLM_FLT_MAX)) ? 0.0f : (float)e;
}
/* d mantissa / dx = 2^-e: g scaled by two exact powers of two (as torch's grad / 2^e) */
TLM_HD float tlf_frexp_mantissa_backward(float x, float g) {
    int32_t e, h;
    tls_frexp_bits(x, &e);
    e = (x == 0.0f || !(tlm_abs(x) <= TLM_FLT_MAX)) ? 0 : e;
    h = -e / 2;
    return tlm_mul(tlm_mul(g, tlm_from_bits((127 + h) << 23)), tlm_from_bits((127 - e - h) << 23));
}

#endif /* TL_FORMULAS_POINTWISE_MATH_H */
