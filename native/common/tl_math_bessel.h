/* tl_math_bessel.h: the Bessel functions of PyTorch's catalog (J0 J1 Y0 Y1, I0 I1 and their
 * scaled forms, K0 K1 and their scaled forms, the spherical j0) and the classical orthogonal
 * polynomials, in double on tl_math.h's IEEE operations (the same bits on both libraries), by
 * power series for small arguments, Hankel's asymptotic expansions for large ones and, for K
 * between 2 and 25, the trapezoid rule on e^x K_v(x) = int_0^inf e^(-x (cosh t - 1)) cosh(v t) dt
 * (h = 1/8: error below 1e-23 there). Callers round the double once. J and Y are accurate to
 * about 2^-45 of their envelope sqrt(2 / (pi x)), not relative to the value near their zeros
 * (nor are PyTorch's).
 */
#ifndef TL_MATH_BESSEL_H
#define TL_MATH_BESSEL_H

#include "tl_math_special.h"

/* sum_k q^k / (k! (k + v)!) for q = x^2 / 4 >= 0, v in {0, 1}: positive terms */
TLM_HD double tls_bessel_i_series(double q, int v) {
    double t = 1.0, s = 1.0;
    for (int k = 1; k < 200; k++) {
        t = tlm_ddiv(tlm_dmul(t, q), (double)(k * (k + v)));
        s = tlm_dadd(s, t);
        if (t < tlm_dmul(s, 0x1p-58)) break;
    }
    return s;
}
/* Hankel's sum sum_k sgn^k a_k(v) / a^k, a_k(v) = prod_j (4v^2 - (2j - 1)^2) / (k! 8^k), 30
 * terms (a >= 25: the last below 1e-18); sgn = -1 for I, +1 for K */
TLM_HD double tls_hankel_sum(double a, int v, double sgn) {
    double t = 1.0, s = 1.0, m = (double)(4 * v * v);
    for (int k = 1; k <= 30; k++) {
        double j = (double)(2 * k - 1);
        t = tlm_ddiv(tlm_dmul(tlm_dmul(t, sgn), tlm_dsub(m, tlm_dmul(j, j))), tlm_dmul(8.0 * (double)k, a));
        s = tlm_dadd(s, t);
    }
    return s;
}
/* e^-|x| I_v(|x|) (v = 0, 1) */
TLM_HD double tls_bessel_ie(double a, int v) {
    if (a >= 25.0) return tlm_ddiv(tls_hankel_sum(a, v, -1.0), tlm_dsqrt(tlm_dmul(2.0 * TLS_PI, a)));
    double q = tlm_dmul(tlm_dmul(a, a), 0.25);
    double s = tls_bessel_i_series(q, v);
    s = v ? tlm_dmul(s, tlm_dmul(a, 0.5)) : s;
    return tlm_dmul(s, tls_exp(-a));
}
/* I_v(|x|) */
TLM_HD double tls_bessel_i(double a, int v) {
    if (a >= 25.0) return tlm_dmul(tls_bessel_ie(a, v), tls_exp(a));
    double s = tls_bessel_i_series(tlm_dmul(tlm_dmul(a, a), 0.25), v);
    return v ? tlm_dmul(s, tlm_dmul(a, 0.5)) : s;
}
/* K_v(a) for 0 < a < 2 by the series at 0 (DLMF 10.31.1) as a double-double, the logarithmic
 * term in double-double (log(a/2) + gamma, log to 2^-59; 1/a for K1), so the dominant part of
 * small a is exact to about 2^-59 and callers round once:
 * K0 = sum_k H_k t_k - (log(a/2) + gamma) (1 + sum_k t_k), t_k = q^k / k!^2, q = a^2 / 4;
 * K1 = 1/a + log(a/2) I1(a) - a/4 sum_k (psi(k+1) + psi(k+2)) q^k / (k! (k+1)!) */
#define TLS_EULER_LO -0x1.6cb90701fbfabp-58
TLM_HD tlm_dd tls_bessel_k_small_dd(double a, int v) {
    double q = tlm_dmul(tlm_dmul(a, a), 0.25), t = 1.0, s = 0.0, acc;
    tlm_dd l = tls_log_dd(tlm_dmul(a, 0.5));                  /* a/2 exact */
    if (v == 0) {
        double h = 0.0;
        acc = 0.0;
        for (int k = 1; k < 40; k++) {
            t = tlm_ddiv(tlm_dmul(t, q), (double)(k * k));
            h = tlm_dadd(h, tlm_ddiv(1.0, (double)k));
            acc = tlm_dfma(t, h, acc);
            s = tlm_dadd(s, t);                                 /* I0 - 1 */
        }
        tlm_dd g;
        g.hi = TLS_EULER;
        g.lo = TLS_EULER_LO;
        tlm_dd L = tlm_dd_add(l, g);
        tlm_dd r = tlm_two_sum(-L.hi, acc);
        double c = tlm_dsub(tlm_dsub(r.lo, L.lo), tlm_dmul(tlm_dadd(L.hi, L.lo), s));
        return tlm_fast_two_sum(r.hi, c);
    }
    double psi = -TLS_EULER, psi1 = tlm_dsub(1.0, TLS_EULER);   /* psi(k + 1), psi(k + 2) */
    acc = tlm_dadd(psi, psi1);
    for (int k = 1; k < 40; k++) {
        t = tlm_ddiv(tlm_dmul(t, q), (double)(k * (k + 1)));
        psi = psi1;
        psi1 = tlm_dadd(psi1, tlm_ddiv(1.0, (double)(k + 1)));
        acc = tlm_dfma(t, tlm_dadd(psi, psi1), acc);
        s = tlm_dadd(s, t);
    }
    double i1 = tlm_dmul(tlm_dmul(a, 0.5), tlm_dadd(1.0, s));   /* I1(a) */
    double rh = tlm_ddiv(1.0, a), rl = tlm_ddiv(tlm_dfma(-rh, a, 1.0), a);   /* 1/a = rh + rl */
    double c = tlm_dsub(tlm_dfma(tlm_dadd(l.hi, l.lo), i1, rl), tlm_dmul(tlm_dmul(a, 0.25), acc));
    return tlm_fast_two_sum(rh, c);
}
TLM_HD double tls_bessel_k_small(double a, int v) {
    tlm_dd k = tls_bessel_k_small_dd(a, v);
    return tlm_dadd(k.hi, k.lo);
}
/* e^a K_v(a) for a > 0 */
TLM_HD double tls_bessel_ke(double a, int v) {
    if (a >= 25.0) return tlm_dmul(tls_hankel_sum(a, v, 1.0), tlm_dsqrt(tlm_ddiv(TLS_PI, tlm_dmul(2.0, a))));
    if (a >= 2.0) {
        double s = 0.5;                                    /* f(0) / 2 */
        for (int j = 1; j < 64; j++) {
            double t = 0.125 * (double)j, e = tls_exp(t), ei = tlm_ddiv(1.0, e);
            double ch = tlm_dmul(tlm_dadd(e, ei), 0.5);
            double sh2 = tls_exp(tlm_dmul(0.5, t));
            double chm1 = tlm_dmul(0.5, tlm_dmul(tlm_dsub(sh2, tlm_ddiv(1.0, sh2)), tlm_dsub(sh2, tlm_ddiv(1.0, sh2))));
            double f = tls_exp(-tlm_dmul(a, chm1));
            f = v ? tlm_dmul(f, ch) : f;
            s = tlm_dadd(s, f);
            if (f < tlm_dmul(s, 0x1p-60)) break;
        }
        return tlm_dmul(s, 0.125);
    }
    return tlm_dmul(tls_bessel_k_small(a, v), tls_exp(a));
}

/* J_v(a) (which = 0) or Y_v(a) (which = 1) for a > 0, v in {0, 1} */
TLM_HD double tls_bessel_jy(float af, int v, int which) {
    double a = (double)af;
    if (a > 12.0) {
        double p = 1.0, qs = 0.0, t = 1.0, prev = 2.0, m = (double)(4 * v * v);
        for (int k = 1; k < 60; k++) {                       /* P, Q: the alternating halves */
            double j = (double)(2 * k - 1);
            t = tlm_ddiv(tlm_dmul(t, tlm_dsub(m, tlm_dmul(j, j))), tlm_dmul(8.0 * (double)k, a));
            if (tls_fabs(t) >= prev) break;                  /* smallest term reached */
            prev = tls_fabs(t);
            double sg = ((k >> 1) & 1) ? -1.0 : 1.0;          /* (-1)^floor(k/2) */
            if (k & 1) qs = tlm_dfma(sg, t, qs);
            else p = tlm_dfma(sg, t, p);
        }
        double s, c;
        tls_sincos(af, &s, &c);
        /* chi = a - (2v + 1) pi / 4: v = 0: cos chi = (c + s) / sqrt2, sin chi = (s - c) / sqrt2;
         * v = 1: cos chi = (s - c) / sqrt2, sin chi = -(s + c) / sqrt2 */
        double cc = v ? tlm_dsub(s, c) : tlm_dadd(c, s);
        double sc = v ? -tlm_dadd(s, c) : tlm_dsub(s, c);
        double r = which ? tlm_dfma(p, sc, tlm_dmul(qs, cc)) : tlm_dfma(p, cc, -tlm_dmul(qs, sc));
        return tlm_ddiv(r, tlm_dsqrt(tlm_dmul(TLS_PI, a)));
    }
    double q = tlm_dmul(tlm_dmul(a, a), 0.25), half = tlm_dmul(a, 0.5);
    double t = 1.0, js = 1.0, h = 0.0, acc = 0.0;
    double psi = -TLS_EULER, psi1 = tlm_dsub(1.0, TLS_EULER);
    if (v == 1) acc = tlm_dadd(psi, psi1);
    for (int k = 1; k < 60; k++) {
        t = tlm_ddiv(tlm_dmul(-t, q), (double)(k * (k + v)));
        js = tlm_dadd(js, t);
        if (v == 0) {
            h = tlm_dadd(h, tlm_ddiv(1.0, (double)k));
            acc = tlm_dfma(-t, h, acc);                        /* (-1)^(k+1) H_k q^k / k!^2 */
        } else {
            psi = psi1;
            psi1 = tlm_dadd(psi1, tlm_ddiv(1.0, (double)(k + 1)));
            acc = tlm_dfma(t, tlm_dadd(psi, psi1), acc);
        }
    }
    double jv = v ? tlm_dmul(js, half) : js;
    if (!which) return jv;
    double l = tls_log(half), twopi = 2.0 / TLS_PI;
    if (v == 0) return tlm_dmul(twopi, tlm_dfma(tlm_dadd(l, TLS_EULER), jv, acc));
    return tlm_dsub(tlm_dsub(tlm_dmul(twopi, tlm_dmul(l, jv)), tlm_ddiv(twopi, a)),
                    tlm_dmul(tlm_dmul(half, acc), 1.0 / TLS_PI));
}

/* the classical orthogonal polynomials at x of degree n (n truncated toward zero, as PyTorch's
 * cast): kind 0-3 Chebyshev T U V W, 4-7 the shifted ones (at 2x - 1), 8 Hermite H
 * (physicists'), 9 Hermite He, 10 Laguerre L, 11 Legendre P. n < 0 gives 0; n above 2^24 or
 * NaN gives NaN (the recurrence would not end in reasonable time). Three-term recurrences in
 * double. */
TLM_HD double tls_orthopoly(double x, double nd, int kind) {
    if (nd != nd || nd > 16777216.0) return tls_nan();
    if (nd < 0.0) return 0.0;
    int64_t n = (int64_t)nd;
    double z = (kind >= 4 && kind <= 7) ? tlm_dsub(tlm_dadd(x, x), 1.0) : x;
    int cheb = kind <= 7, k4 = kind & 3;
    double p = 1.0, q;
    if (cheb) q = k4 == 0 ? z : (k4 == 1 ? tlm_dadd(z, z) : (k4 == 2 ? tlm_dsub(tlm_dadd(z, z), 1.0) : tlm_dadd(tlm_dadd(z, z), 1.0)));
    else if (kind == 8) q = tlm_dadd(x, x);
    else if (kind == 10) q = tlm_dsub(1.0, x);
    else q = x;
    if (n == 0) return 1.0;
    for (int64_t k = 1; k < n; k++) {
        double kd = (double)k, r;
        if (cheb) r = tlm_dsub(tlm_dmul(tlm_dadd(z, z), q), p);
        else if (kind == 8) r = tlm_dsub(tlm_dmul(tlm_dadd(x, x), q), tlm_dmul(2.0 * kd, p));
        else if (kind == 9) r = tlm_dsub(tlm_dmul(x, q), tlm_dmul(kd, p));
        else if (kind == 10) r = tlm_ddiv(tlm_dsub(tlm_dmul(tlm_dsub(2.0 * kd + 1.0, x), q), tlm_dmul(kd, p)), kd + 1.0);
        else r = tlm_ddiv(tlm_dsub(tlm_dmul(tlm_dmul(2.0 * kd + 1.0, x), q), tlm_dmul(kd, p)), kd + 1.0);
        p = q;
        q = r;
    }
    return q;
}

#endif /* TL_MATH_BESSEL_H */
