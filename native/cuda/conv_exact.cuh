// conv_exact.cuh: exact mode's convolution kernels (1 to 3 spatial axes) as implicit GEMMs: the image-side
// operand is gathered from the image a tile at a time, so no im2col or col2im buffer exists, and
// every output gets the bits of the stub (stub/conv_pool.c: im2col + the exact GEMM + col2im,
// rules 3 and 4 of native/common/tl_math.h). Device code only: conv_pool.cu launches these, and
// tests/native/conv_exact_emu.cpp runs the same source on the CPU (tests/native/cuda_emu), so
// CI compares them with the stub bit for bit without a GPU.
//
// Three kernels serve the six passes (conv and transposed conv: forward, input and kernel
// gradient) with one, two or three spatial axes. With "image" the side the stub runs im2col or
// col2im on (C channels, D x H x W) and "columns" the other side's positions (OD x OH x OW), a
// tap t = (kd, kh, kw) joins column (oz, oy, ox) with image cell (oz SD + kd - PD, oy SH + kh -
// PH, ox SW + kw - PW):
//   cx_gather   out[b][m][o] = from start(m) (bias or 0), the fma chain over k = (c, t) in order
//               of A[m][k] * image_b[c][cell(t, o)], 0 where the cell is padding (the fma still
//               happens, as the stub's GEMM multiplies the column's 0): the conv forward, and
//               the transposed conv's input gradient.
//   cx_scatter  out[b][c][cell] = from start(c), for t in kernel order where some column o reads
//               the cell through t: + (the fma chain over d < D, from 0, of Wt[d][c][t] *
//               src_b[d][o]): the chain is the stub's column entry (W^T times the columns) and
//               the adds are its col2im (each cell's taps in kernel order): the conv input
//               gradient, and the transposed conv's forward.
//   cx_wgrad    part[b][m][(c, t)] = the fma chain over positions o in order, from 0, of
//               A_b[m][o] * image_b[c][cell(t, o)] (0 in the padding): one sample's kernel
//               gradient; conv_pool.cu then sums the samples by rule 4 (linalg.cuh Rule4Stream).
// Tiling follows the exact GEMM (gemm.cu): 256 threads of a 16 x 16 grid, each owning TM x TN
// outputs (rows and columns in groups of 4, groups 64 apart, read as float4 from shared memory),
// K staged CX_BK deep through double-buffered shared memory (one barrier per stage, the next
// stage's loads in flight during the current stage's FMAs). The last stage stops at K: no fma
// with padding past the end of a chain. Every output is written by one thread: no atomics.
#pragma once

#include <stdint.h>
#include "tl_math.h"

namespace {

// One side of a convolution seen by the kernels: the image (C channels of D x H x W), the
// column positions (OD x OH x OW), the kernel (KD x KH x KW taps), strides and paddings. A 2-D
// convolution is the 3-D one of depth 1, a 1-D one also of height 1.
struct ConvShape {
    int C, D, H, W, OD, OH, OW, KD, KH, KW, SD, SH, SW, PD, PH, PW;
};

constexpr int CX_THREADS = 256, CX_BK = 16;

// a block's tile: TM x TN outputs per thread (4 or 8 each)
template <int TM, int TN>
struct CxTile {
    static constexpr int RM = TM, RN = TN, BM = 16 * TM, BN = 16 * TN;
    static constexpr int LDA = BM + 4, LDB = BN + 4;  // shared rows, 16-byte aligned, skewed
    static constexpr int LA = CX_BK * BM / CX_THREADS, LB = CX_BK * BN / CX_THREADS;
    static constexpr int SMEM = 2 * CX_BK * (LDA + LDB) * (int)sizeof(float);
};

// One stage of a row-major A (M rows of K values) into a thread's registers: element
// e = tid + CX_THREADS q of the stage is A(row0 + e / CX_BK, k0 + e % CX_BK), 0 outside A;
// cx_store_a puts them into a shared buffer k-major (S[k * LDA + row]).
template <class T>
__device__ __forceinline__ void cx_load_a(const float *__restrict__ A, int M, int K, int row0,
                                          int k0, int tid, float *ra) {
#pragma unroll
    for (int q = 0; q < T::LA; q++) {
        const int e = tid + CX_THREADS * q, r = row0 + e / CX_BK, k = k0 + e % CX_BK;
        ra[q] = (r < M && k < K) ? A[(int64_t)r * K + k] : 0.0f;
    }
}

template <class T>
__device__ __forceinline__ void cx_store_a(float *S, const float *ra, int tid) {
#pragma unroll
    for (int q = 0; q < T::LA; q++) {
        const int e = tid + CX_THREADS * q;
        S[(e % CX_BK) * T::LDA + e / CX_BK] = ra[q];
    }
}

// the tile offset of a thread's output i (of TM or TN), t its thread row or column
__host__ __device__ __forceinline__ int cx_at(int i, int t) { return (i / 4) * 64 + t * 4 + i % 4; }

// outputs per thread along an axis of n outputs: 4 when one 64-wide tile covers it
__host__ __device__ __forceinline__ int cx_per_thread(int64_t n) { return n <= 64 ? 4 : 8; }

// acc[i][j] = fma(A(k, i), B(k, j), acc[i][j]) for k = 0..K-1 in order. loadA / loadB fill a
// stage's registers from k0, storeA / storeB put them into a shared buffer (As or Bs plus
// buffer * CX_BK * LD); every thread of the block calls it with the same K.
template <int TM, int TN, class LoadA, class LoadB, class StoreA, class StoreB>
__device__ __forceinline__ void cx_chain(int K, float *As, float *Bs, LoadA loadA, LoadB loadB,
                                         StoreA storeA, StoreB storeB, float (&acc)[TM][TN]) {
    typedef CxTile<TM, TN> T;
    if (K <= 0) return;
    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    float ra[T::LA], rb[T::LB];
    loadA(0, ra);
    loadB(0, rb);
    storeA(As, ra);
    storeB(Bs, rb);
    __syncthreads();
    for (int k0 = 0, cur = 0; k0 < K; k0 += CX_BK, cur ^= 1) {
        const bool more = k0 + CX_BK < K;
        if (more) {
            loadA(k0 + CX_BK, ra);
            loadB(k0 + CX_BK, rb);
        }
        const float *as = As + cur * CX_BK * T::LDA, *bs = Bs + cur * CX_BK * T::LDB;
        const int kn = K - k0 < CX_BK ? K - k0 : CX_BK;
        auto step = [&](int kk) {
            float a[TM], b[TN];
#pragma unroll
            for (int g = 0; g < TM / 4; g++) {
                const float4 v = *reinterpret_cast<const float4 *>(as + kk * T::LDA + g * 64 + ty * 4);
                a[4 * g] = v.x; a[4 * g + 1] = v.y; a[4 * g + 2] = v.z; a[4 * g + 3] = v.w;
            }
#pragma unroll
            for (int g = 0; g < TN / 4; g++) {
                const float4 v = *reinterpret_cast<const float4 *>(bs + kk * T::LDB + g * 64 + tx * 4);
                b[4 * g] = v.x; b[4 * g + 1] = v.y; b[4 * g + 2] = v.z; b[4 * g + 3] = v.w;
            }
#pragma unroll
            for (int i = 0; i < TM; i++)
#pragma unroll
                for (int j = 0; j < TN; j++) acc[i][j] = __fmaf_rn(a[i], b[j], acc[i][j]);
        };
        if (kn == CX_BK) {
#pragma unroll
            for (int kk = 0; kk < CX_BK; kk++) step(kk);
        } else {
            for (int kk = 0; kk < kn; kk++) step(kk);
        }
        if (more) {
            storeA(As + (cur ^ 1) * CX_BK * T::LDA, ra);
            storeB(Bs + (cur ^ 1) * CX_BK * T::LDB, rb);
        }
        __syncthreads();
    }
}

// cx_gather: out[b][m][o] for rows m < M and columns (b, o) < ncols = batch * OD * OH * OW; A
// is M x (C KD KH KW) row-major; start bias[m] or 0. KS: the kernel is 1 x KS x KS (1 or 3, so
// the per-element splits of k into channel and tap divide by constants), or 0 (any kernel).
// Grid: (column tiles, row tiles).
template <int TM, int TN, int KS>
__global__ void __launch_bounds__(CX_THREADS, 2)
cx_gather(int M, int ncols, const float *__restrict__ A, const float *__restrict__ bias,
          const float *__restrict__ img, float *__restrict__ out, ConvShape s) {
    typedef CxTile<TM, TN> T;
    extern __shared__ float4 smem4[];
    float *As = reinterpret_cast<float *>(smem4), *Bs = As + 2 * CX_BK * T::LDA;
    const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
    const int row0 = blockIdx.y * T::BM, col0 = blockIdx.x * T::BN;
    const int KW = KS ? KS : s.KW, KHW = KS ? KS * KS : s.KH * s.KW, KK = KS ? KHW : KHW * s.KD;
    const int CK = s.C * KK, PHW = s.OH * s.OW, P = s.OD * PHW;
    // this thread's B loads: column jb of the tile, k rows tid / BN + (256 / BN) q
    const int jb = tid % T::BN, col = col0 + jb;
    const bool cok = col < ncols;
    const int bb = cok ? col / P : 0, pb = cok ? col % P : 0, qb = pb % PHW;
    const int iz0 = (pb / PHW) * s.SD - s.PD;
    const int iy0 = (qb / s.OW) * s.SH - s.PH, ix0 = (qb % s.OW) * s.SW - s.PW;
    const float *im = img + (int64_t)bb * s.C * s.D * s.H * s.W;
    auto loadA = [&](int k0, float *ra) { cx_load_a<T>(A, M, CK, row0, k0, tid, ra); };
    auto storeA = [&](float *S, const float *ra) { cx_store_a<T>(S, ra, tid); };
    auto loadB = [&](int k0, float *rb) {
#pragma unroll
        for (int q = 0; q < T::LB; q++) {
            const int k = k0 + tid / T::BN + (CX_THREADS / T::BN) * q;
            float v = 0.0f;
            if (cok && k < CK) {
                const int c = k / KK, t = k % KK, th = KS ? t : t % KHW;
                const int iz = iz0 + (KS ? 0 : t / KHW), iy = iy0 + th / KW, ix = ix0 + th % KW;
                if (iz >= 0 && iz < s.D && iy >= 0 && iy < s.H && ix >= 0 && ix < s.W)
                    v = im[(((int64_t)c * s.D + iz) * s.H + iy) * s.W + ix];
            }
            rb[q] = v;
        }
    };
    auto storeB = [&](float *S, const float *rb) {
#pragma unroll
        for (int q = 0; q < T::LB; q++) S[(tid / T::BN + (CX_THREADS / T::BN) * q) * T::LDB + jb] = rb[q];
    };
    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; i++) {
        const int r = row0 + cx_at(i, ty);
#pragma unroll
        for (int j = 0; j < TN; j++) acc[i][j] = (bias && r < M) ? bias[r] : 0.0f;
    }
    cx_chain<TM, TN>(CK, As, Bs, loadA, loadB, storeA, storeB, acc);
#pragma unroll
    for (int j = 0; j < TN; j++) {
        const int c = col0 + cx_at(j, tx);
        if (c >= ncols) continue;
        const int b = c / P, o = c % P;
#pragma unroll
        for (int i = 0; i < TM; i++) {
            const int r = row0 + cx_at(i, ty);
            if (r < M) out[((int64_t)b * M + r) * P + o] = acc[i][j];
        }
    }
}

// The residue classes of an image axis under stride S and padding P (the cells whose taps share
// a residue): class z holds the indices i with (i + P) mod S == z, first(z) + S j for j < count(z);
// only the taps k with k mod S == z read them.
struct CxClass {
    int first, count;
    __host__ __device__ CxClass(int z, int S, int P, int L) {
        first = ((z - P) % S + S) % S;
        count = first < L ? (L - first + S - 1) / S : 0;
    }
};

// whether the depth axis does anything (cx_scatter's D3)
__host__ __device__ inline bool cx_3d(const ConvShape &s) {
    return !(s.D == 1 && s.OD == 1 && s.KD == 1 && s.SD == 1 && s.PD == 0);
}

// columns of the largest class (conv_pool.cu sizes cx_scatter's grid by it)
__host__ __device__ inline int cx_class_cols(int N, const ConvShape &s) {
    return N * ((s.D + s.SD - 1) / s.SD) * ((s.H + s.SH - 1) / s.SH) * ((s.W + s.SW - 1) / s.SW);
}

// cx_scatter: out[b][c][cell] for rows c < s.C, samples b < N; Wt is D x C x (KD KH KW), src_b
// D x (OD OH OW); start bias[c] or 0. The columns of blockIdx.z are the (sample, cell) pairs of
// one residue class (CxClass) of each axis, (b, j_d, j_h, j_w) row-major, and its tap loop
// visits just the taps of that class, in kernel order: with stride s a cell is read through 1 in
// s of the taps along each axis, and the others, which the stub's col2im never adds, cost
// nothing. D3 false: the depth axis is trivial (cx_3d), known at compile time (fewer registers).
// Grid: (column tiles of the largest class, row tiles, SD SH SW classes).
template <int TM, int TN, bool D3>
__global__ void __launch_bounds__(CX_THREADS, 2)
cx_scatter(int D, int N, const float *__restrict__ Wt, const float *__restrict__ bias,
           const float *__restrict__ src, float *__restrict__ out, ConvShape s) {
    typedef CxTile<TM, TN> T;
    if (!D3) { s.D = s.OD = s.KD = s.SD = 1; s.PD = 0; }
    extern __shared__ float4 smem4[];
    float *As = reinterpret_cast<float *>(smem4), *Bs = As + 2 * CX_BK * T::LDA;
    const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
    const int row0 = blockIdx.y * T::BM, col0 = blockIdx.x * T::BN;
    const int zd = blockIdx.z / (s.SH * s.SW), zy = (blockIdx.z / s.SW) % s.SH, zx = blockIdx.z % s.SW;
    const CxClass cld(zd, s.SD, s.PD, s.D), cly(zy, s.SH, s.PH, s.H), clx(zx, s.SW, s.PW, s.W);
    const int plane = cly.count * clx.count, per = cld.count * plane, ncols = N * per;
    if (col0 >= ncols) return;  // the whole block: a smaller class
    const int M = s.C, KK = s.KD * s.KH * s.KW, DHW = s.D * s.H * s.W, P = s.OD * s.OH * s.OW;
    // column c of the class: sample, and image depth, row and column plus padding (o s + tap)
    auto decode = [&](int c, int &b, int &z, int &y, int &x) {
        b = c / per;
        const int r = c % per, r2 = r % plane;
        z = cld.first + (r / plane) * s.SD + s.PD;
        y = cly.first + (r2 / clx.count) * s.SH + s.PH;
        x = clx.first + (r2 % clx.count) * s.SW + s.PW;
    };
    // the column this thread loads (jb) and the cells of its output columns (j): depth, and row
    // and column packed 16 bits each (conv_pool.cu keeps extents plus paddings below 2^15)
    const int jb = tid % T::BN, colb = col0 + jb;
    const bool cok = colb < ncols;
    int bb, zb, yb, xb;
    decode(cok ? colb : 0, bb, zb, yb, xb);
    const float *sb = src + (int64_t)bb * D * P;
    int cz[TN], cyx[TN];
#pragma unroll
    for (int j = 0; j < TN; j++) {
        const int c = col0 + cx_at(j, tx);
        int b, y, x;
        decode(c < ncols ? c : 0, b, cz[j], y, x);
        cyx[j] = (y << 16) | x;
    }
    float sum[TM][TN], acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; i++) {
        const int r = row0 + cx_at(i, ty);
#pragma unroll
        for (int j = 0; j < TN; j++) sum[i][j] = (bias && r < M) ? bias[r] : 0.0f;
    }
    for (int kd = zd; kd < s.KD; kd += s.SD)
    for (int kh = zy; kh < s.KH; kh += s.SH)
        for (int kw = zx; kw < s.KW; kw += s.SW) {
            const int t = (kd * s.KH + kh) * s.KW + kw;
            // the column position that reads this thread's load cell through tap t, or -1
            const int rz = zb - kd, ry = yb - kh, rx = xb - kw;
            const int ob = (cok && rz >= 0 && ry >= 0 && rx >= 0 && rz / s.SD < s.OD &&
                            ry / s.SH < s.OH && rx / s.SW < s.OW)
                               ? ((rz / s.SD) * s.OH + ry / s.SH) * s.OW + rx / s.SW : -1;
            auto loadA = [&](int k0, float *ra) {
#pragma unroll
                for (int q = 0; q < T::LA; q++) {
                    const int e = tid + CX_THREADS * q, r = row0 + e % T::BM, d = k0 + e / T::BM;
                    ra[q] = (r < M && d < D) ? Wt[((int64_t)d * M + r) * KK + t] : 0.0f;
                }
            };
            auto storeA = [&](float *S, const float *ra) {
#pragma unroll
                for (int q = 0; q < T::LA; q++) {
                    const int e = tid + CX_THREADS * q;
                    S[(e / T::BM) * T::LDA + e % T::BM] = ra[q];
                }
            };
            auto loadB = [&](int k0, float *rb) {
#pragma unroll
                for (int q = 0; q < T::LB; q++) {
                    const int d = k0 + tid / T::BN + (CX_THREADS / T::BN) * q;
                    rb[q] = (ob >= 0 && d < D) ? sb[(int64_t)d * P + ob] : 0.0f;
                }
            };
            auto storeB = [&](float *S, const float *rb) {
#pragma unroll
                for (int q = 0; q < T::LB; q++)
                    S[(tid / T::BN + (CX_THREADS / T::BN) * q) * T::LDB + jb] = rb[q];
            };
#pragma unroll
            for (int i = 0; i < TM; i++)
#pragma unroll
                for (int j = 0; j < TN; j++) acc[i][j] = 0.0f;
            cx_chain<TM, TN>(D, As, Bs, loadA, loadB, storeA, storeB, acc);
#pragma unroll
            for (int j = 0; j < TN; j++) {
                const int vz = cz[j] - kd, vy = (cyx[j] >> 16) - kh, vx = (cyx[j] & 0xffff) - kw;
                if (vz < 0 || vy < 0 || vx < 0 || vz / s.SD >= s.OD || vy / s.SH >= s.OH || vx / s.SW >= s.OW)
                    continue;  // no column reads this cell through tap t
#pragma unroll
                for (int i = 0; i < TM; i++) sum[i][j] = tlm_add(sum[i][j], acc[i][j]);
            }
        }
#pragma unroll
    for (int j = 0; j < TN; j++) {
        const int c = col0 + cx_at(j, tx);
        if (c >= ncols) continue;
        int b, z, y, x;
        decode(c, b, z, y, x);
        const int cell = ((z - s.PD) * s.H + (y - s.PH)) * s.W + (x - s.PW);
#pragma unroll
        for (int i = 0; i < TM; i++) {
            const int r = row0 + cx_at(i, ty);
            if (r < M) out[((int64_t)b * M + r) * DHW + cell] = sum[i][j];
        }
    }
}

// cx_wgrad: part[z][m][n] for rows m < M, columns n = (c, t) < C KD KH KW and samples z <
// gridDim.z: the chain over sample z's positions of A_z[m][o] (A_z = A + z M OD OH OW, row-major)
// times image_z[c][cell(t, o)]. Grid: (column tiles, row tiles, samples).
template <int TM, int TN>
__global__ void __launch_bounds__(CX_THREADS, 2)
cx_wgrad(int M, const float *__restrict__ A, const float *__restrict__ img,
         float *__restrict__ part, ConvShape s) {
    typedef CxTile<TM, TN> T;
    extern __shared__ float4 smem4[];
    float *As = reinterpret_cast<float *>(smem4), *Bs = As + 2 * CX_BK * T::LDA;
    const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
    const int row0 = blockIdx.y * T::BM, col0 = blockIdx.x * T::BN;
    const int KHW = s.KH * s.KW, KK = s.KD * KHW, CK = s.C * KK;
    const int PHW = s.OH * s.OW, P = s.OD * PHW, HW = s.H * s.W;
    const int64_t z = blockIdx.z;
    const float *Az = A + z * M * P, *im = img + z * s.C * s.D * HW;
    // this thread's B loads: position k0 + kb of columns tid / 16 + 16 q, each column's channel
    // plane offset and its tap (kd, kh, kw) packed 10 bits each
    const int kb = tid % CX_BK;
    int off[T::LB], tap[T::LB];
#pragma unroll
    for (int q = 0; q < T::LB; q++) {
        const int n = col0 + tid / CX_BK + 16 * q, c = n / KK, t = n % KK;
        off[q] = n < CK ? c * s.D * HW : -1;
        tap[q] = ((t / KHW) << 20) | (((t % KHW) / s.KW) << 10) | (t % s.KW);
    }
    auto loadA = [&](int k0, float *ra) { cx_load_a<T>(Az, M, P, row0, k0, tid, ra); };
    auto storeA = [&](float *S, const float *ra) { cx_store_a<T>(S, ra, tid); };
    auto loadB = [&](int k0, float *rb) {
        const int o = k0 + kb, oq = o % PHW;
        const bool ook = o < P;
        const int bz = (o / PHW) * s.SD - s.PD, by = (oq / s.OW) * s.SH - s.PH, bx = (oq % s.OW) * s.SW - s.PW;
#pragma unroll
        for (int q = 0; q < T::LB; q++) {
            const int iz = bz + (tap[q] >> 20), iy = by + ((tap[q] >> 10) & 1023), ix = bx + (tap[q] & 1023);
            rb[q] = (ook && off[q] >= 0 && iz >= 0 && iz < s.D && iy >= 0 && iy < s.H && ix >= 0 && ix < s.W)
                        ? im[off[q] + (iz * s.H + iy) * s.W + ix] : 0.0f;
        }
    };
    auto storeB = [&](float *S, const float *rb) {
#pragma unroll
        for (int q = 0; q < T::LB; q++) S[kb * T::LDB + tid / CX_BK + 16 * q] = rb[q];
    };
    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; i++)
#pragma unroll
        for (int j = 0; j < TN; j++) acc[i][j] = 0.0f;
    cx_chain<TM, TN>(P, As, Bs, loadA, loadB, storeA, storeB, acc);
    float *pz = part + z * M * CK;
#pragma unroll
    for (int i = 0; i < TM; i++) {
        const int r = row0 + cx_at(i, ty);
        if (r >= M) continue;
#pragma unroll
        for (int j = 0; j < TN; j++) {
            const int n = col0 + cx_at(j, tx);
            if (n < CK) pz[(int64_t)r * CK + n] = acc[i][j];
        }
    }
}

// ---------------------------------------------------------------- the passes (host side)
// A convolution's sizes in 3-D (2-D: depth 1; 1-D: also height 1): N samples, input Cin x D x
// H x W, output Cout x OD x OH x OW, kernel KD x KH x KW, strides, paddings. For a transposed
// convolution "input" and "output" are its own (x and y), the stub's swapped geometry.
struct ConvDims {
    int N, Cin, Cout, D, H, W, OD, OH, OW, KD, KH, KW, SD, SH, SW, PD, PH, PW;
};

// the image and columns of the stub's im2col / col2im: the input and output positions for a
// convolution, the output and input positions for a transposed convolution
inline ConvShape cx_shape(const ConvDims &d, bool transpose) {
    ConvShape s;
    s.C = transpose ? d.Cout : d.Cin;
    s.D = transpose ? d.OD : d.D;   s.H = transpose ? d.OH : d.H;   s.W = transpose ? d.OW : d.W;
    s.OD = transpose ? d.D : d.OD;  s.OH = transpose ? d.H : d.OH;  s.OW = transpose ? d.W : d.OW;
    s.KD = d.KD; s.KH = d.KH; s.KW = d.KW; s.SD = d.SD; s.SH = d.SH; s.SW = d.SW;
    s.PD = d.PD; s.PH = d.PH; s.PW = d.PW;
    return s;
}

// the gather's kernel-size specialisation (cx_gather's KS)
inline int cx_ks(const ConvShape &s) {
    return s.KD == 1 && s.KH == s.KW && (s.KH == 1 || s.KH == 3) ? s.KH : 0;
}

// f(CxTile<TM, TN>()) for the tile of a launch over `rows` x `cols` outputs (cx_gather,
// cx_wgrad): 8 rows per thread when one 64-row tile does not cover the rows, else 8 columns when
// one 64-column tile does not cover them, else 4 x 4. No 8 x 8: at 128 registers (two blocks
// per SM) it would spill. cx_scatter, with two accumulators per output, always takes 4 x 4.
template <class F>
void cx_tiles(int64_t rows, int64_t cols, F f) {
    if (cx_per_thread(rows) == 8) f(CxTile<8, 4>());
    else if (cx_per_thread(cols) == 8) f(CxTile<4, 8>());
    else f(CxTile<4, 4>());
}

// Each pass as the stub orders it, launched through L: L::gather(tile, M, ncols, A, bias, img,
// out, shape), L::scatter(tile, D, N, Wt, bias, src, out, shape) and L::wgrad(tile, M,
// samples, A, img, part, shape) launch the kernels of the tile (conv_pool.cu on the GPU,
// tests/native/conv_exact_emu.cpp on the CPU); each returns 0 or an error code.

// y = the convolution (transpose 0) or transposed convolution (1) of x, from the bias
template <class L>
int cx_forward(L &l, const ConvDims &d, bool transpose, const float *W, const float *bias,
               const float *X, float *Y) {
    const ConvShape s = cx_shape(d, transpose);
    const int ncols = d.N * d.OD * d.OH * d.OW;  // y's cells
    if (d.Cout == 0 || ncols == 0) return 0;
    int st = 0;
    if (!transpose)  // y_b = bias + W col(x_b)
        cx_tiles(d.Cout, ncols, [&](auto t) { st = l.gather(t, d.Cout, ncols, W, bias, X, Y, s); });
    else             // y_b = col2im(W^T x_b) onto the bias
        st = l.scatter(CxTile<4, 4>(), d.Cin, d.N, W, bias, X, Y, s);
    return st;
}

// dx from the upstream gradient g: col2im(W^T col(g)) for a convolution, W col(g) for a
// transposed convolution (the chains start from 0)
template <class L>
int cx_input_grad(L &l, const ConvDims &d, bool transpose, const float *W, const float *G, float *dX) {
    const ConvShape s = cx_shape(d, transpose);
    const int ncols = d.N * d.D * d.H * d.W;
    if (d.Cin == 0 || ncols == 0) return 0;
    int st = 0;
    if (!transpose)
        st = l.scatter(CxTile<4, 4>(), d.Cout, d.N, W, nullptr, G, dX, s);
    else
        cx_tiles(d.Cin, ncols, [&](auto t) { st = l.gather(t, d.Cin, ncols, W, nullptr, G, dX, s); });
    return st;
}

// part[z] (Ca x Cb KH KW, z < m) = the kernel gradient of sample n0 + z alone: g_b col(x_b)^T for a
// convolution (Ca = Cout), x_b col(g_b)^T for a transposed convolution (Ca = Cin)
template <class L>
int cx_kernel_grad(L &l, const ConvDims &d, bool transpose, const float *X, const float *G,
                   int n0, int m, float *part) {
    const ConvShape s = cx_shape(d, transpose);
    const int Ca = transpose ? d.Cin : d.Cout, nk = s.C * d.KD * d.KH * d.KW;
    if (Ca == 0 || nk == 0 || m == 0) return 0;
    const float *xs = X + (int64_t)n0 * d.Cin * d.D * d.H * d.W;
    const float *gs = G + (int64_t)n0 * d.Cout * d.OD * d.OH * d.OW;
    int st = 0;
    cx_tiles(Ca, nk, [&](auto t) {
        st = l.wgrad(t, Ca, m, transpose ? xs : gs, transpose ? gs : xs, part, s);
    });
    return st;
}

}  // namespace
