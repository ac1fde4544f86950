/* index.c (stub): concat/slice along the leading axis, gathers and scatter-adds, and the masks
 * worked out from positions or a mask buffer with no host array (triangle, fill_masked).
 *
 * Index conventions (torchlean-inventory section 10 item 4): gathers read 0 for out-of-range
 * indices, scatter-adds skip them, duplicates accumulate in index order j = 0..k-1 (the same
 * fixed order the CUDA deterministic path uses). Negative indices are rejected in Python. */
#include <string.h>
#include "stub.h"
#include "formulas/sort.h"
#include "generated/index_kernels.h"

/* concat1d and concat0: both lay a then b out flat */
int tlk_concat(const char *op, tl_buf a, tl_buf b, tl_buf y, int64_t na, int64_t nb) {
    if (na) memcpy(y->data, a->data, (size_t)na * sizeof(float));
    if (nb) memcpy(y->data + na, b->data, (size_t)nb * sizeof(float));
    return TL_OK;
}

static int slice_rows(const char *op, tl_buf x, tl_buf y, int64_t lead, int64_t row, int64_t start,
                      int64_t length) {
    if (length * row != 0) memcpy(y->data, x->data + start * row, (size_t)(length * row) * sizeof(float));
    return TL_OK;
}

int tlk_slice1d(const char *op, tl_buf x, tl_buf y, int64_t n, int64_t start, int64_t length) {
    return slice_rows(op, x, y, n, 1, start, length);
}

int tlk_slice_range0(const char *op, tl_buf x, tl_buf y, int64_t lead, int64_t row, int64_t start, int64_t length) {
    return slice_rows(op, x, y, lead, row, start, length);
}

int tlk_pad_range0(const char *op, tl_buf g, tl_buf y, int64_t len, int64_t row, int64_t start, int64_t total) {
    if (total * row != 0) memset(y->data, 0, (size_t)(total * row) * sizeof(float));
    if (len * row != 0) memcpy(y->data + start * row, g->data, (size_t)(len * row) * sizeof(float));
    return TL_OK;
}

/* y[j, :] = x[idx[j], :] or zeros when idx[j] is out of range */
static int gather_rows_impl(const char *op, tl_buf x, tl_buf y, int64_t rows, int64_t cols,
                            const int64_t *idx, int64_t k) {
    for (int64_t j = 0; j < k; j++) {
        float *dst = y->data + j * cols;
        if (idx[j] >= 0 && idx[j] < rows) memcpy(dst, x->data + idx[j] * cols, (size_t)cols * sizeof(float));
        else memset(dst, 0, (size_t)cols * sizeof(float));
    }
    return TL_OK;
}

/* y = (x or zeros) with y[idx[j], :] += v[j, :] for in-range idx, j in increasing order */
static int scatter_rows_impl(const char *op, tl_buf x, tl_buf v, tl_buf y, int64_t rows, int64_t cols,
                             const int64_t *idx, int64_t k) {
    if (rows * cols != 0) {
        if (x) memcpy(y->data, x->data, (size_t)(rows * cols) * sizeof(float));
        else memset(y->data, 0, (size_t)(rows * cols) * sizeof(float));
    }
    for (int64_t j = 0; j < k; j++) {
        if (idx[j] < 0 || idx[j] >= rows) continue;
        float *dst = y->data + idx[j] * cols;
        const float *src = v->data + j * cols;
        for (int64_t c = 0; c < cols; c++) dst[c] += src[c];
    }
    return TL_OK;
}

int tlk_gather(const char *op, tl_buf x, tl_buf y, int64_t n, const int64_t *idx, int64_t idx_len) {
    return gather_rows_impl(op, x, y, n, 1, idx, 1);
}

int tlk_gather_row(const char *op, tl_buf x, tl_buf y, int64_t rows, int64_t cols, const int64_t *idx, int64_t idx_len) {
    return gather_rows_impl(op, x, y, rows, cols, idx, 1);
}

int tlk_gather_vec(const char *op, tl_buf x, tl_buf y, int64_t n, const int64_t *idx, int64_t idx_len) {
    return gather_rows_impl(op, x, y, n, 1, idx, idx_len);
}

int tlk_gather_vec_like(const char *op, tl_buf g, tl_buf v, tl_buf y, int64_t n, const int64_t *idx, int64_t idx_len) {
    return gather_rows_impl(op, g, y, n, 1, idx, idx_len);
}

int tlk_gather_rows(const char *op, tl_buf x, tl_buf y, int64_t rows, int64_t cols, const int64_t *idx, int64_t idx_len) {
    return gather_rows_impl(op, x, y, rows, cols, idx, idx_len);
}

int tlk_scatter_add_vec(const char *op, tl_buf x, tl_buf values, tl_buf y, int64_t n, const int64_t *idx, int64_t idx_len) {
    return scatter_rows_impl(op, x, values, y, n, 1, idx, idx_len);
}

int tlk_scatter_add_row(const char *op, tl_buf x, tl_buf values, tl_buf y, int64_t rows, int64_t cols, int64_t i) {
    return scatter_rows_impl(op, x, values, y, rows, cols, &i, 1);
}

int tlk_gather_vec_backward(const char *op, tl_buf g, tl_buf x, tl_buf y, int64_t n, const int64_t *idx, int64_t idx_len) {
    return scatter_rows_impl(op, NULL, g, y, n, 1, idx, idx_len);
}

int tlk_gather_rows_backward(const char *op, tl_buf g, tl_buf x, tl_buf y, int64_t rows, int64_t cols, const int64_t *idx,
                            int64_t idx_len) {
    return scatter_rows_impl(op, NULL, g, y, rows, cols, idx, idx_len);
}

int tlk_scatter_add_rows(const char *op, tl_buf x, tl_buf values, tl_buf y, int64_t rows, int64_t cols,
                         const int64_t *idx, int64_t idx_len) {
    return scatter_rows_impl(op, x, values, y, rows, cols, idx, idx_len);
}

/* torch's tril (upper 0) / triu (upper 1) of the matrices in the last two axes (m, c) */
int tlk_triangle(const char *op, tl_buf x, tl_buf y, int64_t n, int64_t m, int64_t c, int64_t diagonal,
                 int64_t upper) {
    (void)op;
    const float *X = x->data;
    float *Y = y->data;
    #pragma omp parallel for if(n > TL_PAR_MIN) schedule(static)
    for (int64_t t = 0; t < n; t++) {
        int64_t j = t % c, i = (t / c) % m;
        Y[t] = tl_triangle_keeps(i, j, diagonal, upper) ? X[t] : 0.0f;
    }
    return TL_OK;
}

/* masked_fill with a number: value where mask != 0 (NaN is true), x elsewhere */
int tlk_fill_masked(const char *op, tl_buf mask, tl_buf x, tl_buf y, int64_t n, double value) {
    (void)op;
    const float *M = mask->data, *X = x->data, v = (float)value;
    float *Y = y->data;
    #pragma omp parallel for if(n > TL_PAR_MIN) schedule(static)
    for (int64_t t = 0; t < n; t++) Y[t] = M[t] != 0.0f ? v : X[t];
    return TL_OK;
}
