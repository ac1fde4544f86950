// attention_composed.cuh (CUDA): attention.cu's composed path (use_flash = 0): the scores
// materialised in scratch by strided-batched cuBLAS GEMMs, a masked softmax kernel over them, and
// the backward through the same GEMMs. Kept as the reference the fused kernels are tested
// against; the default mode only (exact mode has its own kernels). Included by attention.cu.
#pragma once

#include <math.h>
#include "common.cuh"
#include "attention_tiled.cuh"

namespace {

// C_b (M x N) = alpha * op(A_b) (M x K) @ op(B_b) (K x N) + beta * C_b on cuBLAS (the default
// mode's composed path); lda/ldb/ldc are the row-major leading dimensions of the stored
// matrices. Row-major C^T = op(B)^T op(A)^T in column-major.
int gemm_batched(const char *op, cublasHandle_t h, bool ta, bool tb, int64_t M, int64_t N,
                 int64_t K, float alpha, const float *A, int64_t lda, int64_t sa, const float *B,
                 int64_t ldb, int64_t sb, float beta, float *C, int64_t ldc, int64_t sc,
                 int64_t count) {
    TL_CUBLAS_TRY(op, cublasSgemmStridedBatched(
        h, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, (int)N, (int)M, (int)K,
        &alpha, B, (int)ldb, sb, A, (int)lda, sa, &beta, C, (int)ldc, sc, (int)count));
    return TL_OK;
}

// In place over S (one block per (b, h, i) row): S = softmax(scale * S) over allowed entries,
// blocked entries exactly 0, a fully blocked row all 0; also writes lse.
__global__ void masked_softmax_rows(float *__restrict__ S, const float *__restrict__ mask,
                                    float *__restrict__ lse, int n, float scale, bool causal) {
    const int64_t r = blockIdx.x;
    const int i = (int)(r % n);
    float *row = S + r * n;
    float mx = -INFINITY;
    for (int j = threadIdx.x; j < n; j += blockDim.x)
        if (attends(mask, causal, n, i, j)) {
            const float v = row[j] * scale;
            mx = fmaxf(mx, v != v ? INFINITY : v);  // fmaxf drops NaN: count it as +inf
        }
    mx = tl_block_max(mx);
    float den = 0.0f;
    for (int j = threadIdx.x; j < n; j += blockDim.x)
        if (mx != -INFINITY && attends(mask, causal, n, i, j)) den += expf(row[j] * scale - mx);
    den = tl_block_sum(den);
    // fully blocked: 0; a NaN or +inf score (inf - inf) makes the row NaN, as the stub
    const float inv = den > 0.0f && mx != INFINITY ? 1.0f / den : (mx == INFINITY ? NAN : 0.0f);
    for (int j = threadIdx.x; j < n; j += blockDim.x) {
        bool ok = mx != -INFINITY && attends(mask, causal, n, i, j);
        row[j] = ok ? expf(row[j] * scale - mx) * inv : 0.0f;
    }
    if (threadIdx.x == 0) lse[r] = den > 0.0f ? mx + logf(den) : 0.0f;
}

// P = exp(scale * S - lse) at allowed entries (0 elsewhere), in place.
__global__ void recompute_probs(float *__restrict__ S, const float *__restrict__ mask,
                                const float *__restrict__ lse, int64_t total, int n, float scale,
                                bool causal) {
    TL_GRID_STRIDE(e, total) {
        int64_t r = e / n;
        int i = (int)(r % n), j = (int)(e % n);
        bool ok = attends(mask, causal, n, i, j);
        S[e] = ok ? expf(S[e] * scale - lse[r]) : 0.0f;
    }
}

// dS = P * (dP - D_i) * scale, in place over dP.
__global__ void softmax_grad(float *__restrict__ dP, const float *__restrict__ P,
                             const float *__restrict__ D, int64_t total, int n, float scale) {
    TL_GRID_STRIDE(e, total) { dP[e] = P[e] * (dP[e] - D[e / n]) * scale; }
}

// scores S (B*H, n, n) = Q_h K_h^T per batch item (strided-batched over heads)
int scores(const char *op, cublasHandle_t hnd, const float *Q, const float *K, float *S, int64_t B,
           int64_t n, int64_t H, int64_t hd) {
    const int64_t HD = H * hd;
    for (int64_t b = 0; b < B; b++)
        TL_TRY(gemm_batched(op, hnd, false, true, n, n, hd, 1.0f, Q + b * n * HD, HD, hd,
                            K + b * n * HD, HD, hd, 0.0f, S + b * H * n * n, n, n * n, H));
    return TL_OK;
}

int composed_forward(const char *op, cublasHandle_t hnd, const float *Q, const float *K,
                     const float *V, const float *M, float *O, float *L, int64_t B, int64_t n,
                     int64_t H, int64_t hd, float scale, bool causal) {
    const int64_t HD = H * hd, total = B * H * n * n;
    void *tmp = nullptr;
    TL_TRY(tl_scratch(op, sizeof(float) * (size_t)total, &tmp));
    float *S = (float *)tmp;
    int st = scores(op, hnd, Q, K, S, B, n, H, hd);
    if (!st) {
        masked_softmax_rows<<<(unsigned)(B * H * n), 128, 0, tl_stream()>>>(S, M, L, (int)n, scale,
                                                                           causal);
        st = tl_cuda_launched(op);
    }
    for (int64_t b = 0; b < B && !st; b++)
        st = gemm_batched(op, hnd, false, false, n, hd, n, 1.0f, S + b * H * n * n, n, n * n,
                          V + b * n * HD, HD, hd, 0.0f, O + b * n * HD, HD, hd, H);
    tl_scratch_free(tmp);
    return st;
}

int composed_backward(const char *op, cublasHandle_t hnd, const float *Q, const float *K,
                      const float *V, const float *dO, const float *L, const float *D,
                      const float *M, float *dQ, float *dK, float *dV, int64_t B, int64_t n,
                      int64_t H, int64_t hd, float scale, bool causal) {
    const int64_t HD = H * hd, total = B * H * n * n;
    void *tmp = nullptr;
    TL_TRY(tl_scratch(op, sizeof(float) * (size_t)total * 2, &tmp));
    float *P = (float *)tmp, *dP = P + total;
    int st = scores(op, hnd, Q, K, P, B, n, H, hd);
    if (!st) {
        recompute_probs<<<tl_blocks(total), TL_THREADS, 0, tl_stream()>>>(P, M, L, total, (int)n, scale,
                                                                          causal);
        st = tl_cuda_launched(op);
    }
    // dP = dO_h V_h^T
    for (int64_t b = 0; b < B && !st; b++)
        st = gemm_batched(op, hnd, false, true, n, n, hd, 1.0f, dO + b * n * HD, HD, hd,
                          V + b * n * HD, HD, hd, 0.0f, dP + b * H * n * n, n, n * n, H);
    if (!st) {
        softmax_grad<<<tl_blocks(total), TL_THREADS, 0, tl_stream()>>>(dP, P, D, total, (int)n, scale);
        st = tl_cuda_launched(op);
    }
    for (int64_t b = 0; b < B && !st; b++) {
        const int64_t so = b * n * HD, ss = b * H * n * n;
        st = gemm_batched(op, hnd, false, false, n, hd, n, 1.0f, dP + ss, n, n * n, K + so, HD, hd,
                          0.0f, dQ + so, HD, hd, H);  // dQ = dS K
        if (!st)
            st = gemm_batched(op, hnd, true, false, n, hd, n, 1.0f, dP + ss, n, n * n, Q + so, HD,
                              hd, 0.0f, dK + so, HD, hd, H);  // dK = dS^T Q
        if (!st)
            st = gemm_batched(op, hnd, true, false, n, hd, n, 1.0f, P + ss, n, n * n, dO + so, HD,
                              hd, 0.0f, dV + so, HD, hd, H);  // dV = P^T dO
    }
    tl_scratch_free(tmp);
    return st;
}

}  // namespace
