// attention.cu (CUDA): multi_head_attention forward and fused backward, and their core without
// the projections (the attention op: H = 1, hd = E).
//
// Layout (shared with the stub): q, k, v and attn are (B*n, H*hd) row-major, the direct result
// of the cuBLAS projections; head h of token i is the column block [h*hd, (h+1)*hd), so heads
// are addressed with a row stride of H*hd and never copied. lse is (B, H, n).
//
// use_flash = 1 (and hd <= 128): fused kernels with an online softmax; K/V (or Q/dO) tiles are
// staged in shared memory, so the n x n matrix is never stored. The backward recomputes the
// probabilities from lse and writes every gradient element from exactly one thread: no
// atomics, bit-reproducible. The kernels are register-tiled (attn_*_tiled<HDP>, the head dims
// padded to 64, 96 or 128), each thread 4 rows x 4-8 columns of a score tile, like a small SIMT
// GEMM. TORCHLEAN_ATTN_BWD=onepass (or onepass64) runs the backward as one kernel instead of
// the dQ and dK/dV pair: each key block also computes its share of dQ, and the shares are summed
// in a fixed order through per-tile counters (attn_bwd_onepass, DqOrdered below): still no
// atomics on the data, still bit-reproducible.
// use_flash = 0: the composed path (attention_composed.cuh: materialised scores in scratch, a
// masked softmax kernel, strided-batched GEMMs), kept as the reference the fused core is tested
// against.
// causal = 1 (query i attends keys j <= i, ANDed with the mask): the fused kernels skip the
// tiles that lie wholly after the diagonal and test pairs only on the tiles that cross it; the
// composed path masks the same pairs.
// Exact mode (tl_exact(), either use_flash): the stub's canonical order, see "exact path" below:
// the tiled exact kernels of attention_exact.cuh for head dims up to 128, row kernels above.
// The default schedules take exp and log from CUDA (expf, logf: within 2 ulp), not from tl_math.h:
// measured on an H100 (bench/results/attention.md), tlm_exp there costs 13-18% of the fused
// kernels' time (about 25 instructions per score against 128 FMAs at hd 64). Exact mode and the
// stub use tlm_exp.
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <initializer_list>
#include "common.cuh"
#include "bench_switches.h"
#include "tl_math.h"
#include "generated/attention_kernels.h"
#include "attention_tiled.cuh"
#include "attention_exact.cuh"
#include "attention_exact_rows.cuh"
#include "attention_composed.cuh"

namespace {

// ---------------------------------------------------------------- backward row dots
// D_i = dO_i . O_i per (b, h, i): 8 lanes per row, each a strided part of the dims (float4 when
// vec), then a butterfly over the 8 (fixed order: the same bits every run); the loads of a warp
// cover 4 rows' contiguous dims.
__global__ void rowdot_kernel(const float *__restrict__ dO, const float *__restrict__ O,
                              float *__restrict__ D, int64_t B, int n, int H, int hd, bool vec) {
    const int64_t HD = (int64_t)H * hd, rows = B * H * n;
    const int g = threadIdx.x & 7;
    // the warp's first row decides the loop, so all 32 lanes reach every shuffle
    const int64_t step = ((int64_t)gridDim.x * blockDim.x) >> 3;
    for (int64_t w0 = ((int64_t)blockIdx.x * blockDim.x + (threadIdx.x & ~31)) >> 3; w0 < rows;
         w0 += step) {
        const int64_t r = w0 + ((threadIdx.x & 31) >> 3);
        float s = 0.0f;
        if (r < rows) {
            const int64_t b = r / ((int64_t)H * n), h = (r / n) % H, i = r % n;
            const float *a = dO + (b * n + i) * HD + h * hd, *c = O + (b * n + i) * HD + h * hd;
            if (vec) {
                for (int d = 4 * g; d < hd; d += 32) {
                    const float4 x = *reinterpret_cast<const float4 *>(a + d);
                    const float4 y = *reinterpret_cast<const float4 *>(c + d);
                    s += x.x * y.x + x.y * y.y + x.z * y.z + x.w * y.w;
                }
            } else {
                for (int d = g; d < hd; d += 8) s += a[d] * c[d];
            }
        }
        s = tl_group_sum<8>(s);
        if (r < rows && g == 0) D[r] = s;
    }
}

// ---------------------------------------------------------------- tiled kernels: launches
// (the kernels are in attention_tiled.cuh)

// float4 staging needs hd % 4 == 0 and 16-byte aligned tensors (then every row start is too)
inline bool vec_ok(int64_t hd, std::initializer_list<const float *> ps) {
    if (hd % 4) return false;
    for (const float *p : ps)
        if (reinterpret_cast<uintptr_t>(p) % 16) return false;
    return true;
}

template <int HDP, int KEYS>
int tiled_forward_keys(const char *op, const float *Q, const float *K, const float *V,
                       const float *M, float *O, float *L, int64_t B, int64_t n, int64_t H,
                       int64_t hd, float scale, bool causal) {
    using F = FwdTiles<HDP, KEYS>;
    static bool ready = false;
    TL_TRY(tl_allow_smem(op, attn_fwd_tiled<HDP, KEYS>, F::SMEM, ready));
    dim3 grid((unsigned)((n + TROWS - 1) / TROWS), (unsigned)(B * H));
    attn_fwd_tiled<HDP, KEYS><<<grid, TTHREADS, F::SMEM, tl_stream()>>>(
        Q, K, V, M, O, L, (int)n, (int)H, (int)hd, scale, causal, vec_ok(hd, {Q, K, V}));
    TL_LAUNCHED(op);
    return TL_OK;
}

// the forward's key tile: TORCHLEAN_ATTN_FWD_KEYS=32 or 64 (benchmark builds, bench_switches.h)
int fwd_keys(int64_t hd) {
    const char *e = tl_bench_env("TORCHLEAN_ATTN_FWD_KEYS");
    if (e && e[0] == '3') return 32;
    if (e && e[0] == '6') return 64;
    (void)hd;
    return 64;
}

template <int HDP>
int tiled_forward(const char *op, const float *Q, const float *K, const float *V, const float *M,
                  float *O, float *L, int64_t B, int64_t n, int64_t H, int64_t hd, float scale,
                  bool causal) {
    if (fwd_keys(hd) == 32)
        return tiled_forward_keys<HDP, 32>(op, Q, K, V, M, O, L, B, n, H, hd, scale, causal);
    return tiled_forward_keys<HDP, 64>(op, Q, K, V, M, O, L, B, n, H, hd, scale, causal);
}

// The one-pass backward's dQ: each query tile's shares summed in rank order in place. A block
// takes its number from a ticket (the order blocks started); thread 0 waits until the tile's
// counter reaches the block's rank, the block adds its share (the first rank stores it), and
// thread 0 moves the counter on once every thread's stores are visible.
struct DqOrdered {
    float *dQ;
    int *cnt;           // one per (batch x head, query tile), zero before the launch
    unsigned *ticket;   // zero before the launch
    __device__ int block_id() const {
        __shared__ int id;
        if (threadIdx.x == 0) id = (int)atomicAdd(ticket, 1u);
        __syncthreads();
        return id;
    }
    __device__ void wait(int slot, int rank) const {
        if (threadIdx.x == 0 && rank > 0) {
            const volatile int *c = cnt + slot;
            while (*c < rank) __nanosleep(64);
            __threadfence();
        }
        __syncthreads();
    }
    __device__ void add(size_t i, float v, int rank) const {
        __stcg(dQ + i, rank ? __ldcg(dQ + i) + v : v);
    }
    __device__ void done(int slot, int rank) const {
        __threadfence();
        __syncthreads();
        if (threadIdx.x == 0) atomicExch(cnt + slot, rank + 1);
    }
};

// Which backward the fused path runs, from TORCHLEAN_ATTN_BWD per call (benchmark builds,
// bench_switches.h; the product build always runs the default): the dQ and dK/dV
// kernels (unset or `two`, the default: the one measured on a GPU so far), the one-pass kernel
// with 32-query tiles (`onepass`) or with 64-query tiles (`onepass64`, head dims up to 64).
// 0: two kernels, else the query tile.
int onepass_cols(int hdp) {
    const char *e = tl_bench_env("TORCHLEAN_ATTN_BWD");
    if (!e || strncmp(e, "onepass", 7)) return 0;
    return !strcmp(e, "onepass64") && hdp == 64 ? 64 : 32;
}

// whether one head's key blocks all fit on the GPU at once (the one-pass walk's condition); the
// occupancy query needs the kernel's shared-memory opt-in first
template <int HDP, int CPT>
int onepass_fits(const char *op, int64_t key_blocks, bool *fits) {
    static bool ready = false;
    static int per_sm = -1;
    TL_TRY(tl_allow_smem(op, attn_bwd_onepass<HDP, CPT, DqOrdered>, Onepass<HDP, CPT>::SMEM, ready));
    if (per_sm < 0) {
        int v = 0;
        if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&v, attn_bwd_onepass<HDP, CPT, DqOrdered>,
                                                          TTHREADS, Onepass<HDP, CPT>::SMEM) != cudaSuccess) {
            (void)cudaGetLastError();
            v = 0;
        }
        per_sm = v;
    }
    *fits = key_blocks <= (int64_t)per_sm * tl_sm_count();
    return TL_OK;
}

template <int HDP, int CPT>
int onepass_backward(const char *op, const float *Q, const float *K, const float *V,
                     const float *dO, const float *L, const float *D, const float *M, float *dQ,
                     float *dK, float *dV, int64_t B, int64_t n, int64_t H, int64_t hd,
                     float scale, bool causal) {
    using P = Onepass<HDP, CPT>;
    const int64_t tiles = (n + P::COLS - 1) / P::COLS, words = B * H * tiles + 1;
    void *tmp = nullptr;
    TL_TRY(tl_scratch(op, sizeof(int) * (size_t)words, &tmp));
    int *cnt = (int *)tmp;
    const cudaError_t e = cudaMemsetAsync(cnt, 0, sizeof(int) * (size_t)words, tl_stream());
    int st = e == cudaSuccess ? TL_OK : tl_cuda_status(op, e);
    if (!st) {
        DqOrdered sink{dQ, cnt, reinterpret_cast<unsigned *>(cnt + words - 1)};
        dim3 grid((unsigned)((n + TROWS - 1) / TROWS), (unsigned)(B * H));
        attn_bwd_onepass<HDP, CPT, DqOrdered><<<grid, TTHREADS, P::SMEM, tl_stream()>>>(
            Q, K, V, dO, L, D, M, sink, dK, dV, (int)n, (int)H, (int)hd, scale, causal,
            vec_ok(hd, {Q, K, V, dO}));
        st = tl_cuda_launched(op);
    }
    tl_scratch_free(tmp);
    return st;
}

// the one-pass backward with 8 CPT-query tiles when it applies (*done), else nothing
template <int HDP, int CPT>
int try_onepass(const char *op, const float *Q, const float *K, const float *V, const float *dO,
                const float *L, const float *D, const float *M, float *dQ, float *dK, float *dV,
                int64_t B, int64_t n, int64_t H, int64_t hd, float scale, bool causal, bool *done) {
    *done = false;
    if (B * H * ((n + 8 * CPT - 1) / (8 * CPT)) >= INT32_MAX) return TL_OK;
    TL_TRY((onepass_fits<HDP, CPT>(op, (n + TROWS - 1) / TROWS, done)));
    if (!*done) return TL_OK;
    return onepass_backward<HDP, CPT>(op, Q, K, V, dO, L, D, M, dQ, dK, dV, B, n, H, hd, scale,
                                      causal);
}

template <int HDP>
int tiled_backward(const char *op, const float *Q, const float *K, const float *V,
                   const float *dO, const float *L, const float *D, const float *M, float *dQ,
                   float *dK, float *dV, int64_t B, int64_t n, int64_t H, int64_t hd, float scale,
                   bool causal) {
    const int cols = onepass_cols(HDP);
    bool done = false;
    if (cols == 64)
        TL_TRY((try_onepass<64, 8>(op, Q, K, V, dO, L, D, M, dQ, dK, dV, B, n, H, hd, scale, causal,
                                   &done)));
    else if (cols == 32)
        TL_TRY((try_onepass<HDP, 4>(op, Q, K, V, dO, L, D, M, dQ, dK, dV, B, n, H, hd, scale,
                                    causal, &done)));
    if (done) return TL_OK;
    static bool dq_ready = false, dkv_ready = false;
    TL_TRY(tl_allow_smem(op, attn_dq_tiled<HDP>, Tiled<HDP>::DQ_SMEM, dq_ready));
    TL_TRY(tl_allow_smem(op, attn_dkv_tiled<HDP>, Tiled<HDP>::DKV_SMEM, dkv_ready));
    const bool vec = vec_ok(hd, {Q, K, V, dO});
    dim3 grid((unsigned)((n + TROWS - 1) / TROWS), (unsigned)(B * H));
    attn_dq_tiled<HDP><<<grid, TTHREADS, Tiled<HDP>::DQ_SMEM, tl_stream()>>>(
        Q, K, V, dO, L, D, M, dQ, (int)n, (int)H, (int)hd, scale, causal, vec);
    TL_LAUNCHED(op);
    attn_dkv_tiled<HDP><<<grid, TTHREADS, Tiled<HDP>::DKV_SMEM, tl_stream()>>>(
        Q, K, V, dO, L, D, M, dK, dV, (int)n, (int)H, (int)hd, scale, causal, vec);
    TL_LAUNCHED(op);
    return TL_OK;
}

// The fused core by head dim: the tiled kernels with the head dims padded to 64, 96 or 128 (a
// head dim of 32 or less pads to 64 too: twice its dot-product work, still far faster than a
// lane group per row); the caller sends larger head dims to the composed path.
int flash_forward(const char *op, const float *Q, const float *K, const float *V, const float *M,
                  float *O, float *L, int64_t B, int64_t n, int64_t H, int64_t hd, float scale,
                  bool causal) {
    if (hd > 96) return tiled_forward<128>(op, Q, K, V, M, O, L, B, n, H, hd, scale, causal);
    if (hd > 64) return tiled_forward<96>(op, Q, K, V, M, O, L, B, n, H, hd, scale, causal);
    return tiled_forward<64>(op, Q, K, V, M, O, L, B, n, H, hd, scale, causal);
}

int flash_backward(const char *op, const float *Q, const float *K, const float *V, const float *dO,
                   const float *L, const float *D, const float *M, float *dQ, float *dK, float *dV,
                   int64_t B, int64_t n, int64_t H, int64_t hd, float scale, bool causal) {
    if (hd > 96)
        return tiled_backward<128>(op, Q, K, V, dO, L, D, M, dQ, dK, dV, B, n, H, hd, scale, causal);
    if (hd > 64)
        return tiled_backward<96>(op, Q, K, V, dO, L, D, M, dQ, dK, dV, B, n, H, hd, scale, causal);
    return tiled_backward<64>(op, Q, K, V, dO, L, D, M, dQ, dK, dV, B, n, H, hd, scale, causal);
}

// ---------------------------------------------------------------- exact path (tl_exact())
// The stub's order exactly (native/stub/attention.c's file comment): projections and weight
// gradients through tl_gemm_exact_f32, the online softmax of rule 5 (tiles of TLM_ATTN_TILE
// keys in order), recomputed probabilities from tlm_attn_prob/dscore, and every gradient row
// one fma chain over keys (dQ) or queries (dK, dV) in order.
// Head dims up to 128: the tiled kernels of attention_exact.cuh (the default kernels' tiles,
// the stub's arithmetic), launched like the default ones; above, attention_exact_rows.cuh.
template <int HDP>
int exact_tiled_forward(const char *op, const float *Q, const float *K, const float *V, const float *M,
                        float *O, float *L, int64_t B, int64_t n, int64_t H, int64_t hd, float scale,
                        bool causal) {
    static bool ready = false;
    TL_TRY(tl_allow_smem(op, attn_fwd_exact<HDP>, Exact<HDP>::FWD_SMEM, ready));
    dim3 grid((unsigned)((n + TROWS - 1) / TROWS), (unsigned)(B * H));
    attn_fwd_exact<HDP><<<grid, TTHREADS, Exact<HDP>::FWD_SMEM, tl_stream()>>>(
        Q, K, V, M, O, L, (int)n, (int)H, (int)hd, scale, causal, vec_ok(hd, {Q, K, V}));
    TL_LAUNCHED(op);
    return TL_OK;
}

template <int HDP>
int exact_tiled_backward(const char *op, const float *Q, const float *K, const float *V,
                         const float *dO, const float *L, const float *D, const float *M, float *dQ,
                         float *dK, float *dV, int64_t B, int64_t n, int64_t H, int64_t hd,
                         float scale, bool causal) {
    static bool dq_ready = false, dkv_ready = false;
    TL_TRY(tl_allow_smem(op, attn_dq_exact<HDP>, Tiled<HDP>::DQ_SMEM, dq_ready));
    TL_TRY(tl_allow_smem(op, attn_dkv_exact<HDP>, Tiled<HDP>::DKV_SMEM, dkv_ready));
    const bool vec = vec_ok(hd, {Q, K, V, dO});
    dim3 grid((unsigned)((n + TROWS - 1) / TROWS), (unsigned)(B * H));
    attn_dq_exact<HDP><<<grid, TTHREADS, Tiled<HDP>::DQ_SMEM, tl_stream()>>>(
        Q, K, V, dO, L, D, M, dQ, (int)n, (int)H, (int)hd, scale, causal, vec);
    TL_LAUNCHED(op);
    attn_dkv_exact<HDP><<<grid, TTHREADS, Tiled<HDP>::DKV_SMEM, tl_stream()>>>(
        Q, K, V, dO, L, D, M, dK, dV, (int)n, (int)H, (int)hd, scale, causal, vec);
    TL_LAUNCHED(op);
    return TL_OK;
}

// ---------------------------------------------------------------- the core and the projections
// The attention core on (B*n, H*hd) Q, K, V: O and lse, by mode and head dim (exact mode's
// canonical kernel, the fused kernels for use_flash and hd <= 128, else the composed path).
int core_forward(const char *op, const float *Q, const float *K, const float *V, const float *M, float *O,
                 float *L, int64_t b, int64_t n, int64_t h, int64_t hd, bool flash, bool causal) {
    const float scale = (float)(1.0 / sqrt((double)hd));
    if (tl_exact() && hd <= 128) {
        if (hd > 96) return exact_tiled_forward<128>(op, Q, K, V, M, O, L, b, n, h, hd, scale, causal);
        if (hd > 64) return exact_tiled_forward<96>(op, Q, K, V, M, O, L, b, n, h, hd, scale, causal);
        return exact_tiled_forward<64>(op, Q, K, V, M, O, L, b, n, h, hd, scale, causal);
    }
    if (tl_exact()) {
        exact_fwd_kernel<<<ex_blocks(b * h * n), EX_WARPS * 32, 0, tl_stream()>>>(Q, K, V, M, O, L, b, n, h, hd,
                                                                                  scale, causal);
        TL_LAUNCHED(op);
        return TL_OK;
    }
    if (flash && hd <= 128) return flash_forward(op, Q, K, V, M, O, L, b, n, h, hd, scale, causal);
    cublasHandle_t hnd;
    TL_TRY(tl_cublas(op, &hnd));
    return composed_forward(op, hnd, Q, K, V, M, O, L, b, n, h, hd, scale, causal);
}

// The core's backward: dQ, dK, dV from dO and the forward's O and lse; D (b*h*n) is scratch.
int core_backward(const char *op, const float *Q, const float *K, const float *V, const float *O,
                  const float *L, const float *dO, const float *M, float *dQ, float *dK, float *dV, float *D,
                  int64_t b, int64_t n, int64_t h, int64_t hd, bool flash, bool causal) {
    const float scale = (float)(1.0 / sqrt((double)hd));
    cudaStream_t s = tl_stream();
    if (tl_exact()) {
        attn_rowdot_exact<<<tl_blocks(b * h * n), TL_THREADS, 0, s>>>(dO, O, D, b * h * n, (int)n, (int)h,
                                                                      (int)hd);
        TL_LAUNCHED(op);
        if (hd > 128) {
            exact_grad_kernel<<<ex_blocks(b * h * n), EX_WARPS * 32, 0, s>>>(0, Q, K, V, dO, L, D, M, dQ, nullptr,
                                                                            b, n, h, hd, scale, causal);
            exact_grad_kernel<<<ex_blocks(b * h * n), EX_WARPS * 32, 0, s>>>(1, Q, K, V, dO, L, D, M, dK, dV, b,
                                                                            n, h, hd, scale, causal);
            TL_LAUNCHED(op);
            return TL_OK;
        }
        if (hd > 96)
            return exact_tiled_backward<128>(op, Q, K, V, dO, L, D, M, dQ, dK, dV, b, n, h, hd, scale, causal);
        if (hd > 64)
            return exact_tiled_backward<96>(op, Q, K, V, dO, L, D, M, dQ, dK, dV, b, n, h, hd, scale, causal);
        return exact_tiled_backward<64>(op, Q, K, V, dO, L, D, M, dQ, dK, dV, b, n, h, hd, scale, causal);
    }
    rowdot_kernel<<<tl_blocks(8 * b * h * n), TL_THREADS, 0, s>>>(dO, O, D, b, (int)n, (int)h, (int)hd,
                                                                 vec_ok(hd, {dO, O}));
    TL_LAUNCHED(op);
    if (flash && hd <= 128)
        return flash_backward(op, Q, K, V, dO, L, D, M, dQ, dK, dV, b, n, h, hd, scale, causal);
    cublasHandle_t hnd;
    TL_TRY(tl_cublas(op, &hnd));
    return composed_backward(op, hnd, Q, K, V, dO, L, D, M, dQ, dK, dV, b, n, h, hd, scale, causal);
}

// C (M x N) = op(A) op(B), or C += op(A) op(B) when accumulate: the library's GEMM entry (the
// canonical GEMM in exact mode, which continues C's sums; one cuBLAS SGEMM otherwise). The
// projections and weight gradients.
int project(const char *op, bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
            const float *B, int64_t ldb, float *C, int64_t ldc, bool accumulate) {
    return tl_gemm_f32(op, ta, tb, 1, M, N, K, A, lda, 0, B, ldb, 0, accumulate ? 1.0f : 0.0f, C, ldc, 0, 1);
}

// CUDA launch limits: (batch x heads) runs on gridDim.y, and sequence offsets stay in int range
constexpr int64_t MAX_SEQ = 1 << 30;
int check_launch(const char *op, int64_t b, int64_t n, int64_t h) {
    if (b * h > TL_MAX_GRID_YZ || n > MAX_SEQ)
        return tl_fail(TL_E_SHAPE, "%s: batch x heads = %lld (at most %lld) or sequence %lld (at most %lld) "
                       "exceeds the CUDA launch limits", op, (long long)(b * h), (long long)TL_MAX_GRID_YZ,
                       (long long)n, (long long)MAX_SEQ);
    return TL_OK;
}

int zero(const char *op, tl_buf t) {
    if (t->n) TL_CUDA_TRY(op, cudaMemsetAsync(t->data, 0, sizeof(float) * t->n, tl_stream()));
    return TL_OK;
}

}  // namespace

extern "C" int tlk_multi_head_attention(const char *op, tl_buf wq, tl_buf wk, tl_buf wv, tl_buf wo, tl_buf x,
                                       tl_buf mask, tl_buf y, tl_buf q, tl_buf k, tl_buf v,
                                       tl_buf lse, tl_buf attn, int64_t b, int64_t n, int64_t dm,
                                       int64_t h, int64_t hd, int64_t has_mask, int64_t flash,
                                       int64_t causal) {
    const int64_t R = b * n, HD = h * hd;
    TL_TRY(check_launch(op, b, n, h));
    if (R == 0 || HD == 0 || dm == 0) {
        tl_buf outs[] = {y, q, k, v, lse, attn};
        for (tl_buf t : outs) TL_TRY(zero(op, t));
        return TL_OK;
    }
    const float *M = has_mask ? mask->data : nullptr;
    const float *X = x->data;
    TL_TRY(project(op, false, false, R, HD, dm, X, dm, wq->data, HD, q->data, HD, false));
    TL_TRY(project(op, false, false, R, HD, dm, X, dm, wk->data, HD, k->data, HD, false));
    TL_TRY(project(op, false, false, R, HD, dm, X, dm, wv->data, HD, v->data, HD, false));
    TL_TRY(core_forward(op, q->data, k->data, v->data, M, attn->data, lse->data, b, n, h, hd, flash != 0,
                        causal != 0));
    return project(op, false, false, R, dm, HD, attn->data, HD, wo->data, dm, y->data, dm, false);
}

extern "C" int tlk_multi_head_attention_backward(const char *op, tl_buf g, tl_buf wq, tl_buf wk, tl_buf wv,
                                                tl_buf wo, tl_buf x, tl_buf q, tl_buf k, tl_buf v,
                                                tl_buf lse, tl_buf attn, tl_buf mask, tl_buf dwq,
                                                tl_buf dwk, tl_buf dwv, tl_buf dwo, tl_buf dx,
                                                int64_t b, int64_t n, int64_t dm, int64_t h,
                                                int64_t hd, int64_t has_mask, int64_t flash,
                                                int64_t causal) {
    const int64_t R = b * n, HD = h * hd;
    TL_TRY(check_launch(op, b, n, h));
    if (R == 0 || HD == 0 || dm == 0) {
        tl_buf outs[] = {dwq, dwk, dwv, dwo, dx};
        for (tl_buf t : outs) TL_TRY(zero(op, t));
        return TL_OK;
    }
    const float *M = has_mask ? mask->data : nullptr;
    const float *G = g->data, *X = x->data, *O = attn->data;
    // scratch: dO, dQ, dK, dV (R x HD each) and D (B*H*n)
    const size_t big = (size_t)(R * HD);
    void *tmp = nullptr;
    TL_TRY(tl_scratch(op, sizeof(float) * (4 * big + (size_t)(b * h * n)), &tmp));
    float *dO = (float *)tmp, *dQ = dO + big, *dK = dQ + big, *dV = dK + big, *D = dV + big;
    int st = project(op, true, false, HD, dm, R, O, HD, G, dm, dwo->data, dm, false);
    if (!st) st = project(op, false, true, R, HD, dm, G, dm, wo->data, dm, dO, HD, false);
    if (!st) st = core_backward(op, q->data, k->data, v->data, O, lse->data, dO, M, dQ, dK, dV, D, b, n, h, hd,
                                flash != 0, causal != 0);
    if (!st) st = project(op, true, false, dm, HD, R, X, dm, dQ, HD, dwq->data, HD, false);
    if (!st) st = project(op, true, false, dm, HD, R, X, dm, dK, HD, dwk->data, HD, false);
    if (!st) st = project(op, true, false, dm, HD, R, X, dm, dV, HD, dwv->data, HD, false);
    // dx = dQ Wq^T + dK Wk^T + dV Wv^T, each GEMM continuing the previous one's sums
    if (!st) st = project(op, false, true, R, dm, HD, dQ, HD, wq->data, HD, dx->data, dm, false);
    if (!st) st = project(op, false, true, R, dm, HD, dK, HD, wk->data, HD, dx->data, dm, true);
    if (!st) st = project(op, false, true, R, dm, HD, dV, HD, wv->data, HD, dx->data, dm, true);
    tl_scratch_free(tmp);
    return st;
}

extern "C" int tlk_attention(const char *op, tl_buf q, tl_buf k, tl_buf v, tl_buf mask, tl_buf o, tl_buf lse,
                             int64_t b, int64_t n, int64_t e, int64_t has_mask, int64_t flash,
                             int64_t causal) {
    TL_TRY(check_launch(op, b, n, 1));
    if (b * n == 0 || e == 0) {
        TL_TRY(zero(op, o));
        return zero(op, lse);
    }
    return core_forward(op, q->data, k->data, v->data, has_mask ? mask->data : nullptr, o->data, lse->data, b,
                        n, 1, e, flash != 0, causal != 0);
}

extern "C" int tlk_attention_backward(const char *op, tl_buf g, tl_buf q, tl_buf k, tl_buf v, tl_buf o,
                                      tl_buf lse, tl_buf mask, tl_buf dq, tl_buf dk, tl_buf dv, int64_t b,
                                      int64_t n, int64_t e, int64_t has_mask, int64_t flash,
                                      int64_t causal) {
    TL_TRY(check_launch(op, b, n, 1));
    if (b * n == 0 || e == 0) {
        tl_buf outs[] = {dq, dk, dv};
        for (tl_buf t : outs) TL_TRY(zero(op, t));
        return TL_OK;
    }
    void *tmp = nullptr;  // D, one per row
    TL_TRY(tl_scratch(op, sizeof(float) * (size_t)(b * n), &tmp));
    int st = core_backward(op, q->data, k->data, v->data, o->data, lse->data, g->data,
                           has_mask ? mask->data : nullptr, dq->data, dk->data, dv->data, (float *)tmp, b, n,
                           1, e, flash != 0, causal != 0);
    tl_scratch_free(tmp);
    return st;
}
