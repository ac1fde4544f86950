// gemm_x64.cuh: the device code of CUDA's exact GEMM (rule 3, exact_version 7: float64 chunk
// chains on the FP64 tensor cores), included by gemm.cu (launches and plan: its x64 section)
// and compiled for the CPU by tests/native/gemm_x64_emu.cpp with the emulation in
// tests/native/cuda_emu (TL_CUDA_EMU: cp.async as a plain copy, mma.sync m16n8k16 .f64 as the
// float64 FMA chain in k order that bench/results/dmma-gemm.md measured, over the warp's
// fragments), so tests/test_gemm_x64_kernels.py checks the tiling, stage ring, fold, split and
// store maps against the stub bit for bit.
#pragma once

#include "tl_math.h"

namespace x64 {


constexpr int KC = TL_EXACT_KCHUNK;
constexpr int BM = 64, BN = 64, WM = 32, WN = 32, BK = 16, STAGES = 4, MINB = 3;
constexpr int WARPS_N = BN / WN, THREADS = 32 * (BM / WM) * (BN / WN);
constexpr int FM = WM / 8, FN = WN / 8, NACC = 2 * FM * FN;   // accumulators per lane
constexpr size_t SMEM_FOLD = (size_t)NACC * THREADS * sizeof(double);
static_assert(KC % BK == 0, "stages never straddle a chunk");
static_assert(FM % 2 == 0, "fragment pairs");

// one operand's stage: op(X)[x][k] for x in [x0, x0 + BX), k in [k0, k0 + BK); X[x][k] is
// P[x ld + k] (KCONTIG) or P[k ld + x]. Shared layout keeps the contiguous direction: S[x][k]
// with rows of BK + 4 floats, or S[k][x] with rows of BX + 8: a warp's fragment reads (lane
// (g, t) reads op(X)[base + g][4 q + t]) hit 32 distinct banks either way.
template <int BX, bool KCONTIG>
struct Tile {
    static constexpr int LD = KCONTIG ? BK + 4 : BX + 8;
    static constexpr int SIZE = KCONTIG ? BX * LD : BK * LD;   // floats per stage
    static constexpr int NCH = BX * BK / 4, NI = NCH / THREADS;  // 16-byte copies; per thread
    static_assert(NCH % THREADS == 0, "whole copies per thread");
    __device__ static void chunk(int q, int &x, int &k) {
        if (KCONTIG) { x = q / (BK / 4); k = 4 * (q % (BK / 4)); }
        else { k = q / (BX / 4); x = 4 * (q % (BX / 4)); }
    }
    __device__ static int soff(int x, int k) { return KCONTIG ? x * LD + k : k * LD + x; }
    __device__ static long long goff(int x, int k, long long ld) {
        return KCONTIG ? (long long)x * ld + k : (long long)k * ld + x;
    }
    __device__ static int frag(int q, int t, int base, int g) { return soff(base + g, 4 * q + t); }
};

__device__ __forceinline__ void cp_async16(float *dst, const float *src, int src_bytes) {
#if defined(__CUDA_ARCH__)
    const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(src_bytes));
#elif defined(TL_CUDA_EMU)
    for (int e = 0; e < 4; e++) dst[e] = src_bytes ? src[e] : 0.0f;   // lands at once
#endif
}
__device__ __forceinline__ void cp_async_commit() {
#if defined(__CUDA_ARCH__)
    asm volatile("cp.async.commit_group;\n" ::);
#endif
}
template <int N> __device__ __forceinline__ void cp_async_wait() {
#if defined(__CUDA_ARCH__)
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
#endif
}
// d = a b + d on the FP64 tensor cores: a 16x16 (a_{2q+h} = A[g + 8h][t + 4q]), b 16x8
// (b_q = B[t + 4q][g]), d 16x8 (d0, d1 = D[g][2t + e], d2, d3 = D[g + 8][2t + e])
__device__ __forceinline__ void dmma16k16(double &d0, double &d1, double &d2, double &d3,
                                          const double (&a)[8], const double (&b)[4]) {
#if defined(__CUDA_ARCH__)
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f64.f64.f64.f64 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7,%8,%9,%10,%11}, {%12,%13,%14,%15}, {%0,%1,%2,%3};"
                 : "+d"(d0), "+d"(d1), "+d"(d2), "+d"(d3)
                 : "d"(a[0]), "d"(a[1]), "d"(a[2]), "d"(a[3]), "d"(a[4]), "d"(a[5]), "d"(a[6]),
                   "d"(a[7]), "d"(b[0]), "d"(b[1]), "d"(b[2]), "d"(b[3]));
#elif defined(TL_CUDA_EMU)
    // the warp's fragments through a per-warp table, then each of this lane's four outputs as the
    // float64 FMA chain over the 16 k's in k order from d
    static double fa[THREADS / 32][32][8], fb[THREADS / 32][32][4];
    const int w = (int)threadIdx.x / 32, lane = (int)threadIdx.x % 32, g = lane >> 2, t = lane & 3;
    for (int i = 0; i < 8; i++) fa[w][lane][i] = a[i];
    for (int i = 0; i < 4; i++) fb[w][lane][i] = b[i];
    __syncwarp();
    double *d[4] = {&d0, &d1, &d2, &d3};
    for (int o = 0; o < 4; o++) {
        const int h = o >> 1, col = 2 * t + (o & 1);   // D[g + 8h][col]
        for (int k = 0; k < 16; k++)   // A[g + 8h][k]: lane (g, k % 4)'s a[2 (k / 4) + h]; B[k][col]: lane (col, k % 4)'s b[k / 4]
            *d[o] = std::fma(fa[w][4 * g + k % 4][2 * (k / 4) + h], fb[w][4 * col + k % 4][k / 4], *d[o]);
    }
    __syncwarp();
#endif
}

template <class T>
__device__ __forceinline__ void stage_issue(const float *__restrict__ P, long long ld, int X, int K,
                                            int x0, int k0, int tid, float *S) {
#pragma unroll
    for (int i = 0; i < T::NI; i++) {
        int x, k;
        T::chunk(tid + i * THREADS, x, k);
        const bool in = x0 + x < X && k0 + k < K;
        cp_async16(S + T::soff(x, k), in ? P + T::goff(x0 + x, k0 + k, ld) : P, in ? 16 : 0);
    }
}

// accumulator 2 (i FN + j) + e of lane (g, t) in warp (wm, wn): tile element (row, col)
__device__ __forceinline__ void out_rc(int wm, int wn, int g, int t, int idx, int &row, int &col) {
    const int e = idx & 1, ij = idx >> 1, i = ij / FN, j = ij % FN;
    row = wm * WM + 8 * i + g;
    col = wn * WN + 8 * j + 2 * t + e;
}
// the scratch slot of a split launch: chunk ch, tile tl (of ntiles), tile element (r, c)
__device__ __forceinline__ size_t wslot(int ch, int tl, int ntiles, int r, int c) {
    return ((size_t)ch * ntiles + tl) * (BM * BN) + (size_t)r * BN + c;
}

// C_b (M x N) = op(A_b) op(B_b) (+ C_b's prior value when accumulate) for b = blockIdx.z + b0;
// block blockIdx.x is output tile blockIdx.x (row-major over the tiles). SPLIT (batch 1):
// blockIdx.y is a chunk, whose partial goes to W (wslot); x64_fold finishes the outputs.
template <bool TA, bool TB, bool SPLIT>
__global__ void __launch_bounds__(THREADS, MINB)
x64_pipe(const float *__restrict__ A, long long lda, long long sa, const float *__restrict__ B,
         long long ldb, long long sb, float *__restrict__ C, long long ldc, long long sc,
         double *__restrict__ W, int M, int N, int K, int accumulate, long long b0) {
    using TAt = Tile<BM, !TA>;
    using TBt = Tile<BN, TB>;
    constexpr int STAGE = TAt::SIZE + TBt::SIZE;
    static_assert((TAt::SIZE * 4) % 16 == 0 && (STAGE * 4) % 16 == 0, "16-byte aligned stages");
    extern __shared__ double2 x64_smem[];   // 16-byte aligned
    double *Fs = reinterpret_cast<double *>(x64_smem);   // the running fold (K > KC, not SPLIT)
    float *St = reinterpret_cast<float *>(reinterpret_cast<unsigned char *>(x64_smem) +
                                          (!SPLIT && K > KC ? SMEM_FOLD : 0));
    const long long b = b0 + blockIdx.z;
    A += b * sa;
    B += b * sb;
    C += b * sc;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t = lane & 3;
    const int wm = warp / WARPS_N, wn = warp % WARPS_N;
    const int tiles_n = (N + BN - 1) / BN;
    const int m0 = (int)(blockIdx.x / tiles_n) * BM, n0 = (int)(blockIdx.x % tiles_n) * BN;
    const int kbeg = SPLIT ? (int)blockIdx.y * KC : 0, kend = SPLIT ? min(K, kbeg + KC) : K;
    const int nkt = (kend - kbeg + BK - 1) / BK;
    double acc[NACC];
    const bool from_c = accumulate && (!SPLIT || blockIdx.y == 0);
#pragma unroll
    for (int i = 0; i < NACC; i++) {
        int r, c;
        out_rc(wm, wn, g, t, i, r, c);
        acc[i] = from_c && m0 + r < M && n0 + c < N ? (double)C[(long long)(m0 + r) * ldc + n0 + c] : 0.0;
    }
#pragma unroll
    for (int s = 0; s < STAGES - 1; s++) {
        if (s < nkt) {
            float *S = St + s * STAGE;
            stage_issue<TAt>(A, lda, M, K, m0, kbeg + s * BK, tid, S);
            stage_issue<TBt>(B, ldb, N, K, n0, kbeg + s * BK, tid, S + TAt::SIZE);
        }
        cp_async_commit();
    }
    bool folded = false;
    for (int kt = 0; kt < nkt; kt++) {
        cp_async_wait<STAGES - 2>();   // stage kt has landed (this thread's copies) ...
        __syncthreads();               // ... everyone's; and stage kt - 1's buffer is free
        {
            const int nk = kt + STAGES - 1;
            if (nk < nkt) {
                float *S = St + (nk % STAGES) * STAGE;
                stage_issue<TAt>(A, lda, M, K, m0, kbeg + nk * BK, tid, S);
                stage_issue<TBt>(B, ldb, N, K, n0, kbeg + nk * BK, tid, S + TAt::SIZE);
            }
            cp_async_commit();
        }
        const float *As = St + (kt % STAGES) * STAGE, *Bs = As + TAt::SIZE;
#pragma unroll
        for (int p = 0; p < FM / 2; p++) {
            double a[8];
#pragma unroll
            for (int q = 0; q < 4; q++)
#pragma unroll
                for (int h = 0; h < 2; h++)
                    a[2 * q + h] = (double)As[TAt::frag(q, t, wm * WM + 8 * (2 * p + h), g)];
#pragma unroll
            for (int j = 0; j < FN; j++) {
                double bf[4];
#pragma unroll
                for (int q = 0; q < 4; q++) bf[q] = (double)Bs[TBt::frag(q, t, wn * WN + 8 * j, g)];
                dmma16k16(acc[2 * (2 * p * FN + j)], acc[2 * (2 * p * FN + j) + 1],
                          acc[2 * ((2 * p + 1) * FN + j)], acc[2 * ((2 * p + 1) * FN + j) + 1], a, bf);
            }
        }
        const int knext = kbeg + (kt + 1) * BK;
        if (!SPLIT && knext % KC == 0 && knext < K) {   // a chunk ended: F = F + p_c, p from 0
#pragma unroll
            for (int i = 0; i < NACC; i++) {
                double *f = Fs + i * THREADS + tid;
                *f = folded ? __dadd_rn(*f, acc[i]) : acc[i];
                acc[i] = 0.0;
            }
            folded = true;
        }
    }
    cp_async_wait<0>();
    // accumulators 2 q, 2 q + 1: columns c, c + 1 of one row (c even), one paired store where
    // both are inside and C's pair is 8-byte aligned, else one store per column inside (any N,
    // ldc or offset of C: C is never staged)
#pragma unroll
    for (int q = 0; q < NACC / 2; q++) {
        int r, c;
        out_rc(wm, wn, g, t, 2 * q, r, c);
        const int row = m0 + r, col = n0 + c;
        if (row >= M || col >= N) continue;
        if (SPLIT) {
            *reinterpret_cast<double2 *>(W + wslot(blockIdx.y, blockIdx.x, gridDim.x, r, c)) =
                make_double2(acc[2 * q], acc[2 * q + 1]);
        } else {
            const double v0 = folded ? __dadd_rn(Fs[2 * q * THREADS + tid], acc[2 * q]) : acc[2 * q];
            const double v1 =
                folded ? __dadd_rn(Fs[(2 * q + 1) * THREADS + tid], acc[2 * q + 1]) : acc[2 * q + 1];
            float *o = C + (long long)row * ldc + col;
            if (col + 1 < N && reinterpret_cast<uintptr_t>(o) % 8 == 0) {
                *reinterpret_cast<float2 *>(o) = make_float2(__double2float_rn(v0), __double2float_rn(v1));
            } else {
                o[0] = __double2float_rn(v0);
                if (col + 1 < N) o[1] = __double2float_rn(v1);
            }
        }
    }
}

// The staged path (gemm.cu's exact_gemm64): an operand the tiles cannot load as it lies (an
// unaligned view, a leading dimension or batch stride not a multiple of 4, a contiguous M or N
// not a multiple of 4) is copied into dense scratch, rows padded to a multiple of 4 floats. When
// K itself is not a multiple of 4, or a short K accumulates from C, both operands are staged with
// K padded to a multiple of BK: A's padded k's hold -0, B's +0, so each padded product is -0,
// and p + (-0) == p for every p (a -0 partial from C included, which +0 products would turn
// into +0). The tiles then never zero-fill inside K: the bits are the unpadded chain's.
struct Plan {
    bool stage_a, stage_b;
    int K;   // the K the tiles run over (padded or not)
};

inline bool fits(const void *p, long long ld, long long s, long long batch, int mult, int align) {
    return (uintptr_t)p % align == 0 && ld % mult == 0 && (batch == 1 || s % mult == 0);
}

inline Plan plan(int ta, int tb, long long batch, int M, int N, int K, int accumulate,
                 const float *A, long long lda, long long sa, const float *B, long long ldb,
                 long long sb) {
    const bool pad_k = K % 4 != 0 || (accumulate && K % BK != 0 && K <= KC);
    Plan p;
    p.K = pad_k ? (K + BK - 1) / BK * BK : K;
    p.stage_a = pad_k || !fits(A, lda, sa, batch, 4, 16) || (ta && M % 4 != 0);
    p.stage_b = pad_k || !fits(B, ldb, sb, batch, 4, 16) || (!tb && N % 4 != 0);
    return p;
}

// an operand's stored rows x cols: X (M or N) x K when K is contiguous, else K x X; staged,
// with K the plan's and X rounded up to a multiple of 4 where X is contiguous
inline void stored_dims(bool kcontig, int X, int K, int &rows, int &cols) {
    rows = kcontig ? X : K;
    cols = kcontig ? K : X;
}
inline void staged_dims(bool kcontig, int X, int K, int &rows, int &cols) {
    stored_dims(kcontig, kcontig ? X : (X + 3) / 4 * 4, K, rows, cols);
}

// D_b (drows x dcols, dense) = P_b (rows x cols, leading dimension ld, batch stride s), padded
// with `pad` (A: -0, B: +0; see Plan), for batches b0 + blockIdx.y
__global__ void x64_stage(const float *__restrict__ P, long long ld, long long s, int rows, int cols,
                          float *__restrict__ D, int drows, int dcols, float pad, long long b0) {
    const long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= (long long)drows * dcols) return;
    const long long b = b0 + blockIdx.y;
    const int r = (int)(e / dcols), c = (int)(e % dcols);
    D[b * drows * dcols + e] = r < rows && c < cols ? P[b * s + (long long)r * ld + c] : pad;
}

// the left fold of a split launch's chunk partials (chunk 0, 1, ...) in float64, rounded once
__global__ void x64_fold(const double *__restrict__ W, int ntiles, int chunks, int M, int N,
                         float *__restrict__ C, long long ldc) {
    const long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= (long long)ntiles * BM * BN) return;
    const int tl = (int)(e / (BM * BN)), r = (int)(e % (BM * BN)) / BN, c = (int)(e % BN);
    const int tiles_n = (N + BN - 1) / BN, row = (tl / tiles_n) * BM + r, col = (tl % tiles_n) * BN + c;
    if (row >= M || col >= N) return;
    const size_t step = (size_t)ntiles * BM * BN, e0 = (size_t)tl * BM * BN + (size_t)r * BN + c;
    double s = W[e0];
    for (int ch = 1; ch < chunks; ch++) s = __dadd_rn(s, W[ch * step + e0]);
    C[(long long)row * ldc + col] = __double2float_rn(s);
}

// the rule written out: one output per thread, any layout; batches b0 + blockIdx.y
__global__ void x64_general(int ta, int tb, int M, int N, int K, const float *__restrict__ A,
                            long long lda, long long sa, const float *__restrict__ B, long long ldb,
                            long long sb, float *__restrict__ C, long long ldc, long long sc,
                            int accumulate, long long b0) {
    const long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= (long long)M * N) return;
    const long long b = b0 + blockIdx.y, i = e / N, j = e % N;
    const float *a = A + b * sa + (ta ? i : i * lda), *bp = B + b * sb + (tb ? j * ldb : j);
    const long long as = ta ? lda : 1, bs = tb ? 1 : ldb;
    float *c = C + b * sc + i * ldc + j;
    double p = accumulate ? (double)*c : 0.0, tot = 0.0;
    for (int k0 = 0;; k0 += KC) {
        const int k1 = K - k0 < KC ? K : k0 + KC;
        for (int kk = k0; kk < k1; kk++) p = __fma_rn((double)a[kk * as], (double)bp[kk * bs], p);
        tot = k0 == 0 ? p : __dadd_rn(tot, p);
        p = 0.0;
        if (k1 >= K) break;
    }
    *c = __double2float_rn(tot);
}

// the general kernel split per chunk (batch 1, few outputs over a long K): thread (e, chunk
// blockIdx.y) writes its chunk's partial to W[chunk][e] (chunk 0 from C's prior value when
// accumulate, the others from 0); x64_general_fold adds them in chunk order: x64_general's bits
__global__ void x64_general_part(int ta, int tb, int M, int N, int K, const float *__restrict__ A,
                                 long long lda, const float *__restrict__ B, long long ldb,
                                 const float *__restrict__ C, long long ldc, int accumulate,
                                 double *__restrict__ W) {
    const long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= (long long)M * N) return;
    const long long i = e / N, j = e % N;
    const int ch = blockIdx.y, k0 = ch * KC, k1 = K - k0 < KC ? K : k0 + KC;
    const float *a = A + (ta ? i : i * lda), *bp = B + (tb ? j * ldb : j);
    const long long as = ta ? lda : 1, bs = tb ? 1 : ldb;
    double p = (accumulate && ch == 0) ? (double)C[i * ldc + j] : 0.0;
    for (int kk = k0; kk < k1; kk++) p = __fma_rn((double)a[kk * as], (double)bp[kk * bs], p);
    W[(size_t)ch * M * N + e] = p;
}

__global__ void x64_general_fold(const double *__restrict__ W, int chunks, int M, int N,
                                 float *__restrict__ C, long long ldc) {
    const long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= (long long)M * N) return;
    const size_t mn = (size_t)M * N;
    double s = W[e];
    for (int ch = 1; ch < chunks; ch++) s = __dadd_rn(s, W[ch * mn + e]);
    C[(e / N) * ldc + e % N] = __double2float_rn(s);
}

}  // namespace x64
