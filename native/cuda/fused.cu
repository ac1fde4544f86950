// fused.cu (CUDA): fused kernels for transformer training (see native/stub/fused.c).
//
// cross_entropy_rows: the forward reads each row of logits twice (max, then the sum of exp) and
// writes three floats per row; nothing of size (N, V) is written. The backward is one
// elementwise pass over the logits that writes dlogits = g * (softmax - onehot) from the saved
// row max and log-sum. Default mode: a warp per row up to 1024 classes, a 256-thread block
// beyond, fixed-order group reductions (deterministic). Exact mode: the stub's sums (a block per
// row, tlm_max_first and rule-4 sums of tl_exact_block_reduce), so the same bits as the stub.
// Both over the stub's formulas (formulas/normalize.h: tlm_exp, tlm_log).
//
// linear_gelu: default mode runs one cuBLASLt GEMM with the BIAS epilogue into `pre` (no bias
// broadcast pass and no read of C), then gelu's kernel into y. The GELU stays the registry's
// kernel rather than cuBLASLt's GELU_AUX_BIAS epilogue because the tape frees y while only VJPs
// read it and recomputes it as gelu(pre) (ops.yaml `recompute`), which must give the forward's
// bits. Strict FP32 unless TF32 is allowed. Deterministic and exact modes, and anything
// cuBLASLt declines (misaligned buffers, no algorithm), run linear's kernel then gelu's, so
// their bits are those of the unfused pair (in exact mode: linear's rule-3 chain from the bias,
// then gelu's stagewise formula, the stub's). The backward is gelu_backward into a scratch,
// then linear's three backward kernels.
//
// linear_residual: the same GEMM with the residual r as cuBLASLt's C operand (beta 1), or
// linear's kernel then add's (deterministic and exact modes, declines: the unfused pair's bits).
#include "common.cuh"
#include "reduce_util.cuh"
#include "formulas/normalize.h"
#include "generated/fused_kernels.h"
#include "generated/elementwise_kernels.h"
#include "generated/linalg_kernels.h"
#include <cublasLt.h>
#include <math.h>
#include <mutex>

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
        for (int64_t k = lane; k < cols; k += G) s += tlf_softmax_exp(xr[k], m);
    s = tl_group_sum<G>(s);
    if (!ok || lane != 0) return;
    const float ls = tlm_log(s);
    rowmax[row] = s != s ? s : m;
    logsum[row] = ls;
    loss[row] = ce_label_ok(lab, row, cols) ? tlf_ce_loss(m, xr[lab[row]], ls) : 0.0f;
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
    const float s = tl_exact_block_reduce([=](int64_t e) { return tlf_softmax_exp(xr[e], m); },
                                          cols, part, TlExactSum{});
    if (threadIdx.x != 0) return;
    const float ls = tlm_log(s);
    rowmax[row] = s != s ? s : m;
    logsum[row] = ls;
    loss[row] = ce_label_ok(lab, row, cols) ? tlf_ce_loss(m, xr[lab[row]], ls) : 0.0f;
}

// a block per row (grid-stride over rows): the row's statistics and label are read once, the
// row is walked by the block's threads (float4 when every row starts 16-byte aligned); every
// mode (an elementwise pass: the stub's bits)
template <bool VEC4>
__global__ void ce_bwd(const float *__restrict__ g, const float *__restrict__ x,
                       const float *__restrict__ rowmax, const float *__restrict__ logsum,
                       const int64_t *__restrict__ lab, float *__restrict__ dx, int64_t rows,
                       int64_t cols) {
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const float *xr = x + r * cols;
        float *dr = dx + r * cols;
        const int64_t t = lab[r];
        if (t < 0 || t >= cols) {  // ignored row
            for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) dr[j] = 0.0f;
            continue;
        }
        const float m = rowmax[r], ls = logsum[r], gr = g[r];
        if (VEC4) {
            const float4 *x4 = (const float4 *)xr;
            float4 *d4 = (float4 *)dr;
            for (int64_t q = threadIdx.x; q < cols / 4; q += blockDim.x) {
                const float4 v = x4[q];
                const int64_t j = 4 * q;
                d4[q] = make_float4(tlf_ce_grad(v.x, m, ls, gr, j == t),
                                    tlf_ce_grad(v.y, m, ls, gr, j + 1 == t),
                                    tlf_ce_grad(v.z, m, ls, gr, j + 2 == t),
                                    tlf_ce_grad(v.w, m, ls, gr, j + 3 == t));
            }
        } else {
            for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
                dr[j] = tlf_ce_grad(xr[j], m, ls, gr, j == t);
        }
    }
}

void launch_ce_bwd(const float *g, const float *x, const float *rowmax, const float *logsum,
                   const int64_t *lab, float *dx, int64_t rows, int64_t cols) {
    const bool vec4 = cols % 4 == 0 && ((uintptr_t)x & 15u) == 0 && ((uintptr_t)dx & 15u) == 0;
    const int64_t per_thread = vec4 ? cols / 4 : cols;
    const int threads = per_thread >= 256 ? 256 : per_thread >= 128 ? 128 : 64;
    const unsigned blocks = (unsigned)(rows < 65536 * 16 ? rows : 65536 * 16);
    if (vec4)
        ce_bwd<true><<<blocks, threads, 0, tl_stream()>>>(g, x, rowmax, logsum, lab, dx, rows, cols);
    else
        ce_bwd<false><<<blocks, threads, 0, tl_stream()>>>(g, x, rowmax, logsum, lab, dx, rows, cols);
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
    if (rows > 0) {
        launch_ce_bwd(g->data, x->data, rowmax->data, logsum->data, d, dx->data, rows, cols);
    }
    int rc = tl_cuda_launched(op);
    tl_scratch_free(d);
    return rc;
}

namespace {

std::mutex g_lt_mu;
cublasLtHandle_t g_lt = nullptr;
void *g_lt_ws = nullptr;
const size_t kLtWorkspaceBytes = (size_t)32 << 20;

int lt_handle(const char *op, cublasLtHandle_t *out) {
    cublasHandle_t h;
    TL_TRY(tl_cublas(op, &h));  // device and stream set up, no sticky error
    std::lock_guard<std::mutex> lk(g_lt_mu);
    if (!g_lt) {
        cublasLtHandle_t lt = nullptr;
        TL_CUBLAS_TRY(op, cublasLtCreate(&lt));
        void *ws = nullptr;
        cudaError_t e = cudaMalloc(&ws, kLtWorkspaceBytes);  // once per process
        if (e != cudaSuccess) { cublasLtDestroy(lt); return tl_cuda_status(op, e); }
        g_lt = lt;
        g_lt_ws = ws;
    }
    *out = g_lt;
    return TL_OK;
}

struct LtPlan {  // the descriptors of one call, destroyed with it
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
    cublasLtMatmulPreference_t pref = nullptr;
    ~LtPlan() {
        if (pref) cublasLtMatmulPreferenceDestroy(pref);
        if (d) cublasLtMatrixLayoutDestroy(d);
        if (b) cublasLtMatrixLayoutDestroy(b);
        if (a) cublasLtMatrixLayoutDestroy(a);
        if (desc) cublasLtMatmulDescDestroy(desc);
    }
};

bool aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

// pre (rows, out) = x W^T + b (+ r when r is given) in one GEMM. In column-major terms that is
// D (out, rows) = op_T(W: in x out, ld in) * (x: in x rows, ld in) + 1 * C + bias(out), C = r
// (laid out as D) or absent. *done says whether cuBLASLt took it; a decline (no algorithm,
// unsupported layout) is not an error.
int lt_linear_bias(const char *op, const float *w, const float *b, const float *x, float *pre,
                   int64_t rows, int64_t out, int64_t in, bool *done, const float *r = nullptr) {
    *done = false;
    if (!aligned16(w) || !aligned16(b) || !aligned16(x) || !aligned16(pre) || (r && !aligned16(r)))
        return TL_OK;
    cublasLtHandle_t lt;
    TL_TRY(lt_handle(op, &lt));
    LtPlan p;
    const cublasComputeType_t ct = tl_allow_tf32() ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    const cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
    TL_CUBLAS_TRY(op, cublasLtMatmulDescCreate(&p.desc, ct, CUDA_R_32F));
    TL_CUBLAS_TRY(op, cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
    TL_CUBLAS_TRY(op, cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
    TL_CUBLAS_TRY(op, cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
    TL_CUBLAS_TRY(op, cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &b, sizeof(b)));
    TL_CUBLAS_TRY(op, cublasLtMatrixLayoutCreate(&p.a, CUDA_R_32F, (uint64_t)in, (uint64_t)out, in));
    TL_CUBLAS_TRY(op, cublasLtMatrixLayoutCreate(&p.b, CUDA_R_32F, (uint64_t)in, (uint64_t)rows, in));
    TL_CUBLAS_TRY(op, cublasLtMatrixLayoutCreate(&p.d, CUDA_R_32F, (uint64_t)out, (uint64_t)rows, out));
    TL_CUBLAS_TRY(op, cublasLtMatmulPreferenceCreate(&p.pref));
    const size_t ws = kLtWorkspaceBytes;
    TL_CUBLAS_TRY(op, cublasLtMatmulPreferenceSetAttribute(p.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                           &ws, sizeof(ws)));
    cublasLtMatmulHeuristicResult_t res;
    int found = 0;
    if (cublasLtMatmulAlgoGetHeuristic(lt, p.desc, p.a, p.b, p.d, p.d, p.pref, 1, &res, &found) !=
            CUBLAS_STATUS_SUCCESS || found == 0)
        return TL_OK;
    const float one = 1.0f, zero = 0.0f;
    cublasStatus_t st = cublasLtMatmul(lt, p.desc, &one, w, p.a, x, p.b, r ? &one : &zero,
                                       r ? r : pre, p.d, pre, p.d, &res.algo, g_lt_ws, ws,
                                       tl_stream());
    if (st == CUBLAS_STATUS_NOT_SUPPORTED) return TL_OK;
    if (st != CUBLAS_STATUS_SUCCESS) return tl_cublas_status(op, st);
    *done = true;
    return TL_OK;
}

}  // namespace

extern "C" int tlk_linear_gelu(const char *op, tl_buf w, tl_buf b, tl_buf x, tl_buf y, tl_buf pre,
                               int64_t rows, int64_t out_dim, int64_t in_dim) {
    if (rows * out_dim == 0) return TL_OK;
    bool done = false;
    if (!tl_deterministic() && in_dim > 0)
        TL_TRY(lt_linear_bias(op, w->data, b->data, x->data, pre->data, rows, out_dim, in_dim, &done));
    if (!done) TL_TRY(tlk_linear(op, w, b, x, pre, rows, out_dim, in_dim));
    return tlk_gelu(op, pre, y, rows * out_dim);
}

extern "C" int tlk_linear_gelu_backward(const char *op, tl_buf g, tl_buf w, tl_buf x, tl_buf pre,
                                        tl_buf dw, tl_buf db, tl_buf dx, int64_t rows,
                                        int64_t out_dim, int64_t in_dim) {
    const int64_t n = rows * out_dim;
    void *scratch = nullptr;
    if (n) TL_TRY(tl_scratch(op, (size_t)n * sizeof(float), &scratch));
    struct tl_buffer dpre = {(float *)scratch, n, 1, 0};
    int rc = n ? tlk_gelu_backward(op, pre, g, &dpre, n) : TL_OK;
    if (rc == TL_OK) rc = tlk_linear_backward_w(op, &dpre, x, dw, rows, out_dim, in_dim);
    if (rc == TL_OK) rc = tlk_linear_backward_b(op, &dpre, db, rows, out_dim);
    if (rc == TL_OK) rc = tlk_linear_backward_x(op, &dpre, w, x, dx, rows, out_dim, in_dim);
    if (scratch) tl_scratch_free(scratch);
    return rc;
}

// linear_residual: y = x W^T + b + r. Default mode: one cuBLASLt GEMM, bias epilogue, r as C;
// deterministic and exact modes (and a cuBLASLt decline): linear's kernel, then add's.
extern "C" int tlk_linear_residual(const char *op, tl_buf w, tl_buf b, tl_buf x, tl_buf r, tl_buf y,
                                   int64_t rows, int64_t out_dim, int64_t in_dim) {
    if (rows * out_dim == 0) return TL_OK;
    bool done = false;
    if (!tl_deterministic() && in_dim > 0)
        TL_TRY(lt_linear_bias(op, w->data, b->data, x->data, y->data, rows, out_dim, in_dim, &done,
                              r->data));
    if (done) return TL_OK;
    TL_TRY(tlk_linear(op, w, b, x, y, rows, out_dim, in_dim));
    return tlk_add(op, y, r, y, rows * out_dim);
}

