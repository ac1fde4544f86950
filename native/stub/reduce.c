/* reduce.c (stub): reductions. Sums use fixed-size blocks combined in index order, so the
 * result does not depend on the thread count (deterministic mode needs nothing extra here).
 *
 * Axis reductions see x as (outer, len, inner) row-major and drop the middle axis. Two loop
 * shapes keep every read contiguous: inner == 1 sums each row; inner > 1 adds whole inner-rows
 * into per-chunk output rows in increasing k, vectorised across the independent outputs.
 *
 * Exact mode follows rule 4 of tl_math.h (chunks of TLM_CHUNK summed sequentially, then the
 * fixed binary tree over the chunk partials) for every sum; the inner > 1 shape always does,
 * since it costs no more than a plain running sum. Default mode sums contiguous rows with
 * tl_sum_f32_block (8 interleaved lanes, faster than one sequential chain). */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include "stub.h"
#include "generated/reduce_kernels.h"

#define SUM_BLOCK 16384

/* Rule 4 over x[0..n) on all threads: blocks of 64 chunks are aligned complete subtrees of the
 * rule's tree (the last block the tree of what is left), so tlm_tree_sum over the block sums,
 * each computed by tl_rule4_sum in parallel, is the whole tree. */
#define RULE4_BLOCK (64 * TLM_CHUNK)
static int rule4_sum(const char *op, const float *x, int64_t n, float *out) {
    int64_t nb = (n + RULE4_BLOCK - 1) / RULE4_BLOCK;
    if (nb <= 1) { *out = tl_rule4_sum(x, n); return TL_OK; }
    float *part = (float *)malloc((size_t)nb * sizeof(float));
    if (!part) return tl_fail(TL_E_OOM, "%s: out of host memory for %lld partial sums", op, (long long)nb);
#pragma omp parallel for schedule(static) if (nb > 2)
    for (int64_t b = 0; b < nb; b++) {
        int64_t lo = b * RULE4_BLOCK;
        part[b] = tl_rule4_sum(x + lo, n - lo < RULE4_BLOCK ? n - lo : RULE4_BLOCK);
    }
    *out = tlm_tree_sum(part, nb);
    free(part);
    return TL_OK;
}

/* fixed-order sum of n floats: blocks of SUM_BLOCK in parallel, then the partials in order
 * (rule 4 in exact mode). Hidden (not static): views.c reuses it for sum_to with a 0-d or
 * one-element target. */
TL_HIDDEN int tl_stub_sum_fixed(const char *op, const float *x, int64_t n, double *out) {
    if (tl_exact()) {
        float s = 0.0f;
        TL_TRY(rule4_sum(op, x, n, &s));
        *out = s;
        return TL_OK;
    }
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

/* chunk c of column tile t (outer index t / nch, columns from (t % nch) CH): the sequential sum of
 * its rows, whole inner-rows added in k order (vectorised over the tile's columns), into its row
 * of the partials (part, or y itself when there is one chunk) */
static inline void axis_chunk(const float *X, float *part, float *Y, int64_t len, int64_t inner,
                              int64_t nc, int64_t nch, int64_t CH, int64_t t, int64_t c) {
    int64_t o = t / nch, i0 = (t % nch) * CH, w = inner - i0 < CH ? inner - i0 : CH;
    const float *x = X + o * len * inner + i0;
    float *p = (part ? part + o * nc * inner + i0 : Y + o * inner + i0) + c * inner;
    int64_t k0 = c * TLM_CHUNK, k1 = len - k0 < TLM_CHUNK ? len : k0 + TLM_CHUNK;
    memcpy(p, x + k0 * inner, (size_t)w * sizeof(float));
    for (int64_t k = k0 + 1; k < k1; k++) {
        const float *xr = x + k * inner;
        for (int64_t i = 0; i < w; i++) p[i] = tlm_add(p[i], xr[i]);
    }
}

/* y[o, i] = sum_k x[o, k, i], times float32(1/len) when mean (NaN for an empty mean) */
static int axis_sum(const char *op, const float *X, float *Y, int64_t outer, int64_t len,
                    int64_t inner, int mean) {
    float sc = len ? 1.0f / (float)len : NAN;
    if (outer * inner == 0) return TL_OK;
    if (inner == 1) {
        int exact = tl_exact();
#pragma omp parallel for schedule(static) if (outer * len > TL_PAR_MIN)
        for (int64_t o = 0; o < outer; o++) {
            float s = exact ? tl_rule4_sum(X + o * len, len)
                            : (len ? (float)tl_sum_f32_block(X + o * len, len) : 0.0f);
            Y[o] = mean ? tlm_mul(s, sc) : s;
        }
        return TL_OK;
    }
    /* inner > 1, rule 4 per output: part[o][c][i] is chunk c's sequential sum (whole inner-rows
     * added in k order, vectorised over i), then the strided in-place tree over c, which pairs
     * exactly as tlm_tree_sum does. One chunk needs no scratch: it is written to y directly. */
    int64_t nc = (len + TLM_CHUNK - 1) / TLM_CHUNK;
    if (nc == 0) {
        for (int64_t j = 0; j < outer * inner; j++) Y[j] = mean ? NAN : 0.0f;
        return TL_OK;
    }
    float *part = NULL;
    if (nc > 1) {
        part = (float *)malloc((size_t)(outer * nc * inner) * sizeof(float));
        if (!part) return tl_fail(TL_E_OOM, "%s: out of host memory for %lld partial sums", op,
                                  (long long)(outer * nc * inner));
    }
    /* column tiles of at most 1024 outputs, narrower (down to 64) until every thread has one;
     * when there are still fewer tiles than threads (a tall, narrow x), the chunk sums run over
     * (tile, chunk) pairs first, then the trees. The tile width and the split change no bit:
     * each output's chain and tree are fixed. */
    const int parallel = outer * len * inner > TL_PAR_MIN;
    const int64_t threads = parallel ? omp_get_max_threads() : 1;
    int64_t CH = 1024;
    while (CH > 64 && outer * ((inner + CH - 1) / CH) < threads) CH /= 2;
    const int64_t nch = (inner + CH - 1) / CH, tiles = outer * nch;
    const int split = tiles < threads && nc > 1;
#pragma omp parallel for schedule(static) if (parallel && split)
    for (int64_t tc = 0; tc < (split ? tiles * nc : 0); tc++)
        axis_chunk(X, part, Y, len, inner, nc, nch, CH, tc / nc, tc % nc);
#pragma omp parallel for schedule(static) if (parallel && tiles > 1)
    for (int64_t t = 0; t < tiles; t++) {
        int64_t o = t / nch, i0 = (t % nch) * CH, w = inner - i0 < CH ? inner - i0 : CH;
        float *pb = part ? part + o * nc * inner + i0 : Y + o * inner + i0;
        for (int64_t c = 0; c < (split ? 0 : nc); c++) axis_chunk(X, part, Y, len, inner, nc, nch, CH, t, c);
        for (int64_t step = 1; step < nc; step *= 2)
            for (int64_t c = 0; c + step < nc; c += 2 * step) {
                float *a = pb + c * inner;
                const float *b = pb + (c + step) * inner;
                for (int64_t i = 0; i < w; i++) a[i] = tlm_add(a[i], b[i]);
            }
        float *y = Y + o * inner + i0;
        if (part) memcpy(y, pb, (size_t)w * sizeof(float));
        if (mean)
            for (int64_t i = 0; i < w; i++) y[i] = tlm_mul(y[i], sc);
    }
    free(part);
    return TL_OK;
}

/* The stub's one rule-4 column sum (stub.h): reduce_sum, sum_to, linear's bias gradient and the
 * norms' parameter gradients all run it. */
TL_HIDDEN int tl_stub_axis_sum(const char *op, const float *X, float *Y, int64_t outer,
                               int64_t len, int64_t inner) {
    return axis_sum(op, X, Y, outer, len, inner, 0);
}

/* reduce_sum (mean = 0) and reduce_mean (mean = 1) */
int tlk_reduce_sum(const char *op, tl_buf x, tl_buf y, int64_t outer, int64_t len, int64_t inner,
                   int64_t mean) {
    return axis_sum(op, x->data, y->data, outer, len, inner, (int)mean);
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
