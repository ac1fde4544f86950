/* tl_math_more.h: the correctly rounded functions of PyTorch's pointwise math catalog, written
 * once for both libraries on tl_math.h's operations (rule 2 there).
 *
 * log2 log10 exp2 sinh cosh asinh acosh atanh atan asin acos return the float32 nearest the true
 * value, ties to even, for every float32 input: each is evaluated as an unevaluated double-double
 * sum with relative error below about 2^-58 and rounded once (tlm_dd_round), and
 * tests/native/check_math.c (`build/check_math log2 ...`) compares all 2^32 inputs of each with
 * glibc double and quad precision (bench/results/check-math-new.md). hypot is correctly rounded
 * for every pair by construction (see tlm_hypot); atan2 takes the same double-double route over
 * an exactly divided quotient, correctly rounded unless its true value lies within about 2^-58
 * of a rounding midpoint (a random and edge-case comparison with quad precision found none; two
 * arguments cannot be enumerated). No libm, no intrinsics: IEEE double operations only, so the
 * stub and CUDA give the same bits (tests/native/tl_math_device_check.cu).
 */
#ifndef TL_MATH_MORE_H
#define TL_MATH_MORE_H

#include "tl_math.h"

#if defined(__CUDA_ARCH__)
TLM_HD double tlm_dsqrt(double a) { return __dsqrt_rn(a); }
#else
TLM_HD double tlm_dsqrt(double a) { return __builtin_sqrt(a); }   /* IEEE sqrt instruction */
#endif

#define TLM_NANF tlm_from_bits(0x7fc00000)
#define TLM_INFF tlm_from_bits(0x7f800000)
#define TLM_FLT_MAX 3.40282347e38f

/* ---- double-double helpers ---- */

/* a times the constant ch + cl, relative error about 2^-104 beyond a's own */
TLM_HD tlm_dd tlm_dd_mul_c(tlm_dd a, double ch, double cl) {
    tlm_dd p = tlm_two_prod(a.hi, ch);
    p.lo = tlm_dfma(a.hi, cl, tlm_dfma(a.lo, ch, p.lo));
    return p;
}
/* a + b, both unevaluated sums, renormalised */
TLM_HD tlm_dd tlm_dd_add(tlm_dd a, tlm_dd b) {
    tlm_dd s = tlm_two_sum(a.hi, b.hi);
    return tlm_fast_two_sum(s.hi, tlm_dadd(s.lo, tlm_dadd(a.lo, b.lo)));
}
/* sqrt(s.hi + s.lo) for s >= 0 (0 gives 0): the double root r and the correction
 * (s - r^2) / (2r), where s.hi - r^2 is exact (an FMA) for a correctly rounded r */
TLM_HD tlm_dd tlm_dd_sqrt(tlm_dd s) {
    tlm_dd r;
    r.hi = tlm_dsqrt(s.hi);
    double c = tlm_ddiv(tlm_dadd(tlm_dfma(-r.hi, r.hi, s.hi), s.lo), tlm_dadd(r.hi, r.hi));
    r.lo = tlm_dsel(r.hi == 0.0, 0.0, c);
    return r;
}

/* ---- logarithms in base 2 and 10 ---- */

#define TLM_INV_LN2_LO 0x1.777d0ffda0d24p-56   /* 1/ln2 = TLM_INV_LN2 + this */
#define TLM_INV_LN10_HI 0x1.bcb7b1526e50ep-2
#define TLM_INV_LN10_LO 0x1.95355baaafad3p-57

/* log(x) for finite x > 0 as an unevaluated sum (tlm_log_core, relative error below 2^-59) */
TLM_HD_INLINE tlm_dd tlm_log_ddf(float x) {
    float e, f = tlm_log_split(x, &e);
    tlm_dd fd;
    fd.hi = (double)f;
    fd.lo = 0.0;
    return tlm_log_core((double)e, fd);
}
/* log(x) times ch + cl, with log's special values: log(+-0) = -inf, log(x < 0) = NaN */
TLM_HD_INLINE float tlm_log_scaled(float x, double ch, double cl) {
    tlm_dd l = tlm_dd_mul_c(tlm_log_ddf(tlm_sel((x > 0.0f) & (x <= TLM_FLT_MAX), x, 1.0f)), ch, cl);
    float y = tlm_dd_round(l.hi, l.lo);
    y = tlm_sel(x > TLM_FLT_MAX, x, y);
    y = tlm_sel(x < 0.0f, TLM_NANF, y);
    y = tlm_sel(x == 0.0f, -TLM_INFF, y);
    return tlm_nan_pass(x, y);
}
/* log2 and log10, correctly rounded (exact at powers of 2, and of 10 up to 10^10) */
TLM_HD_INLINE float tlm_log2(float x) { return tlm_log_scaled(x, TLM_INV_LN2, TLM_INV_LN2_LO); }
TLM_HD_INLINE float tlm_log10(float x) { return tlm_log_scaled(x, TLM_INV_LN10_HI, TLM_INV_LN10_LO); }

/* ---- 2^x, sinh, cosh ---- */

#define TLM_LN2_DHI 0x1.62e42fefa39efp-1   /* ln2 = this + TLM_LN2_DLO */
#define TLM_LN2_DLO 0x1.abc9e3b39803fp-56

/* 2^x, correctly rounded: x = k + r (k = round(x), r exact, |r| <= 1/2), t = r ln2 as hi + lo
 * (|t| < 0.35), e^t - 1 = m from tlm_expm1_core (whose own reduction of t.hi is exact there:
 * k' in {-1, 0, 1}, and t.hi - k' LN2_HI is a Sterbenz subtraction), then
 * 2^(k + k') (1 + m + t.lo (1 + m)). x is clamped to [-152, 129] (2^-152 rounds to 0). */
TLM_HD_INLINE float tlm_exp2(float x) {
    double xc = (double)tlm_clampf(x, -152.0f, 129.0f);
    double k = tlm_dsub(tlm_dadd(xc, 0x1.8p52), 0x1.8p52);
    double r = tlm_dsub(xc, k);
    tlm_dd t = tlm_two_prod(r, TLM_LN2_DHI);
    t.lo = tlm_dfma(r, TLM_LN2_DLO, t.lo);
    tlm_dd m;
    double k2 = tlm_expm1_core(t.hi, &m);
    double p = tlm_pow2_of(tlm_dadd(k, k2));
    tlm_dd e = tlm_fast_two_sum(1.0, m.hi);
    double lo = tlm_dadd(tlm_dadd(e.lo, m.lo), tlm_dfma(t.lo, m.hi, t.lo));
    float y = tlm_dd_round(tlm_dmul(e.hi, p), tlm_dmul(lo, p));
    return tlm_nan_pass(x, y);
}

/* e^a as hi + lo and e^a - 1 as hi + lo, for a float a in [0, 90] (tlm_expm1's route) */
TLM_HD_INLINE void tlm_exp_pair(float a, tlm_dd *ea, tlm_dd *em1) {
    tlm_dd m;
    double p = tlm_pow2_of(tlm_expm1_core((double)a, &m));
    tlm_dd e = tlm_fast_two_sum(1.0, m.hi);
    ea->hi = tlm_dmul(e.hi, p);
    ea->lo = tlm_dmul(tlm_dadd(e.lo, m.lo), p);
    tlm_dd s = tlm_two_sum(ea->hi, -1.0);
    em1->hi = s.hi;
    em1->lo = tlm_dadd(s.lo, ea->lo);
}

/* sinh, correctly rounded: with E = e^a - 1, a = |x| clamped to 90 (sinh overflows beyond
 * 89.42), sinh(a) = (E + E / (E + 1)) / 2, a sum of two positive terms (no cancellation near 0);
 * odd (sinh(-0) = -0). */
TLM_HD_INLINE float tlm_sinh(float x) {
    float a = tlm_clampf(tlm_abs(x), 0.0f, 90.0f);
    tlm_dd ea, em1;
    tlm_exp_pair(a, &ea, &em1);
    tlm_dd s = tlm_dd_add(em1, tlm_dd_div(em1, ea));
    float y = tlm_dd_round(tlm_dmul(s.hi, 0.5), tlm_dmul(s.lo, 0.5));
    return tlm_nan_pass(x, tlm_copysign(y, x));
}

/* cosh, correctly rounded: (e^a + 1 / e^a) / 2, a = |x| clamped to 90, two positive terms */
TLM_HD_INLINE float tlm_cosh(float x) {
    float a = tlm_clampf(tlm_abs(x), 0.0f, 90.0f);
    tlm_dd ea, em1, one;
    tlm_exp_pair(a, &ea, &em1);
    one.hi = 1.0;
    one.lo = 0.0;
    tlm_dd s = tlm_dd_add(ea, tlm_dd_div(one, ea));
    float y = tlm_dd_round(tlm_dmul(s.hi, 0.5), tlm_dmul(s.lo, 0.5));
    return tlm_nan_pass(x, y);
}

/* ---- inverse hyperbolic functions: logarithms of exact double-double arguments ---- */

/* log of u = u.hi + u.lo > 0 with u.hi normal (tlm_log_dd keeps u - 1 exact, so arguments near
 * 1 lose nothing), rounded once after times `scale` (a power of two) */
TLM_HD_INLINE float tlm_log_dd_round(tlm_dd u, double scale) {
    tlm_dd l = tlm_log_dd(u);
    return tlm_dd_round(tlm_dmul(l.hi, scale), tlm_dmul(l.lo, scale));
}

/* atanh, correctly rounded: log((1 + a) / (1 - a)) / 2, a = |x|, 1 + a and 1 - a exact (2Sum),
 * the quotient a double-double division; odd; atanh(+-1) = +-inf, |x| > 1 NaN. */
TLM_HD_INLINE float tlm_atanh(float x) {
    float a = tlm_sel(tlm_abs(x) < 1.0f, tlm_abs(x), 0.5f);   /* 1, beyond and NaN: selected out */
    tlm_dd n = tlm_two_sum(1.0, (double)a), d = tlm_two_sum(1.0, -(double)a);
    float y = tlm_log_dd_round(tlm_dd_div(n, d), 0.5);
    y = tlm_sel(tlm_abs(x) == 1.0f, TLM_INFF, y);
    y = tlm_sel(tlm_abs(x) > 1.0f, TLM_NANF, y);
    return tlm_nan_pass(x, tlm_copysign(y, x));
}

/* asinh, correctly rounded: a = |x|; a < 2^-12: a - a^3/6 + 3a^5/40 (the next term is 2^-72 of
 * a), added to a exactly; else log(a + sqrt(a^2 + 1)) with a^2 exact, a^2 + 1 exact (2Sum), a
 * double-double root and sum. Odd; asinh(+-inf) = +-inf. */
TLM_HD_INLINE float tlm_asinh(float x) {
    float a = tlm_sel(tlm_abs(x) <= TLM_FLT_MAX, tlm_abs(x), 1.0f);
    double ad = (double)a, sq = tlm_dmul(ad, ad);
    tlm_dd r = tlm_dd_sqrt(tlm_two_sum(sq, 1.0));
    tlm_dd u = tlm_dd_add(r, tlm_two_sum(ad, 0.0));
    float big = tlm_log_dd_round(u, 1.0);
    double corr = tlm_dmul(tlm_dmul(sq, ad), tlm_dfma(sq, 0.075, -1.0 / 6.0));
    float small = tlm_dd_round(ad, corr);
    float y = tlm_sel(a < 0x1p-12f, small, big);
    y = tlm_sel(tlm_abs(x) > TLM_FLT_MAX, TLM_INFF, y);
    return tlm_nan_pass(x, tlm_copysign(y, x));
}

/* acosh, correctly rounded: log(x + sqrt(x^2 - 1)) for x >= 1, x^2 - 1 exact (2Sum), so x near
 * 1 loses nothing; acosh(1) = 0, acosh(x < 1) = NaN, acosh(+inf) = +inf. */
TLM_HD_INLINE float tlm_acosh(float x) {
    float a = tlm_sel((x >= 1.0f) & (x <= TLM_FLT_MAX), x, 1.0f);
    double ad = (double)a;
    tlm_dd r = tlm_dd_sqrt(tlm_two_sum(tlm_dmul(ad, ad), -1.0));
    float y = tlm_log_dd_round(tlm_dd_add(r, tlm_two_sum(ad, 0.0)), 1.0);
    y = tlm_sel(x > TLM_FLT_MAX, TLM_INFF, y);
    y = tlm_sel(x < 1.0f, TLM_NANF, y);
    return tlm_nan_pass(x, y);
}

/* ---- hypot ---- */

/* sqrt(x^2 + y^2), correctly rounded for every pair: x^2 and y^2 are exact doubles (24-bit
 * significands; subnormal squares stay normal doubles) and their sum S is exact as hi + lo
 * (2Sum); sqrt(S) as tlm_dd_sqrt has relative error about 2^-104, while a true value that is not
 * a rounding midpoint lies at least about 2^-72 (relative) from one (S and a midpoint's square
 * are multiples of the smaller square's last bit, and S within 2^-24 of a midpoint's square
 * needs the smaller square to be at least 2^-24 of the larger), so one rounding is exact.
 * hypot(+-inf, anything) = +inf, NaN otherwise propagates. */
TLM_HD_INLINE float tlm_hypot(float x, float y) {
    double xd = (double)x, yd = (double)y;
    tlm_dd r = tlm_dd_sqrt(tlm_two_sum(tlm_dmul(xd, xd), tlm_dmul(yd, yd)));
    float h = tlm_dd_round(r.hi, r.lo);
    h = tlm_nan_pass(y, tlm_nan_pass(x, h));
    return tlm_sel((tlm_abs(x) == TLM_INFF) | (tlm_abs(y) == TLM_INFF), TLM_INFF, h);
}

/* ---- arctangents ---- */

#define TLM_PI_2_HI 0x1.921fb54442d18p+0   /* pi/2 = this + TLM_PI_2_LO */
#define TLM_PI_2_LO 0x1.1a62633145c07p-54

/* atan(t) for t = t.hi + t.lo >= 0 (finite), relative error about 2^-60: t > 1 folds to
 * pi/2 - atan(1/t); then u in [0, 1], c = i/8 nearest u, v = (u - c) / (1 + u c) (u - c exact by
 * Sterbenz, 1 + u c from an exact product), |v| <= 1/16, atan(u) = atan(c) + v + v^3 P(v^2) with
 * the Taylor series to v^17 (truncation below 2^-64) and atan(c) from a double-double table. */
TLM_HD_INLINE tlm_dd tlm_atan_dd(tlm_dd t) {
    const double ATAN_HI[9] = {0.0, 0x1.fd5ba9aac2f6ep-4, 0x1.f5b75f92c80ddp-3, 0x1.6f61941e4def1p-2,
                               0x1.dac670561bb4fp-2, 0x1.1e00babdefeb4p-1, 0x1.4978fa3269ee1p-1,
                               0x1.700a7c5784634p-1, 0x1.921fb54442d18p-1};
    const double ATAN_LO[9] = {0.0, -0x1.cd37686760c17p-59, 0x1.8ab6e3cf7afbdp-57, -0x1.c63aae6f6e918p-56,
                               0x1.a2b7f222f65e2p-56, -0x1.928df287a668fp-58, 0x1.2419a87f2a458p-56,
                               -0x1.8c34d25aadef6p-56, 0x1.1a62633145c07p-55};
    int32_t inv = t.hi > 1.0;
    tlm_dd one;
    one.hi = 1.0;
    one.lo = 0.0;
    tlm_dd ti = tlm_dd_div(one, t);
    tlm_dd u;
    u.hi = tlm_dsel(inv, ti.hi, t.hi);
    u.lo = tlm_dsel(inv, ti.lo, t.lo);
    double uh = tlm_dsel((u.hi >= 0.0) & (u.hi <= 1.0), u.hi, 0.0);   /* the table index stays in range */
    double cd = tlm_dsub(tlm_dadd(tlm_dmul(uh, 8.0), 0x1.8p52), 0x1.8p52);
    int32_t i = (int32_t)cd;
    double c = tlm_dmul(cd, 0.125);
    tlm_dd num = tlm_two_sum(tlm_dsub(u.hi, c), u.lo);
    tlm_dd cp = tlm_two_prod(u.hi, c);
    tlm_dd den = tlm_fast_two_sum(1.0, cp.hi);
    den.lo = tlm_dadd(den.lo, tlm_dfma(u.lo, c, cp.lo));
    tlm_dd v = tlm_dd_div(num, den);
    double z = tlm_dmul(v.hi, v.hi);
    double p = -0x1.e1e1e1e1e1e1ep-5;             /* -1/17 */
    p = tlm_dfma(p, z, 0x1.1111111111111p-4);      /* 1/15 */
    p = tlm_dfma(p, z, -0x1.3b13b13b13b14p-4);     /* -1/13 */
    p = tlm_dfma(p, z, 0x1.745d1745d1746p-4);      /* 1/11 */
    p = tlm_dfma(p, z, -0x1.c71c71c71c71cp-4);     /* -1/9 */
    p = tlm_dfma(p, z, 0x1.2492492492492p-3);      /* 1/7 */
    p = tlm_dfma(p, z, -0x1.999999999999ap-3);     /* -1/5 */
    p = tlm_dfma(p, z, 0x1.5555555555555p-2);      /* 1/3 */
    double corr = tlm_dmul(tlm_dmul(v.hi, z), -p);
    tlm_dd a = tlm_two_sum(ATAN_HI[i], v.hi);
    a = tlm_fast_two_sum(a.hi, tlm_dadd(a.lo, tlm_dadd(ATAN_LO[i], tlm_dadd(v.lo, corr))));
    /* t > 1: pi/2 - atan(1/t) (atan(1/t) <= pi/4, no cancellation) */
    tlm_dd f = tlm_two_sum(TLM_PI_2_HI, -a.hi);
    f.lo = tlm_dadd(f.lo, tlm_dsub(TLM_PI_2_LO, a.lo));
    a.hi = tlm_dsel(inv, f.hi, a.hi);
    a.lo = tlm_dsel(inv, f.lo, a.lo);
    return a;
}

/* atan, correctly rounded; odd; atan(+-inf) = +-pi/2 rounded */
TLM_HD_INLINE float tlm_atan(float x) {
    float a = tlm_sel(tlm_abs(x) <= TLM_FLT_MAX, tlm_abs(x), 1.0f);
    tlm_dd t;
    t.hi = (double)a;
    t.lo = 0.0;
    tlm_dd r = tlm_atan_dd(t);
    float y = tlm_dd_round(r.hi, r.lo);
    y = tlm_sel(tlm_abs(x) > TLM_FLT_MAX, tlm_from_bits(0x3fc90fdb), y);
    return tlm_nan_pass(x, tlm_copysign(y, x));
}

/* asin, correctly rounded: atan(a / sqrt(1 - a^2)), a = |x|, 1 - a^2 exact (a^2 an exact double,
 * 2Sum); odd; asin(+-1) = +-pi/2 rounded, |x| > 1 NaN. */
TLM_HD_INLINE float tlm_asin(float x) {
    float a = tlm_sel(tlm_abs(x) < 1.0f, tlm_abs(x), 0.5f);
    double ad = (double)a;
    tlm_dd s = tlm_dd_sqrt(tlm_two_sum(1.0, -tlm_dmul(ad, ad)));
    tlm_dd n;
    n.hi = ad;
    n.lo = 0.0;
    tlm_dd r = tlm_atan_dd(tlm_dd_div(n, s));
    float y = tlm_dd_round(r.hi, r.lo);
    y = tlm_sel(tlm_abs(x) == 1.0f, tlm_from_bits(0x3fc90fdb), y);
    y = tlm_sel(tlm_abs(x) > 1.0f, TLM_NANF, y);
    return tlm_nan_pass(x, tlm_copysign(y, x));
}

/* acos, correctly rounded: 2 atan(sqrt((1 - x) / (1 + x))), 1 - x and 1 + x exact (2Sum);
 * acos(1) = 0, acos(-1) = pi rounded, |x| > 1 NaN. */
TLM_HD_INLINE float tlm_acos(float x) {
    float a = tlm_sel(tlm_abs(x) < 1.0f, x, 0.5f);
    tlm_dd n = tlm_two_sum(1.0, -(double)a), d = tlm_two_sum(1.0, (double)a);
    tlm_dd r = tlm_atan_dd(tlm_dd_sqrt(tlm_dd_div(n, d)));
    float y = tlm_dd_round(tlm_dadd(r.hi, r.hi), tlm_dadd(r.lo, r.lo));
    y = tlm_sel(x == 1.0f, 0.0f, y);
    y = tlm_sel(x == -1.0f, tlm_from_bits(0x40490fdb), y);
    y = tlm_sel(tlm_abs(x) > 1.0f, TLM_NANF, y);
    return tlm_nan_pass(x, y);
}

#define TLM_PI_HI 0x1.921fb54442d18p+1
#define TLM_PI_LO 0x1.1a62633145c07p-53

/* atan2(y, x), C99's special values (PyTorch's): with p = min(|x|, |y|), q = max(|x|, |y|),
 * atan(p / q) (an exact double-double quotient), pi/2 minus it where |y| > |x|, pi minus that
 * where x < 0 (or x = -0), the sign of y. Correctly rounded except where the true value lies
 * within about 2^-58 of a rounding midpoint (see the header comment). */
TLM_HD_INLINE float tlm_atan2(float y, float x) {
    float ax = tlm_abs(x), ay = tlm_abs(y);
    int32_t swap = ay > ax;
    int32_t xneg = tlm_to_bits(x) < 0;
    double p = (double)tlm_sel(swap, ax, ay), q = (double)tlm_sel(swap, ay, ax);
    int32_t bad = !((q > 0.0) & (q <= (double)TLM_FLT_MAX) & (p == p));   /* 0, inf, NaN: below */
    tlm_dd n, d;
    n.hi = tlm_dsel(bad, 0.0, p);
    n.lo = 0.0;
    d.hi = tlm_dsel(bad, 1.0, q);
    d.lo = 0.0;
    tlm_dd r = tlm_atan_dd(tlm_dd_div(n, d));
    tlm_dd f = tlm_two_sum(TLM_PI_2_HI, -r.hi);
    f.lo = tlm_dadd(f.lo, tlm_dsub(TLM_PI_2_LO, r.lo));
    r.hi = tlm_dsel(swap, f.hi, r.hi);
    r.lo = tlm_dsel(swap, f.lo, r.lo);
    tlm_dd g = tlm_two_sum(TLM_PI_HI, -r.hi);
    g.lo = tlm_dadd(g.lo, tlm_dsub(TLM_PI_LO, r.lo));
    r.hi = tlm_dsel(xneg, g.hi, r.hi);
    r.lo = tlm_dsel(xneg, g.lo, r.lo);
    float v = tlm_dd_round(r.hi, r.lo);
    /* the special values: y = 0: 0 or pi; x = 0: pi/2; infinities: 0, pi/4, pi/2, 3pi/4, pi */
    float pi = tlm_from_bits(0x40490fdb), pi_2 = tlm_from_bits(0x3fc90fdb);
    float yz = tlm_sel(xneg, pi, 0.0f);
    v = tlm_sel(ax == 0.0f, pi_2, v);
    v = tlm_sel(ay == 0.0f, yz, v);
    float yinf = tlm_sel(ax == TLM_INFF, tlm_sel(xneg, tlm_from_bits(0x4016cbe4), tlm_from_bits(0x3f490fdb)), pi_2);
    v = tlm_sel((ax == TLM_INFF) & (ay < TLM_INFF), yz, v);
    v = tlm_sel(ay == TLM_INFF, yinf, v);
    return tlm_nan_pass(y, tlm_nan_pass(x, tlm_copysign(v, y)));
}

/* ---- sin, cos, tan of any float32 ---- */

/* |x| = k pi/2 + r for finite |x| >= pi/4 (Payne-Hanek, in integers): |x| = m 2^e (m a 24-bit
 * integer); bits i >= e - 1 of 2/pi (weights 2^-i) decide x 2/pi mod 4, so a 128-bit window V of
 * them from bit e - 1 gives x 2/pi = m V 2^-126 (mod 4) with error below 2^-100. The low 128
 * bits of m V hold k mod 4 (top two) and the fraction f, taken in [-1/2, 1/2) (k rounded to
 * nearest); r = f pi/2 as hi + lo. Returns k mod 4. The table is 2/pi's bits after 32 zero bits
 * (so windows of small e read zeros). */
TLM_HD_INLINE int32_t tlm_reduce_pi_2(float ax, tlm_dd *r) {
    const uint32_t TWO_OVER_PI[10] = {0x00000000u, 0xa2f9836eu, 0x4e441529u, 0xfc2757d1u, 0xf534ddc0u,
                                      0xdb629599u, 0x3c439041u, 0xfe5163abu, 0xdebbc561u, 0xb7246e3au};
    int32_t b = tlm_to_bits(ax);
    uint64_t m = (uint64_t)((b & 0x7fffff) | 0x800000);
    int32_t e = ((b >> 23) & 0xff) - 150;
    e = e < -24 ? -24 : e;                          /* |x| >= pi/4 has e >= -24 */
    int32_t p = e + 30, wi = p >> 5, sh = p & 31;
    uint64_t w[4];
    for (int j = 0; j < 4; j++)
        w[j] = ((((uint64_t)TWO_OVER_PI[wi + j] << 32) | TWO_OVER_PI[wi + j + 1]) >> (32 - sh)) & 0xffffffffu;
    uint64_t t3 = m * w[3], t2 = m * w[2] + (t3 >> 32), t1 = m * w[1] + (t2 >> 32);
    uint64_t t0 = m * w[0] + (t1 >> 32);
    uint64_t top = (t0 << 32) | (t1 & 0xffffffffu), low = (t2 << 32) | (t3 & 0xffffffffu);
    int32_t q = (int32_t)(top >> 62);
    uint64_t a = (top << 2) | (low >> 62), lo = low << 2;
    q = (q + (int32_t)(a >> 63)) & 3;               /* f >= 1/2: k + 1, f - 1 (a signed) */
    int64_t as = (int64_t)a;
    tlm_dd f;
    f.hi = tlm_dmul((double)(as >> 11), 0x1p-53);   /* 53 bits: exact */
    f.lo = tlm_dmul((double)(((uint64_t)(as & 0x7ff) << 53) | (lo >> 11)), 0x1p-117);
    f = tlm_fast_two_sum(f.hi, f.lo);
    *r = tlm_dd_mul_c(f, TLM_PI_2_HI, TLM_PI_2_LO);
    return q;
}

/* sin(r) and cos(r) for r = r.hi + r.lo, |r| <= pi/4 (slightly more), relative error about
 * 2^-60: sin = r - r^3/6 + r^5 S(r^2), cos = 1 - r^2/2 + r^4/24 + r^6 C(r^2) (Taylor to r^19 and
 * r^20), the leading terms from exact products and 1/6, 1/24 as double-doubles, r.lo through
 * cos(r.hi) and -sin(r.hi) to first order. */
TLM_HD_INLINE void tlm_sincos_dd(tlm_dd r, tlm_dd *sn, tlm_dd *cs) {
    double x = r.hi;
    tlm_dd z = tlm_two_prod(x, x);
    double zz = z.hi;
    double ps = -0x1.2f49b46814157p-57;
    ps = tlm_dfma(ps, zz, 0x1.952c77030ad4ap-49);
    ps = tlm_dfma(ps, zz, -0x1.ae7f3e733b81fp-41);
    ps = tlm_dfma(ps, zz, 0x1.6124613a86d09p-33);
    ps = tlm_dfma(ps, zz, -0x1.ae64567f544e4p-26);
    ps = tlm_dfma(ps, zz, 0x1.71de3a556c734p-19);
    ps = tlm_dfma(ps, zz, -0x1.a01a01a01a01ap-13);
    ps = tlm_dfma(ps, zz, 0x1.1111111111111p-7);
    double pc = 0x1.e542ba4020225p-62;
    pc = tlm_dfma(pc, zz, -0x1.6827863b97d97p-53);
    pc = tlm_dfma(pc, zz, 0x1.ae7f3e733b81fp-45);
    pc = tlm_dfma(pc, zz, -0x1.93974a8c07c9dp-37);
    pc = tlm_dfma(pc, zz, 0x1.1eed8eff8d898p-29);
    pc = tlm_dfma(pc, zz, -0x1.27e4fb7789f5cp-22);
    pc = tlm_dfma(pc, zz, 0x1.a01a01a01a01ap-16);
    pc = tlm_dfma(pc, zz, -0x1.6c16c16c16c17p-10);
    double z2 = tlm_dmul(zz, zz);
    /* sin: x + (-(x^3)/6) + x^5 S + r.lo (1 - x^2/2) */
    tlm_dd x3 = tlm_two_prod(x, z.hi);
    x3.lo = tlm_dfma(x, z.lo, x3.lo);
    tlm_dd s3 = tlm_dd_mul_c(x3, -0x1.5555555555555p-3, -0x1.5555555555555p-57);
    double stail = tlm_dfma(tlm_dmul(x, z2), ps, tlm_dfma(r.lo, tlm_dfma(-0.5, zz, 1.0), s3.lo));
    tlm_dd sa = tlm_fast_two_sum(x, s3.hi);
    *sn = tlm_fast_two_sum(sa.hi, tlm_dadd(sa.lo, stail));
    /* cos: 1 + (-z/2) + z^2/24 + z^3 C - r.lo x */
    tlm_dd z4 = tlm_two_prod(z.hi, z.hi);
    z4.lo = tlm_dfma(tlm_dadd(z.hi, z.hi), z.lo, z4.lo);
    tlm_dd c4 = tlm_dd_mul_c(z4, 0x1.5555555555555p-5, 0x1.5555555555555p-59);
    tlm_dd ca = tlm_fast_two_sum(1.0, tlm_dmul(-0.5, z.hi));
    double ctail = tlm_dfma(tlm_dmul(zz, z2), pc, tlm_dfma(-r.lo, x, tlm_dfma(-0.5, z.lo, c4.lo)));
    tlm_dd cb = tlm_fast_two_sum(ca.hi, c4.hi);
    *cs = tlm_fast_two_sum(cb.hi, tlm_dadd(tlm_dadd(ca.lo, cb.lo), ctail));
}

/* sin(|x|) (as hi + lo) and cos(x), quadrant applied; which = 0: sin, 1: cos, 2: tan */
TLM_HD_INLINE float tlm_trig(float x, int32_t which) {
    float ax = tlm_abs(x);
    int32_t finite = ax <= TLM_FLT_MAX, small = ax < 0.78539816f;   /* below pi/4: no reduction */
    tlm_dd r;
    int32_t q = tlm_reduce_pi_2(tlm_sel(finite & !small, ax, 1.0f), &r);
    r.hi = tlm_dsel(small, (double)ax, r.hi);
    r.lo = tlm_dsel(small, 0.0, r.lo);
    q = small ? 0 : q;
    tlm_dd sn, cs;
    tlm_sincos_dd(r, &sn, &cs);
    /* sin(k pi/2 + r): q = 0: s, 1: c, 2: -s, 3: -c; cos: q = 0: c, 1: -s, 2: -c, 3: s */
    int32_t odd = q & 1;
    tlm_dd u, v;                                     /* u = the value's magnitude part */
    u.hi = tlm_dsel(odd, cs.hi, sn.hi);
    u.lo = tlm_dsel(odd, cs.lo, sn.lo);
    v.hi = tlm_dsel(odd, sn.hi, cs.hi);
    v.lo = tlm_dsel(odd, sn.lo, cs.lo);
    tlm_dd t = tlm_dd_div(u, v);                     /* tan: s/c, or c/s with the sign flipped */
    double sgn_s = (q & 2) ? -1.0 : 1.0;
    double sgn_c = ((q + 1) & 2) ? -1.0 : 1.0;
    double sgn_t = odd ? -1.0 : 1.0;
    double hi, lo;
    if (which == 0) { hi = tlm_dmul(u.hi, sgn_s); lo = tlm_dmul(u.lo, sgn_s); }
    else if (which == 1) { hi = tlm_dmul(v.hi, sgn_c); lo = tlm_dmul(v.lo, sgn_c); }
    else { hi = tlm_dmul(t.hi, sgn_t); lo = tlm_dmul(t.lo, sgn_t); }
    float y = tlm_dd_round(hi, lo);
    if (which != 1) y = tlm_from_bits(tlm_to_bits(y) ^ (tlm_to_bits(x) & (int32_t)0x80000000));   /* odd */
    y = tlm_sel(!finite, TLM_NANF, y);
    return tlm_nan_pass(x, y);
}
/* sin, cos and tan, correctly rounded, for every float32 (any size: exact reduction);
 * sin(-0) = -0, tan(-0) = -0, cos(0) = 1, +-inf NaN */
TLM_HD_INLINE float tlm_sin(float x) { return tlm_trig(x, 0); }
TLM_HD_INLINE float tlm_cos(float x) { return tlm_trig(x, 1); }
TLM_HD_INLINE float tlm_tan(float x) { return tlm_trig(x, 2); }

#endif /* TL_MATH_MORE_H */
