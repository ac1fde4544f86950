/* cr_special_oracle.h: independent values of PyTorch's special functions for the exhaustive
 * check of formulas/pointwise_math.h's float32 results (tests/native/check_special.c).
 *
 * Each function has two references, each a value with an absolute error bound: a fast one in
 * double (glibc's erfc, lgamma, j0, j1, y0, y1, or a plain series / asymptotic sum written
 * here), and a slow one in quad precision (libquadmath's erfcq, lgammaq, j0q ..., or the same
 * sums in __float128). None shares code or constants with tl_math_special.h / tl_math_bessel.h.
 * Error bounds are generous (2^-44 .. 2^-46 relative in double, 2^-100 in quad); for J and Y
 * they are relative to the envelope max(|v|, sqrt(2 / (pi x))) above x = 2, where no absolute
 * accuracy holds near the zeros for any evaluation. The inverse functions (erfinv, ndtri) are
 * checked through their forward functions (erf / erfc, ndtr) at the rounding midpoints. */
#ifndef CR_SPECIAL_ORACLE_H
#define CR_SPECIAL_ORACLE_H

#include <math.h>
#include <quadmath.h>
#include <stdint.h>
#include <string.h>

typedef __float128 quad;
typedef struct { double v, e; } cr_d;   /* value, absolute error bound (e = 0: exact) */
typedef struct { quad v, e, lo; } cr_q;   /* value v + lo (lo: a rounding error kept) */

static cr_d crd(double v, double rel) { cr_d r = {v, fabs(v) * rel}; return r; }
static cr_d crd_exact(double v) { cr_d r = {v, 0.0}; return r; }
static cr_q crq(quad v, quad rel) { cr_q r = {v, fabsq(v) * rel, 0}; return r; }
static cr_q crq_exact(quad v) { cr_q r = {v, 0, 0}; return r; }

#define R48 0x1p-46
#define Q100 0x1p-100Q

/* ---- erfc, erfcx, ndtr, log_ndtr ---- */
static cr_d d_erfc(double x) { return crd(erfc(x), R48); }
static cr_q q_erfc(double x) { return crq(erfcq(x), Q100); }

static double d_erfcx_asym(double x) {          /* x >= 26: 10 terms of the asymptotic sum */
    double s = 1.0, t = 1.0, z = 2.0 * x * x;
    for (int k = 1; k < 10; k++) { t *= -(2.0 * k - 1) / z; s += t; }
    return s / (x * 1.7724538509055160273);
}
static cr_d d_erfcx(double x) {
    if (x < -9.5) return crd_exact(INFINITY);               /* 2 e^(x^2) > 2^128 */
    if (x < 26.0) return crd(exp(x * x) * erfc(x), R48);   /* x^2 exact; inf below -26.6 */
    return crd(d_erfcx_asym(x), R48);
}
static cr_q q_erfcx(double x) {
    quad xq = x;
    if (x < -100.0) return crq_exact(INFINITY);             /* float32 inf from -9.4 */
    if (x <= 100.0) return crq(expq(xq * xq) * erfcq(xq), Q100);
    quad s = 1, t = 1, z = 2 * xq * xq;
    for (int k = 1; k < 20; k++) { t *= -(2 * k - 1) / z; s += t; }
    return crq(s / (xq * sqrtq(M_PIq)), Q100);
}

/* ndtr = erfc(-x / sqrt 2) / 2: the rounded argument costs (2 t^2 + 2) 2^-52 relative */
static cr_d d_ndtr(double x) {
    if (x < -14.5) return crd_exact(0.0);                   /* below 2^-150: rounds to +0 */
    double t = -x * 0.70710678118654752440, v = 0.5 * erfc(t);
    return crd(v, R48 + (t > 0 ? 2 * t * t + 2 : 2) * 0x1p-52);   /* erfc(t <= 0): insensitive */
}
static cr_q q_ndtr(double x) { return crq(0.5Q * erfcq(-(quad)x / sqrtq(2.0Q)), Q100); }

static cr_d d_log_ndtr(double x) {
    if (isinf(x)) return crd_exact(x < 0 ? x : -0.0);
    if (x > 0) {
        double t = x * 0.70710678118654752440, s = 0.5 * erfc(t);
        if (s == 0.0 || x > 15.0) return crd_exact(-0.0);   /* |value| < 2^-160: -0 */
        return crd(log1p(-s), R48 + (2 * t * t + 2) * 0x1p-52);
    }
    if (x > -37.0) {
        double t = -x * 0.70710678118654752440, v = log(0.5 * erfc(t));
        cr_d r = crd(v, R48);
        r.e += (2 * t * t + 4) * 0x1p-52;
        return r;
    }
    double z = 1.0 / (x * x), s = 1.0, t = 1.0;
    for (int k = 1; k < 7; k++) { t *= -(2.0 * k - 1) * z; s += t; }
    return crd(-0.5 * x * x - log(-x) - 0.91893853320467274178 + log(s), R48);
}
static cr_q q_log_ndtr(double x) {
    quad xq = x, r2 = sqrtq(2.0Q);
    if (x > 0) return crq(log1pq(-0.5Q * erfcq(xq / r2)), Q100);
    if (x > -100.0) return crq(logq(0.5Q * erfcq(-xq / r2)), Q100);
    quad z = 1 / (xq * xq), s = 1, t = 1;
    for (int k = 1; k < 16; k++) { t *= -(2 * k - 1) * z; s += t; }
    /* -x^2/2 is exact in quad; the rest (~ -log|x|) may fall below its quad ulp (|x| > 2^55),
     * so the sum keeps its rounding error, which decides a tie at a float32 midpoint */
    quad a = -xq * xq / 2, b = -logq(-xq) - logq(2 * M_PIq) / 2 + logq(s), v = a + b;
    cr_q r = {v, Q100 * (fabsq(b) + 1), b - (v - a)};          /* two-sum: v + lo = a + b exactly */
    return r;
}

/* ---- lgamma (poles: +inf, as torch) ---- */
static int cr_nonpos_int(double x) { return x <= 0 && x == floor(x); }
static cr_d d_lgamma(double x) {
    if (isinf(x) || cr_nonpos_int(x)) return crd_exact(INFINITY);
    return crd(lgamma(x), R48);
}
static cr_q q_lgamma(double x) { return crq(lgammaq(x), Q100); }

/* ---- digamma: recurrence up to z >= Z, then ln z - 1/2z - sum B2k / (2k z^2k); reflection
 * psi(x) = psi(1 - x) - pi / tan(pi x) below 0; +0: -inf, -0: +inf, negative integers and -inf
 * NaN (torch's conventions) ---- */
static const double BERN_N[] = {1, -1, 1, -1, 5, -691, 7, -3617, 43867, -174611, 854513,
                                -236364091, 8553103, -23749461029.0};
static const double BERN_D[] = {6, 30, 42, 30, 66, 2730, 6, 510, 798, 330, 138, 2730, 6, 870};
static cr_d d_psi_pos(double x) {
    double s = 0, m = 0, shift = 0;
    while (x < 10.0) { s -= 1 / x; m += 1 / x; x += 1; shift = 0x1p-50; }   /* x + 1: 2^-53 */
    double z2 = 1 / (x * x), p = z2, a = log(x) - 0.5 / x;
    for (int k = 0; k < 8; k++) { a -= BERN_N[k] / BERN_D[k] / (2 * (k + 1)) * p; p *= z2; }
    cr_d r = {s + a, 0x1p-46 * (m + fabs(a)) + shift};
    return r;
}
static cr_d d_digamma(double x) {
    if (x != x || x == -INFINITY) return crd_exact(NAN);
    if (x == INFINITY) return crd_exact(INFINITY);
    if (x == 0) return crd_exact(signbit(x) ? INFINITY : -INFINITY);
    if (cr_nonpos_int(x)) return crd_exact(NAN);
    if (x > 0) return d_psi_pos(x);
    double r = x - rint(x), c = 3.14159265358979323846 / tan(3.14159265358979323846 * r);
    cr_d p = d_psi_pos(1 - x);                               /* 1 - x exact */
    p.v -= c;
    p.e += 0x1p-48 * fabs(c);
    return p;
}
static cr_q q_psi_pos(quad x) {
    quad s = 0, m = 0;
    while (x < 60) { s -= 1 / x; m += 1 / x; x += 1; }
    quad z2 = 1 / (x * x), p = z2, a = logq(x) - 1 / (2 * x);
    for (int k = 0; k < 14; k++) { a -= (quad)BERN_N[k] / BERN_D[k] / (2 * (k + 1)) * p; p *= z2; }
    cr_q r = {s + a, Q100 * (m + fabsq(a) + 1), 0};
    return r;
}
static cr_q q_digamma(double x) {
    if (x > 0) return q_psi_pos(x);
    double r = x - rint(x);
    quad c = M_PIq / tanq(M_PIq * r);
    cr_q p = q_psi_pos(1 - (quad)x);
    p.v -= c;
    p.e += Q100 * fabsq(c);
    return p;
}

/* ---- modified Bessel I0, I1 and their scaled forms (x >= 0) ---- */
/* sum_k q^k / (k! (k + v)!), q = x^2 / 4: positive terms */
static double d_iser(double x, int v, int *k_used) {
    double q = x * x * 0.25, t = 1, s = 1;
    int k = 1;
    for (; k < 400; k++) { t = t * q / (k * (double)(k + v)); s += t; if (t < s * 0x1p-60) break; }
    *k_used = k;
    return v ? s * x * 0.5 : s;
}
/* e^-x I_v(x) by Hankel's sum, x >= 30: 40 terms, the last below 2^-77 */
static double d_ihankel(double x, int v) {
    double t = 1, s = 1, m = 4.0 * v * v;
    for (int k = 1; k <= 40; k++) { t *= -(m - (2.0 * k - 1) * (2.0 * k - 1)) / (8.0 * k * x); s += t; }
    return s / sqrt(2 * 3.14159265358979323846 * x);
}
static cr_d d_bessel_i(double x, int v, int scaled) {
    if (x == INFINITY) return crd_exact(scaled ? 0.0 : INFINITY);
    if (!scaled && x > 100.0) return crd_exact(INFINITY);   /* float32 overflow from 91.9 */
    if (x <= 30.0 || !scaled) {
        int k;
        double s = d_iser(x, v, &k);
        return crd(scaled ? s * exp(-x) : s, (3.0 * k + 8) * 0x1p-52);
    }
    return crd(d_ihankel(x, v), R48);
}
static cr_q q_bessel_i(double xd, int v, int scaled) {
    quad x = xd;
    if (xd <= 60.0) {
        quad q = x * x / 4, t = 1, s = 1;
        for (int k = 1; k < 400; k++) { t = t * q / (k * (quad)(k + v)); s += t; if (t < s * 0x1p-118Q) break; }
        if (v) s *= x / 2;
        return crq(scaled ? s * expq(-x) : s, Q100);
    }
    quad t = 1, s = 1, m = 4 * v * v;
    for (int k = 1; k <= 60; k++) { t *= -(m - (2 * k - 1) * (quad)(2 * k - 1)) / (8 * k * x); s += t; }
    s /= sqrtq(2 * M_PIq * x);
    return crq(scaled ? s : s * expq(x), Q100);
}

/* ---- Bessel J0 J1 Y0 Y1 (x >= 0): errors relative to the envelope above 2 (0.25 for Y0,
 * whose first zero is 0.89) ---- */
static double cr_env(double x, double v, double from) {
    double a = fabs(v), env = x > from ? fmin(1.0, sqrt(2.0 / (3.14159265358979323846 * x))) : 0.0;
    return a > env ? a : env;
}
static cr_d d_bessel_jy(double x, int kind) {
    if (kind >= 2 && x == 0) return crd_exact(-INFINITY);
    if (x == INFINITY) return crd_exact(0.0);
    if (kind == 0 && x == 0) return crd_exact(1.0);
    if (kind == 1 && x == 0) return crd_exact(x);
    double v = kind == 0 ? j0(x) : kind == 1 ? j1(x) : kind == 2 ? y0(x) : y1(x);
    cr_d r = {v, R48 * cr_env(x, v, kind == 2 ? 0.25 : 2.0)};
    return r;
}
static cr_q q_bessel_jy(double x, int kind) {
    quad v = kind == 0 ? j0q(x) : kind == 1 ? j1q(x) : kind == 2 ? y0q(x) : y1q(x);
    cr_q r = {v, Q100 * cr_env(x, (double)v, kind == 2 ? 0.25 : 2.0), 0};
    return r;
}

/* I1, e^-x I1, J1 at 0 < x < 2^-60: x/2 times 1 + x^2/8 (I1: up), 1 - x + ... (I1e) or
 * 1 - x^2/8 (J1: down); x/2 may be a float32 midpoint (x subnormal), so the rounding direction
 * decides: x/2 itself when exact, else (x subnormal, odd: x/2 a midpoint) the neighbour on that side */
static float cr_half_directed(double x, int up) {
    double h = 0.5 * x;
    float f = (float)h;
    if ((double)f == h) return f;
    float dn = (double)f < h ? f : nextafterf(f, 0.0f), upf = (double)f > h ? f : nextafterf(f, INFINITY);
    return up ? upf : dn;
}

#endif /* CR_SPECIAL_ORACLE_H */
