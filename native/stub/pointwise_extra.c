/* pointwise_extra.c (stub): pow, erf, exact GELU and PyTorch's softplus, with their VJPs.
 *
 * Every body is the canonical arithmetic of tl_math.h / tl_math_extra.h, stage by stage (the
 * shared pointwise_extra.h formulas), so the stub and CUDA give the same bits in every mode.
 */
#include "stub.h"
#include "pointwise_extra.h"
#include "entry/pointwise_extra_kernels.h"

#define LOOP(n) _Pragma("omp parallel for if(n > TL_PAR_MIN / 8) schedule(static)") \
    for (int64_t i = 0; i < n; i++)

int tlk_pow(const char *op, tl_buf a, tl_buf b, tl_buf y, int64_t n) {
    (void)op;
    const float *A = a->data, *B = b->data; float *Y = y->data;
    LOOP(n) Y[i] = tlm_pow(A[i], B[i]);
    return TL_OK;
}

int tlk_pow_backward_base(const char *op, tl_buf a, tl_buf b, tl_buf g, tl_buf da, int64_t n) {
    (void)op;
    const float *A = a->data, *B = b->data, *G = g->data; float *D = da->data;
    LOOP(n) D[i] = tlx_pow_grad_base(A[i], B[i], G[i]);
    return TL_OK;
}

int tlk_pow_backward_exponent(const char *op, tl_buf a, tl_buf b, tl_buf y, tl_buf g, tl_buf db,
                              int64_t n) {
    (void)op;
    const float *A = a->data, *B = b->data, *Y = y->data, *G = g->data; float *D = db->data;
    LOOP(n) D[i] = tlx_pow_grad_exponent(A[i], B[i], Y[i], G[i]);
    return TL_OK;
}

int tlk_pow_scalar(const char *op, tl_buf x, tl_buf y, int64_t n, double p) {
    (void)op;
    const float *X = x->data; float *Y = y->data;
    const float pf = (float)p;
    LOOP(n) Y[i] = tlm_pow(X[i], pf);
    return TL_OK;
}

int tlk_pow_scalar_backward(const char *op, tl_buf x, tl_buf g, tl_buf dx, int64_t n, double p) {
    (void)op;
    const float *X = x->data, *G = g->data; float *D = dx->data;
    const float pf = (float)p;
    LOOP(n) D[i] = tlx_pow_grad_base(X[i], pf, G[i]);
    return TL_OK;
}

/* erf over a block: a plain loop, which GCC vectorises (its table reads become gathers); the
 * same loop inside the OpenMP-outlined body is left scalar */
static TL_VEC512 __attribute__((noinline)) void erf_block(const float *X, float *Y, int64_t len) {
    for (int64_t i = 0; i < len; i++) Y[i] = tlm_erf(X[i]);
}

int tlk_erf(const char *op, tl_buf x, tl_buf y, int64_t n) {
    (void)op;
    const float *X = x->data; float *Y = y->data;
    const int64_t B = 1024, nb = (n + B - 1) / B;
#pragma omp parallel for if (n > TL_PAR_MIN / 8) schedule(static)
    for (int64_t b = 0; b < nb; b++) erf_block(X + b * B, Y + b * B, n - b * B < B ? n - b * B : B);
    return TL_OK;
}

int tlk_erf_backward(const char *op, tl_buf x, tl_buf g, tl_buf dx, int64_t n) {
    (void)op;
    const float *X = x->data, *G = g->data; float *D = dx->data;
    LOOP(n) D[i] = tlx_erf_grad(X[i], G[i]);
    return TL_OK;
}

int tlk_gelu_erf(const char *op, tl_buf x, tl_buf y, int64_t n) {
    (void)op;
    const float *X = x->data; float *Y = y->data;
    LOOP(n) Y[i] = tlx_gelu_erf(X[i]);
    return TL_OK;
}

int tlk_gelu_erf_backward(const char *op, tl_buf x, tl_buf g, tl_buf dx, int64_t n) {
    (void)op;
    const float *X = x->data, *G = g->data; float *D = dx->data;
    LOOP(n) D[i] = tlx_gelu_erf_grad(X[i], G[i]);
    return TL_OK;
}

int tlk_softplus_beta(const char *op, tl_buf x, tl_buf y, int64_t n, double beta, double threshold) {
    (void)op;
    const float *X = x->data; float *Y = y->data;
    const float bf = (float)beta, tf = (float)threshold;
    LOOP(n) Y[i] = tlx_softplus_beta(X[i], bf, tf);
    return TL_OK;
}

int tlk_softplus_beta_backward(const char *op, tl_buf x, tl_buf g, tl_buf dx, int64_t n,
                               double beta, double threshold) {
    (void)op;
    const float *X = x->data, *G = g->data; float *D = dx->data;
    const float bf = (float)beta, tf = (float)threshold;
    LOOP(n) D[i] = tlx_softplus_beta_grad(X[i], G[i], bf, tf);
    return TL_OK;
}
