// fused.cu (CUDA): fused kernels for transformer training (see native/stub/fused.c).
//
// cross_entropy_rows: the forward reads each row of logits twice (max, then the sum of exp) and
// writes three floats per row; nothing of size (N, V) is written. The backward is one
// elementwise pass over the logits that writes dlogits = g * (softmax - onehot) from the saved
// row max and log-sum. Default mode: a warp per row up to 1024 classes, a 256-thread block
// beyond, fixed-order group reductions (deterministic) and expf/logf. Exact mode: the stub's
// arithmetic (a block per row, tlm_max_first and rule-4 sums of tl_exact_block_reduce, tlm_exp,
// tlm_log), so the same bits as the stub.
#include "common.cuh"
#include "reduce_util.cuh"
#include "entry/fused_kernels.h"
#include <math.h>

namespace {

__device__ __forceinline__ bool ce_label_ok(const int64_t *lab, int64_t r, int64_t cols) {
    return lab[r] >= 0 && lab[r] < cols;
}

template <int G>
__global__ void ce_fwd(const float *__restrict__ x, const int64_t *__restrict__ lab,
                       float *__restrict__ loss, float *__restrict__ rowmax,
                       float *__restrict__ logsum, int64_t rows, int64_t cols) {
    const int64_t row = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / G;
    const int lane = threadIdx.x % G;
    const bool ok = row < rows;  // whole groups agree, so the group reductions stay convergent
    const float *xr = x + (ok ? row : 0) * cols;
    float m = -INFINITY;
    if (ok)
        for (int64_t k = lane; k < cols; k += G) m = tl_max_nan(m, xr[k]);
    m = tl_group_max<G>(m);
    float s = 0.0f;
    if (ok)
        for (int64_t k = lane; k < cols; k += G) s += expf(xr[k] - m);
    s = tl_group_sum<G>(s);
    if (!ok || lane != 0) return;
    const float ls = logf(s);
    rowmax[row] = s != s ? s : m;
    logsum[row] = ls;
    loss[row] = ce_label_ok(lab, row, cols) ? (m - xr[lab[row]]) + ls : 0.0f;
}

__global__ void ce_fwd_exact(const float *__restrict__ x, const int64_t *__restrict__ lab,
                             float *__restrict__ loss, float *__restrict__ rowmax,
                             float *__restrict__ logsum, int64_t cols, float *gpart) {
    extern __shared__ float smem[];
    float *part = gpart ? gpart + blockIdx.x * tl_exact_chunks(cols) : smem;
    const int64_t row = blockIdx.x;
    const float *xr = x + row * cols;
    const float m = tl_exact_block_reduce([=](int64_t e) { return xr[e]; }, cols, part,
                                          TlExactMaxFirst{});
    __syncthreads();  // every thread holds m before part is reused
    const float s = tl_exact_block_reduce([=](int64_t e) { return tlm_exp(tlm_sub(xr[e], m)); },
                                          cols, part, TlExactSum{});
    if (threadIdx.x != 0) return;
    const float ls = tlm_log(s);
    rowmax[row] = s != s ? s : m;
    logsum[row] = ls;
    loss[row] = ce_label_ok(lab, row, cols) ? tlm_add(tlm_sub(m, xr[lab[row]]), ls) : 0.0f;
}

template <bool EXACT>
__global__ void ce_bwd(const float *__restrict__ g, const float *__restrict__ x,
                       const float *__restrict__ rowmax, const float *__restrict__ logsum,
                       const int64_t *__restrict__ lab, float *__restrict__ dx, int64_t rows,
                       int64_t cols) {
    const int64_t n = rows * cols;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = i / cols, j = i - r * cols;
        if (!ce_label_ok(lab, r, cols)) { dx[i] = 0.0f; continue; }
        const bool hit = j == lab[r];
        if (EXACT) {
            const float p = tlm_exp(tlm_sub(tlm_sub(x[i], rowmax[r]), logsum[r]));
            dx[i] = tlm_mul(g[r], hit ? tlm_sub(p, 1.0f) : p);
        } else {
            const float p = expf((x[i] - rowmax[r]) - logsum[r]);
            dx[i] = g[r] * (hit ? p - 1.0f : p);
        }
    }
}

int upload_labels(const char *op, const int64_t *lab, int64_t n, int64_t **out) {
    void *p = NULL;
    TL_TRY(tl_scratch(op, (size_t)n * sizeof(int64_t), &p));
    int st = tl_upload(op, p, lab, (size_t)n * sizeof(int64_t));
    if (st) { tl_scratch_free(p); return st; }
    *out = (int64_t *)p;
    return TL_OK;
}

int ce_forward(const char *op, const float *x, const int64_t *d_lab, float *loss, float *rowmax,
               float *logsum, int64_t rows, int64_t cols) {
    cudaStream_t st = tl_stream();
    if (tl_exact()) {
        if (rows > TL_MAX_GRID_X)
            return tl_fail(TL_E_SHAPE, "%s: %lld rows exceed the CUDA grid limit", op, (long long)rows);
        size_t smem = tl_exact_smem(cols);
        float *gpart = nullptr;
        if (!smem) TL_TRY(tl_scratch(op, (size_t)(rows * tl_exact_chunks(cols)) * sizeof(float), (void **)&gpart));
        ce_fwd_exact<<<(unsigned)rows, tl_exact_threads(cols), smem, st>>>(x, d_lab, loss, rowmax,
                                                                          logsum, cols, gpart);
        int rc = tl_cuda_launched(op);
        if (gpart) tl_scratch_free(gpart);
        return rc;
    }
    const int G = cols <= 1024 ? 32 : 256;
    const unsigned blocks = (unsigned)((rows * G + TL_THREADS - 1) / TL_THREADS);
    if (G == 32)
        ce_fwd<32><<<blocks, TL_THREADS, 0, st>>>(x, d_lab, loss, rowmax, logsum, rows, cols);
    else
        ce_fwd<256><<<blocks, TL_THREADS, 0, st>>>(x, d_lab, loss, rowmax, logsum, rows, cols);
    TL_LAUNCHED(op);
    return TL_OK;
}

}  // namespace

extern "C" int tlk_cross_entropy_rows(const char *op, tl_buf x, tl_buf loss, tl_buf rowmax, tl_buf logsum,
                                      int64_t rows, int64_t cols, const int64_t *lab, int64_t lab_len) {
    int64_t *d = NULL;
    TL_TRY(upload_labels(op, lab, rows, &d));
    int rc = ce_forward(op, x->data, d, loss->data, rowmax->data, logsum->data, rows, cols);
    tl_scratch_free(d);
    return rc;
}

extern "C" int tlk_cross_entropy_rows_backward(const char *op, tl_buf g, tl_buf x, tl_buf rowmax,
                                               tl_buf logsum, tl_buf dx, int64_t rows, int64_t cols,
                                               const int64_t *lab, int64_t lab_len) {
    int64_t *d = NULL;
    TL_TRY(upload_labels(op, lab, rows, &d));
    const unsigned blocks = tl_blocks(rows * cols);
    if (tl_exact())
        ce_bwd<true><<<blocks, TL_THREADS, 0, tl_stream()>>>(g->data, x->data, rowmax->data,
                                                            logsum->data, d, dx->data, rows, cols);
    else
        ce_bwd<false><<<blocks, TL_THREADS, 0, tl_stream()>>>(g->data, x->data, rowmax->data,
                                                             logsum->data, d, dx->data, rows, cols);
    int rc = tl_cuda_launched(op);
    tl_scratch_free(d);
    return rc;
}
