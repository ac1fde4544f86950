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

/* ---- modified Bessel K0, K1 and e^x K0, e^x K1 (x >= 0): the series at 0 (DLMF 10.31.1) up
 * to x = 2, Steed's continued fraction CF2 (Temme 1975) above, Hankel's sum for huge x ---- */
#define CR_EULER 0.57721566490153286061
#define CR_EULER_Q 0.577215664901532860606512090082402431Q
/* e^x K_mu(x) = sqrt(pi / (2x)) / s for x >= 2, mu in [0, 1/2]; *ratio = K_(mu+1) / K_mu.
 * Measured against mpmath: within 2^-50 (double) at x = 2 .. 1e6 */
static double d_cf2(double x, double mu, double *ratio) {
    double b = 2 * (1 + x), d = 1 / b, h = d, delh = d, q1 = 0, q2 = 1;
    double a1 = 0.25 - mu * mu, q = a1, c = a1, a = -a1, s = 1 + q * delh;
    for (int i = 2; i < 5000; i++) {
        a -= 2 * (i - 1);
        c = -a * c / i;
        double qn = (q1 - b * q2) / a;
        q1 = q2;
        q2 = qn;
        q += c * qn;
        b += 2;
        d = 1 / (b + a * d);
        delh = (b * d - 1) * delh;
        h += delh;
        double dels = q * delh;
        s += dels;
        if (fabs(dels) < s * 0x1p-60) break;
    }
    if (ratio) *ratio = (mu + x + 0.5 - a1 * h) / x;
    return s;
}
static quad q_cf2(quad x, quad mu, quad *ratio) {
    quad b = 2 * (1 + x), d = 1 / b, h = d, delh = d, q1 = 0, q2 = 1;
    quad a1 = 0.25Q - mu * mu, q = a1, c = a1, a = -a1, s = 1 + q * delh;
    for (int i = 2; i < 20000; i++) {
        a -= 2 * (i - 1);
        c = -a * c / i;
        quad qn = (q1 - b * q2) / a;
        q1 = q2;
        q2 = qn;
        q += c * qn;
        b += 2;
        d = 1 / (b + a * d);
        delh = (b * d - 1) * delh;
        h += delh;
        quad dels = q * delh;
        s += dels;
        if (fabsq(dels) < s * 0x1p-120Q) break;
    }
    if (ratio) *ratio = (mu + x + 0.5Q - a1 * h) / x;
    return s;
}
/* the series at 0 < x <= 2: K0 = sum_k H_k q^k / k!^2 - (log(x/2) + gamma) I0(x),
 * K1 = 1/x + log(x/2) I1(x) - x/4 sum_k (psi(k+1) + psi(k+2)) q^k / (k! (k+1)!), q = x^2/4;
 * *mag: the sum of the parts' magnitudes (the cancellation's scale) */
static double d_kseries(double x, int v, double *mag) {
    double q = x * x * 0.25, l = log(x * 0.5), t = 1, s = 1;
    if (v == 0) {
        double hk = 0, acc = 0;
        for (int k = 1; k < 100; k++) { t *= q / ((double)k * k); hk += 1.0 / k; s += t; acc += hk * t; if (t < 0x1p-60) break; }
        double b = (l + CR_EULER) * s;
        *mag = fabs(acc) + fabs(b);
        return acc - b;
    }
    double ps = 1 - 2 * CR_EULER, acc = ps;
    for (int k = 1; k < 100; k++) { t *= q / ((double)k * (k + 1)); ps += 1.0 / k + 1.0 / (k + 1); s += t; acc += ps * t; if (t < 0x1p-60) break; }
    double i1 = 0.5 * x * s, b = l * i1, c = 0.25 * x * acc;
    *mag = 1 / x + fabs(b) + fabs(c);
    return 1 / x + b - c;
}
static quad q_kseries(quad x, int v, quad *mag) {
    quad q = x * x / 4, l = logq(x / 2), t = 1, s = 1;
    if (v == 0) {
        quad hk = 0, acc = 0;
        for (int k = 1; k < 200; k++) { t *= q / ((quad)k * k); hk += 1 / (quad)k; s += t; acc += hk * t; if (t < 0x1p-120Q) break; }
        quad b = (l + CR_EULER_Q) * s;
        *mag = fabsq(acc) + fabsq(b);
        return acc - b;
    }
    quad ps = 1 - 2 * CR_EULER_Q, acc = ps;
    for (int k = 1; k < 200; k++) { t *= q / ((quad)k * (k + 1)); ps += 1 / (quad)k + 1 / (quad)(k + 1); s += t; acc += ps * t; if (t < 0x1p-120Q) break; }
    quad i1 = x * s / 2, b = l * i1, c = x * acc / 4;
    *mag = 1 / x + fabsq(b) + fabsq(c);
    return 1 / x + b - c;
}
/* Hankel's sum sqrt(pi / (2x)) sum_k a_k(v) / x^k for e^x K_v(x), x > 1e6 (double, 8 terms) or
 * 1e9 (quad, 16 terms): the first omitted term is below 2^-150 relative */
static cr_d d_bessel_k(double x, int v, int scaled) {
    if (x != x || x < 0) return crd_exact(NAN);
    if (x == 0) return crd_exact(INFINITY);
    if (x == INFINITY) return crd_exact(0.0);
    if (!scaled && x > 110.0) return crd_exact(0.0);        /* K < e^-110 < 2^-150: +0 */
    if (x <= 2.0) {
        double mag, k = d_kseries(x, v, &mag), e = mag * 0x1p-47;
        if (scaled) { double ex = exp(x); k *= ex; e = e * ex + fabs(k) * 0x1p-51; }
        cr_d r = {k, e};
        return r;
    }
    double ke;
    if (x <= 1e6) {
        double ratio, s = d_cf2(x, 0.0, &ratio);
        ke = sqrt(3.14159265358979323846 / (2 * x)) / s;
        if (v) ke *= ratio;
    } else {
        double t = 1, s = 1, m = 4.0 * v * v;
        for (int k = 1; k <= 8; k++) { t *= (m - (2.0 * k - 1) * (2.0 * k - 1)) / (8.0 * k * x); s += t; }
        ke = s * sqrt(3.14159265358979323846 / (2 * x));
    }
    return crd(scaled ? ke : ke * exp(-x), R48);
}
static cr_q q_bessel_k(double xd, int v, int scaled) {
    quad x = xd, ke;
    if (xd <= 2.0) {
        quad mag, k = q_kseries(x, v, &mag), e = mag * 0x1p-106Q;
        if (scaled) { quad ex = expq(x); k *= ex; e = e * ex + fabsq(k) * 0x1p-110Q; }
        cr_q r = {k, e, 0};
        return r;
    }
    if (xd <= 1e9) {
        quad ratio, s = q_cf2(x, 0, &ratio);
        ke = sqrtq(M_PIq / (2 * x)) / s;
        if (v) ke *= ratio;
    } else {
        quad t = 1, s = 1, m = 4 * v * v;
        for (int k = 1; k <= 16; k++) { t *= (m - (2 * k - 1) * (quad)(2 * k - 1)) / (8 * k * x); s += t; }
        ke = s * sqrtq(M_PIq / (2 * x));
    }
    return crq(scaled ? ke : ke * expq(-x), Q100);
}

/* ---- Airy Ai: Maclaurin sums for -14.5 <= x < 2.08 (double only above -2.08), Ai =
 * e^-zeta / (2 sqrt(pi) x^1/4 s) with K_1/3's CF2 s at zeta = 2/3 x^1.5 >= 2 (Ai = sqrt(x/3)
 * K_1/3(zeta) / pi), and DLMF 9.7.9's asymptotic sums below -14.5 with the phase zeta - pi/4
 * reduced in quad-quad. Errors of the negative axis are relative to the envelope
 * |x|^-1/4 / sqrt(pi) (the phase's error grows as |x|^1.5 2^-220: below -2^64 the checker
 * compares with the envelope only) ---- */
#define CR_AI_C1 0.355028053887817239260063186004183176Q   /* Ai(0) */
#define CR_AI_C2 0.258819403792806798405183560189203963Q   /* -Ai'(0) */
static double cr_ai_env(double x, double v) {
    double env = x < -1 ? pow(-x, -0.25) * 0.56418958354775628695 : 0.0;
    return fabs(v) > env ? fabs(v) : env;
}
/* c1 f - c2 g with each term's rounding error bounded by (3k + 8) 2^-53 of it */
static cr_d d_ai_series(double x) {
    double c1 = (double)CR_AI_C1, c2 = (double)CR_AI_C2, x3 = x * x * x;
    double tf = 1, tg = x, f = 1, g = x, mag = c1 * 8 + c2 * fabs(x) * 8;
    for (int k = 1; k < 200; k++) {
        tf *= x3 / ((3.0 * k - 1) * (3.0 * k));
        tg *= x3 / ((3.0 * k) * (3.0 * k + 1));
        f += tf;
        g += tg;
        double m = c1 * fabs(tf) + c2 * fabs(tg);
        mag += (3.0 * k + 8) * m;
        if (m < mag * 0x1p-64) break;
    }
    double v = c1 * f - c2 * g;
    cr_d r = {v, mag * 0x1p-52 + fabs(v) * 0x1p-52};
    return r;
}
static cr_q q_ai_series(double xd) {
    quad x = xd, x3 = x * x * x, tf = 1, tg = x, f = 1, g = x, mag = CR_AI_C1 * 8 + CR_AI_C2 * fabsq(x) * 8;
    for (int k = 1; k < 400; k++) {
        tf *= x3 / ((3 * k - 1) * (quad)(3 * k));
        tg *= x3 / ((3 * k) * (quad)(3 * k + 1));
        f += tf;
        g += tg;
        quad m = CR_AI_C1 * fabsq(tf) + CR_AI_C2 * fabsq(tg);
        mag += (3 * k + 8) * m;
        if (m < mag * 0x1p-124Q) break;
    }
    quad v = CR_AI_C1 * f - CR_AI_C2 * g;
    cr_q r = {v, mag * 0x1p-111Q + fabsq(v) * 0x1p-112Q, 0};
    return r;
}
/* the phase zeta - pi/4 = 2 pi (u - 1/8), u = |x|^1.5 / (3 pi), reduced to [-pi, pi]: sqrt|x|
 * as two quads (r + e / 2r, e = |x| - r^2 exact by fmaq), |x| r exactly (fmaq), 1 / (3 pi) as two
 * quads, the product's leading part exact and each part reduced by whole numbers: error about
 * 2^-110 + u 2^-220 turns, so below 2^-100 for |x| <= 2^64 (u <= 2^94.3); and zeta */
#define CR_INV3PI_HI 0x1.b2995e7b7b60386ff5be3f85388dp-4Q
#define CR_INV3PI_LO -0x1.7f6dbe46ef2d284a7eabc9bd8d6cp-122Q
static quad cr_ai_phase(double xd, quad *zeta) {
    quad a = -(quad)xd, r = sqrtq(a), r2 = fmaq(-r, r, a) / (2 * r);
    quad p = a * r, pl = fmaq(a, r, -p);                  /* a r = p + pl exactly */
    quad A = p * CR_INV3PI_HI, Al = fmaq(p, CR_INV3PI_HI, -A);
    quad rest = p * CR_INV3PI_LO + (pl + a * r2) * CR_INV3PI_HI;   /* about u 2^-112 */
    quad f = (A - rintq(A)) + (Al - rintq(Al)) + (rest - rintq(rest)) - 0.125Q;
    f -= rintq(f);
    *zeta = 2 * a * (r + r2) / 3;
    return 2 * M_PIq * f;
}
/* the same in plain quad (error zeta 2^-111 radians, so 2^-52 at |x| = 2^40), fmaq-free and
 * faster, for the double reference up to |x| = 2^40 */
static quad cr_ai_phase_q(double xd, quad *zeta) {
    quad a = -(quad)xd, z = 2 * a * sqrtq(a) / 3, n = rintq(z / (2 * M_PIq));
    *zeta = z;
    return (z - n * (2 * M_PIq)) - M_PIq / 4;
}
static cr_d d_ai_neg(double x) {                   /* x < -14.5: zeta > 36.8 */
    quad zq, ph = x >= -0x1p40 ? cr_ai_phase_q(x, &zq) : cr_ai_phase(x, &zq);
    double z = (double)zq, t = 1, P = 1, Q = 0;
    int k = 1;
    for (; k < 200; k++) {
        double tn = t * (6.0 * k - 5) * (6.0 * k - 3) * (6.0 * k - 1) / ((2.0 * k - 1) * 216.0 * k * z);
        if (tn < 0x1p-64 || tn > t) { t = tn; break; }
        t = tn;
        double sg = ((k >> 1) & 1) ? -t : t;       /* (-1)^floor(k/2) u_k zeta^-k */
        if (k & 1) Q += sg; else P += sg;
    }
    double env = pow(-x, -0.25) * 0.56418958354775628695, p = (double)ph;
    double v = env * (cos(p) * P + sin(p) * Q);
    cr_d r = {v, env * (0x1p-48 + 2 * t + (x >= -0x1p40 ? z * 0x1p-110 : 0.0))};
    return r;
}
static cr_q q_ai_neg(double x) {
    quad zq, ph = cr_ai_phase(x, &zq), t = 1, P = 1, Q = 0;
    for (int k = 1; k < 400; k++) {
        quad tn = t * (6 * k - 5) * (quad)(6 * k - 3) * (6 * k - 1) / ((2 * k - 1) * 216 * (quad)k * zq);
        if (tn < 0x1p-124Q || tn > t) { t = tn; break; }
        t = tn;
        quad sg = ((k >> 1) & 1) ? -t : t;
        if (k & 1) Q += sg; else P += sg;
    }
    quad env = powq(-(quad)x, -0.25Q) / sqrtq(M_PIq);
    cr_q r = {env * (cosq(ph) * P + sinq(ph) * Q), env * (0x1p-98Q + 2 * t), 0};
    return r;
}
static cr_d d_airy_ai(double x) {
    if (x != x) return crd_exact(NAN);
    if (isinf(x)) return crd_exact(0.0);
    if (x > 30.0) return crd_exact(0.0);                   /* Ai < e^-109 < 2^-150: +0 */
    if (x < -14.5) return d_ai_neg(x);
    if (x < -2.08) { cr_d r = {0.0, INFINITY}; return r; }  /* the sums cancel too much: quad */
    if (x < 2.08) return d_ai_series(x);
    double z = 2.0 / 3.0 * x * sqrt(x), s = d_cf2(z, 1.0 / 3.0, NULL);
    return crd(exp(-z) / (2 * 1.7724538509055160273 * sqrt(sqrt(x)) * s), 0x1p-47 + z * 0x1p-50);
}
static cr_q q_airy_ai(double x) {
    if (x < -14.5) return q_ai_neg(x);
    if (x < 2.08) return q_ai_series(x);
    quad xq = x, z = 2 * xq * sqrtq(xq) / 3, s = q_cf2(z, 1 / 3.0Q, NULL);
    return crq(expq(-z) / (2 * sqrtq(M_PIq) * sqrtq(sqrtq(xq)) * s), 0x1p-104Q + z * 0x1p-110Q);
}

/* ---- spherical j0 = sin(x) / x (glibc's sin within 1 ulp; sinq) ---- */
static cr_d d_sph_j0(double x) {
    if (x != x) return crd_exact(NAN);
    if (isinf(x)) return crd_exact(0.0);
    if (x == 0) return crd_exact(1.0);
    return crd(sin(x) / x, R48);
}
static cr_q q_sph_j0(double x) { return crq(sinq((quad)x) / x, Q100); }

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
