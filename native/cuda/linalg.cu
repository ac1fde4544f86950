// linalg.cu (CUDA): matmul/bmm/linear and their VJPs on one cuBLAS strided-batched SGEMM, MSE.
//
// Row-major C (m, p) = op(A) op(B) is computed as column-major C^T = op(B)^T op(A)^T, i.e. the
// operands are swapped and no data is transposed. The handle from tl_cublas() is bound to
// tl_stream() and runs strict FP32 unless TF32 was opted into.
//
// Exact mode (tl_exact()) follows native/common/tl_math.h as the stub does: GEMMs take the
// exact GEMM (rule 3; linear accumulates from the bias), column sums and the MSE sum are rule 4
// (linalg.cuh), and every elementwise step is a tlm_ operation.
#include "common.cuh"
#include "linalg.cuh"
#include "formulas/normalize.h"
#include "generated/linalg_kernels.h"

// C = op(A) op(B) (+ beta C); A stored (batch, m, n) or (batch, n, m) when ta; B (batch, n, p) or
// (batch, p, n) when tb: the library's GEMM entry (exact or cuBLAS), contiguous batches.
static int gemm(const char *op, const float *A, const float *B, float *C, int64_t batch, int64_t m,
                int64_t n, int64_t p, int ta, int tb, float beta) {
    return tl_gemm_f32(op, ta, tb, batch, m, p, n, A, ta ? m : n, m * n, B, tb ? n : p, n * p, beta, C, p,
                       m * p, 0);
}

extern "C" int tlk_matmul_t(const char *op, tl_buf a, tl_buf b, tl_buf y, int64_t batch, int64_t m, int64_t n, int64_t p,
                           int64_t ta, int64_t tb) {
    return gemm(op, a->data, b->data, y->data, batch, m, n, p, (int)ta, (int)tb, 0.0f);
}

extern "C" int tlk_matmul(const char *op, tl_buf a, tl_buf b, tl_buf y, int64_t m, int64_t n, int64_t p) {
    return gemm(op, a->data, b->data, y->data, 1, m, n, p, 0, 0, 0.0f);
}

extern "C" int tlk_bmm(const char *op, tl_buf a, tl_buf b, tl_buf y, int64_t batch, int64_t m, int64_t n, int64_t p) {
    return gemm(op, a->data, b->data, y->data, batch, m, n, p, 0, 0, 0.0f);
}

__global__ void k_rows_from_vec(const float *v, float *y, int64_t rows, int64_t cols) {
    TL_GRID_STRIDE(i, rows * cols) y[i] = v[i % cols];
}

extern "C" int tlk_linear(const char *op, tl_buf w, tl_buf b, tl_buf x, tl_buf y, int64_t rows, int64_t out_dim, int64_t in_dim) {
    if (rows * out_dim == 0) return TL_OK;
    k_rows_from_vec<<<tl_blocks(rows * out_dim), TL_THREADS, 0, tl_stream()>>>(b->data, y->data, rows, out_dim);
    TL_LAUNCHED(op);
    // y (rows, out) += x (rows, in) @ W^T
    return gemm(op, x->data, w->data, y->data, 1, rows, in_dim, out_dim, 0, 1, 1.0f);
}

extern "C" int tlk_linear_backward_w(const char *op, tl_buf g, tl_buf x, tl_buf dw, int64_t rows, int64_t out_dim, int64_t in_dim) {
    return gemm(op, g->data, x->data, dw->data, 1, out_dim, rows, in_dim, 1, 0, 0.0f);
}

// value j of row o: g[j][o], column o of g (rows, cols)
struct ColumnOf {
    const float *g;
    int64_t cols;
    __device__ float at(int64_t o, int64_t j) const { return g[j * cols + o]; }
};

extern "C" int tlk_linear_backward_b(const char *op, tl_buf g, tl_buf db, int64_t rows, int64_t out_dim) {
    if (out_dim == 0) return TL_OK;
    if (tl_exact()) return rule4_rows(op, ColumnOf{g->data, out_dim}, out_dim, rows, db->data, 0.0f);
    return tl_cuda_axis_sum(op, g->data, db->data, 1, rows, out_dim, 0);
}

extern "C" int tlk_linear_backward_x(const char *op, tl_buf g, tl_buf w, tl_buf x, tl_buf dx, int64_t rows, int64_t out_dim,
                                    int64_t in_dim) {
    return gemm(op, g->data, w->data, dx->data, 1, rows, out_dim, in_dim, 0, 0, 0.0f);
}

// sq[i] = (a[i] - t[i])^2, whose mean tl_cuda_axis_sum then takes over the whole GPU
__global__ void k_sq_diff(const float *a, const float *t, float *sq, int64_t n) {
    TL_GRID_STRIDE(i, n) sq[i] = tlf_sqdev(a[i], t[i]);
}

// the stub's formula (formulas/normalize.h): scale = g * (2 / n), then (yhat - target) * scale
__global__ void k_mse_bwd(const float *a, const float *t, const float *g, float *d, int64_t n) {
    float scale = tlf_mse_scale(g[0], (float)n);
    TL_GRID_STRIDE(i, n) d[i] = tlf_mse_backward(a[i], t[i], scale);
}

// value j: (yhat[j] - target[j])^2, rounded after the subtraction and the product
struct SquaredDiff {
    const float *a, *t;
    __device__ float at(int64_t, int64_t j) const { return tlf_sqdev(a[j], t[j]); }
};

extern "C" int tlk_mse_loss(const char *op, tl_buf yhat, tl_buf target, tl_buf y, int64_t n) {
    if (tl_exact()) return rule4_rows(op, SquaredDiff{yhat->data, target->data}, 1, n, y->data, (float)n);
    float *sq;
    TL_TRY(tl_scratch(op, (size_t)n * sizeof(float), (void **)&sq));
    k_sq_diff<<<tl_blocks(n), TL_THREADS, 0, tl_stream()>>>(yhat->data, target->data, sq, n);
    int st = tl_cuda_launched(op);
    if (!st) st = tl_cuda_axis_sum(op, sq, y->data, 1, n, 1, 1);
    tl_scratch_free(sq);
    return st;
}

extern "C" int tlk_mse_loss_backward(const char *op, tl_buf yhat, tl_buf target, tl_buf g, tl_buf dyhat, int64_t n) {
    if (n == 0) return TL_OK;
    k_mse_bwd<<<tl_blocks(n), TL_THREADS, 0, tl_stream()>>>(yhat->data, target->data, g->data, dyhat->data, n);
    TL_LAUNCHED(op);
    return TL_OK;
}
