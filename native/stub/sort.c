/* sort.c (stub): sorting rows, taking entries by position, running sums, products and extremes.
 *
 * Every kernel works on rows (rows, cols) (the catalog moves the dim last) and is the reference
 * order that cuda/sort.cu reproduces: the sort is stable on the keys of formulas/sort.h (so
 * its result is unique: any stable sort gives these positions), running sums and products take
 * the chunked order of formulas/sort.h, running extremes and the cumprod backward walk each
 * row once in order, and take_rows_backward adds a row's updates in index order. Positions
 * are float32 whole numbers (rows are at most 2^24 long, where every one is exact).
 */
#include <stdlib.h>
#include <string.h>
#include "stub.h"
#include "formulas/sort.h"
#include "generated/sort_kernels.h"

typedef struct { uint32_t key; int32_t pos; } sort_item;

static int by_key_then_pos(const void *pa, const void *pb) {
    const sort_item *a = pa, *b = pb;
    if (a->key != b->key) return a->key < b->key ? -1 : 1;
    return (a->pos > b->pos) - (a->pos < b->pos);
}

/* The positions that stably sort each row, the first k of them per row into out (rows x k) */
static int sort_rows_first(const char *op, const float *X, float *out, int64_t rows, int64_t cols, int64_t k,
                           int64_t descending) {
    int failed = 0;
    #pragma omp parallel if(rows > 1 && rows * cols > TL_PAR_MIN)
    {
        sort_item *items = malloc(sizeof(sort_item) * (size_t)(cols ? cols : 1));
        if (!items) {
            #pragma omp atomic write
            failed = 1;
        }
        #pragma omp for schedule(static)
        for (int64_t r = 0; r < rows; r++) {
            if (!items) continue;
            const float *row = X + r * cols;
            for (int64_t j = 0; j < cols; j++) items[j] = (sort_item){tlf_sort_key(row[j], descending), (int32_t)j};
            /* (key, position) pairs are all distinct: the one order is the stable sort's */
            qsort(items, (size_t)cols, sizeof(sort_item), by_key_then_pos);
            for (int64_t j = 0; j < k; j++) out[r * k + j] = (float)items[j].pos;
        }
        free(items);
    }
    if (failed) return tl_fail(TL_E_OOM, "%s: cannot allocate a row of %lld sort keys", op, (long long)cols);
    return TL_OK;
}

int tlk_argsort_rows(const char *op, tl_buf x, tl_buf idx, int64_t rows, int64_t cols, int64_t descending) {
    return sort_rows_first(op, x->data, idx->data, rows, cols, cols, descending);
}

/* top-k positions: the sort's first k (CUDA selects them without sorting the row: the same
 * positions, since the stable order is unique) */
int tlk_topk_rows(const char *op, tl_buf x, tl_buf idx, int64_t rows, int64_t cols, int64_t k, int64_t descending) {
    return sort_rows_first(op, x->data, idx->data, rows, cols, k, descending);
}

int tlk_take_rows(const char *op, tl_buf x, tl_buf idx, tl_buf y, int64_t rows, int64_t cols, int64_t k) {
    (void)op;
    const float *X = x->data, *I = idx->data;
    float *Y = y->data;
    #pragma omp parallel for if(rows * k > TL_PAR_MIN) schedule(static)
    for (int64_t t = 0; t < rows * k; t++) {
        int64_t c = tlf_row_index(I[t], cols);
        Y[t] = c < 0 ? 0.0f : X[(t / k) * cols + c];
    }
    return TL_OK;
}

int tlk_take_rows_backward(const char *op, tl_buf idx, tl_buf g, tl_buf dx, int64_t rows, int64_t k, int64_t cols,
                           int64_t distinct) {
    (void)op;
    (void)distinct; /* in index order, a distinct row's sums are its single updates: 0 + g */
    const float *I = idx->data, *G = g->data;
    float *D = dx->data;
    memset(D, 0, sizeof(float) * (size_t)(rows * cols));
    #pragma omp parallel for if(rows > 1 && rows * k > TL_PAR_MIN) schedule(static)
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < k; j++) {
            int64_t c = tlf_row_index(I[r * k + j], cols);
            if (c >= 0) D[r * cols + c] = tlm_add(D[r * cols + c], G[r * k + j]);
        }
    return TL_OK;
}

/* One row's running values in the chunked order of formulas/sort.h, read from the row's end
 * when reverse. Rows of at most TL_CUM_CHUNK chunks stream with one sequential carry; longer
 * rows write each chunk's own running values, take the carries from the running values of the
 * chunk totals (this same order, one level up: `scratch` holds 2 nch floats per level), and
 * add them. */
static void cum_row(const float *x, float *y, int64_t n, int64_t reverse, int64_t kind, float *scratch) {
    const int64_t nch = (n + TL_CUM_CHUNK - 1) / TL_CUM_CHUNK;
    if (nch <= TL_CUM_CHUNK) {
        float carry = 0.0f; /* the chunks before this one; unused in chunk 0 */
        for (int64_t c0 = 0; c0 < n; c0 += TL_CUM_CHUNK) {
            int64_t c1 = c0 + TL_CUM_CHUNK < n ? c0 + TL_CUM_CHUNK : n;
            float local = 0.0f;
            for (int64_t j = c0; j < c1; j++) {
                int64_t p = reverse ? n - 1 - j : j;
                local = j == c0 ? x[p] : tlf_cum_step(local, x[p], kind);
                y[p] = c0 == 0 ? local : tlf_cum_step(carry, local, kind);
            }
            carry = c0 == 0 ? local : tlf_cum_step(carry, local, kind);
        }
        return;
    }
    float *tot = scratch, *run = scratch + nch;
    for (int64_t c = 0; c < nch; c++) {
        int64_t c0 = c * TL_CUM_CHUNK, c1 = c0 + TL_CUM_CHUNK < n ? c0 + TL_CUM_CHUNK : n;
        float local = 0.0f;
        for (int64_t j = c0; j < c1; j++) {
            int64_t p = reverse ? n - 1 - j : j;
            local = j == c0 ? x[p] : tlf_cum_step(local, x[p], kind);
            y[p] = local;
        }
        tot[c] = local;
    }
    cum_row(tot, run, nch, 0, kind, scratch + 2 * nch);
    for (int64_t j = TL_CUM_CHUNK; j < n; j++) {
        int64_t p = reverse ? n - 1 - j : j;
        y[p] = tlf_cum_step(run[j / TL_CUM_CHUNK - 1], y[p], kind);
    }
}

int tlk_cumulative(const char *op, tl_buf x, tl_buf y, int64_t rows, int64_t cols, int64_t reverse, int64_t kind) {
    const float *X = x->data;
    float *Y = y->data;
    /* scratch for long rows: 2 nch floats per level, nch shrinking 256-fold a level */
    const int64_t nch = (cols + TL_CUM_CHUNK - 1) / TL_CUM_CHUNK, need = nch > TL_CUM_CHUNK ? 3 * nch + 64 : 0;
    int failed = 0;
    #pragma omp parallel if(rows > 1 && rows * cols > TL_PAR_MIN)
    {
        float *scratch = need ? malloc(sizeof(float) * (size_t)need) : NULL;
        if (need && !scratch) {
            #pragma omp atomic write
            failed = 1;
        }
        #pragma omp for schedule(static)
        for (int64_t r = 0; r < rows; r++)
            if (!need || scratch) cum_row(X + r * cols, Y + r * cols, cols, reverse, kind, scratch);
        free(scratch);
    }
    if (failed) return tl_fail(TL_E_OOM, "%s: cannot allocate the running totals of a row of %lld", op, (long long)cols);
    return TL_OK;
}

int tlk_cumprod_rows_backward(const char *op, tl_buf x, tl_buf g, tl_buf dx, int64_t rows, int64_t cols,
                              int64_t reverse) {
    (void)op;
    const float *X = x->data, *G = g->data;
    float *D = dx->data;
    #pragma omp parallel for if(rows > 1 && rows * cols > TL_PAR_MIN) schedule(static)
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = X + r * cols, *gr = G + r * cols;
        float *dr = D + r * cols;
#define TL_POS(j) (reverse ? cols - 1 - (j) : (j))
        float s = gr[TL_POS(cols - 1)];
        dr[TL_POS(cols - 1)] = s;
        for (int64_t j = cols - 2; j >= 0; j--) {
            s = tlf_cumprod_carry(gr[TL_POS(j)], xr[TL_POS(j + 1)], s);
            dr[TL_POS(j)] = s;
        }
        float before = 1.0f; /* x_0 ... x_{j-1} */
        for (int64_t j = 0; j < cols; j++) {
            dr[TL_POS(j)] = tlm_mul(before, dr[TL_POS(j)]);
            before = tlm_mul(before, xr[TL_POS(j)]);
        }
#undef TL_POS
    }
    return TL_OK;
}

int tlk_cumarg_rows(const char *op, tl_buf x, tl_buf idx, int64_t rows, int64_t cols, int64_t kind) {
    (void)op;
    const float *X = x->data;
    float *I = idx->data;
    #pragma omp parallel for if(rows > 1 && rows * cols > TL_PAR_MIN) schedule(static)
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = X + r * cols;
        float best = xr[0];
        int64_t at = 0;
        for (int64_t j = 0; j < cols; j++) {
            if (j > 0 && tlf_cumarg_takes(xr[j], best, kind)) { best = xr[j]; at = j; }
            I[r * cols + j] = (float)at;
        }
    }
    return TL_OK;
}

int tlk_put_add_rows(const char *op, tl_buf x, tl_buf idx, tl_buf values, tl_buf y, int64_t rows, int64_t cols,
                     int64_t k) {
    (void)op;
    const float *I = idx->data, *V = values->data;
    float *Y = y->data;
    if (rows > 0 && cols > 0) memcpy(Y, x->data, sizeof(float) * (size_t)(rows * cols));
    #pragma omp parallel for if(rows > 1 && rows * k > TL_PAR_MIN) schedule(static)
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < k; j++) {
            int64_t c = tlf_row_index(I[r * k + j], cols);
            if (c >= 0) Y[r * cols + c] = tlm_add(Y[r * cols + c], V[r * k + j]);
        }
    return TL_OK;
}
