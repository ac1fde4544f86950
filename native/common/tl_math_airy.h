/* tl_math_airy.h: the Airy function Ai of PyTorch's catalog (torch.special.airy_ai), in double on
 * tl_math.h's IEEE operations (the same bits on both libraries); callers round once.
 *
 * |x| < 8: the Maclaurin series Ai = c1 f - c2 g, f = sum 3^k (1/3)_k x^3k / (3k)!,
 * g = sum 3^k (2/3)_k x^(3k+1) / (3k+1)!, 48 terms each in double-double (x^3 exact; the last
 * below 2^-109 of the largest): the sums cancel by at most e^(2 zeta) = 2^44 at x = 8
 * (zeta = 2/3 |x|^1.5), leaving about 2^-55.
 * x >= 8: Ai = e^-zeta / (2 sqrt(pi) x^1/4) sum_k (-1)^k u_k zeta^-k, 31 terms (the last below
 * 2^-47 of the sum). x <= -8: Ai = (sin t (1 + P) - cos t Q) / (sqrt(pi) |x|^1/4), t = zeta +
 * pi/4, P, Q the even and odd parts of the same sum (P less its leading 1); t in turns,
 * |x|^1.5 / (3 pi) + 1/8, is formed from exact products and reduced by whole numbers
 * (tls_airy_turns: about 2^-100 + u 2^-155 turns, so about 2^-62 at |x| = 2^64), and sin t,
 * cos t, their combination with P and Q and the factor 1 / (sqrt(pi) |x|^1/4) are
 * double-doubles, rounded to a double once. So Ai is within about 2^-45 of its value for
 * x > -8 and within about 2^-60 of its envelope |x|^-1/4 / sqrt(pi) from -8 to -2^64 (not
 * relative to the value near its zeros; tests/native/check_special.c found it correctly rounded
 * on every input it checked there); below -2^64 the phase degrades (2^-40 turns at 2^78) and
 * only the envelope holds (PyTorch's double evaluation loses the phase from about -2^23).
 */
#ifndef TL_MATH_AIRY_H
#define TL_MATH_AIRY_H

#include "tl_math_special.h"

#define TLS_AIRY_C1 0x1.6b8c7962715b8p-2        /* Ai(0) = 3^-2/3 / Gamma(2/3) */
#define TLS_AIRY_C1_LO 0x1.7a96d7bb04e65p-56
#define TLS_AIRY_C2 0x1.0907f42b70f8bp-2        /* -Ai'(0) = 3^-1/3 / Gamma(1/3) */
#define TLS_AIRY_C2_LO -0x1.d1459035afde2p-56
#define TLS_INV_3PI_HI 0x1.b2995e7b7b604p-4     /* 1 / (3 pi) */
#define TLS_INV_3PI_LO -0x1.e40290701eb1ep-58
#define TLS_INV_3PI_LO2 0x1.9f404920dc887p-113
#define TLS_INV_SQRT_PI_D 0x1.20dd750429b6dp-1  /* 1 / sqrt(pi) */
#define TLS_INV_SQRT_PI_LO 0x1.1ae3a914fed80p-57
#define TLS_2PI_HI 0x1.921fb54442d18p+2          /* 2 pi */
#define TLS_2PI_LO 0x1.1a62633145c07p-52

/* a * b and a / d in double-double (errors about 2^-104 relative) */
TLM_HD tlm_dd tls_dd_mul(tlm_dd a, tlm_dd b) {
    tlm_dd p = tlm_two_prod(a.hi, b.hi);
    double t = tlm_dfma(a.hi, b.lo, tlm_dmul(a.lo, b.hi));
    return tlm_fast_two_sum(p.hi, tlm_dadd(p.lo, t));
}
TLM_HD tlm_dd tls_dd_div_d(tlm_dd a, double d) {
    double q = tlm_ddiv(a.hi, d);
    tlm_dd p = tlm_two_prod(q, d);
    double r = tlm_dadd(tlm_dsub(tlm_dsub(a.hi, p.hi), p.lo), a.lo);
    return tlm_fast_two_sum(q, tlm_ddiv(r, d));
}

/* the Maclaurin series at |x| < 8 */
TLM_HD double tls_airy_series(double x) {
    tlm_dd x3 = tlm_two_prod(tlm_dmul(x, x), x);      /* x^2 exact (x a float), x^3 exact */
    tlm_dd tf = {1.0, 0.0}, tg = {x, 0.0}, f = tf, g = tg;
    for (int k = 1; k <= 48; k++) {
        double a = (double)(3 * k - 1), b = (double)(3 * k), c = (double)(3 * k + 1);
        tf = tls_dd_div_d(tls_dd_mul(tf, x3), tlm_dmul(a, b));
        tg = tls_dd_div_d(tls_dd_mul(tg, x3), tlm_dmul(b, c));
        f = tlm_dd_add(f, tf);
        g = tlm_dd_add(g, tg);
    }
    tlm_dd c1 = {TLS_AIRY_C1, TLS_AIRY_C1_LO}, c2 = {TLS_AIRY_C2, TLS_AIRY_C2_LO};
    tlm_dd a = tls_dd_mul(c1, f), b = tls_dd_mul(c2, g);
    b.hi = -b.hi;
    b.lo = -b.lo;
    tlm_dd r = tlm_dd_add(a, b);
    return tlm_dadd(r.hi, r.lo);
}

/* the asymptotic sum's terms u_k zeta^-k, u_k = u_(k-1) (6k-5)(6k-3)(6k-1) / ((2k-1) 216 k), 31
 * of them: x > 0 sums them alternating (*p, *q unused); x < 0 splits them into
 * P = sum_j (-1)^j u_2j zeta^-2j (returned less its first term 1) and
 * Q = sum_j (-1)^j u_(2j+1) zeta^-(2j+1) */
TLM_HD double tls_airy_sums(double zeta, int negative, double *p, double *q) {
    double t = 1.0, s = 1.0, P = 0.0, Q = 0.0;
    for (int k = 1; k <= 31; k++) {
        double kd = (double)k;
        double num = tlm_dmul(tlm_dmul(6.0 * kd - 5.0, 6.0 * kd - 3.0), 6.0 * kd - 1.0);
        t = tlm_ddiv(tlm_dmul(t, num), tlm_dmul(tlm_dmul(2.0 * kd - 1.0, 216.0 * kd), zeta));
        double st = (k & 1) ? -t : t, sg = ((k >> 1) & 1) ? -t : t;
        s = tlm_dadd(s, st);
        if (k & 1) Q = tlm_dadd(Q, sg);
        else P = tlm_dadd(P, sg);
    }
    *p = negative ? P : 0.0;
    *q = negative ? Q : 0.0;
    return s;
}

/* x - rint(x), exact */
TLM_HD double tls_frac(double x) { return tlm_dsub(x, tls_rint(x)); }
/* s + t for a double-double s and a double t */
TLM_HD tlm_dd tls_dd_add_d(tlm_dd s, double t) {
    tlm_dd u = tlm_two_sum(s.hi, t);
    return tlm_fast_two_sum(u.hi, tlm_dadd(u.lo, s.lo));
}
/* the phase of Ai below 0 in turns, u = a^1.5 / (3 pi) + 1/8 less a whole number, as
 * w.hi + w.lo (|w.hi| <= 1/2): sqrt(a) as three doubles (r1 + r2 + r3, the residuals by FMA),
 * a^1.5 = a r1 + a r2 (exact products) + a r3, 1 / (3 pi) as three doubles, every product whose
 * size reaches a turn taken exactly (two_prod) and reduced by whole numbers before the sum; the
 * terms left out or rounded are below about u 2^-155 (sqrt's residual r3 to about 2^-158 of
 * sqrt(a), 1 / (3 pi) to 2^-166), so the error is about 2^-100 + u 2^-155 turns */
TLM_HD tlm_dd tls_airy_turns(double a) {
    double r1 = tlm_dsqrt(a), e1 = tlm_dfma(-r1, r1, a), d = tlm_dadd(r1, r1);
    double r2 = tlm_ddiv(e1, d);
    tlm_dd pr = tlm_two_prod(d, r2);
    double e2 = tlm_dsub(tlm_dsub(tlm_dsub(e1, pr.hi), pr.lo), tlm_dmul(r2, r2));
    double r3 = tlm_ddiv(e2, d);
    tlm_dd p1 = tlm_two_prod(a, r1), p2 = tlm_two_prod(a, r2);   /* a r1, a r2 exactly */
    tlm_dd A = tlm_two_prod(p1.hi, TLS_INV_3PI_HI), B = tlm_two_prod(p1.hi, TLS_INV_3PI_LO);
    tlm_dd D = tlm_two_prod(p1.lo, TLS_INV_3PI_HI), E = tlm_two_prod(p2.hi, TLS_INV_3PI_HI);
    double small = tlm_dadd(tlm_dadd(tlm_dmul(p1.hi, TLS_INV_3PI_LO2), tlm_dmul(p1.lo, TLS_INV_3PI_LO)),
                            tlm_dadd(tlm_dmul(p2.hi, TLS_INV_3PI_LO),
                                     tlm_dmul(tlm_dadd(p2.lo, tlm_dmul(a, r3)), TLS_INV_3PI_HI)));
    tlm_dd w = tlm_two_sum(tls_frac(A.hi), tls_frac(A.lo));
    w = tls_dd_add_d(w, tls_frac(B.hi));
    w = tls_dd_add_d(w, tls_frac(D.hi));
    w = tls_dd_add_d(w, tls_frac(E.hi));
    w = tls_dd_add_d(w, tls_frac(tlm_dadd(tlm_dadd(B.lo, D.lo), E.lo)));
    w = tls_dd_add_d(w, tls_frac(small));
    w = tls_dd_add_d(w, 0.125);
    return tlm_fast_two_sum(tls_frac(w.hi), w.lo);
}

/* Ai(x) for a finite float x */
TLM_HD double tls_airy_ai(float xf) {
    double x = (double)xf, a = tls_fabs(x);
    if (a < 8.0) return tls_airy_series(x);
    tlm_dd s;
    s.hi = a;
    s.lo = 0.0;
    tlm_dd r = tlm_dd_sqrt(s);                               /* sqrt|x| */
    tlm_dd p = tlm_dd_mul_c(r, a, 0.0);                      /* |x|^1.5 */
    double zeta = tlm_dmul(tlm_dadd(p.hi, p.lo), 2.0 / 3.0);
    double q = tlm_dsqrt(r.hi);                              /* |x|^1/4 */
    double P, Q, sum = tls_airy_sums(zeta, x < 0.0, &P, &Q);
    if (x > 0.0) {
        double env = tlm_ddiv(tls_exp(-zeta), tlm_dmul(2.0, q));
        return tlm_dmul(tlm_dmul(env, TLS_INV_SQRT_PI_D), sum);
    }
    /* turns u = |x|^1.5 / (3 pi) + 1/8 (a double-double), t = 2 pi u = zeta + pi/4; Ai =
     * (sin t (1 + P) - cos t Q) / (sqrt(pi) |x|^1/4) with sin t, cos t and the sum as
     * double-doubles, so only the phase's error (tls_airy_turns) and P's and Q's (about
     * 2^-53 / zeta) remain relative to the envelope, and the result is rounded once */
    tlm_dd w = tls_airy_turns(a);
    double n4 = tls_rint(tlm_dmul(w.hi, 4.0));                     /* quarter turns, -2 .. 2 */
    double h = tlm_dsub(w.hi, tlm_dmul(n4, 0.25));                 /* exact, |h| <= 1/8 */
    tlm_dd hr = tlm_dd_mul_c(tlm_two_sum(h, w.lo), TLS_2PI_HI, TLS_2PI_LO);   /* radians */
    tlm_dd sn, cs, st, ct;
    tlm_sincos_dd(hr, &sn, &cs);
    int32_t qd = (int32_t)n4 & 3;                        /* t = qd pi/2 + hr */
    st = (qd & 1) ? cs : sn;
    ct = (qd & 1) ? sn : cs;
    double ss = (qd & 2) ? -1.0 : 1.0, sc = ((qd + 1) & 2) ? -1.0 : 1.0;
    st.hi = tlm_dmul(st.hi, ss);
    st.lo = tlm_dmul(st.lo, ss);
    ct.hi = tlm_dmul(ct.hi, sc);
    ct.lo = tlm_dmul(ct.lo, sc);
    double t1 = tlm_dsub(tlm_dmul(st.hi, P), tlm_dmul(ct.hi, Q));
    tlm_dd v = tlm_two_sum(st.hi, t1);
    v = tlm_two_sum(v.hi, tlm_dadd(v.lo, st.lo));
    tlm_dd e = {TLS_INV_SQRT_PI_D, TLS_INV_SQRT_PI_LO};
    e = tlm_dd_div(e, tlm_dd_sqrt(r));                   /* 1 / (sqrt(pi) |x|^1/4) */
    v = tls_dd_mul(v, e);
    return tlm_dadd(v.hi, v.lo);
}

#endif /* TL_MATH_AIRY_H */
