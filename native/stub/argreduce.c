/* argreduce.c (stub): argmax/argmin over one axis and selecting one entry per position.
 *
 * Layout (outer, len, inner) around the axis. The scan runs in index order and keeps the first
 * best entry; a NaN beats every number (the first NaN wins), as PyTorch's max and argmax. No
 * arithmetic, so every mode gives the same bits on both libraries. Indices are written as
 * float32 whole numbers (the entry bounds len by 2^24, where every index is exact).
 */
#include "stub.h"
#include "generated/argreduce_kernels.h"

int tlk_argreduce(const char *op, tl_buf x, tl_buf y, int64_t outer, int64_t len, int64_t inner,
                  int64_t kind) {
    (void)op;
    const float *X = x->data;
    float *Y = y->data;
    const int64_t m = outer * inner;
    #pragma omp parallel for if(m * len > TL_PAR_MIN) schedule(static)
    for (int64_t j = 0; j < m; j++) {
        const float *row = X + (j / inner) * len * inner + j % inner;
        float best = row[0];
        int64_t at = 0;
        for (int64_t k = 1; k < len; k++) {
            float v = row[k * inner];
            int better = kind == 0 ? v > best : v < best;
            if (better || (v != v && best == best)) { best = v; at = k; }
        }
        Y[j] = (float)at;
    }
    return TL_OK;
}

/* a whole-number index in [0, len), or -1 (outside, or NaN) */
static inline int64_t index_of(float v, int64_t len) {
    return (v >= 0.0f && v < (float)len) ? (int64_t)v : -1;
}

int tlk_select_along_axis(const char *op, tl_buf x, tl_buf idx, tl_buf y, int64_t outer,
                          int64_t len, int64_t inner) {
    (void)op;
    const float *X = x->data, *I = idx->data;
    float *Y = y->data;
    const int64_t m = outer * inner;
    #pragma omp parallel for if(m > TL_PAR_MIN) schedule(static)
    for (int64_t j = 0; j < m; j++) {
        int64_t k = index_of(I[j], len);
        Y[j] = k < 0 ? 0.0f : X[(j / inner) * len * inner + k * inner + j % inner];
    }
    return TL_OK;
}

int tlk_select_along_axis_backward(const char *op, tl_buf idx, tl_buf g, tl_buf dx, int64_t outer,
                                   int64_t len, int64_t inner) {
    (void)op;
    const float *I = idx->data, *G = g->data;
    float *D = dx->data;
    const int64_t total = outer * len * inner;
    #pragma omp parallel for if(total > TL_PAR_MIN) schedule(static)
    for (int64_t e = 0; e < total; e++) {
        int64_t o = e / (len * inner), k = (e / inner) % len, i = e % inner;
        int64_t j = o * inner + i;
        D[e] = index_of(I[j], len) == k ? G[j] : 0.0f;
    }
    return TL_OK;
}
