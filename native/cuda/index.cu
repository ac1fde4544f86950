// index.cu (CUDA): concat/slice along the leading axis, gathers and scatter-adds.
//
// Indices arrive as host int64 arrays; they are copied to stream-ordered scratch memory.
// Gathers read 0 for out-of-range indices; scatter-adds skip them and accumulate duplicates,
// with atomicAdd by default. In deterministic mode the host groups the update positions by target
// row (a stable counting sort, or a sort on (row, j) for very tall targets), and one thread per
// (touched row, column) adds that row's updates in index order j = 0..k-1: the stub's order, at
// the cost of one pass over the updates. triangle and fill_masked work out their masks from
// positions or a mask buffer, with no host array.
#include <stdlib.h>
#include "common.cuh"
#include "formulas/sort.h"
#include "generated/index_kernels.h"

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
    int st = tl_upload(op, p, idx, (size_t)k * sizeof(int64_t));
    if (st) { tl_scratch_free(p); return st; }
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

// deterministic: plan = [rows touched (nu) | segment starts (nu + 1) | update positions (k)];
// the updates of row plan[u] are positions plan[2 nu + 1 + p] for p in [start[u], start[u + 1])
__global__ void k_scatter_ordered(const float *v, float *y, const int64_t *plan, int64_t nu,
                                  int64_t cols) {
    const int64_t *start = plan + nu, *pos = plan + 2 * nu + 1;
    TL_GRID_STRIDE(t, nu * cols) {
        const int64_t u = t / cols, c = t % cols, at = plan[u] * cols + c;
        float acc = y[at];
        for (int64_t p = start[u]; p < start[u + 1]; p++) acc += v[pos[p] * cols + c];
        y[at] = acc;
    }
}

static int cmp_row_pos(const void *a, const void *b) {  // (row, j) pairs, row then j
    const int64_t *x = (const int64_t *)a, *y = (const int64_t *)b;
    if (x[0] != y[0]) return x[0] < y[0] ? -1 : 1;
    return x[1] < y[1] ? -1 : (x[1] > y[1]);
}

// the plan of k_scatter_ordered for in-range updates (host memory the caller frees); *nu set
static int64_t *scatter_plan(const int64_t *idx, int64_t k, int64_t rows, int64_t *nu, int64_t *len) {
    int64_t valid = 0;
    for (int64_t j = 0; j < k; j++) valid += idx[j] >= 0 && idx[j] < rows;
    int64_t *pairs = (int64_t *)malloc((size_t)(valid > 0 ? valid : 1) * 2 * sizeof(int64_t));
    if (!pairs) return NULL;
    int64_t m = 0;
    if (rows <= 4 * k + 65536) {  // stable counting sort by row
        int64_t *count = (int64_t *)calloc((size_t)rows + 1, sizeof(int64_t));
        if (!count) { free(pairs); return NULL; }
        for (int64_t j = 0; j < k; j++) if (idx[j] >= 0 && idx[j] < rows) count[idx[j] + 1]++;
        for (int64_t r = 0; r < rows; r++) count[r + 1] += count[r];
        for (int64_t j = 0; j < k; j++)
            if (idx[j] >= 0 && idx[j] < rows) {
                int64_t at = count[idx[j]]++;
                pairs[2 * at] = idx[j]; pairs[2 * at + 1] = j;
            }
        free(count);
        m = valid;
    } else {
        for (int64_t j = 0; j < k; j++)
            if (idx[j] >= 0 && idx[j] < rows) { pairs[2 * m] = idx[j]; pairs[2 * m + 1] = j; m++; }
        qsort(pairs, (size_t)m, 2 * sizeof(int64_t), cmp_row_pos);
    }
    int64_t u = 0;
    for (int64_t p = 0; p < m; p++) u += p == 0 || pairs[2 * p] != pairs[2 * p - 2];
    int64_t *plan = (int64_t *)malloc((size_t)(2 * u + 1 + m) * sizeof(int64_t));
    if (!plan) { free(pairs); return NULL; }
    int64_t *start = plan + u, *pos = plan + 2 * u + 1, q = 0;
    for (int64_t p = 0; p < m; p++) {
        if (p == 0 || pairs[2 * p] != pairs[2 * p - 2]) { plan[q] = pairs[2 * p]; start[q++] = p; }
        pos[p] = pairs[2 * p + 1];
    }
    start[u] = m;
    free(pairs);
    *nu = u;
    *len = 2 * u + 1 + m;
    return plan;
}

// y += the updates in index order per row (k_scatter_ordered)
static int scatter_ordered(const char *op, const float *v, float *y, const int64_t *idx, int64_t k,
                           int64_t rows, int64_t cols) {
    int64_t nu = 0, len = 0;
    tl_graph_host_reads(idx, (size_t)k * sizeof(int64_t));   // the plan is the values'
    int64_t *plan = scatter_plan(idx, k, rows, &nu, &len);
    if (!plan) return tl_fail(TL_E_OOM, "%s: out of host memory planning %lld updates", op, (long long)k);
    int64_t *d = NULL;
    int st = nu > 0 ? upload_idx(op, plan, len, &d) : TL_OK;
    free(plan);
    if (st || nu == 0) return st;
    k_scatter_ordered<<<tl_blocks(nu * cols), TL_THREADS, 0, tl_stream()>>>(v, y, d, nu, cols);
    tl_scratch_free(d);
    return tl_cuda_launched(op);
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
    if (tl_deterministic()) return scatter_ordered(op, v->data, y->data, idx, k, rows, cols);
    int64_t *d = NULL;
    TL_TRY(upload_idx(op, idx, k, &d));
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

extern "C" int tlk_scatter_add_rows(const char *op, tl_buf x, tl_buf values, tl_buf y, int64_t rows, int64_t cols,
                                    const int64_t *idx, int64_t idx_len) {
    return scatter_rows_impl(op, x, values, y, rows, cols, idx, idx_len);
}

// flat: one thread per entry (for narrow rows); by rows: a thread per column of a row and a
// walk down the rows, so the 64-bit divisions that find an entry's row run once per row, not
// once per entry (they were half of tril's time at 4096 x 4096)
__global__ void k_triangle_flat(const float *__restrict__ x, float *__restrict__ y, int64_t n, int64_t m,
                                int64_t c, int64_t diagonal, int64_t upper) {
    TL_GRID_STRIDE(t, n) {
        const int64_t j = t % c, i = (t / c) % m;
        y[t] = tl_triangle_keeps(i, j, diagonal, upper) ? x[t] : 0.0f;
    }
}

__global__ void k_triangle_rows(const float *__restrict__ x, float *__restrict__ y, int64_t rows, int64_t m,
                                int64_t c, int64_t diagonal, int64_t upper) {
    const int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (j >= c) return;
    for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
        const int64_t t = r * c + j;
        y[t] = tl_triangle_keeps(r % m, j, diagonal, upper) ? x[t] : 0.0f;
    }
}

extern "C" int tlk_triangle(const char *op, tl_buf x, tl_buf y, int64_t n, int64_t m, int64_t c, int64_t diagonal,
                            int64_t upper) {
    if (n == 0) return TL_OK;
    if (c < 128) {
        k_triangle_flat<<<tl_blocks(n), TL_THREADS, 0, tl_stream()>>>(x->data, y->data, n, m, c, diagonal, upper);
    } else {
        const int64_t rows = n / c;
        dim3 grid((unsigned)((c + TL_THREADS - 1) / TL_THREADS), (unsigned)(rows < 65535 ? rows : 65535));
        k_triangle_rows<<<grid, TL_THREADS, 0, tl_stream()>>>(x->data, y->data, rows, m, c, diagonal, upper);
    }
    TL_LAUNCHED(op);
    return TL_OK;
}

__global__ void k_fill_masked(const float *__restrict__ mask, const float *__restrict__ x, float *__restrict__ y,
                              int64_t n, float v) {
    TL_GRID_STRIDE(t, n) y[t] = mask[t] != 0.0f ? v : x[t];
}

extern "C" int tlk_fill_masked(const char *op, tl_buf mask, tl_buf x, tl_buf y, int64_t n, double value) {
    k_fill_masked<<<tl_blocks(n), TL_THREADS, 0, tl_stream()>>>(mask->data, x->data, y->data, n, (float)value);
    TL_LAUNCHED(op);
    return TL_OK;
}
