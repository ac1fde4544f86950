/* index.c (stub): concat/slice along the leading axis, gathers and scatter-adds.
 *
 * Index conventions (torchlean-inventory section 10 item 4): gathers read 0 for out-of-range
 * indices, scatter-adds skip them, duplicates accumulate in index order j = 0..k-1 (the same
 * fixed order the CUDA deterministic path uses). Negative indices are rejected in Python. */
#include <string.h>
#include "stub.h"

int tl_concat1d(tl_buf a, tl_buf b, tl_buf y, int64_t na, int64_t nb) {
    TL_CHECK("concat1d", a, na); TL_CHECK("concat1d", b, nb); TL_CHECK("concat1d", y, na + nb);
    if (na) memcpy(y->data, a->data, (size_t)na * sizeof(float));
    if (nb) memcpy(y->data + na, b->data, (size_t)nb * sizeof(float));
    return TL_OK;
}

int tl_concat0(tl_buf a, tl_buf b, tl_buf y, int64_t na, int64_t nb) {
    TL_CHECK("concat0", a, na); TL_CHECK("concat0", b, nb); TL_CHECK("concat0", y, na + nb);
    if (na) memcpy(y->data, a->data, (size_t)na * sizeof(float));
    if (nb) memcpy(y->data + na, b->data, (size_t)nb * sizeof(float));
    return TL_OK;
}

static int slice_rows(const char *op, tl_buf x, tl_buf y, int64_t lead, int64_t row, int64_t start,
                      int64_t length) {
    if (start < 0 || length < 0 || start + length > lead)
        return tl_fail(TL_E_SHAPE, "%s: range [%lld:%lld] is out of range for length %lld", op,
                       (long long)start, (long long)(start + length), (long long)lead);
    TL_CHECK(op, x, lead * row); TL_CHECK(op, y, length * row);
    if (length * row != 0) memcpy(y->data, x->data + start * row, (size_t)(length * row) * sizeof(float));
    return TL_OK;
}

int tl_slice1d(tl_buf x, tl_buf y, int64_t n, int64_t start, int64_t length) {
    return slice_rows("slice1d", x, y, n, 1, start, length);
}

int tl_slice_range0(tl_buf x, tl_buf y, int64_t lead, int64_t row, int64_t start, int64_t length) {
    return slice_rows("slice_range0", x, y, lead, row, start, length);
}

int tl_pad_range0(tl_buf g, tl_buf y, int64_t len, int64_t row, int64_t start, int64_t total) {
    if (start < 0 || len < 0 || start + len > total)
        return tl_fail(TL_E_SHAPE, "pad_range0: range [%lld:%lld] does not fit %lld", (long long)start,
                       (long long)(start + len), (long long)total);
    TL_CHECK("pad_range0", g, len * row); TL_CHECK("pad_range0", y, total * row);
    if (total * row != 0) memset(y->data, 0, (size_t)(total * row) * sizeof(float));
    if (len * row != 0) memcpy(y->data + start * row, g->data, (size_t)(len * row) * sizeof(float));
    return TL_OK;
}

/* y[j, :] = x[idx[j], :] or zeros when idx[j] is out of range */
static int gather_rows_impl(const char *op, tl_buf x, tl_buf y, int64_t rows, int64_t cols,
                            const int64_t *idx, int64_t k) {
    TL_CHECK(op, x, rows * cols); TL_CHECK(op, y, k * cols);
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
    if (x) TL_CHECK(op, x, rows * cols);
    TL_CHECK(op, v, k * cols); TL_CHECK(op, y, rows * cols);
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

int tl_gather(tl_buf x, tl_buf y, int64_t n, const int64_t *idx, int64_t idx_len) {
    if (idx_len != 1) return tl_fail(TL_E_ARG, "gather: expected one index, got %lld", (long long)idx_len);
    return gather_rows_impl("gather", x, y, n, 1, idx, 1);
}

int tl_gather_row(tl_buf x, tl_buf y, int64_t rows, int64_t cols, const int64_t *idx, int64_t idx_len) {
    if (idx_len != 1) return tl_fail(TL_E_ARG, "gather_row: expected one index, got %lld", (long long)idx_len);
    return gather_rows_impl("gather_row", x, y, rows, cols, idx, 1);
}

int tl_gather_vec(tl_buf x, tl_buf y, int64_t n, const int64_t *idx, int64_t idx_len) {
    return gather_rows_impl("gather_vec", x, y, n, 1, idx, idx_len);
}

int tl_gather_vec_like(tl_buf g, tl_buf v, tl_buf y, int64_t n, const int64_t *idx, int64_t idx_len) {
    TL_CHECK("gather_vec_like", v, idx_len);
    return gather_rows_impl("gather_vec_like", g, y, n, 1, idx, idx_len);
}

int tl_gather_rows(tl_buf x, tl_buf y, int64_t rows, int64_t cols, const int64_t *idx, int64_t idx_len) {
    return gather_rows_impl("gather_rows", x, y, rows, cols, idx, idx_len);
}

int tl_scatter_add_vec(tl_buf x, tl_buf values, tl_buf y, int64_t n, const int64_t *idx, int64_t idx_len) {
    return scatter_rows_impl("scatter_add_vec", x, values, y, n, 1, idx, idx_len);
}

int tl_scatter_add_row(tl_buf x, tl_buf values, tl_buf y, int64_t rows, int64_t cols, int64_t i) {
    if (i < 0 || i >= rows)
        return tl_fail(TL_E_SHAPE, "scatter_add_row: row index %lld is out of range for %lld rows",
                       (long long)i, (long long)rows);
    return scatter_rows_impl("scatter_add_row", x, values, y, rows, cols, &i, 1);
}

int tl_gather_vec_backward(tl_buf g, tl_buf x, tl_buf y, int64_t n, const int64_t *idx, int64_t idx_len) {
    TL_CHECK("gather_vec_backward", x, n);
    return scatter_rows_impl("gather_vec_backward", NULL, g, y, n, 1, idx, idx_len);
}

int tl_gather_rows_backward(tl_buf g, tl_buf x, tl_buf y, int64_t rows, int64_t cols, const int64_t *idx,
                            int64_t idx_len) {
    TL_CHECK("gather_rows_backward", x, rows * cols);
    return scatter_rows_impl("gather_rows_backward", NULL, g, y, rows, cols, idx, idx_len);
}
