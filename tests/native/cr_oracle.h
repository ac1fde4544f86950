/* cr_oracle.h: the correctly rounded float32 value of each function in tl_math.h's rule 2, from
 * an independent oracle, and a checker that compares tl_math.h with it over a range of inputs.
 *
 * Oracle: glibc's double-precision function (a composition for sigmoid and softplus, within a
 * few double ulps), rounded to float32, unless that double lies within 2^-44 (relative) of a
 * float32 rounding midpoint; then the same function in quad precision (libquadmath, about
 * 2^-110), which must be clear of the midpoint by 2^-100 or the input is reported unresolved.
 * Shared by the exhaustive check (check_math.c, `make check-math`) and the CI shim
 * (tl_math_shim.c). Needs -lquadmath. */
#ifndef CR_ORACLE_H
#define CR_ORACLE_H

#include <math.h>
#include <quadmath.h>
#include <stdint.h>
#include <string.h>
#include "tl_math_more.h"

/* the functions, in this order */
enum { TLM_F_EXP, TLM_F_EXPM1, TLM_F_LOG, TLM_F_LOG1P, TLM_F_TANH, TLM_F_SIGMOID, TLM_F_SOFTPLUS,
       TLM_F_ERF, TLM_F_SIN_2PI, TLM_F_COS_2PI, TLM_F_LOG2, TLM_F_LOG10, TLM_F_EXP2, TLM_F_SINH,
       TLM_F_COSH, TLM_F_ASINH, TLM_F_ACOSH, TLM_F_ATANH, TLM_F_ATAN, TLM_F_ASIN, TLM_F_ACOS, TLM_F_SIN, TLM_F_COS, TLM_F_TAN };
static const char *const CR_NAMES[] = {"exp", "expm1", "log", "log1p", "tanh", "sigmoid",
                                       "softplus", "erf", "sin_2pi", "cos_2pi", "log2", "log10",
                                       "exp2", "sinh", "cosh", "asinh", "acosh", "atanh", "atan",
                                       "asin", "acos", "sin", "cos", "tan"};
#define CR_COUNT 24

static inline float cr_ours(int fn, float x) {
    switch (fn) {
    case TLM_F_EXP: return tlm_exp(x);
    case TLM_F_EXPM1: return tlm_expm1(x);
    case TLM_F_LOG: return tlm_log(x);
    case TLM_F_LOG1P: return tlm_log1p(x);
    case TLM_F_TANH: return tlm_tanh(x);
    case TLM_F_SIGMOID: return tlm_sigmoid(x);
    case TLM_F_SOFTPLUS: return tlm_softplus(x);
    case TLM_F_ERF: return tlm_erf(x);
    case TLM_F_SIN_2PI: return tlm_sin_2pi(x);
    case TLM_F_LOG2: return tlm_log2(x);
    case TLM_F_LOG10: return tlm_log10(x);
    case TLM_F_EXP2: return tlm_exp2(x);
    case TLM_F_SINH: return tlm_sinh(x);
    case TLM_F_COSH: return tlm_cosh(x);
    case TLM_F_ASINH: return tlm_asinh(x);
    case TLM_F_ACOSH: return tlm_acosh(x);
    case TLM_F_ATANH: return tlm_atanh(x);
    case TLM_F_ATAN: return tlm_atan(x);
    case TLM_F_ASIN: return tlm_asin(x);
    case TLM_F_ACOS: return tlm_acos(x);
    case TLM_F_SIN: return tlm_sin(x);
    case TLM_F_COS: return tlm_cos(x);
    case TLM_F_TAN: return tlm_tan(x);
    default: return tlm_cos_2pi(x);
    }
}

/* ours over a block: one switch, then a plain loop the compiler may vectorise */
#define CR_BLOCK_CASE(F, FN) case F: for (int64_t i = 0; i < n; i++) y[i] = FN(x[i]); break;
static void cr_ours_block(int fn, const float *x, float *y, int64_t n) {
    switch (fn) {
    CR_BLOCK_CASE(TLM_F_EXP, tlm_exp)
    CR_BLOCK_CASE(TLM_F_EXPM1, tlm_expm1)
    CR_BLOCK_CASE(TLM_F_LOG, tlm_log)
    CR_BLOCK_CASE(TLM_F_LOG1P, tlm_log1p)
    CR_BLOCK_CASE(TLM_F_TANH, tlm_tanh)
    CR_BLOCK_CASE(TLM_F_SIGMOID, tlm_sigmoid)
    CR_BLOCK_CASE(TLM_F_SOFTPLUS, tlm_softplus)
    CR_BLOCK_CASE(TLM_F_ERF, tlm_erf)
    CR_BLOCK_CASE(TLM_F_SIN_2PI, tlm_sin_2pi)
    CR_BLOCK_CASE(TLM_F_LOG2, tlm_log2)
    CR_BLOCK_CASE(TLM_F_LOG10, tlm_log10)
    CR_BLOCK_CASE(TLM_F_EXP2, tlm_exp2)
    CR_BLOCK_CASE(TLM_F_SINH, tlm_sinh)
    CR_BLOCK_CASE(TLM_F_COSH, tlm_cosh)
    CR_BLOCK_CASE(TLM_F_ASINH, tlm_asinh)
    CR_BLOCK_CASE(TLM_F_ACOSH, tlm_acosh)
    CR_BLOCK_CASE(TLM_F_ATANH, tlm_atanh)
    CR_BLOCK_CASE(TLM_F_ATAN, tlm_atan)
    CR_BLOCK_CASE(TLM_F_ASIN, tlm_asin)
    CR_BLOCK_CASE(TLM_F_ACOS, tlm_acos)
    CR_BLOCK_CASE(TLM_F_SIN, tlm_sin)
    CR_BLOCK_CASE(TLM_F_COS, tlm_cos)
    CR_BLOCK_CASE(TLM_F_TAN, tlm_tan)
    default: for (int64_t i = 0; i < n; i++) y[i] = tlm_cos_2pi(x[i]);
    }
}

/* u - rint(u) folded to [0, 1/2] exactly in double; *neg: sin's sign flip */
static double cr_fold(double u, int *neg) {
    double r = u - rint(u);
    *neg = r < 0;
    return fabs(r);
}

static double cr_ref_double(int fn, double x) {
    int neg;
    double t;
    const double tau = 6.283185307179586476925;
    switch (fn) {
    case TLM_F_EXP: return exp(x);
    case TLM_F_EXPM1: return expm1(x);
    case TLM_F_LOG: return log(x);
    case TLM_F_LOG1P: return log1p(x);
    case TLM_F_TANH: return tanh(x);
    case TLM_F_SIGMOID: t = exp(-fabs(x)); return (x >= 0 ? 1.0 : t) / (1.0 + t);
    case TLM_F_SOFTPLUS: return (x > 0 ? x : 0.0) + log1p(exp(-fabs(x)));
    case TLM_F_ERF: return erf(x);
    case TLM_F_LOG2: return log2(x);
    case TLM_F_LOG10: return log10(x);
    case TLM_F_EXP2: return exp2(x);
    case TLM_F_SINH: return sinh(x);
    case TLM_F_COSH: return cosh(x);
    case TLM_F_ASINH: return asinh(x);
    case TLM_F_ACOSH: return acosh(x);
    case TLM_F_ATANH: return atanh(x);
    case TLM_F_ATAN: return atan(x);
    case TLM_F_ASIN: return asin(x);
    case TLM_F_ACOS: return acos(x);
    case TLM_F_SIN: return sin(x);
    case TLM_F_COS: return cos(x);
    case TLM_F_TAN: return tan(x);
    case TLM_F_SIN_2PI:
        if (!isfinite(x)) return NAN;
        t = cr_fold(x, &neg);
        if (t <= 0.125) t = sin(tau * t);
        else if (t <= 0.375) t = cos(tau * (t - 0.25));
        else t = -sin(tau * (t - 0.5));
        return neg ? -t : t;
    default:
        if (!isfinite(x)) return NAN;
        t = cr_fold(x, &neg);
        if (t <= 0.125) return cos(tau * t);
        if (t <= 0.375) return -sin(tau * (t - 0.25));
        return -cos(tau * (t - 0.5));
    }
}

static __float128 cr_ref_quad(int fn, double xd) {
    __float128 x = xd;
    int neg;
    double t;
    const __float128 tau = 2 * M_PIq;
    switch (fn) {
    case TLM_F_EXP: return expq(x);
    case TLM_F_EXPM1: return expm1q(x);
    case TLM_F_LOG: return logq(x);
    case TLM_F_LOG1P: return log1pq(x);
    case TLM_F_TANH: return tanhq(x);
    case TLM_F_SIGMOID: return x >= 0 ? 1 / (1 + expq(-x)) : expq(x) / (1 + expq(x));
    case TLM_F_SOFTPLUS: return (x > 0 ? x : 0) + log1pq(expq(-fabsq(x)));
    case TLM_F_ERF: return erfq(x);
    case TLM_F_LOG2: return log2q(x);
    case TLM_F_LOG10: return log10q(x);
    case TLM_F_EXP2: return exp2q(x);
    case TLM_F_SINH: return sinhq(x);
    case TLM_F_COSH: return coshq(x);
    case TLM_F_ASINH: return asinhq(x);
    case TLM_F_ACOSH: return acoshq(x);
    case TLM_F_ATANH: return atanhq(x);
    case TLM_F_ATAN: return atanq(x);
    case TLM_F_ASIN: return asinq(x);
    case TLM_F_ACOS: return acosq(x);
    case TLM_F_SIN: return sinq(x);
    case TLM_F_COS: return cosq(x);
    case TLM_F_TAN: return tanq(x);
    case TLM_F_SIN_2PI:
        t = cr_fold(xd, &neg);
        return (neg ? -1 : 1) * sinq(tau * (__float128)t);
    default:
        t = cr_fold(xd, &neg);
        return cosq(tau * (__float128)t);
    }
}

/* distance from v to the nearest float32 rounding midpoint (the overflow threshold included) */
static double cr_mid_dist(double v) {
    float f = (float)v;
    if (isinf(f)) return fabs(fabs(v) - 0x1.ffffffp127);
    double up = (double)nextafterf(f, INFINITY), dn = (double)nextafterf(f, -INFINITY);
    double a = fabs(v - ((double)f + up) / 2), b = fabs(v - ((double)f + dn) / 2);
    return a < b ? a : b;
}
static __float128 cr_mid_dist_q(__float128 v) {
    float f = (float)v;
    if (isinf(f)) return fabsq(fabsq(v) - 0x1.ffffffp127Q);
    __float128 up = nextafterf(f, INFINITY), dn = nextafterf(f, -INFINITY);
    __float128 a = fabsq(v - ((__float128)f + up) / 2), b = fabsq(v - ((__float128)f + dn) / 2);
    return a < b ? a : b;
}

/* The correctly rounded value of fn at x; *hard = 1 when quad precision was needed, 3 when the
 * true value is within 2^-48 (relative) of a midpoint (a hard case worth keeping for CI), 2 when
 * even quad sat within 2^-100 of one (unresolved). */
static float cr_oracle(int fn, float x, int *hard) {
    *hard = 0;
    double v = cr_ref_double(fn, (double)x);
    if (!isfinite(v) || v == 0.0 || cr_mid_dist(v) > 0x1p-44 * fabs(v)) return (float)v;
    *hard = 1;
    __float128 q = cr_ref_quad(fn, (double)x), d = cr_mid_dist_q(q);
    if (d <= 0x1p-48Q * fabsq(q)) *hard = 3;
    if (d <= 0x1p-100Q * fabsq(q)) *hard = 2;
    return (float)q;
}

/* 1 when the double v (relative error far below 2^-44) certainly rounds to the float y: v lies
 * inside y's rounding interval by more than 2^-44 |v|. A cheap first test; 0 sends the input on
 * to cr_oracle. */
static int cr_surely_rounds_to(double v, float y) {
    if (!(y == y) || y == 0.0f || isinf(y) || !isfinite(v) || (v < 0) != (y < 0)) return 0;
    double av = fabs(v), a = fabs((double)y);
    uint32_t b = (uint32_t)tlm_to_bits(y) & 0x7fffffffu;
    float fu, fd;
    uint32_t bu = b + 1, bd = b - 1;
    memcpy(&fu, &bu, sizeof fu);
    memcpy(&fd, &bd, sizeof fd);
    double up = isinf(fu) ? 0x1p128 : (double)fu;   /* beyond FLT_MAX: the overflow threshold */
    double m = 0x1p-44 * av;
    return av > (a + (double)fd) / 2 + m && av < (a + up) / 2 - m;
}

/* equal bits, or both NaN, or (sin/cos only) zeros of either sign: their sign is a convention */
static int cr_same(int fn, float got, float want) {
    if (want != want) return got != got;
    if (want == 0.0f && (fn == TLM_F_SIN_2PI || fn == TLM_F_COS_2PI)) return got == 0.0f;
    return tlm_to_bits(got) == tlm_to_bits(want);
}

typedef struct cr_stats {
    int64_t checked, mismatches, quad, unresolved, nhard;
    uint32_t bad[64];      /* up to 64 mismatching inputs */
    int nbad;
    uint32_t hard[4096];   /* up to 4096 inputs within 2^-48 of a midpoint */
} cr_stats;

/* Compare tl_math with the oracle on every stride-th bit pattern of [lo, hi] (inclusive). */
static void cr_check_range(int fn, uint32_t lo, uint32_t hi, uint32_t stride, cr_stats *st) {
    const int64_t B = 4096;
    int64_t steps = ((int64_t)hi - lo) / stride + 1;
    int64_t nblocks = (steps + B - 1) / B;
    memset(st, 0, sizeof *st);
#pragma omp parallel
    {
        float x[4096], y[4096];
        int64_t mis = 0, quad = 0, unres = 0;
#pragma omp for schedule(dynamic, 16)
        for (int64_t blk = 0; blk < nblocks; blk++) {
            int64_t s0 = blk * B, n = steps - s0 < B ? steps - s0 : B;
            for (int64_t i = 0; i < n; i++) {
                uint32_t b = lo + (uint32_t)((s0 + i) * stride);
                memcpy(&x[i], &b, sizeof b);
            }
            cr_ours_block(fn, x, y, n);
            for (int64_t i = 0; i < n; i++) {
                int hard = 0;
                if (cr_surely_rounds_to(cr_ref_double(fn, (double)x[i]), y[i])) continue;
                float want = cr_oracle(fn, x[i], &hard);
                quad += hard >= 1;
                unres += hard == 2;
                if (hard == 3) {
#pragma omp critical
                    { if (st->nhard < 4096) st->hard[st->nhard] = (uint32_t)tlm_to_bits(x[i]); st->nhard++; }
                }
                if (!cr_same(fn, y[i], want)) {
                    mis++;
#pragma omp critical
                    if (st->nbad < 64) st->bad[st->nbad++] = (uint32_t)tlm_to_bits(x[i]);
                }
            }
        }
#pragma omp critical
        { st->mismatches += mis; st->quad += quad; st->unresolved += unres; }
    }
    st->checked = steps;
}

#endif /* CR_ORACLE_H */
