/* elementwise.c (stub): pointwise kernels over equal-length buffers. */
#include "stub.h"

#define BINARY(NAME, EXPR)                                                           \
    int tl_##NAME(tl_buf a, tl_buf b, tl_buf y, int64_t n) {                         \
        TL_CHECK(#NAME, a, n); TL_CHECK(#NAME, b, n); TL_CHECK(#NAME, y, n);         \
        const float *A = a->data, *B = b->data; float *Y = y->data;                  \
        _Pragma("omp parallel for simd if(n > TL_PAR_MIN) schedule(static)")         \
        for (int64_t i = 0; i < n; i++) { float av = A[i], bv = B[i]; Y[i] = (EXPR); } \
        return TL_OK;                                                                \
    }

#define UNARY(NAME, EXPR)                                                            \
    int tl_##NAME(tl_buf x, tl_buf y, int64_t n) {                                   \
        TL_CHECK(#NAME, x, n); TL_CHECK(#NAME, y, n);                                \
        const float *X = x->data; float *Y = y->data;                                \
        _Pragma("omp parallel for simd if(n > TL_PAR_MIN) schedule(static)")         \
        for (int64_t i = 0; i < n; i++) { float v = X[i]; Y[i] = (EXPR); }           \
        return TL_OK;                                                                \
    }

/* dx = f(x, g) */
#define UNARY_BWD(NAME, EXPR)                                                        \
    int tl_##NAME(tl_buf x, tl_buf g, tl_buf dx, int64_t n) {                        \
        TL_CHECK(#NAME, x, n); TL_CHECK(#NAME, g, n); TL_CHECK(#NAME, dx, n);        \
        const float *X = x->data, *G = g->data; float *D = dx->data;                 \
        _Pragma("omp parallel for simd if(n > TL_PAR_MIN) schedule(static)")         \
        for (int64_t i = 0; i < n; i++) { float v = X[i], gv = G[i]; D[i] = (EXPR); } \
        return TL_OK;                                                                \
    }

BINARY(add, av + bv)
BINARY(mul, av * bv)

UNARY(relu, v > 0.0f ? v : 0.0f)
UNARY_BWD(relu_backward, v > 0.0f ? gv : 0.0f)
