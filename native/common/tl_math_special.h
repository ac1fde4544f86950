/* tl_math_special.h: the special functions of PyTorch's catalog (erfc and its relatives, the
 * inverse error functions, lgamma, digamma, Hurwitz zeta, the Bessel functions), written once for
 * both libraries on tl_math.h's IEEE double operations (rule 2's route: no libm, no intrinsics,
 * explicit FMAs, so the stub and CUDA give the same bits).
 *
 * Each is evaluated in double by a fixed algorithm (series, continued fractions, recurrences,
 * asymptotic expansions and Newton steps with fixed counts or data-independent stopping tests) and
 * rounded to float32 once by the caller. The double values are within a few double ulps of the
 * true ones away from zeros of the function (relative error below about 2^-45), so the float32
 * results are correctly rounded for almost every input and within 1 ulp everywhere such a
 * bound holds; tests/test_special_functions.py states each function's measured ulps against
 * mpmath. tests/native/check_special.c checks the float32 formulas against glibc and libquadmath
 * on all 2^32 inputs (bench/results/check-math-special.md: correctly rounded on every input
 * checked so far, except J and Y near their zeros).
 */
#ifndef TL_MATH_SPECIAL_H
#define TL_MATH_SPECIAL_H

#include "tl_math_more.h"

#define TLS_SQRT_PI_INV2 0x1.20dd750429b6dp+0   /* 2 / sqrt(pi) */
#define TLS_INV_SQRT_PI 0x1.20dd750429b6dp-1    /* 1 / sqrt(pi) */
#define TLS_SQRT1_2 0x1.6a09e667f3bcdp-1        /* 1 / sqrt(2) */
#define TLS_SQRT2 0x1.6a09e667f3bcdp+0
#define TLS_PI 0x1.921fb54442d18p+1
#define TLS_EULER 0x1.2788cfc6fb619p-1           /* Euler's gamma */
#define TLS_LOG_2PI_2 0x1.d67f1c864beb5p-1       /* log(2 pi) / 2 */
#define TLS_LOG_PI 0x1.250d048e7a1bdp+0

TLM_HD double tls_inf(void) { return tlm_dfrom_bits(0x7ff0000000000000LL); }
TLM_HD double tls_nan(void) { return tlm_dfrom_bits(0x7ff8000000000000LL); }
TLM_HD double tls_fabs(double x) { return tlm_dfrom_bits(tlm_dbits(x) & 0x7fffffffffffffffLL); }
/* round to the nearest integer (|x| < 2^51) */
TLM_HD double tls_rint(double x) {
    double s = x < 0.0 ? -0x1.8p52 : 0x1.8p52;
    return tlm_dsub(tlm_dadd(x, s), s);
}
/* the largest integer <= x (|x| < 2^51) */
TLM_HD double tls_floor(double x) {
    double r = tls_rint(x);
    return r > x ? tlm_dsub(r, 1.0) : r;
}

/* e^x in double for any x: clamped to [-708, 708], where 2^k e^r stays a normal double (the
 * float32 results built on it are 0 or inf well inside that range) */
TLM_HD double tls_exp(double x) {
    double xc = x < -708.0 ? -708.0 : (x > 708.0 ? 708.0 : x);
    double t, r = tlm_exp_reduce(xc, &t);
    double v = tlm_scale2(tlm_dfma(tlm_dfma(tlm_exp_q(r), r, 1.0), r, 1.0), t);
    v = x < -745.0 ? 0.0 : v;
    return x > 710.0 ? tls_inf() : v;
}
/* e^(h + l) for a double-double exponent */
TLM_HD double tls_exp_dd(tlm_dd e) { double v = tls_exp(e.hi); return tlm_dfma(v, e.lo, v); }
/* log(x) as hi + lo for a finite double x > 0 (subnormals scaled first); log(0) = -inf,
 * log(+inf) = +inf, NaN for x < 0 or NaN */
TLM_HD tlm_dd tls_log_dd(double x) {
    if (!(x > 0.0) || x > 0x1.fffffffffffffp1023) {   /* outside the domain: no bit arithmetic */
        tlm_dd r;
        r.hi = x == 0.0 ? tlm_dfrom_bits((int64_t)0xfff0000000000000ULL)       /* -inf */
             : x > 0.0 ? x : tlm_dfrom_bits((int64_t)0x7ff8000000000000ULL);    /* +inf, NaN */
        r.lo = 0.0;
        return r;
    }
    int32_t sub = x < 0x1p-1022;
    tlm_dd u;
    u.hi = sub ? tlm_dmul(x, 0x1p64) : x;
    u.lo = 0.0;
    tlm_dd l = tlm_log_dd(u);
    tlm_dd c = tlm_two_sum(l.hi, sub ? -64.0 * TLM_LN2_DHI : 0.0);
    c.lo = tlm_dadd(c.lo, tlm_dadd(l.lo, sub ? -64.0 * TLM_LN2_DLO : 0.0));
    return tlm_fast_two_sum(c.hi, c.lo);
}
TLM_HD double tls_log(double x) { tlm_dd l = tls_log_dd(x); return tlm_dadd(l.hi, l.lo); }

/* sin(pi x) and cos(pi x) for a double x with |x| < 2^51 (exact reduction by whole numbers) */
TLM_HD void tls_sincospi(double x, double *s, double *c) {
    double n = tls_rint(x), f = tlm_dsub(x, n);                /* |f| <= 1/2, exact */
    double af = tls_fabs(f), far = af > 0.25 ? 1.0 : 0.0;
    double g = far ? tlm_dsub(0.5, af) : af;                    /* exact, <= 1/4 */
    double sg = tlm_dmul(g, 0.5), sn = tlm_sin_2pi_d(sg), cs = tlm_cos_2pi_d(sg);
    double sf = far ? cs : sn, cf = far ? sn : cs;              /* sin(pi af), cos(pi af) */
    double odd = tlm_dsub(n, tlm_dmul(2.0, tls_floor(tlm_dmul(n, 0.5)))) != 0.0 ? -1.0 : 1.0;
    *s = tlm_dmul(tlm_dmul(sf, f < 0.0 ? -1.0 : 1.0), odd);
    *c = tlm_dmul(cf, odd);
}

/* sin(x), cos(x) of a finite float x in double (tl_math_more.h's exact reduction) */
TLM_HD void tls_sincos(float x, double *s, double *c) {
    float ax = tlm_abs(x);
    int32_t small = ax < 0.78539816f;
    tlm_dd r, sn, cs;
    int32_t q = tlm_reduce_pi_2(tlm_sel(small, 1.0f, ax), &r);
    r.hi = tlm_dsel(small, (double)ax, r.hi);
    r.lo = tlm_dsel(small, 0.0, r.lo);
    q = small ? 0 : q;
    tlm_sincos_dd(r, &sn, &cs);
    double sv = tlm_dadd(sn.hi, sn.lo), cv = tlm_dadd(cs.hi, cs.lo);
    double s0 = (q & 1) ? cv : sv, c0 = (q & 1) ? sv : cv;
    s0 = (q & 2) ? -s0 : s0;
    c0 = ((q + 1) & 2) ? -c0 : c0;
    *s = x < 0.0f ? -s0 : s0;
    *c = c0;
}

/* ================================================================ the error function family */

/* erfc(x) e^(x^2) for x >= 1: the continued fraction
 * 1 / (sqrt(pi) (x + (1/2) / (x + (2/2) / (x + ...)))) evaluated from depth n (truncation error
 * below 1e-19 relative from 2.5 up at depth 50; tls_erfcx_nonneg's depths below) */
TLM_HD double tls_erfcx_cf_n(double x, int n) {
    double t = x;
    for (int k = n; k >= 1; k--) t = tlm_dadd(x, tlm_ddiv(0.5 * (double)k, t));
    return tlm_ddiv(TLS_INV_SQRT_PI, t);
}
/* erf(x) e^(x^2) sqrt(pi) / 2 = sum x^(2n+1) 2^n / (2n+1)!!, positive terms, for |x| < 2.5 */
TLM_HD double tls_erf_scaled_series(double x) {
    double x2 = tlm_dmul(2.0, tlm_dmul(x, x)), t = x, s = x;
    for (int n = 0; n < 60; n++) {
        t = tlm_ddiv(tlm_dmul(t, x2), (double)(2 * n + 3));
        s = tlm_dadd(s, t);
        if (tls_fabs(t) < tlm_dmul(tls_fabs(s), 0x1p-56)) break;
    }
    return s;
}
/* e^(-x^2) for a double x (x^2 split exactly) */
TLM_HD double tls_exp_negsq(double x) {
    tlm_dd q = tlm_two_prod(x, x);
    q.hi = -q.hi;
    q.lo = -q.lo;
    return tls_exp_dd(q);
}
/* erf(x) for a double x with |x| < 2.5 (the series, no cancellation) */
TLM_HD double tls_erf_small(double x) {
    return tlm_dmul(tlm_dmul(tls_erf_scaled_series(x), TLS_SQRT_PI_INV2), tls_exp_negsq(x));
}
/* (1 - erf(a)) e^(a^2) for 0 <= a < 2.5. 1 - erf(a) cancels: a relative error of about
 * 2^-53 erf(a) / erfc(a) (2^-50.6 at 1, 2^-45 at 2, 2^-42 at 2.5), so tls_erfcx_nonneg uses it
 * below 1 only; the first Newton steps of tls_erfc_inv_dd use it as a cheap start. */
TLM_HD double tls_erfcx_cancel(double a) {
    return tlm_ddiv(tlm_dsub(1.0, tls_erf_small(a)), tls_exp_negsq(a));
}
/* erfcx(x) = e^(x^2) erfc(x) for x >= 0 without the cancellation: the continued fraction from 1
 * up, its depth by range so that the truncation stays below 2^-60 relative (measured with mpmath
 * at 60 digits against erfc(x) e^(x^2); the truncation falls as x grows: depth 250 gives 2^-61.1
 * at 1, depth 120 2^-61.7 at 1.5, depth 50 2^-61.7 at 2.5); below 1 tls_erfcx_cancel (its loss
 * is at most 2^-50.6 relative there). */
TLM_HD double tls_erfcx_nonneg(double x) {
    if (x >= 2.5) return tls_erfcx_cf_n(x, 50);
    if (x >= 1.5) return tls_erfcx_cf_n(x, 120);
    if (x >= 1.0) return tls_erfcx_cf_n(x, 250);
    return tls_erfcx_cancel(x);
}
/* erfc(x) for a double x; erfc(-x) = 2 - erfc(x). From |x| = 1 up erfcx(|x|) e^(-x^2) (the
 * fraction: no cancellation); below 1, 1 - erf(|x|) (erf / erfc below 5.4 there). */
TLM_HD double tls_erfc(double x) {
    double a = tls_fabs(x), v;
    if (a >= 1.0) v = a > 27.3 ? 0.0 : tlm_dmul(tls_erfcx_nonneg(a), tls_exp_negsq(a));
    else v = tlm_dsub(1.0, tlm_dmul(tlm_dmul(tls_erf_scaled_series(a), TLS_SQRT_PI_INV2), tls_exp_negsq(a)));
    return x < 0.0 ? tlm_dsub(2.0, v) : v;
}
/* erfc(x / sqrt 2) for a double x, with x / sqrt 2 as hi + lo (two_prod with sqrt 1/2's two
 * parts) and erfc(hi + lo) = erfc(hi) - lo 2 / sqrt(pi) e^(-hi^2) to first order: rounding
 * x / sqrt 2 to a double alone costs 2 t^2 2^-53 relative at t = x / sqrt 2 (2^-48 at t = 3.7,
 * where log_ndtr missed a midpoint by that) */
TLM_HD double tls_erfc_sqrt1_2(double x) {
    tlm_dd t = tlm_two_prod(x, TLS_SQRT1_2);
    t.lo = tlm_dfma(x, -0x1.bdd3413b26456p-55, t.lo);         /* sqrt 1/2 - TLS_SQRT1_2 */
    double v = tls_erfc(t.hi);
    double c = tlm_dmul(tlm_dmul(t.lo, TLS_SQRT_PI_INV2), tls_exp_negsq(t.hi));
    return tls_fabs(x) <= 0x1p1000 ? tlm_dsub(v, c) : v;        /* +-inf: the split gives NaN */
}
/* erfcx(x) for x < 0 from v = erfcx(-x): 2 e^(x^2) - v (overflows float32 below about -9.4;
 * inf below -26.6, where e^(x^2) leaves tls_exp's range); v itself for x >= 0 */
TLM_HD double tls_erfcx_reflect(double x, double v) {
    if (x < 0.0) {
        tlm_dd q = tlm_two_prod(x, x);
        v = x < -26.6 ? tls_inf() : tlm_dsub(tlm_dmul(2.0, tls_exp_dd(q)), v);   /* x^2 < 708 */
    }
    return v;
}
/* erfcx(x) = e^(x^2) erfc(x) for a double x (tls_erfcx_nonneg of |x|, reflected below 0).
 * (Before, [1, 2.5) was tls_erfcx_cancel too: erfcx missed 9 midpoints of 2^32 there, log_ndtr
 * one, ndtri 11 through its last Newton step.) */
TLM_HD double tls_erfcx(double x) { return tls_erfcx_reflect(x, tls_erfcx_nonneg(tls_fabs(x))); }
/* the cheap erfcx for tls_erfc_inv_dd's first Newton steps: tls_erfcx_cancel below 2.5 */
TLM_HD double tls_erfcx_newton(double x) {
    double a = tls_fabs(x);
    return tls_erfcx_reflect(x, a >= 2.5 ? tls_erfcx_cf_n(a, 50) : tls_erfcx_cancel(a));
}
/* the x >= 0 with erfc(x) = s for 0 < s <= 1, as hi + lo: Newton on
 * log erfc(x) = log erfcx(x) - x^2 (no underflow), 5 steps from Abramowitz-Stegun 26.2.23 (error
 * below 4.5e-4 in the normal quantile, so 4 quadratic steps reach double precision). The result's
 * accuracy is that of the last step's residual, so the last step evaluates erfcx without
 * cancellation (tls_erfcx), forms log erfcx(x) - x^2 - log s from exact parts
 * (x^2 and log s as double-doubles, the sums by two_sum) and returns x + correction unrounded.
 * (With tls_erfcx's 1 - erf(x) there, x lost up to 2^-46 relative near 2.5: ndtri missed the
 * correctly rounded value by a whole ulp at 11 inputs p in [2^-13, 2^-9].) */
TLM_HD tlm_dd tls_erfc_inv_dd(double s) {
    double t = tlm_dmul(s, 0.5);                         /* upper tail of the standard normal */
    double w = tlm_dsqrt(tlm_dmul(-2.0, tls_log(t)));
    double num = tlm_dfma(tlm_dfma(0.010328, w, 0.802853), w, 2.515517);
    double den = tlm_dfma(tlm_dfma(tlm_dfma(0.001308, w, 0.189269), w, 1.432788), w, 1.0);
    double x = tlm_dmul(tlm_dsub(w, tlm_ddiv(num, den)), TLS_SQRT1_2);
    x = x < 0.0 ? 0.0 : x;
    tlm_dd ls = tls_log_dd(s);
    double lsd = tlm_dadd(ls.hi, ls.lo);
    for (int i = 0; i < 4; i++) {
        double e = tls_erfcx_newton(x);
        double f = tlm_dsub(tlm_dsub(tls_log(e), tlm_dmul(x, x)), lsd);
        x = tlm_dadd(x, tlm_dmul(f, tlm_dmul(e, 0.5 / TLS_INV_SQRT_PI)));   /* f / (2 / (sqrt(pi) e)) */
    }
    double e = tls_erfcx(x);
    tlm_dd q = tlm_two_prod(x, x);
    tlm_dd a = tlm_two_sum(tls_log(e), -q.hi);
    tlm_dd b = tlm_two_sum(a.hi, -ls.hi);
    double f = tlm_dadd(b.hi, tlm_dsub(tlm_dsub(tlm_dadd(a.lo, b.lo), q.lo), ls.lo));
    return tlm_fast_two_sum(x, tlm_dmul(f, tlm_dmul(e, 0.5 / TLS_INV_SQRT_PI)));
}
TLM_HD double tls_erfc_inv(double s) { tlm_dd r = tls_erfc_inv_dd(s); return tlm_dadd(r.hi, r.lo); }
/* erfinv(y) for |y| < 1: Newton on erf (the series) for |y| <= 1/2, else erfc's inverse at 1 - |y| */
TLM_HD double tls_erfinv(double y) {
    double a = tls_fabs(y), x;
    if (a <= 0.5) {
        x = tlm_dmul(a, tlm_dfma(tlm_dmul(a, a), 0.2617993877991494, 0.886226925452758));
        for (int i = 0; i < 4; i++)
            x = tlm_dsub(x, tlm_ddiv(tlm_dsub(tls_erf_small(x), a), tlm_dmul(TLS_SQRT_PI_INV2, tls_exp_negsq(x))));
    } else {
        x = tls_erfc_inv(tlm_dsub(1.0, a));
    }
    return y < 0.0 ? -x : x;
}

/* ================================================================ lgamma, digamma, zeta */

/* lgamma(1 + z) = -gamma z + sum_k>=2 (-1)^k zeta(k) / k z^k, |z| <= 1/4 (28 terms) */
TLM_HD double tls_lgamma1p_series(double z) {
    const double C[28] = {
        -0x1.2788cfc6fb619p-1, 0x1.a51a6625307d3p-1, -0x1.9a4d55beab2d7p-2,
        0x1.151322ac7d848p-2, -0x1.a8b9c17aa6149p-3, 0x1.5b40cb100c306p-3,
        -0x1.2703a1dcea3aep-3, 0x1.010b36af86397p-3, -0x1.c806706d57db4p-4,
        0x1.9a01e385d5f8fp-4, -0x1.748c33114c6d6p-4, 0x1.556ad63243bc4p-4,
        -0x1.3b1d971fc5985p-4, 0x1.2496df8320c5fp-4, -0x1.11133476e7fe0p-4,
        0x1.00010064cdeb2p-4, -0x1.e1e2d311e8abdp-5, 0x1.c71ce3a20b419p-5,
        -0x1.af28a1b5688a0p-5, 0x1.9999b3352d5bap-5, -0x1.86186db77bfbfp-5,
        0x1.745d1d1778df9p-5, -0x1.642c88591b66dp-5, 0x1.555556aaafdcdp-5,
        -0x1.47ae151eb9fb7p-5, 0x1.3b13b189d925ep-5, -0x1.2f684c00002bcp-5,
        0x1.24924936db7bcp-5,
    };
    double p = C[27];
    for (int k = 26; k >= 0; k--) p = tlm_dfma(p, z, C[k]);
    return tlm_dmul(p, z);
}
/* lgamma(2 + z) = (1 - gamma) z + sum_k>=2 (-1)^k (zeta(k) - 1) / k z^k, |z| <= 3/4 (42 terms) */
TLM_HD double tls_lgamma2p_series(double z) {
    const double C[42] = {
        0x1.b0ee6072093cep-2, 0x1.4a34cc4a60fa6p-2, -0x1.13e001a557607p-4,
        0x1.51322ac7d8483p-6, -0x1.e404fc218f5f2p-8, 0x1.7add6eadb6c30p-9,
        -0x1.38ac5c2bf8e08p-10, 0x1.0b36af86396e9p-11, -0x1.d3fd4c76d2fc8p-13,
        0x1.a127b0f17d65ap-14, -0x1.78de5bd7c81efp-15, 0x1.580dcee66eb02p-16,
        -0x1.3cbc963ce2243p-17, 0x1.2597a39f34aacp-18, -0x1.11b2eb7679541p-19,
        0x1.0064cdeb22f0fp-20, -0x1.e2600d93cfd2fp-22, 0x1.c76bbb3f07a4dp-23,
        -0x1.af5a6cbbf8a97p-24, 0x1.99b93c2070b0fp-25, -0x1.862c734df3eacp-26,
        0x1.7469daccfadcdp-27, -0x1.6434a8447aeadp-28, 0x1.555a877ffd2c3p-29,
        -0x1.47b1679258d0ep-30, 0x1.3b15d2b2fc10cp-31, -0x1.2f69a9fabe3e0p-32,
        0x1.24932a337434cp-33, -0x1.1a7c26ec2523cp-34, 0x1.11116e693ed98p-35,
        -0x1.08424cbc543d8p-36, 0x1.000026e3f644fp-37, -0x1.f07c514fc9f0ap-39,
        0x1.e1e2026aafcd8p-40, -0x1.d41d56e5ee2e2p-41, 0x1.c71c7f6f10e37p-42,
        -0x1.bacf9a27bc89bp-43, 0x1.af28718a10d6ep-44, -0x1.a41a45603e5b6p-45,
        0x1.99999c0716ee9p-46, -0x1.8f9c1a8df9d78p-47, 0x1.8618628d28905p-48,
    };
    double p = C[41];
    for (int k = 40; k >= 0; k--) p = tlm_dfma(p, z, C[k]);
    return tlm_dmul(p, z);
}
/* lgamma(y) for y > 0 finite, as a double */
TLM_HD double tls_lgamma_pos(double y) {
    if (y <= 0.25) return tlm_dsub(tls_lgamma1p_series(y), tls_log(y));
    if (y < 0.75) return tlm_dsub(tls_lgamma2p_series(tlm_dsub(y, 1.0)), tls_log(y));
    if (y <= 1.25) return tls_lgamma1p_series(tlm_dsub(y, 1.0));
    if (y <= 2.75) return tls_lgamma2p_series(tlm_dsub(y, 2.0));
    if (y < 12.0) {
        double p = 1.0, z = y;
        while (z > 2.75) { z = tlm_dsub(z, 1.0); p = tlm_dmul(p, z); }
        return tlm_dadd(tls_lgamma2p_series(tlm_dsub(z, 2.0)), tls_log(p));
    }
    /* Stirling: (y - 1/2) log y - y + log(2 pi) / 2 + sum B2k / (2k (2k - 1) y^(2k - 1)) */
    tlm_dd l = tls_log_dd(y);
    tlm_dd m = tlm_two_prod(tlm_dsub(y, 0.5), l.hi);
    m.lo = tlm_dfma(tlm_dsub(y, 0.5), l.lo, m.lo);
    double r = tlm_ddiv(1.0, y), r2 = tlm_dmul(r, r);
    double s = -0x1.e4286cb0f5398p-6;                      /* B16 / (16 15) ... B2 / (2 1) */
    s = tlm_dfma(s, r2, 0x1.a41a41a41a41ap-8);
    s = tlm_dfma(s, r2, -0x1.f6ab0d9993c7dp-10);
    s = tlm_dfma(s, r2, 0x1.b951e2b18ff23p-11);
    s = tlm_dfma(s, r2, -0x1.3813813813814p-11);
    s = tlm_dfma(s, r2, 0x1.a01a01a01a01ap-11);
    s = tlm_dfma(s, r2, -0x1.6c16c16c16c17p-9);
    s = tlm_dfma(s, r2, 0x1.5555555555555p-4);
    tlm_dd a = tlm_two_sum(m.hi, -y);
    return tlm_dadd(a.hi, tlm_dadd(tlm_dadd(a.lo, m.lo), tlm_dfma(s, r, TLS_LOG_2PI_2)));
}
/* lgamma(x) = log |Gamma(x)| for a float x: +inf at 0, the negative integers and +-inf;
 * reflection log(pi / |sin(pi x)|) - lgamma(1 - x) below 0. Every float32 of magnitude 2^23 or
 * more is an integer, so all x <= -2^23 are poles (tested first: tls_floor needs |x| < 2^51; at
 * x = -2^106 it returned x + 2^53, and the reflection gave a finite value). */
TLM_HD float tls_lgammaf(float x) {
    double xd = (double)x;
    float ax = tlm_abs(x);
    if (!(ax <= TLM_FLT_MAX)) return ax;                 /* NaN, +-inf -> +inf */
    if (x > 0.0f) {
        float y = tlm_d2f(tlm_dadd(tls_lgamma_pos(xd), 0.0));   /* lgamma(1) = +0 */
        /* the one input of 2^32 where that double lands on the wrong side of a rounding
         * midpoint (tests/native/check_special.c, all inputs; mpmath at 50 digits) */
        return tlm_fix(x, 0x3b7c53aa, 0x40b1d661, y);
    }
    if (x <= -8388608.0f || tls_floor(xd) == xd) return TLM_INFF;   /* 0, -0, negative integers */
    double s, c;
    tls_sincospi(xd, &s, &c);
    double v = tlm_dsub(tlm_dsub(TLS_LOG_PI, tls_log(tls_fabs(s))), tls_lgamma_pos(tlm_dsub(1.0, xd)));
    return tlm_d2f(v);
}

/* digamma(y) for y > 0 finite: Taylor series at the positive root 1.4616... for
 * |y - root| < 1/4, else the recurrence up to 12 and the asymptotic series */
TLM_HD double tls_digamma_pos(double y) {
    const double R_HI = 0x1.762d86356be3fp+0, R_LO = 0x1.b86a722197829p-54;
    double z0 = tlm_dsub(y, R_HI);
    if (tls_fabs(z0) < 0.25) {
        const double C[24] = {
        0x1.ef72bc8ee38acp-1, -0x1.c563b54aa1a35p-2, 0x1.08b4294d50381p-2,
        -0x1.4fc1317257da8p-3, 0x1.b9a5b6370f3abp-4, -0x1.27baba261cc2cp-4,
        0x1.8fce02b239ca7p-5, -0x1.0fa7ec36a7d8fp-5, 0x1.723d6807edcc0p-6,
        -0x1.f970508e1b6a2p-7, 0x1.5955caaa962f3p-7, -0x1.d828079282eb8p-8,
        0x1.42e1acf81d8dcp-8, -0x1.b9afc7cee8a14p-9, 0x1.2e23345f79aafp-9,
        -0x1.9d626f71d1f7ap-10, 0x1.1acebbd761089p-10, -0x1.82f6345c65b35p-11,
        0x1.08bdae1a261d4p-11, -0x1.6a3fddea11304p-12, 0x1.efacab6fb8985p-13,
        -0x1.531f5dc5eb563p-13, 0x1.d0080f810fab5p-14, -0x1.3d7972688af67p-14,
        };
        double z = tlm_dsub(z0, R_LO);
        double p = C[23];
        for (int k = 22; k >= 0; k--) p = tlm_dfma(p, z, C[k]);
        return tlm_dmul(p, z);
    }
    double acc = 0.0, w = y;
    while (w < 12.0) { acc = tlm_dadd(acc, tlm_ddiv(1.0, w)); w = tlm_dadd(w, 1.0); }
    double r = tlm_ddiv(1.0, w), r2 = tlm_dmul(r, r);
    double s = 0x1.c5e5e5e5e5e5ep-2;                      /* -B16 / 16 ... -B2 / 2 */
    s = tlm_dfma(s, r2, -0x1.5555555555555p-4);
    s = tlm_dfma(s, r2, 0x1.5995995995996p-6);
    s = tlm_dfma(s, r2, -0x1.f07c1f07c1f08p-8);
    s = tlm_dfma(s, r2, 0x1.1111111111111p-8);
    s = tlm_dfma(s, r2, -0x1.0410410410410p-8);
    s = tlm_dfma(s, r2, 0x1.1111111111111p-7);
    s = tlm_dfma(s, r2, -0x1.5555555555555p-4);
    double v = tlm_dfma(s, r2, tlm_dmul(-0.5, r));
    return tlm_dsub(tlm_dadd(tls_log(w), v), acc);
}
/* digamma of a float x: -inf at +0, +inf at -0 (PyTorch), NaN at the negative integers and -inf;
 * reflection digamma(1 - x) - pi cos(pi x) / sin(pi x) below 0. All x <= -2^23 (-inf included)
 * are poles, tested before tls_floor (which needs |x| < 2^51), as in tls_lgammaf. */
TLM_HD float tls_digammaf(float x) {
    double xd = (double)x;
    if (x != x) return x;
    if (x == 0.0f) return tlm_copysign(TLM_INFF, -x);
    if (x == TLM_INFF) return x;
    float y;
    if (x > 0.0f) y = tlm_d2f(tls_digamma_pos(xd));
    else if (x <= -8388608.0f || tls_floor(xd) == xd) return TLM_NANF;
    else {
        double s, c;
        tls_sincospi(xd, &s, &c);
        y = tlm_d2f(tlm_dsub(tls_digamma_pos(tlm_dsub(1.0, xd)), tlm_ddiv(tlm_dmul(TLS_PI, c), s)));
    }
    /* the 6 inputs of 2^32 where the double value lands on the wrong side of a rounding
     * midpoint, by 3e-9 ulp or less (tests/native/check_special.c, all inputs; mpmath at 50
     * digits): their correctly rounded values. Above 2^53 digamma(x) is log(x) - 1/(2x), so
     * its hard cases are log's (tl_math_transcendental.h lists the same two inputs). */
    y = tlm_fix(x, (int32_t)0xa7de86a9u, 0x57134133, y);   /* -0x1.bd0d52p-48 */
    y = tlm_fix(x, (int32_t)0xa7e05475u, 0x57121211, y);   /* -0x1.c0a8eap-48 */
    y = tlm_fix(x, 0x37d4fffc, (int32_t)0xc719d7bau, y);   /* 0x1.a9fff8p-16 */
    y = tlm_fix(x, (int32_t)0xc5a60943u, 0x416641af, y);   /* -0x1.4c1286p+12 */
    y = tlm_fix(x, 0x65d890d3, 0x4254d1f9, y);             /* 0x1.b121a6p+76 */
    return tlm_fix(x, 0x6f31a8ec, 0x42845a89, y);          /* 0x1.6351d8p+95 */
}

/* |a|^-s with the sign of a^-s for an integer s when a < 0 */
TLM_HD double tls_pow_neg(double a, double s) {
    tlm_dd l = tls_log_dd(tls_fabs(a));
    tlm_dd e = tlm_two_prod(-s, l.hi);
    e.lo = tlm_dfma(-s, l.lo, e.lo);
    double v = tls_exp_dd(e);
    double odd = tlm_dsub(s, tlm_dmul(2.0, tls_floor(tlm_dmul(s, 0.5)))) != 0.0;
    return (a < 0.0 && odd) ? -v : v;
}
/* Hurwitz zeta(s, q) = sum_k (k + q)^-s (Cephes' algorithm, as PyTorch's): 9 or more terms
 * directly (until k + q > 9), then Euler-Maclaurin with up to 12 Bernoulli terms. s = 1: inf;
 * s < 1: NaN; q a non-positive integer: inf; q < 0 with s not an integer: NaN. */
TLM_HD double tls_zeta(double s, double q) {
    const double A[12] = {12.0, -720.0, 30240.0, -1209600.0, 47900160.0, -1.8924375803183791606e9,
                          7.47242496e10, -2.950130727918164224e12, 1.1646782814350067249e14,
                          -4.5979787224074726105e15, 1.8152105401943546773e17, -7.1661652561756670113e18};
    if (s != s || q != q) return s + q;
    if (s == 1.0) return tls_inf();
    if (s < 1.0) return tls_nan();
    if (q <= 0.0) {
        if (tls_fabs(q) >= 0x1p51 || q == tls_floor(q)) return tls_inf();
        if (s != tls_floor(s) || tls_fabs(s) >= 0x1p51) return tls_nan();
    }
    if (s == tls_inf()) return q > 1.0 ? 0.0 : (q == 1.0 ? 1.0 : tls_inf());
    if (q == tls_inf()) return 0.0;
    if (q > 1e8) {
        double w = tlm_dadd(tlm_ddiv(1.0, tlm_dsub(s, 1.0)), tlm_ddiv(0.5, q));
        return tlm_dmul(w, tls_pow_neg(q, tlm_dsub(s, 1.0)));
    }
    double sum = tls_pow_neg(q, s), a = q, b = 0.0;
    int i = 0;
    while (i < 9 || a <= 9.0) {
        i++;
        a = tlm_dadd(a, 1.0);
        b = tls_pow_neg(a, s);
        sum = tlm_dadd(sum, b);
        if (tls_fabs(tlm_ddiv(b, sum)) < 0x1p-53) return sum;
    }
    double w = a;
    sum = tlm_dadd(sum, tlm_ddiv(tlm_dmul(b, w), tlm_dsub(s, 1.0)));
    sum = tlm_dsub(sum, tlm_dmul(0.5, b));
    double f = 1.0, k = 0.0;
    for (int j = 0; j < 12; j++) {
        f = tlm_dmul(f, tlm_dadd(s, k));
        b = tlm_ddiv(b, w);
        double t = tlm_ddiv(tlm_dmul(f, b), A[j]);
        sum = tlm_dadd(sum, t);
        if (tls_fabs(tlm_ddiv(t, sum)) < 0x1p-53) break;
        k = tlm_dadd(k, 1.0);
        f = tlm_dmul(f, tlm_dadd(s, k));
        b = tlm_ddiv(b, w);
        k = tlm_dadd(k, 1.0);
    }
    return sum;
}
/* polygamma(n, x) = (-1)^(n+1) n! zeta(n + 1, x) for n >= 1; digamma for n = 0 */
TLM_HD float tls_polygammaf(float n, float x) {
    if (n == 0.0f) return tls_digammaf(x);
    if (x != x || n != n) return TLM_NANF;
    double f = 1.0;
    for (int k = 2; k <= (int)n && k < 200; k++) f = tlm_dmul(f, (double)k);
    double z = tls_zeta(tlm_dadd((double)n, 1.0), (double)x);
    double sg = ((int)n & 1) ? 1.0 : -1.0;
    return tlm_d2f(tlm_dmul(tlm_dmul(sg, f), z));
}

#endif /* TL_MATH_SPECIAL_H */
