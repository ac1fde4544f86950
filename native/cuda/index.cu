// index.cu (CUDA): concat/slice along the leading axis, gathers and scatter-adds.
//
// Indices arrive as host int64 arrays; they are copied to stream-ordered scratch memory.
// Gathers read 0 for out-of-range indices; scatter-adds skip them and accumulate duplicates,
// with atomicAdd by default and, in deterministic mode, one thread per output element that scans
// the updates in index order j = 0..k-1 (the stub's order).
#include "common.cuh"
#include "entry/index_kernels.h"

static int copy_d2d(const char *op, float *dst, const float *src, int64_t n) {
    if (n == 0) return TL_OK;
    TL_CUDA_TRY(op, cudaMemcpyAsync(dst, src, (size_t)n * sizeof(float), cudaMemcpyDeviceToDevice, tl_stream()));
    return TL_OK;
}

static int upload_idx(const char *op, const int64_t *idx, int64_t k, int64_t **out) {
    *out = NULL;
    if (k == 0) return TL_OK;
    void *p = NULL;
    TL_TRY(tl_scratch(op, (size_t)k * sizeof(int64_t), &p));
    cudaError_t e = cudaMemcpyAsync(p, idx, (size_t)k * sizeof(int64_t), cudaMemcpyHostToDevice, tl_stream());
    if (e != cudaSuccess) { tl_scratch_free(p); return tl_cuda_status(op, e); }
    *out = (int64_t *)p;
    return TL_OK;
}

// concat1d and concat0: both lay a then b out flat
extern "C" int tlk_concat(const char *op, tl_buf a, tl_buf b, tl_buf y, int64_t na, int64_t nb) {
    TL_TRY(copy_d2d(op, y->data, a->data, na));
    return copy_d2d(op, y->data + na, b->data, nb);
}

static int slice_rows(const char *op, tl_buf x, tl_buf y, int64_t lead, int64_t row, int64_t start, int64_t length) {
    return copy_d2d(op, y->data, x->data + start * row, length * row);
}

extern "C" int tlk_slice1d(const char *op, tl_buf x, tl_buf y, int64_t n, int64_t start, int64_t length) {
    return slice_rows(op, x, y, n, 1, start, length);
}

extern "C" int tlk_slice_range0(const char *op, tl_buf x, tl_buf y, int64_t lead, int64_t row, int64_t start, int64_t length) {
    return slice_rows(op, x, y, lead, row, start, length);
}

extern "C" int tlk_pad_range0(const char *op, tl_buf g, tl_buf y, int64_t len, int64_t row, int64_t start, int64_t total) {
    if (total * row != 0)
        TL_CUDA_TRY(op, cudaMemsetAsync(y->data, 0, (size_t)(total * row) * sizeof(float), tl_stream()));
    return copy_d2d(op, y->data + start * row, g->data, len * row);
}

__global__ void k_gather_rows(const float *x, float *y, const int64_t *idx, int64_t rows, int64_t cols, int64_t k) {
    TL_GRID_STRIDE(t, k * cols) {
        int64_t j = t / cols, c = t % cols, i = idx[j];
        y[t] = (i >= 0 && i < rows) ? x[i * cols + c] : 0.0f;
    }
}

__global__ void k_scatter_atomic(const float *v, float *y, const int64_t *idx, int64_t rows, int64_t cols, int64_t k) {
    TL_GRID_STRIDE(t, k * cols) {
        int64_t j = t / cols, c = t % cols, i = idx[j];
        if (i >= 0 && i < rows) atomicAdd(&y[i * cols + c], v[t]);
    }
}

// deterministic: each output element sums its updates in index order, then adds them to y
__global__ void k_scatter_ordered(const float *v, float *y, const int64_t *idx, int64_t rows, int64_t cols, int64_t k) {
    TL_GRID_STRIDE(t, rows * cols) {
        int64_t r = t / cols, c = t % cols;
        float acc = y[t];
        for (int64_t j = 0; j < k; j++)
            if (idx[j] == r) acc += v[j * cols + c];
        y[t] = acc;
    }
}

static int gather_rows_impl(const char *op, tl_buf x, tl_buf y, int64_t rows, int64_t cols, const int64_t *idx, int64_t k) {
    if (k * cols == 0) return TL_OK;
    int64_t *d = NULL;
    TL_TRY(upload_idx(op, idx, k, &d));
    k_gather_rows<<<tl_blocks(k * cols), TL_THREADS, 0, tl_stream()>>>(x->data, y->data, d, rows, cols, k);
    tl_scratch_free(d);
    TL_LAUNCHED(op);
    return TL_OK;
}

// y = (x or zeros) with y[idx[j], :] += v[j, :]
static int scatter_rows_impl(const char *op, tl_buf x, tl_buf v, tl_buf y, int64_t rows, int64_t cols,
                             const int64_t *idx, int64_t k) {
    if (rows * cols == 0) return TL_OK;
    if (x) TL_TRY(copy_d2d(op, y->data, x->data, rows * cols));
    else TL_CUDA_TRY(op, cudaMemsetAsync(y->data, 0, (size_t)(rows * cols) * sizeof(float), tl_stream()));
    if (k == 0) return TL_OK;
    int64_t *d = NULL;
    TL_TRY(upload_idx(op, idx, k, &d));
    if (tl_deterministic())
        k_scatter_ordered<<<tl_blocks(rows * cols), TL_THREADS, 0, tl_stream()>>>(v->data, y->data, d, rows, cols, k);
    else
        k_scatter_atomic<<<tl_blocks(k * cols), TL_THREADS, 0, tl_stream()>>>(v->data, y->data, d, rows, cols, k);
    tl_scratch_free(d);
    TL_LAUNCHED(op);
    return TL_OK;
}

extern "C" int tlk_gather(const char *op, tl_buf x, tl_buf y, int64_t n, const int64_t *idx, int64_t idx_len) {
    return gather_rows_impl(op, x, y, n, 1, idx, 1);
}

extern "C" int tlk_gather_row(const char *op, tl_buf x, tl_buf y, int64_t rows, int64_t cols, const int64_t *idx, int64_t idx_len) {
    return gather_rows_impl(op, x, y, rows, cols, idx, 1);
}

extern "C" int tlk_gather_vec(const char *op, tl_buf x, tl_buf y, int64_t n, const int64_t *idx, int64_t idx_len) {
    return gather_rows_impl(op, x, y, n, 1, idx, idx_len);
}

extern "C" int tlk_gather_vec_like(const char *op, tl_buf g, tl_buf v, tl_buf y, int64_t n, const int64_t *idx, int64_t idx_len) {
    return gather_rows_impl(op, g, y, n, 1, idx, idx_len);
}

extern "C" int tlk_gather_rows(const char *op, tl_buf x, tl_buf y, int64_t rows, int64_t cols, const int64_t *idx, int64_t idx_len) {
    return gather_rows_impl(op, x, y, rows, cols, idx, idx_len);
}

extern "C" int tlk_scatter_add_vec(const char *op, tl_buf x, tl_buf values, tl_buf y, int64_t n, const int64_t *idx, int64_t idx_len) {
    return scatter_rows_impl(op, x, values, y, n, 1, idx, idx_len);
}

extern "C" int tlk_scatter_add_row(const char *op, tl_buf x, tl_buf values, tl_buf y, int64_t rows, int64_t cols, int64_t i) {
    return scatter_rows_impl(op, x, values, y, rows, cols, &i, 1);
}

extern "C" int tlk_gather_vec_backward(const char *op, tl_buf g, tl_buf x, tl_buf y, int64_t n, const int64_t *idx, int64_t idx_len) {
    return scatter_rows_impl(op, NULL, g, y, n, 1, idx, idx_len);
}

extern "C" int tlk_gather_rows_backward(const char *op, tl_buf g, tl_buf x, tl_buf y, int64_t rows, int64_t cols,
                                       const int64_t *idx, int64_t idx_len) {
    return scatter_rows_impl(op, NULL, g, y, rows, cols, idx, idx_len);
}
