/* reduce.c (stub): reductions. Sums use fixed-size blocks combined in index order, so the
 * result does not depend on the thread count (deterministic mode needs nothing extra here).
 *
 * Axis reductions see x as (outer, len, inner) row-major and drop the middle axis. Two loop
 * shapes keep every read contiguous: inner == 1 sums each row with tl_sum_f32_block; inner > 1
 * adds whole inner-rows into the output row in increasing k (a fixed order per output). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "stub.h"
#include "entry/reduce_kernels.h"

#define SUM_BLOCK 16384

/* fixed-order sum of n floats: blocks of SUM_BLOCK in parallel, then the partials in order.
 * Hidden (not static): views.c reuses it for sum_to with a 0-d or one-element target. */
TL_HIDDEN int tl_stub_sum_fixed(const char *op, const float *x, int64_t n, double *out) {
    int64_t nb = (n + SUM_BLOCK - 1) / SUM_BLOCK;
    if (nb <= 1) { *out = n ? tl_sum_f32_block(x, n) : 0.0; return TL_OK; }
    double *part = (double *)malloc((size_t)nb * sizeof(double));
    if (!part) return tl_fail(TL_E_OOM, "%s: out of host memory for %lld partial sums", op, (long long)nb);
#pragma omp parallel for schedule(static) if (nb > 2)
    for (int64_t b = 0; b < nb; b++) {
        int64_t lo = b * SUM_BLOCK, len = n - lo < SUM_BLOCK ? n - lo : SUM_BLOCK;
        part[b] = tl_sum_f32_block(x + lo, len);
    }
    double s = 0.0;
    for (int64_t b = 0; b < nb; b++) s += part[b];
    free(part);
    *out = s;
    return TL_OK;
}

int tlk_sum(const char *op, tl_buf x, tl_buf y, int64_t n) {
    double s = 0.0;
    TL_TRY(tl_stub_sum_fixed("sum", x->data, n, &s));
    y->data[0] = (float)s;
    return TL_OK;
}

/* y[o, i] = scale * sum_k x[o, k, i]; scale < 0 means "no scaling" (plain sum) */
static void axis_sum(const float *X, float *Y, int64_t outer, int64_t len, int64_t inner, int mean) {
    float sc = len ? 1.0f / (float)len : NAN;
    if (inner == 1) {
#pragma omp parallel for schedule(static) if (outer * len > TL_PAR_MIN)
        for (int64_t o = 0; o < outer; o++) {
            float s = len ? (float)tl_sum_f32_block(X + o * len, len) : 0.0f;
            Y[o] = mean ? s * sc : s;
        }
        return;
    }
    /* inner > 1: accumulate contiguous inner rows; parallel over (o, inner chunk) tiles */
    const int64_t CH = 1024;
    int64_t nch = (inner + CH - 1) / CH, tiles = outer * nch;
#pragma omp parallel for schedule(static) if (outer * len * inner > TL_PAR_MIN)
    for (int64_t t = 0; t < tiles; t++) {
        int64_t o = t / nch, i0 = (t % nch) * CH, w = inner - i0 < CH ? inner - i0 : CH;
        float *y = Y + o * inner + i0;
        const float *x = X + o * len * inner + i0;
        for (int64_t i = 0; i < w; i++) y[i] = 0.0f;
        for (int64_t k = 0; k < len; k++) {
            const float *xr = x + k * inner;
            for (int64_t i = 0; i < w; i++) y[i] += xr[i];
        }
        if (mean)
            for (int64_t i = 0; i < w; i++) y[i] *= sc;
    }
}

/* reduce_sum (mean = 0) and reduce_mean (mean = 1) */
int tlk_reduce_sum(const char *op, tl_buf x, tl_buf y, int64_t outer, int64_t len, int64_t inner,
                   int64_t mean) {
    axis_sum(x->data, y->data, outer, len, inner, (int)mean);
    return TL_OK;
}

int tlk_reduce_axis_backward(const char *op, tl_buf g, tl_buf dx, int64_t outer, int64_t len, int64_t inner, int64_t mean) {
    const float *G = g->data; float *D = dx->data;
    float sc = len ? 1.0f / (float)len : 0.0f;
    int64_t rowsz = len * inner;
#pragma omp parallel for schedule(static) if (outer * rowsz > TL_PAR_MIN)
    for (int64_t o = 0; o < outer; o++)
        for (int64_t k = 0; k < len; k++) {
            float *d = D + o * rowsz + k * inner;
            const float *gr = G + o * inner;
            if (mean) for (int64_t i = 0; i < inner; i++) d[i] = gr[i] * sc;
            else memcpy(d, gr, (size_t)inner * sizeof(float));
        }
    return TL_OK;
}

/* NaN-propagating max step: once m is NaN it stays NaN */
static inline float max_step(float m, float v) { return (v > m || v != v) ? v : m; }

int tlk_reduce_max(const char *op, tl_buf x, tl_buf y, int64_t outer, int64_t len, int64_t inner) {
    const float *X = x->data; float *Y = y->data;
    if (len == 0) { /* totalised: the max over an empty axis is 0 */
        for (int64_t i = 0; i < outer * inner; i++) Y[i] = 0.0f;
        return TL_OK;
    }
#pragma omp parallel for schedule(static) if (outer * len * inner > TL_PAR_MIN)
    for (int64_t o = 0; o < outer; o++) {
        const float *xo = X + o * len * inner;
        float *yo = Y + o * inner;
        for (int64_t i = 0; i < inner; i++) yo[i] = xo[i];
        for (int64_t k = 1; k < len; k++) {
            const float *xr = xo + k * inner;
            for (int64_t i = 0; i < inner; i++) yo[i] = max_step(yo[i], xr[i]);
        }
    }
    return TL_OK;
}

/* Ties share: every entry equal to the max gets g / (number of such entries). */
int tlk_reduce_max_backward(const char *op, tl_buf x, tl_buf y, tl_buf g, tl_buf dx, int64_t outer, int64_t len,
                           int64_t inner) {
    const float *X = x->data, *Y = y->data, *G = g->data; float *D = dx->data;
    if (outer * inner == 0 || len == 0) return TL_OK;
    if (inner == 1) {
#pragma omp parallel for schedule(static) if (outer * len > TL_PAR_MIN)
        for (int64_t o = 0; o < outer; o++) {
            const float *xr = X + o * len; float *dr = D + o * len; float m = Y[o];
            int64_t cnt = 0;
            for (int64_t k = 0; k < len; k++) cnt += xr[k] == m;
            float share = cnt ? G[o] / (float)cnt : 0.0f;
            for (int64_t k = 0; k < len; k++) dr[k] = xr[k] == m ? share : 0.0f;
        }
        return TL_OK;
    }
    /* inner > 1: count ties row by row (contiguous reads), then write */
    float *cnt = (float *)calloc((size_t)(outer * inner), sizeof(float));
    if (!cnt) return tl_fail(TL_E_OOM, "%s: out of host memory for %lld tie counts", op,
                             (long long)(outer * inner));
#pragma omp parallel for schedule(static) if (outer * len * inner > TL_PAR_MIN)
    for (int64_t o = 0; o < outer; o++) {
        const float *xo = X + o * len * inner, *yo = Y + o * inner;
        float *co = cnt + o * inner;
        for (int64_t k = 0; k < len; k++)
            for (int64_t i = 0; i < inner; i++) co[i] += xo[k * inner + i] == yo[i] ? 1.0f : 0.0f;
        float *dO = D + o * len * inner;
        for (int64_t k = 0; k < len; k++)
            for (int64_t i = 0; i < inner; i++) {
                float c = co[i];
                dO[k * inner + i] = (xo[k * inner + i] == yo[i] && c > 0.0f) ? G[o * inner + i] / c : 0.0f;
            }
    }
    free(cnt);
    return TL_OK;
}
