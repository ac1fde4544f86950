/* tl_math_shim.c: test-only wrapper that exports native/common/tl_math.h to Python (cffi) and
 * measures each canonical function's error against a double-precision libm reference.
 *
 * Built by `make build/tl_math_test.so` with the stub's flags, so the functions compile exactly
 * as they do inside the stub. libm is used here only, as the independent reference. */
#include <math.h>
#include <stdint.h>
#include "tl_math.h"

#define EXPORT __attribute__((visibility("default")))

enum { F_EXP, F_LOG, F_LOG1P, F_TANH, F_SIGMOID, F_SOFTPLUS, F_ERF, F_GELU, F_GELU_GRAD,
       F_SQRT, F_RSQRT, F_SIN_2PI, F_COS_2PI, F_COUNT };

static float eval(int fn, float x) {
    switch (fn) {
    case F_EXP: return tlm_exp(x);
    case F_LOG: return tlm_log(x);
    case F_LOG1P: return tlm_log1p(x);
    case F_TANH: return tlm_tanh(x);
    case F_SIGMOID: return tlm_sigmoid(x);
    case F_SOFTPLUS: return tlm_softplus(x);
    case F_ERF: return tlm_erf(x);
    case F_GELU: return tlm_gelu(x);
    case F_GELU_GRAD: return tlm_gelu_grad(x);
    case F_SQRT: return tlm_sqrt(x);
    case F_RSQRT: return tlm_rsqrt(x);
    case F_SIN_2PI: return tlm_sin_2pi(x);
    case F_COS_2PI: return tlm_cos_2pi(x);
    }
    return NAN;
}

/* sin or cos of 2 pi x in double, x reduced exactly first (x - rint(x) and the octant shifts are
 * exact in double), so large x and the zeros of cos are referenced to full precision */
static double trig_2pi(int want_sin, double x) {
    if (!isfinite(x)) return NAN;
    double r = x - rint(x), t = fabs(r), sg = r < 0 ? -1.0 : 1.0;   /* sin(2 pi x) = sin(2 pi r) */
    const double tau = 6.283185307179586476925;
    if (t <= 0.125) return want_sin ? sg * sin(tau * t) : cos(tau * t);
    if (t <= 0.375) return want_sin ? sg * cos(tau * (t - 0.25)) : -sin(tau * (t - 0.25));
    return want_sin ? -sg * sin(tau * (t - 0.5)) : -cos(tau * (t - 0.5));
}

/* the true value in double (sigmoid and softplus in their overflow-safe forms) */
static double reference(int fn, double x) {
    switch (fn) {
    case F_EXP: return exp(x);
    case F_LOG: return log(x);
    case F_LOG1P: return log1p(x);
    case F_TANH: return tanh(x);
    case F_SIGMOID: return x >= 0 ? 1.0 / (1.0 + exp(-x)) : exp(x) / (1.0 + exp(x));
    case F_SOFTPLUS: return (x > 0 ? x : 0.0) + log1p(exp(-fabs(x)));
    case F_ERF: return erf(x);
    case F_SQRT: return sqrt(x);
    case F_RSQRT: return 1.0 / sqrt(x);
    case F_SIN_2PI: return trig_2pi(1, x);
    case F_COS_2PI: return trig_2pi(0, x);
    }
    return NAN;
}

/* |got - ref| in float32 ulps of ref; NaN/overflow disagreements count as +inf */
static double ulp_error(float got, double ref) {
    if (isnan(ref)) return isnan(got) ? 0.0 : INFINITY;
    if (isnan(got)) return INFINITY;
    float rf = (float)ref;               /* correctly rounded reference */
    if (isinf(rf) || isinf(got)) return got == rf ? 0.0 : INFINITY;
    int e;
    frexp(ref, &e);
    double ulp = ldexp(1.0, e - 24);
    if (ulp < 0x1p-149) ulp = 0x1p-149;
    return fabs((double)got - ref) / ulp;
}

EXPORT int tlmt_count(void) { return F_COUNT; }

EXPORT void tlmt_eval(int fn, const float *x, float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = eval(fn, x[i]);
}

/* Every stride-th bit pattern in [lo, hi] (inclusive, as uint32). Reports the largest ulp error,
 * the input giving it, and how many inputs were checked. */
EXPORT void tlmt_scan(int fn, uint32_t lo, uint32_t hi, uint32_t stride, double *max_err,
                      float *worst, int64_t *checked) {
    double best = 0.0;
    uint32_t arg = lo;
    int64_t cnt = 0;
    int64_t steps = ((int64_t)hi - lo) / stride + 1;
#pragma omp parallel
    {
        double lbest = 0.0;
        uint32_t larg = lo;
#pragma omp for schedule(static) reduction(+ : cnt)
        for (int64_t s = 0; s < steps; s++) {
            uint32_t b = lo + (uint32_t)(s * stride);
            float x;
            memcpy(&x, &b, sizeof x);
            double err = ulp_error(eval(fn, x), reference(fn, (double)x));
            if (err > lbest || (err != err)) { lbest = err; larg = b; }
            cnt++;
        }
#pragma omp critical
        if (lbest > best) { best = lbest; arg = larg; }
    }
    *max_err = best;
    memcpy(worst, &arg, sizeof arg);
    *checked = cnt;
}

EXPORT float tlmt_sum(const float *x, int64_t n) { return tlm_sum(x, 1, n); }
EXPORT float tlmt_tree_sum(float *p, int64_t n) { return tlm_tree_sum(p, n); }
EXPORT float tlmt_dot(const float *a, const float *b, int64_t k, float acc) {
    return tlm_dot(a, 1, b, 1, k, acc);
}

/* rule 5 for one query row: q (d), keys k (n, d), values v (n, d) -> out (d) */
EXPORT void tlmt_attention_row(const float *q, const float *k, const float *v, float *out, int64_t n,
                               int64_t d, float scale) {
    tlm_osm st;
    tlm_osm_init(&st);
    float s[TLM_ATTN_TILE], acc[256];
    for (int64_t c = 0; c < d; c++) acc[c] = 0.0f;
    for (int64_t j0 = 0; j0 < n; j0 += TLM_ATTN_TILE) {
        int len = (int)(n - j0 < TLM_ATTN_TILE ? n - j0 : TLM_ATTN_TILE);
        for (int j = 0; j < len; j++)
            s[j] = tlm_mul(tlm_dot(q, 1, k + (j0 + j) * d, 1, d, 0.0f), scale);
        float alpha = tlm_osm_tile(&st, s, len);
        for (int64_t c = 0; c < d; c++) {
            float a = tlm_mul(acc[c], alpha);
            for (int j = 0; j < len; j++) a = tlm_fma(s[j], v[(j0 + j) * d + c], a);
            acc[c] = a;
        }
    }
    for (int64_t c = 0; c < d; c++) out[c] = tlm_osm_finish(&st, acc[c]);
}
