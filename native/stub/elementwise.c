/* elementwise.c (stub): pointwise kernels over equal-length buffers.
 *
 * Buffers hold exactly n floats, except binary_broadcast's inputs, read through broadcast
 * strides (the ops add to minimum take it when their input shapes differ).
 * Kernels are written in the canonical arithmetic of native/common/tl_math.h (IEEE operations
 * named one by one, the polynomial exp/tanh/gelu...), which CUDA's elementwise.cu calls in the
 * same order, so exact mode gives the same bits on both. The transcendental functions are
 * correctly rounded and branch-free, so their loops vectorise (exp, tanh, log, softplus and
 * safe_log are canonical in every mode, faster than libm's scalar calls; sigmoid in exact mode
 * only).
 * Numerical conventions (inventory section 10): relu'/clamp' only strictly inside, abs' uses
 * sign(0) = 0, sqrt' = 0 for x <= 0, max/min ties split 0.5/0.5, and sigmoid/tanh/softplus never
 * overflow for large |x|.
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

/* default-mode sigmoid, overflow-safe: exp of a non-positive argument only, 1 / (1 + e) for
 * x >= 0 and e / (1 + e) below; branch-free so the loop vectorises (NaN gives NaN through e) */
static inline float fast_sigmoid(float v) {
    float e = tlm_exp(-fabsf(v));
    return (v >= 0.0f ? 1.0f : e) / (1.0f + e);
}

/* tlm_sigmoid over a block (branch-free, so the loop vectorises) */
#define SIG_BLOCK 512
static TL_VEC512 void sigmoid_exact_block(const float *X, float *Y, int64_t len) {
    for (int64_t i = 0; i < len; i++) Y[i] = tlm_sigmoid(X[i]);
}

/* BLOCK(x, y, len) over x[0..n) into y, blocks split across threads */
static void by_blocks(void (*block)(const float *, float *, int64_t), const float *X, float *Y, int64_t n) {
    const int64_t nb = (n + SIG_BLOCK - 1) / SIG_BLOCK;
    #pragma omp parallel for schedule(static) if(n > TL_PAR_MIN)
    for (int64_t b = 0; b < nb; b++) {
        int64_t i0 = b * SIG_BLOCK, len = n - i0 < SIG_BLOCK ? n - i0 : SIG_BLOCK;
        block(X + i0, Y + i0, len);
    }
}

/* tlm_log over a block (branch-free, so the loop vectorises) */
static TL_VEC512 void log_exact_block(const float *X, float *Y, int64_t len) {
    for (int64_t i = 0; i < len; i++) Y[i] = tlm_log(X[i]);
}

/* NaN-propagating max/min: fmaxf would drop a NaN operand */
static inline float tl_maxf(float a, float b) { return (a != a || a >= b) ? a : b; }
static inline float tl_minf(float a, float b) { return (a != a || a <= b) ? a : b; }

BINARY(add, tlm_add(av, bv))
BINARY(sub, tlm_sub(av, bv))
BINARY(mul, tlm_mul(av, bv))
BINARY(div, tlm_div(av, bv))
BINARY(maximum, tl_maxf(av, bv))
BINARY(minimum, tl_minf(av, bv))

/* binary_broadcast: one output row (the last coalesced axis) of fn(a, b), a and b read through
 * strides (0 along the axes they are broadcast on). */
#define BCAST_ROW(NAME, EXPR)                                                                 \
    static void NAME##_row(const float *A, int64_t sa, const float *B, int64_t sb, float *Y,  \
                           int64_t len) {                                                      \
        for (int64_t k = 0; k < len; k++) { float av = A[k * sa], bv = B[k * sb]; Y[k] = (EXPR); } \
    }
BCAST_ROW(add, tlm_add(av, bv))
BCAST_ROW(sub, tlm_sub(av, bv))
BCAST_ROW(mul, tlm_mul(av, bv))
BCAST_ROW(div, tlm_div(av, bv))
BCAST_ROW(maximum, tl_maxf(av, bv))
BCAST_ROW(minimum, tl_minf(av, bv))

typedef void (*bcast_row_fn)(const float *, int64_t, const float *, int64_t, float *, int64_t);

/* The broadcasting form of add, sub, mul, div, maximum and minimum (fn 0..5): the op's own
 * expression per element, so the bits of the op on expanded copies, without the copies. */
int tlk_binary_broadcast(const char *op, tl_buf a, tl_buf b, tl_buf y, const int64_t *y_dims, int64_t y_dims_len,
                        const int64_t *a_dims, int64_t a_dims_len, const int64_t *b_dims, int64_t b_dims_len,
                        int64_t fn) {
    static const bcast_row_fn rows_of[6] = {add_row, sub_row, mul_row, div_row, maximum_row, minimum_row};
    int64_t r = y_dims_len;
    if (r < 1 || r > TL_MAX_RANK || a_dims_len != r || b_dims_len != r)
        return tl_fail(TL_E_ARG, "%s: expected 1 to %d coalesced axes, the same number for a, b and y; got %lld, "
                       "%lld and %lld", op, TL_MAX_RANK, (long long)a_dims_len, (long long)b_dims_len,
                       (long long)r);
    int64_t sa[TL_MAX_RANK], sb[TL_MAX_RANK];
    for (int64_t k = r - 1, ea = 1, eb = 1; k >= 0; k--) { /* row-major strides, 0 where broadcast */
        sa[k] = a_dims[k] == 1 ? 0 : ea;
        sb[k] = b_dims[k] == 1 ? 0 : eb;
        ea *= a_dims[k];
        eb *= b_dims[k];
    }
    const float *A = a->data, *B = b->data;
    float *Y = y->data;
    bcast_row_fn row = rows_of[fn];
    int64_t len = y_dims[r - 1], nrows = 1;
    for (int64_t k = 0; k < r - 1; k++) nrows *= y_dims[k];
#pragma omp parallel for schedule(static) if (nrows * len > TL_PAR_MIN && nrows > 1)
    for (int64_t i = 0; i < nrows; i++) {
        int64_t ao = 0, bo = 0, rest = i;
        for (int64_t k = r - 2; k >= 0; k--) {
            int64_t idx = rest % y_dims[k];
            rest /= y_dims[k];
            ao += idx * sa[k];
            bo += idx * sb[k];
        }
        row(A + ao, sa[r - 1], B + bo, sb[r - 1], Y + i * len, len);
    }
    return TL_OK;
}

/* layer_norm's y from xhat: the same two rounded operations as norm.c's forward */
int tlk_affine_rows(const char *op, tl_buf x, tl_buf gamma, tl_buf beta, tl_buf y, int64_t rows, int64_t cols) {
    const float *X = x->data, *G = gamma->data, *B = beta->data;
    float *Y = y->data;
#pragma omp parallel for schedule(static) if (rows * cols > TL_PAR_MIN && rows > 1)
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < cols; j++) Y[r * cols + j] = tlm_add(tlm_mul(X[r * cols + j], G[j]), B[j]);
    return TL_OK;
}

UNARY(relu, (v > 0.0f || v != v) ? v : 0.0f) /* NaN passes through */
UNARY(abs, tlm_abs(v))
UNARY(sqrt, tlm_sqrt(v))
UNARY(reciprocal, tlm_div(1.0f, v))
UNARY(exp, tlm_exp(v))
/* canonical in every mode: the blocked form is faster than libm's scalar logf */
int tlk_log(const char *op, tl_buf x, tl_buf y, int64_t n) {
    by_blocks(log_exact_block, x->data, y->data, n);
    return TL_OK;
}
UNARY(gelu, tlm_gelu(v))
int tlk_sigmoid(const char *op, tl_buf x, tl_buf y, int64_t n) {
    const float *X = x->data; float *Y = y->data;
    if (tl_exact()) { by_blocks(sigmoid_exact_block, X, Y, n); return TL_OK; }
    LOOP(n) Y[i] = fast_sigmoid(X[i]);
    return TL_OK;
}
UNARY(tanh, tlm_tanh(v))
UNARY(softplus, tlm_softplus(v))

UNARY_BWD(relu_backward, v > 0.0f ? gv : 0.0f)
UNARY_BWD(abs_backward, v > 0.0f ? gv : (v < 0.0f ? -gv : 0.0f))
UNARY_BWD(sqrt_backward, v > 0.0f ? tlm_div(tlm_mul(gv, 0.5f), tlm_sqrt(v)) : 0.0f)
UNARY_BWD(gelu_backward, tlm_mul(gv, tlm_gelu_grad(v)))
/* here x is the forward output y: g y (1 - y) and g (1 - y^2) */
UNARY_BWD(sigmoid_backward, tlm_mul(tlm_mul(gv, v), tlm_sub(1.0f, v)))
UNARY_BWD(tanh_backward, tlm_mul(gv, tlm_sub(1.0f, tlm_mul(v, v))))
/* g sigmoid(x); exact mode computes sigmoid(x) into dx first, then multiplies in place */
int tlk_softplus_backward(const char *op, tl_buf x, tl_buf g, tl_buf dx, int64_t n) {
    const float *X = x->data, *G = g->data; float *D = dx->data;
    if (tl_exact()) {
        by_blocks(sigmoid_exact_block, X, D, n);
        LOOP(n) D[i] = tlm_mul(G[i], D[i]);
    } else {
        LOOP(n) D[i] = G[i] * fast_sigmoid(X[i]);
    }
    return TL_OK;
}

int tlk_scale(const char *op, tl_buf x, tl_buf y, int64_t n, double c) {
    const float *X = x->data; float *Y = y->data; const float cf = (float)c;
    LOOP(n) Y[i] = tlm_mul(cf, X[i]);
    return TL_OK;
}

int tlk_axpy(const char *op, tl_buf a, tl_buf b, tl_buf y, int64_t n, double c) {
    const float *A = a->data, *B = b->data; float *Y = y->data; const float cf = (float)c;
    LOOP(n) Y[i] = tlm_add(A[i], tlm_mul(cf, B[i]));
    return TL_OK;
}

/* log(softplus(x) + eps) */
TL_VEC512 int tlk_safe_log(const char *op, tl_buf x, tl_buf y, int64_t n, double eps) {
    const float *X = x->data; float *Y = y->data; const float e = (float)eps;
    const int64_t nb = (n + SIG_BLOCK - 1) / SIG_BLOCK;
    #pragma omp parallel for schedule(static) if(n > TL_PAR_MIN)
    for (int64_t b = 0; b < nb; b++) {
        int64_t i0 = b * SIG_BLOCK, len = n - i0 < SIG_BLOCK ? n - i0 : SIG_BLOCK;
        float t[SIG_BLOCK];
        for (int64_t i = 0; i < len; i++) t[i] = tlm_add(tlm_softplus(X[i0 + i]), e);
        log_exact_block(t, Y + i0, len);
    }
    return TL_OK;
}

/* (g sigmoid(x)) / (softplus(x) + eps) */
TL_VEC512 int tlk_safe_log_backward(const char *op, tl_buf x, tl_buf g, tl_buf dx, int64_t n, double eps) {
    const float *X = x->data, *G = g->data; float *D = dx->data; const float e = (float)eps;
    if (tl_exact()) {
        LOOP(n) { float v = X[i]; D[i] = tlm_div(tlm_mul(G[i], tlm_sigmoid(v)), tlm_add(tlm_softplus(v), e)); }
    } else {
        LOOP(n) { float v = X[i]; D[i] = G[i] * fast_sigmoid(v) / (tlm_softplus(v) + e); }
    }
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
        float *DA = da->data;                                                      \
        LOOP(n) {                                                                     \
            float av = A[i], bv = B[i], gv = G[i];                                    \
            float w = (av CMP bv) ? 1.0f : (av == bv ? 0.5f : 0.0f);                  \
            DA[i] = tlm_mul(w, gv);                                                   \
        }                                                                             \
        return TL_OK;                                                                 \
    }

MINMAX_BWD(maximum_backward, >)
MINMAX_BWD(minimum_backward, <)
