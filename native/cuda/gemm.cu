// gemm.cu (CUDA): the exact-mode GEMMs of native/common/tl_math.h's rule 3.
// One kernel family kept whole: every kernel below computes its entry's order, and the tile
// choice, fold and split launch pick among them, so reading one file shows why they agree.
//
// tl_gemm_exact_f32 (the exact GEMM, exact_version 7: float64 chunk chains, one rounding per
// output) runs the x64 section at the end: FP64-tensor-core tiles (mma.sync m16n8k16 .f64) over
// all of K or split per chunk with an ordered fold, and a one-output-per-thread kernel for the
// layouts the tiles do not take. The same order the stub runs (stub/gemm.c), so the bits agree.
//
// tl_gemm_exact_chain_f32 (convolutions' GEMMs: one float32 fmaf chain over all of k, the
// stub's tl_sgemm order) runs the tiled SIMT SGEMMs below, in which each thread owns a block of
// outputs and accumulates each one as acc = fma(a[i,kk], b[kk,j], acc) strictly in k order
// (the kernels still take a kchunk, the float32 chunk fold of exact_version 3-6, called with
// INT_MAX: no fold). The kernels differ only in how many outputs a block and a thread own and
// how K reaches shared memory:
// - 128x128 tiles (16x16 threads of 8x8, BK 16, register-staged double buffering), the main
//   kernel; 96x128, 96x96 (cp.async, three stages) and 128x64 tiles from one warp-tiled
//   template, for shapes whose 128x128 tiles would leave much of the last wave empty;
//   pick_tile chooses by the busiest SM's work (bench/results/gemm-exact.md has the rates);
// - 32x32 or 16x16 tiles with 2x2 or 1 output per thread where 128x128 tiles would fill under
//   a quarter of the SMs;
// - the chain kernel (one output per thread, 8x8 per block) for few outputs over a long K,
//   a weight gradient over many tokens, where the K dependent FMAs of each chain are the cost.
// tl_gemm_f32 is what other kernels call (exact or cuBLAS); tlk_gemm_exact is the registry
// entry's body.
#include <string.h>
#include <algorithm>
#include "common.cuh"
#include "bench_switches.h"
#include "generated/gemm_kernels.h"
#include "gemm_x64.cuh"

namespace {

constexpr int BM = 128, BN = 128, THREADS = 256;

// Rule 3's chunk fold: a chunk ends at k_end when k_end < K is a multiple of kchunk; the running
// sum = the first chunk's partial, later the sum + the partial, and the partial restarts from 0.
// The last chunk's partial joins at the store. kchunk = INT_MAX never folds: one chain.
__device__ __forceinline__ bool chunk_ends(int k_end, int K, int kchunk) {
    return k_end < K && k_end % kchunk == 0;
}
__device__ __forceinline__ void fold_into(float &sum, float &acc, int k_end, int kchunk) {
    sum = k_end == kchunk ? acc : __fadd_rn(sum, acc);
    acc = 0.0f;
}

// The large tiles' running sums, in dynamic shared memory (their 64 accumulators per thread
// leave no registers, and keeping the sums in C cost a read and a write of C per chunk: 4096^3
// ran at 54% of cuBLAS instead of 80%). Output e of a thread sits at r[e * threads + thread],
// so a warp's accesses fall in distinct banks. Launches with K > kchunk give the kernel
// outputs-per-block floats of dynamic shared memory (running_sum_bytes); others give none.
struct RunningSums {
    float *r;
    int threads;
    __device__ __forceinline__ float &at(int e) const { return r[e * threads + threadIdx.x]; }
    __device__ __forceinline__ void fold(int e, float &acc, int k_end, int kchunk) const {
        fold_into(at(e), acc, k_end, kchunk);
    }
    __device__ __forceinline__ float total(int e, float acc, int K, int kchunk) const {
        return K > kchunk ? __fadd_rn(at(e), acc) : acc;
    }
};
extern __shared__ __align__(16) float tl_gemm_running[];

size_t running_sum_bytes(int bm, int bn, int K, int kchunk) {
    return K > kchunk ? (size_t)bm * bn * sizeof(float) : 0;
}


// four consecutive elements p[outer * ld + inner + e], zero outside [0, outer_n) x [0, inner_n)
__device__ __forceinline__ void load4(const float *p, long long ld, int outer, int inner,
                                      int outer_n, int inner_n, bool vec, float v[4]) {
    if (vec && outer < outer_n && inner + 3 < inner_n) {
        float4 t = __ldg(reinterpret_cast<const float4 *>(p + (long long)outer * ld + inner));
        v[0] = t.x; v[1] = t.y; v[2] = t.z; v[3] = t.w;
    } else {
#pragma unroll
        for (int e = 0; e < 4; e++)
            v[e] = (outer < outer_n && inner + e < inner_n) ? p[(long long)outer * ld + inner + e] : 0.0f;
    }
}

// Stage one BK-deep tile of op(X) into registers: `rows` is the tile's non-k extent (BM or
// BN), TRANS says whether X is stored k-major (contiguous along rows) or row-major (contiguous
// along k). Each thread loads BK/8 float4s.
template <int BK, bool KMAJOR>
__device__ __forceinline__ void load_tile(const float *X, long long ld, int r0, int k0, int R, int K,
                                          bool vec, float reg[BK / 8][4]) {
#pragma unroll
    for (int q = 0; q < BK / 8; q++) {
        int e = threadIdx.x + THREADS * q;
        if (KMAJOR) {   // X[k * ld + r]: 32 float4 per k-row
            load4(X, ld, k0 + e / 32, r0 + (e % 32) * 4, K, R, vec, reg[q]);
        } else {        // X[r * ld + k]: BK/4 float4 per row
            load4(X, ld, r0 + e / (BK / 4), k0 + (e % (BK / 4)) * 4, R, K, vec, reg[q]);
        }
    }
}

template <int BK, bool KMAJOR>
__device__ __forceinline__ void store_tile(float (*S)[128], const float reg[BK / 8][4]) {
#pragma unroll
    for (int q = 0; q < BK / 8; q++) {
        int e = threadIdx.x + THREADS * q;
        if (KMAJOR) {
            *reinterpret_cast<float4 *>(&S[e / 32][(e % 32) * 4]) =
                make_float4(reg[q][0], reg[q][1], reg[q][2], reg[q][3]);
        } else {
            int r = e / (BK / 4), kq = (e % (BK / 4)) * 4;
#pragma unroll
            for (int i = 0; i < 4; i++) S[kq + i][r] = reg[q][i];
        }
    }
}

// op(A) (M, K): A[i lda + k], or A[k lda + i] when TA; op(B) (K, N): B[k ldb + j], or B[j ldb + k]
template <int BK, bool TA, bool TB>
__global__ void __launch_bounds__(THREADS, 2)
k_gemm_exact(int M, int N, int K, const float *__restrict__ A, long long lda, long long sa,
             const float *__restrict__ B, long long ldb, long long sb, float *__restrict__ C,
             long long ldc, long long sc, int accumulate, int kchunk, bool vec_a, bool vec_b,
             long long b0, bool rows_on_x) {
    static_assert(TL_EXACT_KCHUNK % BK == 0, "k tiles divide the chunk");
    __shared__ __align__(16) float As[2][BK][BM];
    __shared__ __align__(16) float Bs[2][BK][BN];
    long long bi = b0 + blockIdx.z;
    A += bi * sa; B += bi * sb; C += bi * sc;
    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    const int row0 = (rows_on_x ? blockIdx.x : blockIdx.y) * BM;
    const int col0 = (rows_on_x ? blockIdx.y : blockIdx.x) * BN;
    const RunningSums run{tl_gemm_running, THREADS};

    float acc[8][8];
#pragma unroll
    for (int i = 0; i < 8; i++) {
        int r = row0 + (i < 4 ? ty * 4 + i : 64 + ty * 4 + i - 4);
#pragma unroll
        for (int j = 0; j < 8; j++) {
            int c = col0 + (j < 4 ? tx * 4 + j : 64 + tx * 4 + j - 4);
            acc[i][j] = (accumulate && r < M && c < N) ? C[(long long)r * ldc + c] : 0.0f;
        }
    }

    float ra[BK / 8][4], rb[BK / 8][4];
    if (K > 0) {
        load_tile<BK, TA>(A, lda, row0, 0, M, K, vec_a, ra);
        load_tile<BK, !TB>(B, ldb, col0, 0, N, K, vec_b, rb);
        store_tile<BK, TA>(As[0], ra);
        store_tile<BK, !TB>(Bs[0], rb);
    }
    __syncthreads();
    for (int k0 = 0, cur = 0; k0 < K; k0 += BK, cur ^= 1) {
        const bool more = k0 + BK < K;
        if (more) {
            load_tile<BK, TA>(A, lda, row0, k0 + BK, M, K, vec_a, ra);
            load_tile<BK, !TB>(B, ldb, col0, k0 + BK, N, K, vec_b, rb);
        }
        const int kn = K - k0 < BK ? K - k0 : BK;   // the last tile stops at K: no padded fma
        auto step = [&](int kk) {
            float4 a0 = *reinterpret_cast<const float4 *>(&As[cur][kk][ty * 4]);
            float4 a1 = *reinterpret_cast<const float4 *>(&As[cur][kk][64 + ty * 4]);
            float4 b0v = *reinterpret_cast<const float4 *>(&Bs[cur][kk][tx * 4]);
            float4 b1v = *reinterpret_cast<const float4 *>(&Bs[cur][kk][64 + tx * 4]);
            const float a[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
            const float b[8] = {b0v.x, b0v.y, b0v.z, b0v.w, b1v.x, b1v.y, b1v.z, b1v.w};
#pragma unroll
            for (int i = 0; i < 8; i++)
#pragma unroll
                for (int j = 0; j < 8; j++) acc[i][j] = __fmaf_rn(a[i], b[j], acc[i][j]);
        };
        if (kn == BK) {
#pragma unroll
            for (int kk = 0; kk < BK; kk++) step(kk);
        } else {
            for (int kk = 0; kk < kn; kk++) step(kk);
        }
        if (chunk_ends(k0 + BK, K, kchunk)) {
#pragma unroll
            for (int i = 0; i < 8; i++)
#pragma unroll
                for (int j = 0; j < 8; j++) run.fold(i * 8 + j, acc[i][j], k0 + BK, kchunk);
        }
        if (more) {
            store_tile<BK, TA>(As[cur ^ 1], ra);
            store_tile<BK, !TB>(Bs[cur ^ 1], rb);
        }
        __syncthreads();
    }

#pragma unroll
    for (int i = 0; i < 8; i++) {
        int r = row0 + (i < 4 ? ty * 4 + i : 64 + ty * 4 + i - 4);
        if (r >= M) continue;
#pragma unroll
        for (int j = 0; j < 8; j++) {
            int c = col0 + (j < 4 ? tx * 4 + j : 64 + tx * 4 + j - 4);
            if (c < N) C[(long long)r * ldc + c] = run.total(i * 8 + j, acc[i][j], K, kchunk);
        }
    }
}

template <int BK>
int launch(const char *op, int ta, int tb, int64_t batch, int M, int N, int K, const float *A,
           int64_t lda, int64_t sa, const float *B, int64_t ldb, int64_t sb, float *C, int64_t ldc,
           int64_t sc, int accumulate, int kchunk) {
    // float4 loads need 16-byte aligned rows in every batch element
    auto aligned = [](const float *p, int64_t ld, int64_t s, int64_t batch) {
        return ((uintptr_t)p % 16 == 0) && ld % 4 == 0 && (batch == 1 || s % 4 == 0);
    };
    bool va = aligned(A, lda, sa, batch), vb = aligned(B, ldb, sb, batch);
    // gridDim.y stops at 65535: the longer tile count goes on x (M N < 2^32, so one fits on y)
    unsigned mt = (unsigned)((M + BM - 1) / BM), nt = (unsigned)((N + BN - 1) / BN);
    bool rows_on_x = mt > 65535;
    dim3 grid(rows_on_x ? mt : nt, rows_on_x ? nt : mt, 1);
    const size_t shm = running_sum_bytes(BM, BN, K, kchunk);
    for (int64_t b0 = 0; b0 < batch; b0 += 65535) {
        grid.z = (unsigned)(batch - b0 < 65535 ? batch - b0 : 65535);
#define TL_GX_LAUNCH(TA, TB)                                                                       \
    do {                                                                                           \
        static bool ready_ = false;                                                                \
        TL_TRY(tl_allow_smem(op, k_gemm_exact<BK, TA, TB>, BM * BN * sizeof(float), ready_));     \
        k_gemm_exact<BK, TA, TB><<<grid, THREADS, shm, tl_stream()>>>(                             \
            M, N, K, A, lda, sa, B, ldb, sb, C, ldc, sc, accumulate, kchunk, va, vb, b0, rows_on_x); \
    } while (0)
        if (!ta && !tb) TL_GX_LAUNCH(false, false);
        else if (!ta && tb) TL_GX_LAUNCH(false, true);
        else if (ta && !tb) TL_GX_LAUNCH(true, false);
        else TL_GX_LAUNCH(true, true);
#undef TL_GX_LAUNCH
        TL_LAUNCHED(op);
    }
    return TL_OK;
}


// asynchronous copies global -> shared of 4 or 16 bytes, zero-filled when !ok (src unread)
__device__ __forceinline__ void cp_async4(float *dst, const float *src, bool ok) {
    unsigned d = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(d), "l"(src), "r"(ok ? 4 : 0));
}
__device__ __forceinline__ void cp_async16(float *dst, const float *src, bool ok) {
    unsigned d = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(ok ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

// The warp-tiled kernel for the other large tiles: a BM x BN output tile per block of
// (BM/WM) x (BN/WN) warps, each warp a WM x WN sub-tile, each lane TM x TN outputs in float4
// groups (rows lm*4 + g*LM*4 + 0..3 of its warp tile for g < TM/4, LM = WM/TM lanes down,
// columns likewise with LN = WN/TN lanes across), so a warp's fragment reads are LM (or LN)
// consecutive float4s: one shared-memory wavefront each. K is staged BK at a time into
// k-major shared tiles padded by 4 floats (a row-major operand's transposing stores then hit
// distinct banks), one barrier per k-tile, either through registers (the next tile's global
// loads in flight while the current one is multiplied) or, with STAGES > 0, by cp.async with
// STAGES - 1 tiles in flight (measured faster for 96x128 and 96x96, slower for 128x128).
template <int BM_, int BN_, int BK_, int WM_, int WN_, int TM_, int TN_>
struct Tile {
    static constexpr int BM = BM_, BN = BN_, BK = BK_, WM = WM_, WN = WN_, TM = TM_, TN = TN_;
    static constexpr int LM = WM / TM, LN = WN / TN;
    static constexpr int THREADS = (BM / WM) * (BN / WN) * 32;
    static_assert(LM * LN == 32 && TM % 4 == 0 && TN % 4 == 0 && BK % 4 == 0, "tile shape");
    static_assert(BM % WM == 0 && BN % WN == 0, "warp tiles");
};

// float4 loads of one BK-deep tile of an operand whose non-k extent is R, into registers:
// KMAJOR operands are stored X[k * ld + r] (contiguous along r), the others X[r * ld + k]
template <int R, int BK, int THREADS, bool KMAJOR>
struct Stage {
    static constexpr int F = R * BK / 4, NQ = (F + THREADS - 1) / THREADS;
    float v[NQ][4];
    __device__ __forceinline__ void load(const float *X, long long ld, int r0, int k0, int Rn, int K,
                                         bool vec) {
#pragma unroll
        for (int q = 0; q < NQ; q++) {
            int e = threadIdx.x + THREADS * q;
            if (F % THREADS && e >= F) break;
            if (KMAJOR) load4(X, ld, k0 + e / (R / 4), r0 + (e % (R / 4)) * 4, K, Rn, vec, v[q]);
            else load4(X, ld, r0 + e / (BK / 4), k0 + (e % (BK / 4)) * 4, Rn, K, vec, v[q]);
        }
    }
    // the same tile straight into S[kk * (R + 4) + r] by cp.async, no registers: float4 copies
    // along r for KMAJOR operands, single floats (to their transposed places) for the others;
    // zero-filled outside the operand
    __device__ __forceinline__ static void fetch(float *S, const float *X, long long ld, int r0, int k0,
                                                 int Rn, int K, bool vec) {
        if (KMAJOR) {
#pragma unroll
            for (int q = 0; q < NQ; q++) {
                int e = threadIdx.x + THREADS * q;
                if (F % THREADS && e >= F) break;
                const int k = k0 + e / (R / 4), r = r0 + (e % (R / 4)) * 4;
                float *d = &S[(e / (R / 4)) * (R + 4) + (e % (R / 4)) * 4];
                if (vec && k < K && r + 3 < Rn) {
                    cp_async16(d, X + (long long)k * ld + r, true);
                } else {
#pragma unroll
                    for (int i = 0; i < 4; i++) {
                        const bool ok = k < K && r + i < Rn;
                        cp_async4(d + i, ok ? X + (long long)k * ld + r + i : X, ok);
                    }
                }
            }
        } else {
            constexpr int FE = R * BK, NE = (FE + THREADS - 1) / THREADS;
#pragma unroll
            for (int q = 0; q < NE; q++) {
                int e = threadIdx.x + THREADS * q;
                if (FE % THREADS && e >= FE) break;
                const int r = e / BK, kk = e % BK;
                const bool ok = r0 + r < Rn && k0 + kk < K;
                cp_async4(&S[kk * (R + 4) + r], ok ? X + (long long)(r0 + r) * ld + k0 + kk : X, ok);
            }
        }
    }
    // into S[kk * (R + 4) + r]
    __device__ __forceinline__ void store(float *S) const {
#pragma unroll
        for (int q = 0; q < NQ; q++) {
            int e = threadIdx.x + THREADS * q;
            if (F % THREADS && e >= F) break;
            if (KMAJOR) {
                *reinterpret_cast<float4 *>(&S[(e / (R / 4)) * (R + 4) + (e % (R / 4)) * 4]) =
                    make_float4(v[q][0], v[q][1], v[q][2], v[q][3]);
            } else {
                int r = e / (BK / 4), kq = (e % (BK / 4)) * 4;
#pragma unroll
                for (int i = 0; i < 4; i++) S[(kq + i) * (R + 4) + r] = v[q][i];
            }
        }
    }
};

template <class T, int MINB, int STAGES, bool TA, bool TB>
__global__ void __launch_bounds__(T::THREADS, MINB)
k_gemm_tile(int M, int N, int K, const float *__restrict__ A, long long lda, long long sa,
            const float *__restrict__ B, long long ldb, long long sb, float *__restrict__ C,
            long long ldc, long long sc, int accumulate, int kchunk, bool vec_a, bool vec_b,
            bool vec_c, long long b0, bool rows_on_x) {
    constexpr int BM = T::BM, BN = T::BN, BK = T::BK, TM = T::TM, TN = T::TN, SA = BM + 4,
                  SB = BN + 4;
    constexpr int NBUF = STAGES ? STAGES : 2;
    static_assert(TL_EXACT_KCHUNK % BK == 0, "k tiles divide the chunk");
    __shared__ __align__(16) float As[NBUF][BK * SA];  // As[.][kk * SA + i] = op(A)[row0 + i][k0 + kk]
    __shared__ __align__(16) float Bs[NBUF][BK * SB];  // Bs[.][kk * SB + j] = op(B)[k0 + kk][col0 + j]
    long long bi = b0 + blockIdx.z;
    A += bi * sa; B += bi * sb; C += bi * sc;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int wr = (warp / (BN / T::WN)) * T::WM + (lane / T::LN) * 4;
    const int wc = (warp % (BN / T::WN)) * T::WN + (lane % T::LN) * 4;
    const int row0 = (rows_on_x ? blockIdx.x : blockIdx.y) * BM;
    const int col0 = (rows_on_x ? blockIdx.y : blockIdx.x) * BN;
    auto row_of = [&](int i) { return row0 + wr + (i / 4) * T::LM * 4 + i % 4; };
    auto col_of = [&](int j) { return col0 + wc + (j / 4) * T::LN * 4 + j % 4; };
    const RunningSums run{tl_gemm_running, T::THREADS};

    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; i++)
#pragma unroll
        for (int j = 0; j < TN; j++) {
            int r = row_of(i), c = col_of(j);
            acc[i][j] = (accumulate && r < M && c < N) ? C[(long long)r * ldc + c] : 0.0f;
        }

    // kn k-steps of the tile in buffers as, bs (kn < BK only for the last tile: no padded fma)
    auto multiply = [&](const float *as, const float *bs, int kn) {
        auto step = [&](int kk) {
            float a[TM], b[TN];
#pragma unroll
            for (int g = 0; g < TM / 4; g++) {
                float4 t = *reinterpret_cast<const float4 *>(&as[kk * SA + wr + g * T::LM * 4]);
                a[4 * g] = t.x; a[4 * g + 1] = t.y; a[4 * g + 2] = t.z; a[4 * g + 3] = t.w;
            }
#pragma unroll
            for (int g = 0; g < TN / 4; g++) {
                float4 t = *reinterpret_cast<const float4 *>(&bs[kk * SB + wc + g * T::LN * 4]);
                b[4 * g] = t.x; b[4 * g + 1] = t.y; b[4 * g + 2] = t.z; b[4 * g + 3] = t.w;
            }
#pragma unroll
            for (int i = 0; i < TM; i++)
#pragma unroll
                for (int j = 0; j < TN; j++) acc[i][j] = __fmaf_rn(a[i], b[j], acc[i][j]);
        };
        if (kn == BK) {
#pragma unroll
            for (int kk = 0; kk < BK; kk++) step(kk);
        } else {
            for (int kk = 0; kk < kn; kk++) step(kk);
        }
    };
    // after the k tile that ends at k_end
    auto fold = [&](int k_end) {
        if (!chunk_ends(k_end, K, kchunk)) return;
#pragma unroll
        for (int i = 0; i < TM; i++)
#pragma unroll
            for (int j = 0; j < TN; j++) run.fold(i * TN + j, acc[i][j], k_end, kchunk);
    };

    using SA_ = Stage<BM, BK, T::THREADS, TA>;
    using SB_ = Stage<BN, BK, T::THREADS, !TB>;
    if constexpr (STAGES > 0) {
        // cp.async pipeline: STAGES - 1 tiles in flight while one is multiplied, one barrier
        // per tile (it also frees the buffer the next fetch overwrites)
        const int ntiles = (K + BK - 1) / BK;
#pragma unroll
        for (int st = 0; st < STAGES - 1; st++) {
            if (st < ntiles) {
                SA_::fetch(As[st], A, lda, row0, st * BK, M, K, vec_a);
                SB_::fetch(Bs[st], B, ldb, col0, st * BK, N, K, vec_b);
            }
            cp_async_commit();
        }
        for (int t = 0; t < ntiles; t++) {
            cp_async_wait<STAGES - 2>();
            __syncthreads();
            const int nt = t + STAGES - 1;
            if (nt < ntiles) {
                SA_::fetch(As[nt % STAGES], A, lda, row0, nt * BK, M, K, vec_a);
                SB_::fetch(Bs[nt % STAGES], B, ldb, col0, nt * BK, N, K, vec_b);
            }
            cp_async_commit();
            multiply(As[t % STAGES], Bs[t % STAGES], K - t * BK < BK ? K - t * BK : BK);
            fold((t + 1) * BK);
        }
    } else {
        // registers hold the next tile's global loads while the current one is multiplied
        SA_ ga;
        SB_ gb;
        if (K > 0) {
            ga.load(A, lda, row0, 0, M, K, vec_a);
            gb.load(B, ldb, col0, 0, N, K, vec_b);
            ga.store(As[0]);
            gb.store(Bs[0]);
        }
        __syncthreads();
        for (int k0 = 0, cur = 0; k0 < K; k0 += BK, cur ^= 1) {
            const bool more = k0 + BK < K;
            if (more) {
                ga.load(A, lda, row0, k0 + BK, M, K, vec_a);
                gb.load(B, ldb, col0, k0 + BK, N, K, vec_b);
            }
            multiply(As[cur], Bs[cur], K - k0 < BK ? K - k0 : BK);
            fold(k0 + BK);
            if (more) {
                ga.store(As[cur ^ 1]);
                gb.store(Bs[cur ^ 1]);
            }
            __syncthreads();
        }
    }

    if (K > kchunk) {  // the last chunk's partial joins the running sum
#pragma unroll
        for (int i = 0; i < TM; i++)
#pragma unroll
            for (int j = 0; j < TN; j++) acc[i][j] = run.total(i * TN + j, acc[i][j], K, kchunk);
    }
#pragma unroll
    for (int i = 0; i < TM; i++) {
        const int r = row_of(i);
        if (r >= M) continue;
        float *cr = C + (long long)r * ldc;
#pragma unroll
        for (int g = 0; g < TN / 4; g++) {
            const int c = col_of(4 * g);
            if (vec_c && c + 3 < N) {
                *reinterpret_cast<float4 *>(cr + c) =
                    make_float4(acc[i][4 * g], acc[i][4 * g + 1], acc[i][4 * g + 2], acc[i][4 * g + 3]);
            } else {
#pragma unroll
                for (int e = 0; e < 4; e++)
                    if (c + e < N) cr[c + e] = acc[i][4 * g + e];
            }
        }
    }
}

// The small-tile kernel: a (16 TM) x (16 TM) output tile per block of 256 threads, TM x TM
// outputs per thread (rows ty + 16 i, columns tx + 16 j), K staged through shared memory
// SMALL_BK at a time, the next tile's global loads in flight (in registers) during the current
// tile's FMAs: skinny shapes often have a long K. Same chain per output as k_gemm_exact.
constexpr int SMALL_BK = 64;

// the SMALL_BK x T tiles of op(A) (rows row0..) and op(B) (columns col0..) from k0, NL values
// per thread each; neighbouring threads read neighbouring addresses of either layout
template <int T, int NL, bool TA, bool TB>
__device__ __forceinline__ void small_load(int M, int N, int K, const float *A, long long lda,
                                           const float *B, long long ldb, int row0, int col0,
                                           int k0, float ra[NL], float rb[NL]) {
#pragma unroll
    for (int q = 0; q < NL; q++) {
        const int e = threadIdx.x + THREADS * q;
        int kk = TA ? e / T : e % SMALL_BK, i = TA ? e % T : e / SMALL_BK;
        int r = row0 + i, k = k0 + kk;
        ra[q] = (r < M && k < K) ? A[TA ? (long long)k * lda + r : (long long)r * lda + k] : 0.0f;
        int kb = TB ? e % SMALL_BK : e / T, j = TB ? e / SMALL_BK : e % T;
        int c = col0 + j, kq = k0 + kb;
        rb[q] = (c < N && kq < K) ? B[TB ? (long long)c * ldb + kq : (long long)kq * ldb + c] : 0.0f;
    }
}

template <int TM, bool TA, bool TB>
__global__ void __launch_bounds__(THREADS)
k_gemm_exact_small(int M, int N, int K, const float *__restrict__ A, long long lda, long long sa,
                   const float *__restrict__ B, long long ldb, long long sb, float *__restrict__ C,
                   long long ldc, long long sc, int accumulate, int kchunk, long long b0,
                   bool rows_on_x) {
    constexpr int T = 16 * TM, NL = SMALL_BK * T / THREADS;
    static_assert(TL_EXACT_KCHUNK % SMALL_BK == 0, "k tiles divide the chunk");
    __shared__ float As[SMALL_BK][T + 1];  // As[kk][i] = op(A)[row0 + i][k0 + kk]; +1: no conflicts
    __shared__ float Bs[SMALL_BK][T + 1];  // Bs[kk][j] = op(B)[k0 + kk][col0 + j]
    long long bi = b0 + blockIdx.z;
    A += bi * sa; B += bi * sb; C += bi * sc;
    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    const int row0 = (rows_on_x ? blockIdx.x : blockIdx.y) * T;
    const int col0 = (rows_on_x ? blockIdx.y : blockIdx.x) * T;

    float acc[TM][TM];
#pragma unroll
    for (int i = 0; i < TM; i++)
#pragma unroll
        for (int j = 0; j < TM; j++) {
            int r = row0 + ty + 16 * i, c = col0 + tx + 16 * j;
            acc[i][j] = (accumulate && r < M && c < N) ? C[(long long)r * ldc + c] : 0.0f;
        }
    float run[TM][TM] = {};  // rule 3's running sums (few outputs per thread: registers)
    float ra[NL], rb[NL];
    if (K > 0) small_load<T, NL, TA, TB>(M, N, K, A, lda, B, ldb, row0, col0, 0, ra, rb);
    for (int k0 = 0; k0 < K; k0 += SMALL_BK) {
#pragma unroll
        for (int q = 0; q < NL; q++) {
            const int e = threadIdx.x + THREADS * q;
            As[TA ? e / T : e % SMALL_BK][TA ? e % T : e / SMALL_BK] = ra[q];
            Bs[TB ? e % SMALL_BK : e / T][TB ? e / SMALL_BK : e % T] = rb[q];
        }
        __syncthreads();
        if (k0 + SMALL_BK < K)  // the next tile, while this one is multiplied
            small_load<T, NL, TA, TB>(M, N, K, A, lda, B, ldb, row0, col0, k0 + SMALL_BK, ra, rb);
        const int kn = K - k0 < SMALL_BK ? K - k0 : SMALL_BK;  // no padded fma past K
        for (int kk = 0; kk < kn; kk++) {
            float a[TM], b[TM];
#pragma unroll
            for (int i = 0; i < TM; i++) a[i] = As[kk][ty + 16 * i];
#pragma unroll
            for (int j = 0; j < TM; j++) b[j] = Bs[kk][tx + 16 * j];
#pragma unroll
            for (int i = 0; i < TM; i++)
#pragma unroll
                for (int j = 0; j < TM; j++) acc[i][j] = __fmaf_rn(a[i], b[j], acc[i][j]);
        }
        if (chunk_ends(k0 + SMALL_BK, K, kchunk)) {
#pragma unroll
            for (int i = 0; i < TM; i++)
#pragma unroll
                for (int j = 0; j < TM; j++) fold_into(run[i][j], acc[i][j], k0 + SMALL_BK, kchunk);
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < TM; i++) {
        int r = row0 + ty + 16 * i;
        if (r >= M) continue;
#pragma unroll
        for (int j = 0; j < TM; j++) {
            int c = col0 + tx + 16 * j;
            if (c < N) C[(long long)r * ldc + c] = K > kchunk ? __fadd_rn(run[i][j], acc[i][j]) : acc[i][j];
        }
    }
}

// The chain kernel, for few outputs over a long K (a weight gradient over many tokens: 64 x 64
// with K = 20480), where each output's chain of K dependent FMAs is the whole cost: one thread
// per output, 8 x 8 outputs per block of 64 threads, so the blocks spread over the SMs instead
// of crowding a few. K is staged CHAIN_KC at a time into k-contiguous shared rows read as
// float4 (four chain steps per two loads), a group ahead of the FMAs; cp.async fills the
// other buffer with the next chunk, its copies issued between the current chunk's FMAs. Same
// chain per output as every other kernel here.
constexpr int CHAIN_T = 8, CHAIN_KC = 256, CHAIN_THREADS = CHAIN_T * CHAIN_T,
              CHAIN_NL = CHAIN_T * CHAIN_KC / CHAIN_THREADS, CHAIN_G = 4;
static_assert(CHAIN_NL % (CHAIN_KC / 4 / CHAIN_G) == 0, "copies per group");
static_assert(TL_EXACT_KCHUNK % CHAIN_KC == 0, "k chunks of the chain divide rule 3's");

// where element e of a chunk goes: (row or column, k), neighbouring threads on neighbouring
// addresses of either layout (KCONTIG: the operand is stored contiguous along k)
template <bool KCONTIG>
__device__ __forceinline__ void chain_slot(int e, int &x, int &kk) {
    x = KCONTIG ? e / CHAIN_KC : e % CHAIN_T;
    kk = KCONTIG ? e % CHAIN_KC : e / CHAIN_T;
}

template <bool TA, bool TB>
__global__ void __launch_bounds__(CHAIN_THREADS)
k_gemm_exact_chain(int M, int N, int K, const float *__restrict__ A, long long lda, long long sa,
                   const float *__restrict__ B, long long ldb, long long sb, float *__restrict__ C,
                   long long ldc, long long sc, int accumulate, int kchunk, long long tiles_m,
                   long long tiles_n) {
    __shared__ __align__(16) float As[2][CHAIN_T][CHAIN_KC + 4];  // As[.][i][kk] = op(A)[row0 + i][k0 + kk]
    __shared__ __align__(16) float Bs[2][CHAIN_T][CHAIN_KC + 4];  // Bs[.][j][kk] = op(B)[k0 + kk][col0 + j]
    long long t = blockIdx.x;
    const int col0 = (int)(t % tiles_n) * CHAIN_T;
    t /= tiles_n;
    const int row0 = (int)(t % tiles_m) * CHAIN_T;
    const long long bi = t / tiles_m;
    A += bi * sa; B += bi * sb; C += bi * sc;
    const int r = threadIdx.x / CHAIN_T, c = threadIdx.x % CHAIN_T;
    const bool live = row0 + r < M && col0 + c < N;
    float acc = (accumulate && live) ? C[(long long)(row0 + r) * ldc + col0 + c] : 0.0f;
    float tot = 0.0f;  // rule 3's left fold of the finished chunks' partials

    // copy q of this thread's share of the chunk at k0 into buffer buf
    auto fetch = [&](int k0, int buf, int q) {
        const int e = threadIdx.x + CHAIN_THREADS * q;
        int i, j, ka, kb;
        chain_slot<!TA>(e, i, ka);
        chain_slot<TB>(e, j, kb);
        const int gi = row0 + i, gj = col0 + j, gka = k0 + ka, gkb = k0 + kb;
        const bool oka = gi < M && gka < K, okb = gj < N && gkb < K;
        cp_async4(&As[buf][i][ka], oka ? A + (TA ? (long long)gka * lda + gi : (long long)gi * lda + gka) : A, oka);
        cp_async4(&Bs[buf][j][kb], okb ? B + (TB ? (long long)gj * ldb + gkb : (long long)gkb * ldb + gj) : B, okb);
    };
    if (K > 0) {
        for (int q = 0; q < CHAIN_NL; q++) fetch(0, 0, q);
        cp_async_commit();
    }
    for (int k0 = 0, cur = 0; k0 < K; k0 += CHAIN_KC, cur ^= 1) {
        cp_async_wait<0>();
        __syncthreads();  // chunk k0 is in, and every thread is done with the other buffer
        const int kn = K - k0 < CHAIN_KC ? K - k0 : CHAIN_KC;  // no padded fma past K
        const float *ar = As[cur][r], *br = Bs[cur][c];
        auto quad = [&](int kk) {
            const float4 a = *reinterpret_cast<const float4 *>(ar + kk);
            const float4 b = *reinterpret_cast<const float4 *>(br + kk);
            acc = __fmaf_rn(a.x, b.x, acc);
            acc = __fmaf_rn(a.y, b.y, acc);
            acc = __fmaf_rn(a.z, b.z, acc);
            acc = __fmaf_rn(a.w, b.w, acc);
        };
        if (kn == CHAIN_KC) {
            // groups of CHAIN_G quads: the next group's shared loads are issued before this
            // group's FMAs (which wait on each other anyway), then this group's share of the
            // next chunk's copies. In this source order nothing waits on a load: the compiler
            // may not move shared loads across the copies into shared memory.
            const bool next = k0 + CHAIN_KC < K;
            constexpr int NG = CHAIN_KC / 4 / CHAIN_G, PER = CHAIN_NL / NG;
            float4 fa[CHAIN_G], fb[CHAIN_G];
#pragma unroll
            for (int u = 0; u < CHAIN_G; u++) {
                fa[u] = *reinterpret_cast<const float4 *>(ar + 4 * u);
                fb[u] = *reinterpret_cast<const float4 *>(br + 4 * u);
            }
#pragma unroll 1
            for (int g = 0; g < NG; g++) {
                float4 na[CHAIN_G], nb[CHAIN_G];
                if (g + 1 < NG) {
#pragma unroll
                    for (int u = 0; u < CHAIN_G; u++) {
                        na[u] = *reinterpret_cast<const float4 *>(ar + 4 * (CHAIN_G * (g + 1) + u));
                        nb[u] = *reinterpret_cast<const float4 *>(br + 4 * (CHAIN_G * (g + 1) + u));
                    }
                }
                if (next) {
#pragma unroll
                    for (int u = 0; u < PER; u++) fetch(k0 + CHAIN_KC, cur ^ 1, g * PER + u);
                }
#pragma unroll
                for (int u = 0; u < CHAIN_G; u++) {  // k = k0 + 4 (CHAIN_G g + u) + 0..3, in order
                    acc = __fmaf_rn(fa[u].x, fb[u].x, acc);
                    acc = __fmaf_rn(fa[u].y, fb[u].y, acc);
                    acc = __fmaf_rn(fa[u].z, fb[u].z, acc);
                    acc = __fmaf_rn(fa[u].w, fb[u].w, acc);
                }
                if (g + 1 < NG) {
#pragma unroll
                    for (int u = 0; u < CHAIN_G; u++) fa[u] = na[u], fb[u] = nb[u];
                }
            }
            cp_async_commit();
            if (chunk_ends(k0 + CHAIN_KC, K, kchunk)) {
                tot = k0 + CHAIN_KC == kchunk ? acc : __fadd_rn(tot, acc);
                acc = 0.0f;
            }
        } else {  // the last chunk
            int kk = 0;
            for (; kk + 4 <= kn; kk += 4) quad(kk);
            for (; kk < kn; kk++) acc = __fmaf_rn(ar[kk], br[kk], acc);
        }
    }
    if (live) C[(long long)(row0 + r) * ldc + col0 + c] = K > kchunk ? __fadd_rn(tot, acc) : acc;
}

int launch_chain(const char *op, int ta, int tb, int64_t batch, int M, int N, int K, const float *A,
                 int64_t lda, int64_t sa, const float *B, int64_t ldb, int64_t sb, float *C,
                 int64_t ldc, int64_t sc, int accumulate, int kchunk) {
    const long long tm = (M + CHAIN_T - 1) / CHAIN_T, tn = (N + CHAIN_T - 1) / CHAIN_T;
    const unsigned blocks = (unsigned)(batch * tm * tn);  // a few per SM at most: see the caller
#define TL_GX_CHAIN(TA, TB)                                                                       \
    k_gemm_exact_chain<TA, TB><<<blocks, CHAIN_THREADS, 0, tl_stream()>>>(                        \
        M, N, K, A, lda, sa, B, ldb, sb, C, ldc, sc, accumulate, kchunk, tm, tn)
    if (!ta && !tb) TL_GX_CHAIN(false, false);
    else if (!ta && tb) TL_GX_CHAIN(false, true);
    else if (ta && !tb) TL_GX_CHAIN(true, false);
    else TL_GX_CHAIN(true, true);
#undef TL_GX_CHAIN
    TL_LAUNCHED(op);
    return TL_OK;
}

template <int TM>
int launch_small(const char *op, int ta, int tb, int64_t batch, int M, int N, int K, const float *A,
                 int64_t lda, int64_t sa, const float *B, int64_t ldb, int64_t sb, float *C,
                 int64_t ldc, int64_t sc, int accumulate, int kchunk) {
    constexpr int T = 16 * TM;
    unsigned mt = (unsigned)((M + T - 1) / T), nt = (unsigned)((N + T - 1) / T);
    bool rows_on_x = mt > 65535;
    dim3 grid(rows_on_x ? mt : nt, rows_on_x ? nt : mt, 1);
    for (int64_t b0 = 0; b0 < batch; b0 += 65535) {
        grid.z = (unsigned)(batch - b0 < 65535 ? batch - b0 : 65535);
#define TL_GX_SMALL(TA, TB)                                                                       \
    k_gemm_exact_small<TM, TA, TB><<<grid, THREADS, 0, tl_stream()>>>(                            \
        M, N, K, A, lda, sa, B, ldb, sb, C, ldc, sc, accumulate, kchunk, b0, rows_on_x)
        if (!ta && !tb) TL_GX_SMALL(false, false);
        else if (!ta && tb) TL_GX_SMALL(false, true);
        else if (ta && !tb) TL_GX_SMALL(true, false);
        else TL_GX_SMALL(true, true);
#undef TL_GX_SMALL
        TL_LAUNCHED(op);
    }
    return TL_OK;
}

// blocks a launch with tm x tn output tiles would start
int64_t tile_blocks_mn(int64_t batch, int64_t m, int64_t n, int64_t tm, int64_t tn) {
    return batch * ((m + tm - 1) / tm) * ((n + tn - 1) / tn);
}

int64_t tile_blocks(int64_t batch, int64_t m, int64_t n, int64_t t) {
    return tile_blocks_mn(batch, m, n, t, t);
}


// float4 loads and stores need 16-byte aligned rows in every batch element
bool aligned16(const void *p, int64_t ld, int64_t s, int64_t batch) {
    return ((uintptr_t)p % 16 == 0) && ld % 4 == 0 && (batch == 1 || s % 4 == 0);
}

template <class T, int MINB, int STAGES = 0>
int launch_tile(const char *op, int ta, int tb, int64_t batch, int M, int N, int K, const float *A,
                int64_t lda, int64_t sa, const float *B, int64_t ldb, int64_t sb, float *C,
                int64_t ldc, int64_t sc, int accumulate, int kchunk) {
    bool va = aligned16(A, lda, sa, batch), vb = aligned16(B, ldb, sb, batch),
         vc = aligned16(C, ldc, sc, batch);
    // gridDim.y stops at 65535: the longer tile count goes on x (M N < 2^32, so one fits on y)
    unsigned mt = (unsigned)((M + T::BM - 1) / T::BM), nt = (unsigned)((N + T::BN - 1) / T::BN);
    bool rows_on_x = mt > 65535;
    dim3 grid(rows_on_x ? mt : nt, rows_on_x ? nt : mt, 1);
    const size_t shm = running_sum_bytes(T::BM, T::BN, K, kchunk);
    for (int64_t b0 = 0; b0 < batch; b0 += 65535) {
        grid.z = (unsigned)(batch - b0 < 65535 ? batch - b0 : 65535);
#define TL_GX_TILE(TA, TB)                                                                         \
    do {                                                                                           \
        static bool ready_ = false;                                                                \
        TL_TRY(tl_allow_smem(op, k_gemm_tile<T, MINB, STAGES, TA, TB>,                           \
                             T::BM * T::BN * sizeof(float), ready_));                              \
        k_gemm_tile<T, MINB, STAGES, TA, TB><<<grid, T::THREADS, shm, tl_stream()>>>(              \
            M, N, K, A, lda, sa, B, ldb, sb, C, ldc, sc, accumulate, kchunk, va, vb, vc, b0,       \
            rows_on_x);                                                                            \
    } while (0)
        if (!ta && !tb) TL_GX_TILE(false, false);
        else if (!ta && tb) TL_GX_TILE(false, true);
        else if (ta && !tb) TL_GX_TILE(true, false);
        else TL_GX_TILE(true, true);
#undef TL_GX_TILE
        TL_LAUNCHED(op);
    }
    return TL_OK;
}

using LaunchFn = int (*)(const char *, int, int, int64_t, int, int, int, const float *, int64_t,
                         int64_t, const float *, int64_t, int64_t, float *, int64_t, int64_t, int,
                         int);

// the large tiles: name, BM x BN, FMA rate relative to 128x128 (measured at 4096^3 on an H200,
// where every tile runs full waves: bench/results/gemm-exact.md), launcher
struct TileChoice {
    const char *name;
    int bm, bn;
    double rate;
    LaunchFn fn;
};
const TileChoice TILES[] = {
    {"128x128", 128, 128, 1.0, launch<16>},
    {"96x128", 96, 128, 0.845, launch_tile<Tile<96, 128, 8, 32, 64, 8, 8>, 2, 3>},
    {"96x96", 96, 96, 0.64, launch_tile<Tile<96, 96, 8, 96, 32, 12, 8>, 2, 3>},
    {"128x64", 128, 64, 0.63, launch_tile<Tile<128, 64, 8, 64, 32, 8, 8>, 3>},
};

}  // namespace

// TORCHLEAN_GEMM_EXACT_TILE=name runs every large product on that tile (benchmark builds only,
// bench_switches.h: the bits never depend on it); unset, the tile is chosen per shape
static const TileChoice *forced_tile(void) {
    static int done = 0;
    static const TileChoice *t = nullptr;
    if (!done) {
        const char *v = tl_bench_env("TORCHLEAN_GEMM_EXACT_TILE");
        if (v)
            for (const TileChoice &c : TILES)
                if (!strcmp(v, c.name)) t = &c;
        done = 1;
    }
    return t;
}

// TORCHLEAN_GEMM_EXACT_CHAIN=0 turns the chain kernel off (benchmark builds only,
// bench_switches.h: the bits never depend on it)
static bool chain_enabled(void) {
    static const bool on = !tl_bench_off("TORCHLEAN_GEMM_EXACT_CHAIN");
    return on;
}

// The tile whose busiest SM has the least work: ceil(tiles / SMs) tiles of bm x bn outputs
// each, over the tile's FMA rate. 128x128 tiles run most products; the smaller ones keep every
// SM busy where 128x128 tiles would leave much of the last wave empty (4096 x 768: 192 tiles
// on 132 SMs; 96x128 tiles, 258 of them, take 0.54 ms instead of 0.63).
static const TileChoice *pick_tile(int64_t batch, int64_t m, int64_t n, int64_t sms) {
    if (const TileChoice *t = forced_tile()) return t;
    const TileChoice *best = nullptr;
    double best_cost = 0;
    for (const TileChoice &c : TILES) {
        const int64_t per_sm = (tile_blocks_mn(batch, m, n, c.bm, c.bn) + sms - 1) / sms;
        const double cost = (double)per_sm * c.bm * c.bn / c.rate;
        if (!best || cost < best_cost) best = &c, best_cost = cost;
    }
    return best;
}

// TORCHLEAN_GEMM_EXACT_SPLIT=0 turns split-K off (benchmark builds only, bench_switches.h: the
// bits never depend on it)
static bool split_enabled(void) {
    static const bool on = !tl_bench_off("TORCHLEAN_GEMM_EXACT_SPLIT");
    return on;
}

// One launch whose kernels fold every kchunk k's in-kernel (rule 3; INT_MAX: one chain).
static int run_tiles(const char *op, int ta, int tb, int64_t batch, int64_t m, int64_t n, int64_t k,
                     const float *A, int64_t lda, int64_t sa, const float *B, int64_t ldb, int64_t sb,
                     float *C, int64_t ldc, int64_t sc, int accumulate, int kchunk) {
    const int64_t sms = tl_sm_count();
    // few outputs over a long K: one chain per thread, spread over the SMs
    if (k >= 4 * CHAIN_KC && tile_blocks_mn(batch, m, n, CHAIN_T, CHAIN_T) <= 2 * sms && chain_enabled())
        return launch_chain(op, ta, tb, batch, (int)m, (int)n, (int)k, A, lda, sa, B, ldb, sb, C, ldc,
                            sc, accumulate, kchunk);
    // The large tiles do far more per block, so they win unless 128x128 tiles would leave most
    // SMs idle (at 1024^3 on an H200, 64 blocks on 132 SMs: 0.12 ms, 32x32 tiles: 0.20 ms)
    if (tile_blocks(batch, m, n, 128) < sms / 4) {
        if (tile_blocks(batch, m, n, 32) >= sms / 2)
            return launch_small<2>(op, ta, tb, batch, (int)m, (int)n, (int)k, A, lda, sa, B, ldb, sb,
                                   C, ldc, sc, accumulate, kchunk);
        return launch_small<1>(op, ta, tb, batch, (int)m, (int)n, (int)k, A, lda, sa, B, ldb, sb, C,
                               ldc, sc, accumulate, kchunk);  // very few outputs: one chain per thread
    }
    return pick_tile(batch, m, n, sms)->fn(op, ta, tb, batch, (int)m, (int)n, (int)k, A, lda, sa, B,
                                           ldb, sb, C, ldc, sc, accumulate, kchunk);
}

// ==== rule 3's exact GEMM (exact_version 7): float64 chunk chains on the FP64 tensor cores ====
// Per output: chunk c of TL_EXACT_KCHUNK k's gives p_c = fma((double)a_k, (double)b_k, p) over its
// k's in increasing order (p_0 from (double)C's prior value when accumulating, else 0, every later
// p_c from 0); the output is (float)(((p_0 + p_1) + p_2) + ...), one rounding. mma.sync
// m16n8k16 .f64 computes each of its outputs as the float64 FMA chain over its 16 k's in k order
// from c (bench/results/dmma-gemm.md checked it bit for bit on the H200), so a chain of MMAs over
// k = 0, 16, 32, ... of a chunk is the rule's chain. Kernels (bench/probes/dmma_gemm.cu's xpipe64
// and xsplit64):
// - x64_pipe: 64x64 output tiles, 4 warps of 32x32 (32 double accumulators per lane), float32
//   stages of 16 k's copied global -> shared by 16-byte cp.async (4 stages in flight, zero
//   fill outside the matrix), each fragment element converted to double
//   in registers (exact); per fragment pair and column fragment one m16n8k16 per stage. Over all
//   of K (the running fold F in shared memory takes F + p_c at each chunk end) or, SPLIT, one
//   block per (tile, chunk) writing p_c to float64 scratch, then x64_fold adds the partials in
//   chunk order and rounds (few output tiles over a long K; the same bits).
//   It needs M, N, K and the leading dimensions and batch strides of A and B multiples of 4
//   (every 16-byte copy wholly inside or outside), A and B 16-byte aligned, C 8-byte aligned with
//   an even ldc and sc (paired float2 stores).
// - x64_general: one output per thread, the chain and fold written out: every other case (odd
//   sizes, unaligned views, K = 0).
// The kernels live in gemm_x64.cuh, which tests/native/gemm_x64_emu.cpp also compiles for the
// CPU (TL_CUDA_EMU: the mma and cp.async asm are device-only, the emulation computes the same
// chain); the launches and the plan are here.
namespace x64 {

// split scratch at most this many bytes (else the tiles run over all of K)
constexpr int64_t SPLIT_BYTES = (int64_t)1 << 28;

static int launch_general(const char *op, int ta, int tb, int64_t batch, int M, int N, int K,
                          const float *A, int64_t lda, int64_t sa, const float *B, int64_t ldb,
                          int64_t sb, float *C, int64_t ldc, int64_t sc, int accumulate) {
    const unsigned blocks = (unsigned)(((int64_t)M * N + TL_THREADS - 1) / TL_THREADS);
    const int64_t chunks = ((int64_t)K + KC - 1) / KC;
    // few outputs over a long K (a small layer's weight gradient over many rows): one thread
    // per output would leave the GPU idle behind K dependent FMAs; split per chunk, then fold
    if (batch == 1 && chunks >= 2 && (int64_t)M * N < 64 * TL_THREADS * tl_sm_count() &&
        chunks <= 65535 && (int64_t)M * N * chunks * 8 <= SPLIT_BYTES && split_enabled()) {
        double *W = nullptr;
        TL_TRY(tl_scratch(op, (size_t)((int64_t)M * N * chunks) * sizeof(double), (void **)&W));
        x64_general_part<<<dim3(blocks, (unsigned)chunks), TL_THREADS, 0, tl_stream()>>>(
            ta, tb, M, N, K, A, lda, B, ldb, C, ldc, accumulate, W);
        int st = tl_cuda_launched(op);
        if (st == TL_OK) {
            x64_general_fold<<<blocks, TL_THREADS, 0, tl_stream()>>>(W, (int)chunks, M, N, C, ldc);
            st = tl_cuda_launched(op);
        }
        tl_scratch_free(W);
        return st;
    }
    for (int64_t b0 = 0; b0 < batch; b0 += 65535) {
        const dim3 grid(blocks, (unsigned)std::min<int64_t>(batch - b0, 65535));
        x64_general<<<grid, TL_THREADS, 0, tl_stream()>>>(ta, tb, M, N, K, A, lda, sa, B, ldb, sb,
                                                          C, ldc, sc, accumulate, b0);
        TL_LAUNCHED(op);
    }
    return TL_OK;
}

template <bool TA, bool TB>
static int launch_pipe(const char *op, int64_t batch, int M, int N, int K, const float *A,
                       int64_t lda, int64_t sa, const float *B, int64_t ldb, int64_t sb, float *C,
                       int64_t ldc, int64_t sc, int accumulate) {
    constexpr size_t STAGE_BYTES =
        (size_t)STAGES * (Tile<BM, !TA>::SIZE + Tile<BN, TB>::SIZE) * sizeof(float);
    const int64_t tiles = (int64_t)((M + BM - 1) / BM) * ((N + BN - 1) / BN);
    const int64_t chunks = ((int64_t)K + KC - 1) / KC;
    const int64_t slots = (int64_t)MINB * tl_sm_count();   // blocks resident at once
    // few output tiles over K past one chunk: one block per (tile, chunk), then the ordered fold
    if (batch == 1 && chunks >= 2 && tiles < slots && tiles * chunks * BM * BN * 8 <= SPLIT_BYTES &&
        split_enabled()) {
        static bool ready = false;
        TL_TRY(tl_allow_smem(op, x64_pipe<TA, TB, true>, STAGE_BYTES, ready));
        double *W = nullptr;
        TL_TRY(tl_scratch(op, (size_t)(tiles * chunks * BM * BN) * sizeof(double), (void **)&W));
        x64_pipe<TA, TB, true><<<dim3((unsigned)tiles, (unsigned)chunks, 1), THREADS, STAGE_BYTES,
                                 tl_stream()>>>(A, lda, sa, B, ldb, sb, C, ldc, sc, W, M, N, K,
                                                accumulate, 0);
        int st = tl_cuda_launched(op);
        if (st == TL_OK) {
            const int64_t n = tiles * BM * BN;
            x64_fold<<<(unsigned)((n + TL_THREADS - 1) / TL_THREADS), TL_THREADS, 0, tl_stream()>>>(
                W, (int)tiles, (int)chunks, M, N, C, ldc);
            st = tl_cuda_launched(op);
        }
        tl_scratch_free(W);
        return st;
    }
    static bool ready = false;
    TL_TRY(tl_allow_smem(op, x64_pipe<TA, TB, false>, SMEM_FOLD + STAGE_BYTES, ready));
    const size_t shm = (K > KC ? SMEM_FOLD : 0) + STAGE_BYTES;
    for (int64_t b0 = 0; b0 < batch; b0 += 65535) {
        const dim3 grid((unsigned)tiles, 1, (unsigned)std::min<int64_t>(batch - b0, 65535));
        x64_pipe<TA, TB, false><<<grid, THREADS, shm, tl_stream()>>>(
            A, lda, sa, B, ldb, sb, C, ldc, sc, nullptr, M, N, K, accumulate, b0);
        TL_LAUNCHED(op);
    }
    return TL_OK;
}

// the staged copy of one operand (Plan in gemm_x64.cuh): *D dense scratch, *ld, *s its layout
static int stage(const char *op, int64_t batch, bool kcontig, int X, int K, int Kp, const float *P,
                 int64_t ld, int64_t s, float pad, float **D, int64_t *dld, int64_t *ds) {
    int rows, cols, drows, dcols;
    stored_dims(kcontig, X, K, rows, cols);
    staged_dims(kcontig, X, Kp, drows, dcols);
    const int64_t n = (int64_t)drows * dcols;
    TL_TRY(tl_scratch(op, (size_t)(batch * n) * sizeof(float), (void **)D));
    for (int64_t b0 = 0; b0 < batch; b0 += 65535) {
        const dim3 grid((unsigned)((n + TL_THREADS - 1) / TL_THREADS), (unsigned)std::min<int64_t>(batch - b0, 65535));
        x64_stage<<<grid, TL_THREADS, 0, tl_stream()>>>(P, ld, s, rows, cols, *D, drows, dcols, pad, b0);
        const int st = tl_cuda_launched(op);
        if (st != TL_OK) {
            tl_scratch_free(*D);
            *D = nullptr;
            return st;
        }
    }
    *dld = dcols;
    *ds = n;
    return TL_OK;
}

static int launch_tiles(const char *op, int ta, int tb, int64_t batch, int M, int N, int K,
                        const float *A, int64_t lda, int64_t sa, const float *B, int64_t ldb,
                        int64_t sb, float *C, int64_t ldc, int64_t sc, int accumulate) {
    if (!ta && !tb) return launch_pipe<false, false>(op, batch, M, N, K, A, lda, sa, B, ldb, sb, C, ldc, sc, accumulate);
    if (!ta && tb) return launch_pipe<false, true>(op, batch, M, N, K, A, lda, sa, B, ldb, sb, C, ldc, sc, accumulate);
    if (ta && !tb) return launch_pipe<true, false>(op, batch, M, N, K, A, lda, sa, B, ldb, sb, C, ldc, sc, accumulate);
    return launch_pipe<true, true>(op, batch, M, N, K, A, lda, sa, B, ldb, sb, C, ldc, sc, accumulate);
}

// the tiles on the plan's operands: the staged copies (padded K) where the plan says so
static int launch_staged(const char *op, const Plan &p, int ta, int tb, int64_t batch, int M, int N,
                         int K, const float *A, int64_t lda, int64_t sa, const float *B, int64_t ldb,
                         int64_t sb, float *C, int64_t ldc, int64_t sc, int accumulate) {
    float *As = nullptr, *Bs = nullptr;
    int st = TL_OK;
    if (p.stage_a) st = stage(op, batch, !ta, M, K, p.K, A, lda, sa, -0.0f, &As, &lda, &sa);
    if (st == TL_OK && p.stage_b) st = stage(op, batch, tb, N, K, p.K, B, ldb, sb, 0.0f, &Bs, &ldb, &sb);
    if (st == TL_OK)
        st = launch_tiles(op, ta, tb, batch, M, N, p.K, As ? As : A, lda, sa, Bs ? Bs : B, ldb, sb, C,
                          ldc, sc, accumulate);
    tl_scratch_free(As);
    tl_scratch_free(Bs);
    return st;
}

}  // namespace x64

// staging pays for its copies and launches once the product has this many multiply-adds
// (FNO's odd layers: 2.6M); below, the one-output-per-thread kernel is as fast
constexpr int64_t STAGE_MIN_FMAS = (int64_t)1 << 20;

static bool stage_enabled(void) {
    static const bool on = !tl_bench_off("TORCHLEAN_GEMM_EXACT_STAGE");
    return on;
}

// the tiles' condition before the staged path (a bench A/B): no staging, C stored in pairs
static bool unstaged_only(const x64::Plan &p, int M, int N, const float *C, int64_t ldc, int64_t sc,
                          int64_t batch) {
    return !p.stage_a && !p.stage_b && M % 4 == 0 && N % 4 == 0 && x64::fits(C, ldc, sc, batch, 2, 8);
}

// rule 3's exact GEMM (exact_version 7): the tensor-core tiles where the layout allows them,
// directly or on staged copies of the operands (x64::Plan), the general kernel for the rest
static int exact_gemm64(const char *op, int ta, int tb, int64_t batch, int64_t m, int64_t n,
                        int64_t k, const float *A, int64_t lda, int64_t sa, const float *B,
                        int64_t ldb, int64_t sb, float *C, int64_t ldc, int64_t sc, int accumulate) {
    if (batch == 0 || m == 0 || n == 0) return TL_OK;
    if (m > INT32_MAX || n > INT32_MAX || k > INT32_MAX)
        return tl_fail(TL_E_TOO_LARGE, "%s: GEMM dimensions exceed INT_MAX", op);
    const int M = (int)m, N = (int)n, K = (int)k;
    const int64_t tiles = ((m + x64::BM - 1) / x64::BM) * ((n + x64::BN - 1) / x64::BN);
    const x64::Plan p = x64::plan(ta, tb, batch, M, N, K, accumulate, A, lda, sa, B, ldb, sb);
    const bool staged = p.stage_a || p.stage_b;
    if (K == 0 || tiles > INT32_MAX || (staged && (double)batch * m * n * p.K < (double)STAGE_MIN_FMAS) ||
        (!stage_enabled() && !unstaged_only(p, M, N, C, ldc, sc, batch)))
        return x64::launch_general(op, ta, tb, batch, M, N, K, A, lda, sa, B, ldb, sb, C, ldc, sc,
                                   accumulate);
    return x64::launch_staged(op, p, ta, tb, batch, M, N, K, A, lda, sa, B, ldb, sb, C, ldc, sc,
                              accumulate);
}

// the float32 exact GEMM with the fold every kchunk k's (INT_MAX: one chain, never split; the
// only use since exact_version 7, tl_gemm_exact_chain_f32)
static int exact_gemm(const char *op, int ta, int tb, int64_t batch, int64_t m, int64_t n,
                      int64_t k, const float *A, int64_t lda, int64_t sa, const float *B,
                      int64_t ldb, int64_t sb, float *C, int64_t ldc, int64_t sc, int accumulate,
                      int kchunk) {
    if (batch == 0 || m == 0 || n == 0) return TL_OK;
    if (m > INT32_MAX || n > INT32_MAX || k > INT32_MAX)
        return tl_fail(TL_E_TOO_LARGE, "%s: GEMM dimensions exceed INT_MAX", op);
    return run_tiles(op, ta, tb, batch, m, n, k, A, lda, sa, B, ldb, sb, C, ldc, sc, accumulate, kchunk);
}

extern "C" int tl_gemm_exact_f32(const char *op, int ta, int tb, int64_t batch, int64_t m,
                                 int64_t n, int64_t k, const float *A, int64_t lda, int64_t sa,
                                 const float *B, int64_t ldb, int64_t sb, float *C, int64_t ldc,
                                 int64_t sc, int accumulate) {
    return exact_gemm64(op, ta, tb, batch, m, n, k, A, lda, sa, B, ldb, sb, C, ldc, sc, accumulate);
}

extern "C" int tl_gemm_exact_chain_f32(const char *op, int ta, int tb, int64_t batch, int64_t m,
                                       int64_t n, int64_t k, const float *A, int64_t lda,
                                       int64_t sa, const float *B, int64_t ldb, int64_t sb,
                                       float *C, int64_t ldc, int64_t sc, int accumulate) {
    return exact_gemm(op, ta, tb, batch, m, n, k, A, lda, sa, B, ldb, sb, C, ldc, sc, accumulate,
                      INT32_MAX);
}

// The one GEMM entry of the CUDA kernels (linalg, conv_pool, attention), where exact mode
// chooses its GEMM: C_b = op(A_b) op(B_b) + beta C_b for b < batch, beta 0 or 1; row-major A_b
// M x K (K x M when ta), B_b K x N (N x K when tb), leading dimensions lda, ldb, ldc and batch
// strides sa, sb, sc. Exact mode: tl_gemm_exact_f32 (rule 3; beta 1 starts the chains at C).
// Otherwise cuBLAS through the operand swap (row-major C^T = op(B)^T op(A)^T column-major): one
// strided-batched SGEMM, or one plain SGEMM when `single` (batch 1: attention's projections
// always made that call, and cuBLAS may pick other kernels for the two forms). K = 0 leaves C
// (beta 1) or zeroes it (beta 0).
extern "C" int tl_gemm_f32(const char *op, int ta, int tb, int64_t batch, int64_t M, int64_t N, int64_t K,
                           const float *A, int64_t lda, int64_t sa, const float *B, int64_t ldb,
                           int64_t sb, float beta, float *C, int64_t ldc, int64_t sc, int single) {
    if (M == 0 || N == 0 || batch == 0) return TL_OK;
    if (M > INT32_MAX || N > INT32_MAX || K > INT32_MAX || batch > INT32_MAX || lda > INT32_MAX ||
        ldb > INT32_MAX || ldc > INT32_MAX)
        return tl_fail(TL_E_TOO_LARGE, "%s: GEMM dimensions exceed INT_MAX", op);
    if (tl_exact())
        return tl_gemm_exact_f32(op, ta, tb, batch, M, N, K, A, lda, sa, B, ldb, sb, C, ldc, sc,
                                 beta != 0.0f);
    if (K == 0 && beta != 0.0f) return TL_OK;  // nothing to add
    if (K == 0 && ldc == N && (batch == 1 || sc == M * N)) {
        TL_CUDA_TRY(op, cudaMemsetAsync(C, 0, (size_t)(batch * M * N) * sizeof(float), tl_stream()));
        return TL_OK;
    }
    cublasHandle_t h;
    TL_TRY(tl_cublas(op, &h));
    const float one = 1.0f;
    const cublasOperation_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    const int la = (int)(lda > 0 ? lda : 1), lb = (int)(ldb > 0 ? ldb : 1);
    if (single)
        TL_CUBLAS_TRY(op, cublasSgemm(h, opb, opa, (int)N, (int)M, (int)K, &one, B, lb, A, la, &beta, C,
                                      (int)ldc));
    else
        TL_CUBLAS_TRY(op, cublasSgemmStridedBatched(h, opb, opa, (int)N, (int)M, (int)K, &one, B, lb,
                                                    (long long)sb, A, la, (long long)sa, &beta, C,
                                                    (int)ldc, (long long)sc, (int)batch));
    return TL_OK;
}

// the registry entry (ops.yaml gemm_exact): row-major batched buffers, as the stub's body
extern "C" int tlk_gemm_exact(const char *op, tl_buf a, tl_buf b, tl_buf c, int64_t batch, int64_t m,
                              int64_t k, int64_t n, int64_t ta, int64_t tb, int64_t accumulate) {
    return tl_gemm_exact_f32(op, (int)ta, (int)tb, batch, m, n, k, a->data, ta ? m : k, m * k,
                             b->data, tb ? k : n, k * n, c->data, n, m * n, (int)accumulate);
}
