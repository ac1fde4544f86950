/* tl_math_shim.c: test-only wrapper that exports native/common/tl_math.h to Python (cffi): each
 * function on an array, the correct-rounding check of cr_oracle.h over a sampled range, and the
 * error of the IEEE-composed functions (sqrt, rsqrt) against a double-precision libm reference.
 *
 * Built by `make build/tl_math_test.so` with the stub's flags, so the functions compile exactly
 * as they do inside the stub. libm and libquadmath are used here only, as the independent
 * reference. */
#include <math.h>
#include <stdint.h>
#include "cr_oracle.h"

#define EXPORT __attribute__((visibility("default")))

enum { F_EXP, F_LOG, F_LOG1P, F_TANH, F_SIGMOID, F_SOFTPLUS, F_ERF, F_GELU, F_GELU_GRAD,
       F_SQRT, F_RSQRT, F_SIN_2PI, F_COS_2PI, F_EXPM1, F_COUNT };

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
    case F_EXPM1: return tlm_expm1(x);
    }
    return NAN;
}

/* the true value in double, for the IEEE-composed functions */
static double reference(int fn, double x) {
    return fn == F_SQRT ? sqrt(x) : 1.0 / sqrt(x);
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

/* one switch, then a loop the compiler vectorises (as the stub's kernels do) */
#define EVAL_CASE(F, FN) case F: for (int64_t i = 0; i < n; i++) y[i] = FN(x[i]); break;
EXPORT void tlmt_eval(int fn, const float *x, float *y, int64_t n) {
    switch (fn) {
    EVAL_CASE(F_EXP, tlm_exp)
    EVAL_CASE(F_LOG, tlm_log)
    EVAL_CASE(F_LOG1P, tlm_log1p)
    EVAL_CASE(F_TANH, tlm_tanh)
    EVAL_CASE(F_SIGMOID, tlm_sigmoid)
    EVAL_CASE(F_SOFTPLUS, tlm_softplus)
    EVAL_CASE(F_ERF, tlm_erf)
    EVAL_CASE(F_GELU, tlm_gelu)
    EVAL_CASE(F_GELU_GRAD, tlm_gelu_grad)
    default: for (int64_t i = 0; i < n; i++) y[i] = eval(fn, x[i]);
    }
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

/* correct rounding (cr_oracle.h, functions numbered as its TLM_F_*) */
EXPORT int tlmt_cr_count(void) { return CR_COUNT; }
EXPORT void tlmt_cr_eval(int fn, const float *x, float *y, int64_t n) { cr_ours_block(fn, x, y, n); }
/* out: inputs checked, mismatches, quad fallbacks, unresolved; *first_bad: one mismatching input */
EXPORT void tlmt_cr_check(int fn, uint32_t lo, uint32_t hi, uint32_t stride, int64_t *out,
                          uint32_t *first_bad) {
    cr_stats st;
    cr_check_range(fn, lo, hi, stride, &st);
    out[0] = st.checked; out[1] = st.mismatches; out[2] = st.quad; out[3] = st.unresolved;
    *first_bad = st.nbad ? st.bad[0] : 0;
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
