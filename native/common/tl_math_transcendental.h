/* tl_math_transcendental.h: rule 2 of tl_math.h (whose comment states the five rules): exp,
 * expm1, log, log1p, tanh, sigmoid, softplus, erf and gelu, correctly rounded, with the double
 * and double-double steps they are built from. sin and cos of 2 pi u stay in tl_math.h. Include
 * tl_math.h, not this header. */
#ifndef TL_MATH_TRANSCENDENTAL_H
#define TL_MATH_TRANSCENDENTAL_H

#include "tl_math_ieee.h"

/* ---- rule 2: transcendental functions, correctly rounded ----
 *
 * exp, expm1, log, log1p, tanh, sigmoid, softplus, erf and sin/cos of 2 pi u return the float32
 * nearest the true value (ties to even) for every float32 input, so any correctly rounded
 * float32 library gives the same bits; the route inside does not matter. Two routes:
 *  - expm1 and log1p evaluate in IEEE double with the leading terms kept as an unevaluated
 *    sum hi + lo of two doubles, relative error below about 2^-56, rounded to float32 in one
 *    step (tlm_dd_round). `make check-math` (tests/native/check_math.c, against glibc and quad
 *    precision, all 2^32 inputs) found no input that rounds wrong (bench/results/check-math.md).
 *  - exp, log, tanh, sigmoid, softplus, erf and sin/cos of 2 pi u, the ones elementwise
 *    kernels spend their time in, evaluate in plain double (one polynomial or two, at most one
 *    quotient), relative error about 2^-51, rounded to float32 once. An input whose true value
 *    lies within that error of a rounding midpoint may round wrong: `make check-math-same`
 *    compares all 2^32 inputs with the proven double-double version of the same function
 *    (tests/native/tl_math_cr_ref.h, which passed check-math) and lists every such input, and
 *    the function selects their correct values (tlm_fix; log has five, softplus one, the others
 *    none). So both routes are proven on every input; the plain one costs 1-3x the pre-CR float
 *    polynomials instead of 2-7x (bench/results/tl-math-speed.md).
 * Coefficients come from tests/native/tl_math_coeffs.py (mpmath). Any change to this code must
 * pass check-math (double-double route) or check-math-same (plain route) again.
 * Double FMAs (tlm_dfma) are used freely: the result is correctly rounded either way. The code
 * is branch-free (selects), so stub loops vectorise and GPU warps do not diverge. */

#if defined(__CUDA_ARCH__)
TLM_HD double tlm_dmul(double a, double b) { return __dmul_rn(a, b); }
TLM_HD double tlm_dsub(double a, double b) { return __dsub_rn(a, b); }
TLM_HD double tlm_dfma(double a, double b, double c) { return __fma_rn(a, b, c); }
TLM_HD int64_t tlm_dbits(double d) { return __double_as_longlong(d); }
TLM_HD double tlm_dfrom_bits(int64_t b) { return __longlong_as_double(b); }
#else
TLM_HD double tlm_dmul(double a, double b) { return a * b; }
TLM_HD double tlm_dsub(double a, double b) { return a - b; }
TLM_HD double tlm_dfma(double a, double b, double c) { return __builtin_fma(a, b, c); }
TLM_HD int64_t tlm_dbits(double d) { int64_t b; memcpy(&b, &d, sizeof b); return b; }
TLM_HD double tlm_dfrom_bits(int64_t b) { double d; memcpy(&d, &b, sizeof d); return d; }
#endif

/* an unevaluated sum hi + lo of two doubles */
typedef struct tlm_dd { double hi, lo; } tlm_dd;

/* hi + lo = a + b exactly, for |a| >= |b| or a == 0 (Fast2Sum) */
TLM_HD tlm_dd tlm_fast_two_sum(double a, double b) {
    tlm_dd r;
    r.hi = tlm_dadd(a, b);
    r.lo = tlm_dsub(b, tlm_dsub(r.hi, a));
    return r;
}
/* hi + lo = a + b exactly, any order (2Sum) */
TLM_HD tlm_dd tlm_two_sum(double a, double b) {
    tlm_dd r;
    r.hi = tlm_dadd(a, b);
    double bb = tlm_dsub(r.hi, a);
    r.lo = tlm_dadd(tlm_dsub(a, tlm_dsub(r.hi, bb)), tlm_dsub(b, bb));
    return r;
}
/* hi + lo = a b exactly (barring underflow) */
TLM_HD tlm_dd tlm_two_prod(double a, double b) {
    tlm_dd r;
    r.hi = tlm_dmul(a, b);
    r.lo = tlm_dfma(a, b, -r.hi);
    return r;
}

/* The double nearest hi + lo, made odd when inexact (round to odd): the float32 rounding of the
 * result equals that of hi + lo, because float32 midpoints are even doubles. For |hi| >= |lo|
 * or hi == 0, with hi + lo inside the double range. */
TLM_HD double tlm_dd_to_odd(double hi, double lo) {
    tlm_dd s = tlm_fast_two_sum(hi, lo);
    int64_t b = tlm_dbits(s.hi), be = tlm_dbits(s.lo);
    int64_t dir = ((be ^ b) >> 63) | 1;                      /* +1: lo has the sign of hi */
    int64_t on = (int64_t)(((uint64_t)be << 1) != 0) & ~b & 1;   /* inexact and even */
    return tlm_dfrom_bits(b + (dir & -on));
}
/* hi + lo rounded to float32 once */
TLM_HD float tlm_dd_round(double hi, double lo) { return tlm_d2f(tlm_dd_to_odd(hi, lo)); }

/* x unless it is NaN, then a quiet NaN with x's payload; selects on bits, so loops vectorise */
TLM_HD float tlm_nan_pass(float x, float y) {
    int32_t m = -(int32_t)(x != x);
    return tlm_from_bits((tlm_to_bits(y) & ~m) | ((tlm_to_bits(x) | 0x400000) & m));
}
/* v when c, else y (bit select) */
TLM_HD float tlm_sel(int32_t c, float v, float y) {
    int32_t m = -c;
    return tlm_from_bits((tlm_to_bits(y) & ~m) | (tlm_to_bits(v) & m));
}
/* v when c, else y, for doubles (bit select: a plain ?: lets GCC branch around loads) */
TLM_HD double tlm_dsel(int32_t c, double v, double y) {
    int64_t m = -(int64_t)c;
    return tlm_dfrom_bits((tlm_dbits(y) & ~m) | (tlm_dbits(v) & m));
}
/* x clamped to [lo, hi]; NaN gives lo (callers select NaN back at the end) */
TLM_HD float tlm_clampf(float x, float lo, float hi) {
    return tlm_sel(!(x >= lo), lo, tlm_sel(x > hi, hi, x));
}

#define TLM_LN2_HI 0x1.62e42fefa3800p-1   /* 42 bits: k LN2_HI is exact for |k| < 2^11 */
#define TLM_LN2_LO 0x1.ef35793c76730p-45
#define TLM_INV_LN2 0x1.71547652b82fep+0

/* e^x - 1 = 2^k (1 + m) - 1 with 1 + m = e^r, r = x - k ln2, |r| <= ln2/2, for x in
 * [-210, 180] holding at most 26 significant bits (a float32, or twice one). Returns k;
 * m = m.hi + m.lo (|m.lo| <= ulp(m.hi) / 2) with error below 2^-59 relative to e^r.
 * r = rh + rl with rh = x - k LN2_HI exact; e^r - 1 = rh + rh^2/2 + rl e^rh + rh^3 Q(rh), the
 * square split exactly (tlm_two_prod) and summed with the leading term first. */
TLM_HD_INLINE double tlm_expm1_core(double x, tlm_dd *m) {
    const double shifter = 0x1.8p52;   /* adding it rounds to an integer */
    double kd = tlm_dsub(tlm_dadd(tlm_dmul(x, TLM_INV_LN2), shifter), shifter);
    double rh = tlm_dfma(-kd, TLM_LN2_HI, x);   /* exact */
    double rl = tlm_dmul(-kd, TLM_LN2_LO);      /* |rl| < 2^-36 */
    double q = 0x1.61b2b02877046p-33;
    q = tlm_dfma(q, rh, 0x1.1f72fc83bcbc7p-29);
    q = tlm_dfma(q, rh, 0x1.ae64344d76c0cp-26);
    q = tlm_dfma(q, rh, 0x1.27e4db67ac2b0p-22);
    q = tlm_dfma(q, rh, 0x1.71de3a5904949p-19);
    q = tlm_dfma(q, rh, 0x1.a01a01a6d7831p-16);
    q = tlm_dfma(q, rh, 0x1.a01a01a019b2bp-13);
    q = tlm_dfma(q, rh, 0x1.6c16c16c162d6p-10);
    q = tlm_dfma(q, rh, 0x1.1111111111111p-7);
    q = tlm_dfma(q, rh, 0x1.5555555555556p-5);
    q = tlm_dfma(q, rh, 0x1.5555555555555p-3);
    tlm_dd sq = tlm_two_prod(rh, rh);
    tlm_dd lead = tlm_fast_two_sum(rh, tlm_dmul(sq.hi, 0.5));
    double em1 = tlm_dfma(sq.hi, tlm_dfma(q, rh, 0.5), rh);   /* e^rh - 1, to 2^-50 */
    double tail = tlm_dfma(tlm_dmul(sq.hi, rh), q, tlm_dfma(rl, em1, rl));
    *m = tlm_fast_two_sum(lead.hi, tlm_dadd(lead.lo, tlm_dfma(sq.lo, 0.5, tail)));
    return kd;
}

/* 2^k for an integer-valued double k in [-1022, 1023] */
TLM_HD double tlm_pow2_of(double kd) { return tlm_dfrom_bits(((int64_t)kd + 1023) << 52); }

/* the plain-double route (see rule 2 above) */

/* x = k ln2 + r, |r| <= ln2/2, for x in [-210, 180]: returns r (exact when k = 0, else rounded
 * once) and sets *t = 1.5 2^52 + k, whose low bits hold k (tlm_scale2 reads them). */
TLM_HD_INLINE double tlm_exp_reduce(double x, double *t) {
    *t = tlm_dfma(x, TLM_INV_LN2, 0x1.8p52);
    double kd = tlm_dsub(*t, 0x1.8p52);
    return tlm_dfma(-kd, TLM_LN2_LO, tlm_dfma(-kd, TLM_LN2_HI, x));
}
/* 2^k v for tlm_exp_reduce's t, v > 0 and 2^k v a normal double: k added to v's exponent
 * (t's bits are those of 1.5 2^52 plus k, and 1.5 2^52's bits end in 52 zero bits) */
TLM_HD double tlm_scale2(double v, double t) {
    return tlm_dfrom_bits(tlm_dbits(v) + (int64_t)((uint64_t)tlm_dbits(t) << 52));
}
/* Q(r) = (e^r - 1 - r) / r^2 on |r| <= ln2/2, a degree-9 fit: error 2^-55.8 relative to e^r */
TLM_HD_INLINE double tlm_exp_q(double r) {
    double q = 0x1.af389eea54156p-26;
    q = tlm_dfma(q, r, 0x1.28917c9f3a495p-22);
    q = tlm_dfma(q, r, 0x1.71de0db2eb873p-19);
    q = tlm_dfma(q, r, 0x1.a019b914881bap-16);
    q = tlm_dfma(q, r, 0x1.a01a01a7c2f2cp-13);
    q = tlm_dfma(q, r, 0x1.6c16c17889f3cp-10);
    q = tlm_dfma(q, r, 0x1.11111111109b5p-7);
    q = tlm_dfma(q, r, 0x1.5555555553d68p-5);
    q = tlm_dfma(q, r, 0x1.5555555555556p-3);
    return tlm_dfma(q, r, 0x1.0000000000001p-1);
}
/* e^x = 2^k (1 + r (1 + r Q(r))) for x in [-210, 180], one double */
TLM_HD_INLINE double tlm_exp_fast(double x) {
    double t, r = tlm_exp_reduce(x, &t);
    return tlm_scale2(tlm_dfma(tlm_dfma(tlm_exp_q(r), r, 1.0), r, 1.0), t);
}

/* y, or v where x has the bits xb (one listed exception) */
TLM_HD float tlm_fix(float x, int32_t xb, int32_t vb, float y) {
    return tlm_sel(tlm_to_bits(x) == xb, tlm_from_bits(vb), y);
}

/* e^x, correctly rounded. x is clamped to [-104, 89] (e^-104 rounds to 0, e^89 overflows). */
TLM_HD_INLINE float tlm_exp(float x) {
    float y = tlm_d2f(tlm_exp_fast((double)tlm_clampf(x, -104.0f, 89.0f)));
    return tlm_nan_pass(x, y);
}

/* e^x - 1, correctly rounded: 2^k e^r - 1 with the -1 added exactly (2Sum); x clamped to
 * [-104, 89]; expm1(-0) = -0. */
TLM_HD_INLINE float tlm_expm1(float x) {
    tlm_dd m;
    double kd = tlm_expm1_core((double)tlm_clampf(x, -104.0f, 89.0f), &m);
    double p = tlm_pow2_of(kd);
    tlm_dd e = tlm_fast_two_sum(1.0, m.hi);
    tlm_dd s = tlm_two_sum(tlm_dmul(e.hi, p), -1.0);
    float y = tlm_dd_round(s.hi, tlm_dadd(s.lo, tlm_dmul(tlm_dadd(e.lo, m.lo), p)));
    y = tlm_sel(x == 0.0f, x, y);
    return tlm_nan_pass(x, y);
}

/* (n.hi + n.lo) / (d.hi + d.lo) as an unevaluated sum, relative error about 2^-100 beyond the
 * inputs' own: one reciprocal, then the remainder n - q d (an FMA) divided again. */
TLM_HD_INLINE tlm_dd tlm_dd_div(tlm_dd n, tlm_dd d) {
    double inv = tlm_ddiv(1.0, d.hi);
    tlm_dd q;
    q.hi = tlm_dmul(n.hi, inv);
    double rem = tlm_dadd(tlm_dfma(-q.hi, d.hi, n.hi), tlm_dfma(-q.hi, d.lo, n.lo));
    q.lo = tlm_dmul(rem, inv);
    return q;
}

/* Split x > 0 (finite) as m 2^e with m in [sqrt(1/2), sqrt(2)); returns m - 1 (exact). */
TLM_HD float tlm_log_split(float x, float *e_out) {
    int32_t sub = x < 1.17549435e-38f;                     /* subnormal: scale by 2^23 first */
    float xs = sub ? tlm_mul(x, 8388608.0f) : x;
    int32_t b = tlm_to_bits(xs);
    int32_t e = ((b >> 23) & 0xff) - 126 - (sub ? 23 : 0); /* xs = m' 2^e, m' in [0.5, 1) */
    float m = tlm_from_bits((b & 0x007fffff) | 0x3f000000);
    int32_t lowm = m < 0.70710678118654752f;
    e -= lowm;
    *e_out = (float)e;
    return lowm ? tlm_sub(tlm_add(m, m), 1.0f) : tlm_sub(m, 1.0f); /* Sterbenz: exact */
}

/* log(2^e (1 + f)) for f = f.hi + f.lo, 1 + f in [sqrt(1/2), sqrt(2)] (f.lo tiny beside f.hi
 * unless f.hi = 0), as an unevaluated sum with relative error below 2^-59:
 * log(1 + f) = 2 atanh(s) = 2s + s z R(z), s = f / (2 + f), z = s^2 <= 0.0295; e ln2 is
 * e LN2_HI (exact) + e LN2_LO. */
TLM_HD_INLINE tlm_dd tlm_log_core(double e, tlm_dd f) {
    tlm_dd two = tlm_fast_two_sum(2.0, f.hi);
    two.lo = tlm_dadd(two.lo, f.lo);
    tlm_dd s = tlm_dd_div(f, two);
    double z = tlm_dmul(s.hi, s.hi);
    double p = 0x1.0c039fe4bea01p-3;
    p = tlm_dfma(p, z, 0x1.0fbe957ed02d3p-3);
    p = tlm_dfma(p, z, 0x1.3b1c355ddb480p-3);
    p = tlm_dfma(p, z, 0x1.745cf9047e55ep-3);
    p = tlm_dfma(p, z, 0x1.c71c7201593cap-3);
    p = tlm_dfma(p, z, 0x1.2492492476ccap-2);
    p = tlm_dfma(p, z, 0x1.9999999999a38p-2);
    p = tlm_dfma(p, z, 0x1.5555555555555p-1);
    tlm_dd h = tlm_two_sum(tlm_dmul(e, TLM_LN2_HI), tlm_dadd(s.hi, s.hi));
    double lo = tlm_dfma(e, TLM_LN2_LO, tlm_dfma(tlm_dmul(s.hi, z), p, tlm_dadd(s.lo, s.lo)));
    h.lo = tlm_dadd(h.lo, lo);
    return h;
}

/* natural log, correctly rounded. log(+-0) = -inf, log(x < 0) = NaN, log(+inf) = +inf.
 * x = 2^e (1 + f) exactly (tlm_log_split); log(1 + f) = 2s + s z P(z), s = f / (2 + f),
 * z = s^2, in plain double (tlm_log_core's P), added to e ln2 with the leading part last. */
TLM_HD_INLINE float tlm_log(float x) {
    float e, f = tlm_log_split(tlm_sel((x > 0.0f) & (x <= 3.40282347e38f), x, 1.0f), &e);
    double ed = (double)e, fd = (double)f;
    double sd = tlm_ddiv(fd, tlm_dadd(2.0, fd)), z = tlm_dmul(sd, sd);
    double p = 0x1.0c039fe4bea01p-3;
    p = tlm_dfma(p, z, 0x1.0fbe957ed02d3p-3);
    p = tlm_dfma(p, z, 0x1.3b1c355ddb480p-3);
    p = tlm_dfma(p, z, 0x1.745cf9047e55ep-3);
    p = tlm_dfma(p, z, 0x1.c71c7201593cap-3);
    p = tlm_dfma(p, z, 0x1.2492492476ccap-2);
    p = tlm_dfma(p, z, 0x1.9999999999a38p-2);
    p = tlm_dfma(p, z, 0x1.5555555555555p-1);
    double t = tlm_dfma(tlm_dmul(sd, z), p, tlm_dfma(ed, TLM_LN2_LO, tlm_dadd(sd, sd)));
    float y = tlm_d2f(tlm_dfma(ed, TLM_LN2_HI, t));
    y = tlm_fix(x, 0x3c413d3a, (int32_t)0xc08e158f, y);   /* the exceptions (check-math-same) */
    y = tlm_fix(x, 0x41178feb, 0x400fe5e7, y);
    y = tlm_fix(x, 0x4c5d65a5, 0x418f034b, y);
    y = tlm_fix(x, 0x65d890d3, 0x4254d1f9, y);
    y = tlm_fix(x, 0x6f31a8ec, 0x42845a89, y);
    y = tlm_sel(x > 3.40282347e38f, x, y);
    y = tlm_sel(x < 0.0f, tlm_from_bits(0x7fc00000), y);
    y = tlm_sel(x == 0.0f, tlm_from_bits((int32_t)0xff800000), y);
    return tlm_nan_pass(x, y);
}

/* log of u = u.hi + u.lo > 0 (u.lo tiny beside u.hi), finite: u.hi = 2^e m, m in
 * [sqrt(1/2), sqrt(2)), f = (m - 1) + u.lo 2^-e, both parts exact */
TLM_HD_INLINE tlm_dd tlm_log_dd(tlm_dd u) {
    int64_t b = tlm_dbits(u.hi);
    int64_t e = ((b >> 52) & 0x7ff) - 1023;                 /* u.hi normal: u.hi = 1.m 2^e */
    int64_t big = (b & 0x000fffffffffffffLL) > 0x6a09e667f3bcdLL; /* 1.m > sqrt(2) */
    e += big;
    double scale = tlm_dfrom_bits((1023 - e) << 52);        /* 2^-e */
    tlm_dd f;
    f.hi = tlm_dsub(tlm_dmul(u.hi, scale), 1.0);            /* Sterbenz: exact */
    f.lo = tlm_dmul(u.lo, scale);
    return tlm_log_core((double)e, f);
}

/* log(1 + x), correctly rounded: 1 + x is formed exactly (2Sum) and passed to tlm_log_dd.
 * log1p(-1) = -inf, below it NaN, log1p(+inf) = +inf, log1p(-0) = -0. */
TLM_HD_INLINE float tlm_log1p(float x) {
    float xc = tlm_clampf(x, -0.5f, 3.40282347e38f);
    /* below -1/2, 1 + x is exact in float and positive (or 0 at -1, selected out below) */
    xc = tlm_sel(x < -0.5f, tlm_add(1.0f, x), xc);
    tlm_dd u = tlm_two_sum(x < -0.5f ? 0.0 : 1.0, (double)xc);
    u.hi = tlm_dadd(u.hi, x <= -1.0f ? 1.0 : 0.0);   /* x <= -1: a stand-in, selected out below */
    tlm_dd l = tlm_log_dd(u);
    float y = tlm_dd_round(l.hi, l.lo);
    y = tlm_sel(x > 3.40282347e38f, x, y);
    y = tlm_sel(x < -1.0f, tlm_from_bits(0x7fc00000), y);
    y = tlm_sel(x == -1.0f, tlm_from_bits((int32_t)0xff800000), y);
    y = tlm_sel(x == 0.0f, x, y);
    return tlm_nan_pass(x, y);
}

/* tanh, correctly rounded: tanh(a) = -M / (2 + M), M = e^-2a - 1 = 2^k p + (2^k - 1) (one
 * FMA, no cancellation), a = |x| clamped to 20 (tanh rounds to 1 beyond 9.02); the sign is
 * copied from x (tanh(-0) = -0). */
TLM_HD_INLINE float tlm_tanh(float x) {
    float a = tlm_clampf(tlm_abs(x), 0.0f, 20.0f);
    double t, r = tlm_exp_reduce(-2.0 * (double)a, &t);
    double p = tlm_dfma(tlm_dmul(r, r), tlm_exp_q(r), r);   /* e^r - 1 */
    double two = tlm_scale2(1.0, t);
    double m = tlm_dfma(two, p, tlm_dsub(two, 1.0));
    float y = tlm_copysign(tlm_d2f(tlm_ddiv(-m, tlm_dadd(2.0, m))), x);
    return tlm_nan_pass(x, y);
}

/* 1 / (1 + e^-x), correctly rounded, overflow-safe: with E = e^-|x|, 1 / (1 + E) for x >= 0
 * and E / (1 + E) below. |x| < 2^-12 takes 1/2 + x/4 - x^3/48 (the next term is 2^-27 of the
 * last) as an unevaluated sum: 1/2 + x/4 sits on a rounding midpoint there for many x.
 * tlm_sigmoid selects between its two parts; a schedule may instead run tlm_sigmoid_main over
 * a block and tlm_sigmoid_small on the block's few inputs with tlm_sigmoid_is_small (the same
 * bits, without evaluating the series for every input). */
TLM_HD int32_t tlm_sigmoid_is_small(float x) { return tlm_abs(x) < 0x1p-12f; }
TLM_HD_INLINE float tlm_sigmoid_main(float x) {
    double e = tlm_exp_fast(-(double)tlm_clampf(tlm_abs(x), 0.0f, 104.0f));
    return tlm_nan_pass(x, tlm_d2f(tlm_ddiv(x >= 0.0f ? 1.0 : e, tlm_dadd(1.0, e))));
}
TLM_HD float tlm_sigmoid_small(float x) {
    double xd = (double)x;
    return tlm_dd_round(tlm_dfma(xd, 0.25, 0.5), tlm_dmul(tlm_dmul(tlm_dmul(xd, xd), xd), -1.0 / 48.0));
}
TLM_HD_INLINE float tlm_sigmoid(float x) {
    return tlm_sel(tlm_sigmoid_is_small(x), tlm_sigmoid_small(x), tlm_sigmoid_main(x));
}

/* log(1 + e^x) = max(x, 0) + log1p(E), E = e^-|x| (clamped at 104), correctly rounded, in plain
 * double: log1p(E) = 2s + s z P(z) with s = E / (2 + E) (tlm_log's P), or, where 1 + E > sqrt(2),
 * ln2 + log1p(f) with f = (E - 1) / 2, so that |s| stays within P's range. */
TLM_HD_INLINE float tlm_softplus(float x) {
    double e = tlm_exp_fast(-(double)tlm_clampf(tlm_abs(x), 0.0f, 104.0f));
    int32_t big = e > 0x1.6a09e667f3bcdp-2;
    double f = big ? tlm_dmul(tlm_dsub(e, 1.0), 0.5) : e;
    double sd = tlm_ddiv(f, tlm_dadd(2.0, f)), z = tlm_dmul(sd, sd);
    double p = 0x1.0c039fe4bea01p-3;
    p = tlm_dfma(p, z, 0x1.0fbe957ed02d3p-3);
    p = tlm_dfma(p, z, 0x1.3b1c355ddb480p-3);
    p = tlm_dfma(p, z, 0x1.745cf9047e55ep-3);
    p = tlm_dfma(p, z, 0x1.c71c7201593cap-3);
    p = tlm_dfma(p, z, 0x1.2492492476ccap-2);
    p = tlm_dfma(p, z, 0x1.9999999999a38p-2);
    p = tlm_dfma(p, z, 0x1.5555555555555p-1);
    double l = tlm_dfma(tlm_dmul(sd, z), p, tlm_dadd(big ? TLM_LN2_LO : 0.0, tlm_dadd(sd, sd)));
    l = tlm_dadd(big ? TLM_LN2_HI : 0.0, l);
    float y = tlm_d2f(tlm_dadd((double)tlm_sel(x > 0.0f, x, 0.0f), l));
    y = tlm_fix(x, 0x39ea41d0, 0x3f3180bd, y);   /* the one exception (check-math-same) */
    y = tlm_sel(x > 3.40282347e38f, x, y);
    return tlm_nan_pass(x, y);
}

/* erf, correctly rounded. |x| < 1/2: x (c0 + z P(z)), z = x^2; [1/2, 4): 1 - e^-x^2 G(x), G the
 * scaled complement erfc(x) e^x^2 (smooth), two degree-18 fits in t = x - c on [1/2, 7/4] and
 * [7/4, 4] (centres c = 9/8 and 23/8; errors 2^-57.6 and 2^-59.3 relative to erf); |x| >= 4
 * rounds to 1. Odd: the sign is copied from x (erf(-0) = -0). Plain double throughout. Its
 * parts are separate so that a caller can evaluate only the fit an element needs (the stub's
 * erf over blocks); tlm_erf selects among all three. */
TLM_HD_INLINE float tlm_erf_arg(float x) { return tlm_clampf(tlm_abs(x), 0.0f, 4.0f); }

/* erf(a) unrounded for a = tlm_erf_arg(x) < 1/2 */
TLM_HD_INLINE double tlm_erf_small(float a) {
    double ad = (double)a, z = tlm_dmul(ad, ad);
    double p = 0x1.cac885b9d0bf4p-27;
    p = tlm_dfma(p, z, -0x1.5dd2fcc1206e6p-23);
    p = tlm_dfma(p, z, 0x1.b9d7967f8dcd5p-20);
    p = tlm_dfma(p, z, -0x1.f4d2063d89718p-17);
    p = tlm_dfma(p, z, 0x1.f9a325cbffcaap-14);
    p = tlm_dfma(p, z, -0x1.c02db3fdbb984p-11);
    p = tlm_dfma(p, z, 0x1.565bcd0e673b1p-8);
    p = tlm_dfma(p, z, -0x1.b82ce31288b13p-6);
    p = tlm_dfma(p, z, 0x1.ce2f21a042be2p-4);
    p = tlm_dfma(p, z, -0x1.812746b0379e7p-2);
    return tlm_dfma(tlm_dmul(ad, z), p, tlm_dmul(ad, 0x1.20dd750429b6dp+0));
}

/* erf(a) unrounded for a = tlm_erf_arg(x) >= 1/2, far = a >= 7/4 (the second fit) */
TLM_HD_INLINE double tlm_erf_big(float a, int32_t far) {
    double ad = (double)a, z = tlm_dmul(ad, ad);
    double t = tlm_dsub(ad, tlm_dsel(far, 2.875, 1.125));   /* exact */
#define TLM_ERFC_C(near, far_) (far ? far_ : near)
    double g = TLM_ERFC_C(0x1.9cdf8c77d20ccp-28, 0x1.8e9c2517322cap-39);
    g = tlm_dfma(g, t, TLM_ERFC_C(-0x1.7c3b62e6da69ep-26, -0x1.e3b578c873a89p-37));
    g = tlm_dfma(g, t, TLM_ERFC_C(0x1.26ae6c3085286p-24, 0x1.ac6ecd0ec0fffp-35));
    g = tlm_dfma(g, t, TLM_ERFC_C(-0x1.017e92f270df8p-22, -0x1.f2b563aaa4549p-33));
    g = tlm_dfma(g, t, TLM_ERFC_C(0x1.bb89b3e4c8155p-21, 0x1.292dff1def9f7p-30));
    g = tlm_dfma(g, t, TLM_ERFC_C(-0x1.7080e6d2cfcc8p-19, -0x1.4f185eabbff9dp-28));
    g = tlm_dfma(g, t, TLM_ERFC_C(0x1.29974c42e9622p-17, 0x1.71f867bba1780p-26));
    g = tlm_dfma(g, t, TLM_ERFC_C(-0x1.d2b1ee88b0887p-16, -0x1.91b412c4c3b9ep-24));
    g = tlm_dfma(g, t, TLM_ERFC_C(0x1.62743ec2e86a9p-14, 0x1.ab81ccc6dc039p-22));
    g = tlm_dfma(g, t, TLM_ERFC_C(-0x1.041e3b774de8ap-12, -0x1.bd5f07ad24fc7p-20));
    g = tlm_dfma(g, t, TLM_ERFC_C(0x1.6fd9a572d0d9fp-11, 0x1.c5b488bd4d24dp-18));
    g = tlm_dfma(g, t, TLM_ERFC_C(-0x1.f38c6cf5d56f9p-10, -0x1.c35c6388e5df8p-16));
    g = tlm_dfma(g, t, TLM_ERFC_C(0x1.446c5166d9613p-8, 0x1.b5d78b30f2eecp-14));
    g = tlm_dfma(g, t, TLM_ERFC_C(-0x1.910a5d7c2248dp-7, -0x1.9d6f222b62479p-12));
    g = tlm_dfma(g, t, TLM_ERFC_C(0x1.d4e711a2df862p-6, 0x1.7b404aa4db172p-10));
    g = tlm_dfma(g, t, TLM_ERFC_C(-0x1.01343a2c92156p-4, -0x1.512f92fca2362p-8));
    g = tlm_dfma(g, t, TLM_ERFC_C(0x1.05e72521ca1b8p-3, 0x1.21c23afa33c5bp-6));
    g = tlm_dfma(g, t, TLM_ERFC_C(-0x1.e78b356770fbbp-3, -0x1.dfc0205709b5ep-5));
    g = tlm_dfma(g, t, TLM_ERFC_C(0x1.9531e09b149b5p-2, 0x1.7d0a5e9dd5710p-3));
#undef TLM_ERFC_C
    return tlm_dfma(-tlm_exp_fast(-z), g, 1.0);
}

/* erf(x) from r, the unrounded erf of a = tlm_erf_arg(x) */
TLM_HD_INLINE float tlm_erf_round(float x, float a, double r) {
    float y = tlm_sel(a >= 4.0f, 1.0f, tlm_d2f(r));
    y = tlm_copysign(y, x);
    return tlm_nan_pass(x, y);
}

TLM_HD_INLINE float tlm_erf(float x) {
    float a = tlm_erf_arg(x);
    return tlm_erf_round(x, a, tlm_dsel(a < 0.5f, tlm_erf_small(a), tlm_erf_big(a, a >= 1.75f)));
}

/* GELU, tanh form, the registry's stagewise formula with every stage rounded:
 * cubic = ((c x) x) x, t = tanh(k (x + cubic)), y = (x (1 + t)) / 2. Not within 2 ulp of the
 * true function where 1 + t cancels (x below about -3): the error there is about one ulp of
 * |x| (the formula is the contract, as in the registry). x (1 + t) overflows for |x| > 2^127,
 * and gelu(-inf) = -inf * 0 = NaN, as the formula says. */
#define TLM_GELU_K 0.7978845608f
#define TLM_GELU_A 0.044715f
TLM_HD_INLINE float tlm_gelu(float x) {
    float cubic = tlm_mul(tlm_mul(tlm_mul(TLM_GELU_A, x), x), x);
    float t = tlm_tanh(tlm_mul(TLM_GELU_K, tlm_add(x, cubic)));
    return tlm_mul(tlm_mul(x, tlm_add(1.0f, t)), 0.5f);
}

/* d gelu / dx of the same formula, stagewise: (1 + t + (x (1 - t t)) (k (1 + (3c x) x))) / 2 */
TLM_HD_INLINE float tlm_gelu_grad(float x) {
    float cubic = tlm_mul(tlm_mul(tlm_mul(TLM_GELU_A, x), x), x);
    float t = tlm_tanh(tlm_mul(TLM_GELU_K, tlm_add(x, cubic)));
    float du = tlm_mul(TLM_GELU_K, tlm_add(1.0f, tlm_mul(tlm_mul(3.0f * TLM_GELU_A, x), x)));
    float dt = tlm_mul(tlm_mul(x, tlm_sub(1.0f, tlm_mul(t, t))), du);
    return tlm_mul(tlm_add(tlm_add(1.0f, t), dt), 0.5f);
}

#endif /* TL_MATH_TRANSCENDENTAL_H */
