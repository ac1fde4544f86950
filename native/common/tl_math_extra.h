/* tl_math_extra.h: canonical float32 pow, written once for both libraries (see tl_math.h).
 *
 * pow(x, y) for float32 x, y is evaluated in IEEE double with explicitly rounded operations
 * (tlm_dadd, tlm_dmul, tlm_ddiv: no contraction on either side) and rounded to float32 once:
 * log|x| = e ln2 + 2 atanh(s), s = f / (2 + f), f = m - 1 with m in [sqrt(1/2), sqrt(2)) (a
 * series to s^21, relative error below 1e-16); t = y log|x| (a double product, error about
 * 1e-16 |t|); e^t = 2^k e^r with k = round(t / ln2) and r = t - k ln2 (ln2 split so k ln2_hi is
 * exact), e^r a Taylor polynomial to r^13 on |r| <= ln2 / 2. The double result is within about
 * 1e-14 relative of the true power, far inside half a float32 ulp (6e-8), so the float32
 * result is the correctly rounded one except within 1e-14 relative of a rounding boundary;
 * exact powers (3^2, 2^-3, 0.5^2) come out exact. Special cases follow C99 pow (PyTorch's).
 */
#ifndef TL_MATH_EXTRA_H
#define TL_MATH_EXTRA_H

#include "tl_math.h"

/* tlm_dmul and tlm_dsub come from tl_math.h; pow keeps its own ln2 split */
#define TLM_POW_LN2_HI 6.93147180369123816490e-01 /* 0x3fe62e42fee00000: k * LN2_HI exact for |k| < 2^20 */
#define TLM_POW_LN2_LO 1.90821492927058770002e-10

/* log(a) in double for finite a > 0 (float32) */
TLM_HD double tlm_log_d(float a) {
    float e, f = tlm_log_split(a, &e);            /* a = (1 + f) 2^e, f exact */
    double fd = (double)f;
    double s = tlm_ddiv(fd, tlm_dadd(2.0, fd));   /* log(1 + f) = 2 atanh(s) */
    double z = tlm_dmul(s, s);
    double p = 1.0 / 21.0;
    p = tlm_dadd(tlm_dmul(p, z), 1.0 / 19.0);
    p = tlm_dadd(tlm_dmul(p, z), 1.0 / 17.0);
    p = tlm_dadd(tlm_dmul(p, z), 1.0 / 15.0);
    p = tlm_dadd(tlm_dmul(p, z), 1.0 / 13.0);
    p = tlm_dadd(tlm_dmul(p, z), 1.0 / 11.0);
    p = tlm_dadd(tlm_dmul(p, z), 1.0 / 9.0);
    p = tlm_dadd(tlm_dmul(p, z), 1.0 / 7.0);
    p = tlm_dadd(tlm_dmul(p, z), 1.0 / 5.0);
    p = tlm_dadd(tlm_dmul(p, z), 1.0 / 3.0);
    double logm = tlm_dadd(tlm_dadd(s, s), tlm_dmul(tlm_dadd(s, s), tlm_dmul(z, p)));
    double ed = (double)e;
    return tlm_dadd(tlm_dmul(ed, TLM_POW_LN2_HI), tlm_dadd(logm, tlm_dmul(ed, TLM_POW_LN2_LO)));
}

/* e^t rounded to float32 once, for t a double (overflow gives +inf, underflow 0) */
TLM_HD float tlm_exp_d2f(double t) {
    const double shifter = 6755399441055744.0;   /* 1.5 * 2^52: adding it rounds to an integer */
    double tc = t < 100.0 ? t : 100.0;            /* e^100 and e^-120 are out of float32's range */
    tc = tc > -120.0 ? tc : -120.0;
    double kd = tlm_dsub(tlm_dadd(tlm_dmul(tc, TLM_INV_LN2), shifter), shifter);
    double r = tlm_dsub(tlm_dsub(tc, tlm_dmul(kd, TLM_POW_LN2_HI)), tlm_dmul(kd, TLM_POW_LN2_LO));
    double p = 1.0 / 6227020800.0;                /* 1/13! */
    p = tlm_dadd(tlm_dmul(p, r), 1.0 / 479001600.0);
    p = tlm_dadd(tlm_dmul(p, r), 1.0 / 39916800.0);
    p = tlm_dadd(tlm_dmul(p, r), 1.0 / 3628800.0);
    p = tlm_dadd(tlm_dmul(p, r), 1.0 / 362880.0);
    p = tlm_dadd(tlm_dmul(p, r), 1.0 / 40320.0);
    p = tlm_dadd(tlm_dmul(p, r), 1.0 / 5040.0);
    p = tlm_dadd(tlm_dmul(p, r), 1.0 / 720.0);
    p = tlm_dadd(tlm_dmul(p, r), 1.0 / 120.0);
    p = tlm_dadd(tlm_dmul(p, r), 1.0 / 24.0);
    p = tlm_dadd(tlm_dmul(p, r), 1.0 / 6.0);
    p = tlm_dadd(tlm_dmul(p, r), 0.5);
    p = tlm_dadd(tlm_dmul(p, r), 1.0);
    p = tlm_dadd(tlm_dmul(p, r), 1.0);            /* e^r */
    return tlm_d2f(tlm_dmul(p, tlm_pow2d((int32_t)kd)));
}

/* 1 when y is a whole number, 2 when it is an odd one, 0 otherwise (inf and NaN: 0) */
TLM_HD int tlm_int_kind(float y) {
    float a = tlm_abs(y);
    if (a != a || a > 3.40282347e38f) return 0;                   /* NaN, inf */
    if (a >= 16777216.0f) return 1;                                /* every such float is even */
    int32_t i = (int32_t)a;
    if ((float)i != a) return 0;
    return (i & 1) ? 2 : 1;
}

/* C99 pow in float32 (see the header comment) */
TLM_HD float tlm_pow(float x, float y) {
    const float inf = tlm_from_bits(0x7f800000);
    if (y == 0.0f || x == 1.0f) return 1.0f;
    if (x != x || y != y) return tlm_add(x, y);                    /* NaN */
    int kind = tlm_int_kind(y);
    float ax = tlm_abs(x);
    int neg = tlm_to_bits(x) < 0 && kind == 2;                     /* sign bit set (-0 too), odd y */
    if (y == inf || y == -inf) {
        if (ax == 1.0f) return 1.0f;                                /* pow(-1, +-inf) */
        return ((ax < 1.0f) == (y < 0.0f)) ? inf : 0.0f;
    }
    if (ax == 0.0f || ax == inf) {
        int big = (ax == inf) == (y > 0.0f);                       /* result magnitude inf? */
        float m = big ? inf : 0.0f;
        return neg ? -m : m;
    }
    if (x < 0.0f && kind == 0) return tlm_from_bits(0x7fc00000);   /* NaN */
    float r = tlm_exp_d2f(tlm_dmul((double)y, tlm_log_d(ax)));
    return neg ? -r : r;
}

#endif /* TL_MATH_EXTRA_H */
