/* elementwise.c (stub): pointwise kernels over equal-length buffers.
 *
 * Broadcasting is done in Python before the call, so every buffer here holds exactly n floats.
 * Numerical conventions (inventory section 10): relu'/clamp' only strictly inside, abs' uses
 * sign(0) = 0, sqrt' = 0 for x <= 0, max/min ties split 0.5/0.5, and sigmoid/tanh/softplus
 * never overflow for large |x|.
 */
#include "stub.h"
#include "entry/elementwise_kernels.h"

#define LOOP(n) _Pragma("omp parallel for simd if(n > TL_PAR_MIN) schedule(static)") \
    for (int64_t i = 0; i < n; i++)

#define BINARY(NAME, EXPR)                                                           \
    int tlk_##NAME(const char *op, tl_buf a, tl_buf b, tl_buf y, int64_t n) {        \
        const float *A = a->data, *B = b->data; float *Y = y->data;                  \
        LOOP(n) { float av = A[i], bv = B[i]; Y[i] = (EXPR); }                       \
        return TL_OK;                                                                \
    }

#define UNARY(NAME, EXPR)                                                            \
    TL_VEC512 int tlk_##NAME(const char *op, tl_buf x, tl_buf y, int64_t n) {        \
        const float *X = x->data; float *Y = y->data;                                \
        LOOP(n) { float v = X[i]; Y[i] = (EXPR); }                                   \
        return TL_OK;                                                                \
    }

/* dx = f(x, g) */
#define UNARY_BWD(NAME, EXPR)                                                        \
    TL_VEC512 int tlk_##NAME(const char *op, tl_buf x, tl_buf g, tl_buf dx, int64_t n) { \
        const float *X = x->data, *G = g->data; float *D = dx->data;                 \
        LOOP(n) { float v = X[i], gv = G[i]; D[i] = (EXPR); }                        \
        return TL_OK;                                                                \
    }

/* NaN-propagating max/min: fmaxf would drop a NaN operand */
static inline float tl_maxf(float a, float b) { return (a != a || a >= b) ? a : b; }
static inline float tl_minf(float a, float b) { return (a != a || a <= b) ? a : b; }

/* overflow-safe sigmoid: exp of a non-positive argument only, 1 / (1 + e) for x >= 0 and
 * e / (1 + e) below; branch-free so the loop vectorises (NaN gives NaN through e) */
static inline float tl_sigmoidf(float v) {
    float e = tl_expf(-fabsf(v));
    return (v >= 0.0f ? 1.0f : e) / (1.0f + e);
}
/* softplus = max(x, 0) + log1p(exp(-|x|)), exact for large |x| */
static inline float tl_softplusf(float v) {
    return (v > 0.0f ? v : 0.0f) + log1pf(tl_expf(-fabsf(v)));
}

#define GELU_K 0.7978845608f
#define GELU_A 0.044715f
/* stagewise, each stage rounded (inventory 10.6): cubic = ((c x) x) x,
 * y = (x (1 + tanh(k (x + cubic)))) / 2 */
static inline float tl_geluf(float v) {
    float cubic = ((GELU_A * v) * v) * v;
    float t = tl_tanhf(GELU_K * (v + cubic));
    return (v * (1.0f + t)) * 0.5f;
}
/* (1 + t + (x (1 - t^2)) (k (1 + (3c x) x))) / 2 */
static inline float tl_gelu_gradf(float v) {
    float cubic = ((GELU_A * v) * v) * v;
    float t = tl_tanhf(GELU_K * (v + cubic));
    float du = GELU_K * (1.0f + ((3.0f * GELU_A) * v) * v);
    return ((1.0f + t) + (v * (1.0f - t * t)) * du) * 0.5f;
}

BINARY(add, av + bv)
BINARY(sub, av - bv)
BINARY(mul, av * bv)
BINARY(div, av / bv)
BINARY(maximum, tl_maxf(av, bv))
BINARY(minimum, tl_minf(av, bv))

UNARY(relu, (v > 0.0f || v != v) ? v : 0.0f) /* NaN passes through */
UNARY(abs, fabsf(v))
UNARY(sqrt, sqrtf(v))
UNARY(reciprocal, 1.0f / v)
UNARY(exp, tl_expf(v))
UNARY(log, logf(v))
UNARY(gelu, tl_geluf(v))
UNARY(sigmoid, tl_sigmoidf(v))
UNARY(tanh, tl_tanhf(v))
UNARY(softplus, tl_softplusf(v))

UNARY_BWD(relu_backward, v > 0.0f ? gv : 0.0f)
UNARY_BWD(abs_backward, v > 0.0f ? gv : (v < 0.0f ? -gv : 0.0f))
UNARY_BWD(sqrt_backward, v > 0.0f ? gv * 0.5f / sqrtf(v) : 0.0f)
UNARY_BWD(gelu_backward, gv * tl_gelu_gradf(v))
/* here x is the forward output y */
UNARY_BWD(sigmoid_backward, gv * v * (1.0f - v))
UNARY_BWD(tanh_backward, gv * (1.0f - v * v))
UNARY_BWD(softplus_backward, gv * tl_sigmoidf(v))

int tlk_scale(const char *op, tl_buf x, tl_buf y, int64_t n, double c) {
    const float *X = x->data; float *Y = y->data; const float cf = (float)c;
    LOOP(n) Y[i] = cf * X[i];
    return TL_OK;
}

int tlk_axpy(const char *op, tl_buf a, tl_buf b, tl_buf y, int64_t n, double c) {
    const float *A = a->data, *B = b->data; float *Y = y->data; const float cf = (float)c;
    LOOP(n) Y[i] = A[i] + cf * B[i];
    return TL_OK;
}

int tlk_safe_log(const char *op, tl_buf x, tl_buf y, int64_t n, double eps) {
    const float *X = x->data; float *Y = y->data; const float e = (float)eps;
    LOOP(n) Y[i] = logf(tl_softplusf(X[i]) + e);
    return TL_OK;
}

int tlk_safe_log_backward(const char *op, tl_buf x, tl_buf g, tl_buf dx, int64_t n, double eps) {
    const float *X = x->data, *G = g->data; float *D = dx->data; const float e = (float)eps;
    LOOP(n) { float v = X[i]; D[i] = G[i] * tl_sigmoidf(v) / (tl_softplusf(v) + e); }
    return TL_OK;
}

int tlk_clamp(const char *op, tl_buf x, tl_buf y, int64_t n, double lo, double hi) {
    const float *X = x->data; float *Y = y->data; const float l = (float)lo, h = (float)hi;
    LOOP(n) { float v = X[i]; Y[i] = v < l ? l : (v > h ? h : v); }
    return TL_OK;
}

int tlk_clamp_backward(const char *op, tl_buf x, tl_buf g, tl_buf dx, int64_t n, double lo, double hi) {
    const float *X = x->data, *G = g->data; float *D = dx->data;
    const float l = (float)lo, h = (float)hi;
    LOOP(n) { float v = X[i]; D[i] = (v > l && v < h) ? G[i] : 0.0f; }
    return TL_OK;
}

/* da: g where a wins, 0.5 g at a tie, else 0; the VJP forms db = g - da, so ties split 0.5/0.5 */
#define MINMAX_BWD(NAME, CMP)                                                         \
    int tlk_##NAME(const char *op, tl_buf a, tl_buf b, tl_buf g, tl_buf da, int64_t n) { \
        const float *A = a->data, *B = b->data, *G = g->data;                         \
        float *DA = da->data;                                         \
        LOOP(n) {                                                                     \
            float av = A[i], bv = B[i], gv = G[i];                                    \
            float w = (av CMP bv) ? 1.0f : (av == bv ? 0.5f : 0.0f);                  \
            DA[i] = w * gv;                                  \
        }                                                                             \
        return TL_OK;                                                                 \
    }

MINMAX_BWD(maximum_backward, >)
MINMAX_BWD(minimum_backward, <)
