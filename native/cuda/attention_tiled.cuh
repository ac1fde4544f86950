// attention_tiled.cuh: the register-tiled attention kernels (head dims 33..128) and the pair
// rule every attention kernel shares. Device code only: attention.cu launches these kernels,
// and tests/native/attention_tiled_emu.cpp runs the same source on the CPU (one thread per
// CUDA thread, barriers and shuffles emulated), so CI checks their indexing without a GPU.
// Needs tl_group_max / tl_group_sum (reduce_util.cuh) declared before it.
// One kernel family, kept whole (over 500 lines): the forward, dQ, dK/dV and one-pass backward
// kernels are built from the same tile shapes (Tiled, FwdTiles, Onepass), staging helpers and
// score-tile steps, and the CPU emulation compiles exactly this unit; split, each kernel would
// be read against helpers in another file.
#pragma once

#include <math.h>
#include <stdint.h>

namespace {

// the pair (query i, key j) takes part: not after the query when causal, and allowed by the mask
__device__ __forceinline__ bool attends(const float *__restrict__ mask, bool causal, int64_t n,
                                        int64_t i, int64_t j) {
    return !(causal && j > i) && (!mask || mask[i * n + j] != 0.0f);
}

// ---------------------------------------------------------------- tiled kernels (head dim 33..128)
// Each kernel is a few small register-tiled SIMT GEMMs per tile. A block of 128 threads (4 warps)
// owns 64 rows: query rows in the forward and dQ, key rows in dK/dV. Lane l of warp w owns the
// 4 rows r0..r0+3, r0 = 16 w + 4 (l / 8); the 8 lanes sharing them ("a row group") split the
// columns of a score tile (column c = l % 8 + 8 k, k < CPT) and the head dims of the
// accumulators (dims 4 (l % 8) + 32 c4 + e). So every row reduction (the softmax's max and sum)
// is a butterfly over 8 aligned lanes, and every shared read is a float4 that the row group or
// the warp shares:
//   the block's rows, transposed  [d][64]        (scores: 4 rows of one dim per float4)
//   a tile of columns, row major  [col][HDP + 4] (scores: 4 dims of one column; padded so the
//                                                 8 columns of a row group hit distinct banks)
//   probabilities / dS            [col][68]      (products: 4 rows of one column per float4)
// HDP, the head dims padded to 64, 96 or 128, fixes the tiles; dims past hd are staged as 0
// and the score loops stop at hd rounded up to 4. Shared memory is opt-in dynamic, sized so two
// or three blocks fit on an SM. Sums run in fixed orders (dims ascending, then columns
// ascending within a tile and tiles ascending), every output element is written by exactly one
// thread: no atomics, bit-reproducible. Causal blocks skip the tiles that lie wholly after the
// diagonal and visit the heaviest blocks first; only the pair test masks the diagonal tile.
constexpr int TROWS = 64;            // rows per block
constexpr int TTHREADS = 128;        // threads per block
constexpr int PTR = TROWS + 4;       // padded row length of a probability tile

template <int HDP> struct Tiled {
    static_assert(HDP % 32 == 0 && HDP >= 64 && HDP <= 128, "head-dim bound of the tiled kernels");
    static constexpr int DC = HDP / 32;              // float4 chunks of dims per thread
    static constexpr int LD = HDP + 4;               // padded row of a column tile
    static constexpr int DQ_CPT = HDP == 64 ? 8 : 4; // dQ: key columns per thread (tile 8 CPT)
    static constexpr int DKV_CPT = 4;                // dK/dV: query columns per thread
    static constexpr int FWD_BLOCKS = HDP == 128 ? 2 : 3;  // blocks per SM the registers allow
    static constexpr int DQ_BLOCKS = HDP == 128 ? 2 : 3;
    static constexpr int DKV_BLOCKS = HDP == 64 ? 3 : 2;
    static constexpr int KEYS = 64;                  // forward: keys per tile
    // forward: Q^T, then keys (later probabilities), then values
    static constexpr size_t FWD_SMEM = sizeof(float) *
        (HDP * TROWS + (KEYS * LD > KEYS * PTR ? KEYS * LD : KEYS * PTR) + KEYS * HDP);
    // dQ: Q^T, dO^T, keys, values (later dS)
    static constexpr size_t DQ_SMEM = sizeof(float) * (2 * HDP * TROWS + 2 * 8 * DQ_CPT * LD);
    // dK/dV: K^T, V^T, queries, dO (later dS), probabilities, lse and D of the query tile
    static constexpr size_t DKV_SMEM =
        sizeof(float) * (2 * HDP * TROWS + 2 * 8 * DKV_CPT * LD + 8 * DKV_CPT * (PTR + 2));
};

// The one-pass backward with query tiles of 8 CPT: the dK/dV kernel's shared memory (dS
// key-major reuses the probabilities' space) and the tile's rank; 32-query tiles (CPT 4) keep
// the dK/dV kernel's blocks per SM, 64-query tiles (CPT 8, head dims up to 64) take two.
template <int HDP, int CPT> struct Onepass {
    using T = Tiled<HDP>;
    static constexpr int COLS = 8 * CPT;
    static constexpr int BLOCKS = CPT == T::DKV_CPT ? T::DKV_BLOCKS : 2;
    static constexpr size_t SMEM = sizeof(float) *
        (2 * HDP * TROWS + 2 * COLS * T::LD + COLS * (PTR + 2)) + 16;
    static_assert(CPT == 4 || (CPT == 8 && HDP == 64), "one-pass query tiles");
};

// The forward's key tile: KEYS keys per step (64, or 32 for less shared memory and more blocks
// per SM), and the blocks per SM its registers and shared memory allow.
template <int HDP, int KEYS> struct FwdTiles {
    static_assert(KEYS == 32 || KEYS == 64, "forward key tile");
    using T = Tiled<HDP>;
    static constexpr int BLOCKS = KEYS == 64 ? T::FWD_BLOCKS : HDP == 128 ? 3 : 4;
    static constexpr int KP_FLOATS = KEYS * T::LD > KEYS * PTR ? KEYS * T::LD : KEYS * PTR;
    static constexpr size_t SMEM = sizeof(float) * (HDP * TROWS + KP_FLOATS + KEYS * HDP);
};

__device__ __forceinline__ float f4at(const float4 &v, int e) {
    return e == 0 ? v.x : e == 1 ? v.y : e == 2 ? v.z : v.w;
}

// The block's rows row0.. of one head of A, times mul, as T[d][r] (0 past n or hd). Consecutive
// threads take consecutive rows, so the shared stores never conflict. vec: hd % 4 == 0 and A is
// 16-byte aligned, so 4 dims load as one float4.
template <int HDP>
__device__ __forceinline__ void stage_rows_t(float *T, const float *__restrict__ A, size_t base,
                                             int row0, int n, int HD, int hd, float mul, bool vec) {
    if (vec) {
        for (int e = threadIdx.x; e < TROWS * HDP / 4; e += TTHREADS) {
            const int r = e % TROWS, d = 4 * (e / TROWS), i = row0 + r;
            float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            if (i < n && d < hd) v = *reinterpret_cast<const float4 *>(A + base + (size_t)i * HD + d);
            T[d * TROWS + r] = v.x * mul;
            T[(d + 1) * TROWS + r] = v.y * mul;
            T[(d + 2) * TROWS + r] = v.z * mul;
            T[(d + 3) * TROWS + r] = v.w * mul;
        }
    } else {
        for (int e = threadIdx.x; e < TROWS * HDP; e += TTHREADS) {
            const int r = e % TROWS, d = e / TROWS, i = row0 + r;
            T[d * TROWS + r] = (i < n && d < hd) ? A[base + (size_t)i * HD + d] * mul : 0.0f;
        }
    }
}

// COLS rows col0.. of one head of A as S[c][d] with row length LDS (0 past n or hd)
template <int HDP, int COLS, int LDS>
__device__ __forceinline__ void stage_cols(float *S, const float *__restrict__ A, size_t base,
                                           int col0, int n, int HD, int hd, bool vec) {
    if (vec) {
        for (int e = threadIdx.x; e < COLS * HDP / 4; e += TTHREADS) {
            const int c = e / (HDP / 4), d = 4 * (e % (HDP / 4)), j = col0 + c;
            float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            if (j < n && d < hd) v = *reinterpret_cast<const float4 *>(A + base + (size_t)j * HD + d);
            *reinterpret_cast<float4 *>(S + c * LDS + d) = v;
        }
    } else {
        for (int e = threadIdx.x; e < COLS * HDP; e += TTHREADS) {
            const int c = e / HDP, d = e % HDP, j = col0 + c;
            S[c * LDS + d] = (j < n && d < hd) ? A[base + (size_t)j * HD + d] : 0.0f;
        }
    }
}

// s[a][k] += sum over d < dlim (a multiple of 4) of XT[d][r0 + a] * Yc[cl + 8 k][d], d ascending
template <int CPT, int LDY>
__device__ __forceinline__ void tile_dots(float (&s)[4][CPT], const float *XT, const float *Yc,
                                          int r0, int cl, int dlim) {
#pragma unroll 2
    for (int d = 0; d < dlim; d += 4) {
        float4 x[4], y[CPT];
#pragma unroll
        for (int e = 0; e < 4; e++) x[e] = *reinterpret_cast<const float4 *>(XT + (d + e) * TROWS + r0);
#pragma unroll
        for (int k = 0; k < CPT; k++) y[k] = *reinterpret_cast<const float4 *>(Yc + (cl + 8 * k) * LDY + d);
#pragma unroll
        for (int e = 0; e < 4; e++)
#pragma unroll
            for (int k = 0; k < CPT; k++) {
                const float yv = f4at(y[k], e);
                s[0][k] = __fmaf_rn(x[e].x, yv, s[0][k]);
                s[1][k] = __fmaf_rn(x[e].y, yv, s[1][k]);
                s[2][k] = __fmaf_rn(x[e].z, yv, s[2][k]);
                s[3][k] = __fmaf_rn(x[e].w, yv, s[3][k]);
            }
    }
}

// acc[a][4 c4 + e] += sum over columns c < cols of P[c][r0 + a] * Y[c][4 cl + 32 c4 + e], c ascending
template <int DC, int LDY>
__device__ __forceinline__ void tile_products(float (&acc)[4][4 * DC], const float *P,
                                              const float *Y, int r0, int cl, int cols) {
#pragma unroll 4
    for (int c = 0; c < cols; c++) {
        const float4 p = *reinterpret_cast<const float4 *>(P + c * PTR + r0);
#pragma unroll
        for (int c4 = 0; c4 < DC; c4++) {
            const float4 y = *reinterpret_cast<const float4 *>(Y + c * LDY + 4 * cl + 32 * c4);
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const float yv = f4at(y, e);
                acc[0][4 * c4 + e] = __fmaf_rn(p.x, yv, acc[0][4 * c4 + e]);
                acc[1][4 * c4 + e] = __fmaf_rn(p.y, yv, acc[1][4 * c4 + e]);
                acc[2][4 * c4 + e] = __fmaf_rn(p.z, yv, acc[2][4 * c4 + e]);
                acc[3][4 * c4 + e] = __fmaf_rn(p.w, yv, acc[3][4 * c4 + e]);
            }
        }
    }
}

// P[cl + 8 k][r0 + a] = v[a][k]: a thread's 4 rows of each of its columns as one float4
template <int CPT>
__device__ __forceinline__ void put_tile(float *P, const float (&v)[4][CPT], int r0, int cl) {
#pragma unroll
    for (int k = 0; k < CPT; k++)
        *reinterpret_cast<float4 *>(P + (cl + 8 * k) * PTR + r0) =
            make_float4(v[0][k], v[1][k], v[2][k], v[3][k]);
}

// this thread's rows' accumulators to global memory (dims below hd, rows below n)
template <int DC>
__device__ __forceinline__ void store_rows(const float (&acc)[4][4 * DC], float *__restrict__ G,
                                           size_t base, int row0, int r0, int cl, int n, int HD,
                                           int hd) {
#pragma unroll
    for (int a = 0; a < 4; a++) {
        const int i = row0 + r0 + a;
        if (i >= n) continue;
#pragma unroll
        for (int c4 = 0; c4 < DC; c4++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int d = 4 * cl + 32 * c4 + e;
                if (d < hd) G[base + (size_t)i * HD + d] = acc[a][4 * c4 + e];
            }
    }
}

// A backward block of either schedule (attention_exact.cuh too): it owns 64 rows (queries for
// dQ, keys for dK and dV), staged transposed in RT and RT2, and walks the other side in tiles
// of COLS rows staged in C1 and C2 (dK/dV: then a probability tile PT and the tile rows' lse
// and D in Ls and Ds); a thread holds rows r0..r0+3 and tile columns cl + 8 k of head bh,
// whose rows start at base.
template <int HDP, int COLS>
struct BwdBlock {
    static constexpr int LD = Tiled<HDP>::LD;
    float *RT, *RT2, *C1, *C2, *PT, *Ls, *Ds;
    int cl, r0, n, HD, hd, bh;
    size_t base;
    __device__ BwdBlock(float4 *smem, int n_, int H, int hd_)
        : RT(reinterpret_cast<float *>(smem)), RT2(RT + HDP * TROWS), C1(RT2 + HDP * TROWS),
          C2(C1 + COLS * LD), PT(C2 + COLS * LD), Ls(PT + COLS * PTR), Ds(Ls + COLS),
          cl(threadIdx.x & 7), r0((threadIdx.x >> 5) * 16 + ((threadIdx.x & 31) >> 3) * 4), n(n_),
          HD(H * hd_), hd(hd_), bh(blockIdx.y),
          base((size_t)(blockIdx.y / H) * n_ * H * hd_ + (size_t)(blockIdx.y % H) * hd_) {}
    // the block's rows from row0: A (times sa) into RT, B into RT2
    __device__ __forceinline__ void stage_own(const float *__restrict__ A, float sa,
                                              const float *__restrict__ B, int row0, bool vec) {
        stage_rows_t<HDP>(RT, A, base, row0, n, HD, hd, sa, vec);
        stage_rows_t<HDP>(RT2, B, base, row0, n, HD, hd, 1.0f, vec);
    }
    // between two barriers, the tile from row c0: A into C1, B into C2, and given lse, the rows'
    // lse and D (0 past n)
    __device__ __forceinline__ void stage_tile(const float *__restrict__ A, const float *__restrict__ B,
                                               int c0, bool vec, const float *__restrict__ lse = nullptr,
                                               const float *__restrict__ D = nullptr) {
        __syncthreads();  // the previous tile's reads of C1, C2, Ls and Ds are done
        stage_cols<HDP, COLS, LD>(C1, A, base, c0, n, HD, hd, vec);
        stage_cols<HDP, COLS, LD>(C2, B, base, c0, n, HD, hd, vec);
        if (lse && threadIdx.x < COLS) {
            const int i = c0 + threadIdx.x;
            Ls[threadIdx.x] = i < n ? lse[(size_t)bh * n + i] : 0.0f;
            Ds[threadIdx.x] = i < n ? D[(size_t)bh * n + i] : 0.0f;
        }
        __syncthreads();
    }
    // the lse and D of the thread's rows from row0 (0 past n)
    __device__ __forceinline__ void own_stats(float (&L)[4], float (&Di)[4], const float *__restrict__ lse,
                                              const float *__restrict__ D, int row0) const {
#pragma unroll
        for (int a = 0; a < 4; a++) {
            const int i = row0 + r0 + a;
            L[a] = i < n ? lse[(size_t)bh * n + i] : 0.0f;
            Di[a] = i < n ? D[(size_t)bh * n + i] : 0.0f;
        }
    }
};

// Forward: a block owns 64 queries and walks the keys in tiles of 64 with an online softmax
// per tile: scores S = (Q scale) K^T, the row group's running max and sum (the same bits on its
// 8 lanes), the rescaled output O += P V.
template <int HDP, int KEYS = 64>
__global__ void __launch_bounds__(TTHREADS, (FwdTiles<HDP, KEYS>::BLOCKS)) attn_fwd_tiled(
    const float *__restrict__ Q, const float *__restrict__ K, const float *__restrict__ V,
    const float *__restrict__ mask, float *__restrict__ O, float *__restrict__ lse, int n, int H,
    int hd, float scale, bool causal, bool vec) {
    using T = Tiled<HDP>;
    constexpr int CPT = KEYS / 8, DC = T::DC;
    extern __shared__ float4 smem4[];
    float *QT = reinterpret_cast<float *>(smem4);                   // [HDP][64]
    float *KP = QT + HDP * TROWS;                                   // [KEYS][LD] keys, [KEYS][PTR] p
    float *Vs = KP + FwdTiles<HDP, KEYS>::KP_FLOATS;                // [KEYS][HDP]
    const int lane = threadIdx.x & 31, cl = lane & 7;
    const int r0 = (threadIdx.x >> 5) * 16 + (lane >> 3) * 4;
    const int HD = H * hd, bh = blockIdx.y, b = bh / H, h = bh % H;
    const int i0 = (causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x) * TROWS;
    const size_t base = (size_t)b * n * HD + (size_t)h * hd;
    const int dlim = (hd + 3) & ~3;
    stage_rows_t<HDP>(QT, Q, base, i0, n, HD, hd, scale, vec);
    float m[4], l[4], o[4][4 * DC];
#pragma unroll
    for (int a = 0; a < 4; a++) {
        m[a] = -INFINITY;
        l[a] = 0.0f;
#pragma unroll
        for (int d = 0; d < 4 * DC; d++) o[a][d] = 0.0f;
    }
    const int jend = causal ? min(n, i0 + TROWS) : n;
    for (int j0 = 0; j0 < jend; j0 += KEYS) {
        __syncthreads();  // the previous tile's reads of KP and Vs are done
        stage_cols<HDP, KEYS, T::LD>(KP, K, base, j0, n, HD, hd, vec);
        stage_cols<HDP, KEYS, HDP>(Vs, V, base, j0, n, HD, hd, vec);
        __syncthreads();
        float s[4][CPT];
#pragma unroll
        for (int a = 0; a < 4; a++)
#pragma unroll
            for (int k = 0; k < CPT; k++) s[a][k] = 0.0f;
        tile_dots<CPT, T::LD>(s, QT, KP, r0, cl, dlim);
        // every pair of the tile takes part: no pair tests
        const bool inside = !mask && i0 + TROWS <= n && j0 + KEYS <= n && (!causal || j0 + KEYS <= i0 + 1);
#pragma unroll
        for (int a = 0; a < 4; a++) {
            const int i = i0 + r0 + a;
            float tmax = -INFINITY;
#pragma unroll
            for (int k = 0; k < CPT; k++) {
                const int j = j0 + cl + 8 * k;
                if (!inside && !(i < n && j < n && attends(mask, causal, n, i, j))) s[a][k] = -INFINITY;
                tmax = fmaxf(tmax, s[a][k]);
            }
            const float mn = fmaxf(m[a], tl_group_max<8>(tmax));
            const float corr = m[a] == -INFINITY ? 0.0f : expf(m[a] - mn);
            float psum = 0.0f;
#pragma unroll
            for (int k = 0; k < CPT; k++) {
                s[a][k] = s[a][k] == -INFINITY ? 0.0f : expf(s[a][k] - mn);
                psum += s[a][k];
            }
            l[a] = l[a] * corr + tl_group_sum<8>(psum);
            m[a] = mn;
#pragma unroll
            for (int d = 0; d < 4 * DC; d++) o[a][d] *= corr;
        }
        __syncthreads();  // every thread is done reading the keys: KP takes the probabilities
        put_tile<CPT>(KP, s, r0, cl);
        __syncthreads();
        tile_products<DC, HDP>(o, KP, Vs, r0, cl, min(KEYS, n - j0));
    }
#pragma unroll
    for (int a = 0; a < 4; a++) {
        // a +inf score makes the row NaN (as the stub); a fully blocked row outputs 0 with lse
        // 0; a NaN score keeps the row and its lse NaN
        const float la = m[a] == INFINITY ? NAN : l[a];
        const float inv = la > 0.0f ? 1.0f / la : (la != la ? la : 0.0f);
#pragma unroll
        for (int d = 0; d < 4 * DC; d++) o[a][d] *= inv;
        const int i = i0 + r0 + a;
        if (cl == 0 && i < n) lse[(size_t)bh * n + i] = la > 0.0f ? m[a] + logf(la) : inv;
    }
    store_rows<DC>(o, O, base, i0, r0, cl, n, HD, hd);
}

// dQ: a block owns 64 queries and walks the keys in tiles of 8 DQ_CPT: S = (Q scale) K^T and
// dP = dO V^T, dS = P (dP - D) scale with P recomputed from lse, then dQ += dS K.
template <int HDP>
__global__ void __launch_bounds__(TTHREADS, Tiled<HDP>::DQ_BLOCKS) attn_dq_tiled(
    const float *__restrict__ Q, const float *__restrict__ K, const float *__restrict__ V,
    const float *__restrict__ dO, const float *__restrict__ lse, const float *__restrict__ D,
    const float *__restrict__ mask, float *__restrict__ dQ, int n, int H, int hd, float scale,
    bool causal, bool vec) {
    using T = Tiled<HDP>;
    constexpr int CPT = T::DQ_CPT, COLS = 8 * CPT, DC = T::DC;
    extern __shared__ float4 smem4[];
    BwdBlock<HDP, COLS> blk(smem4, n, H, hd);  // Q^T, dO^T; keys, values (later dS)
    float *QT = blk.RT, *GT = blk.RT2, *Ks = blk.C1, *VS = blk.C2;
    const int cl = blk.cl, r0 = blk.r0, HD = blk.HD;
    const size_t base = blk.base;
    const int i0 = (causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x) * TROWS;
    const int dlim = (hd + 3) & ~3;
    blk.stage_own(Q, scale, dO, i0, vec);
    float L[4], Di[4], acc[4][4 * DC];
    blk.own_stats(L, Di, lse, D, i0);
#pragma unroll
    for (int a = 0; a < 4; a++)
#pragma unroll
        for (int d = 0; d < 4 * DC; d++) acc[a][d] = 0.0f;
    const int jend = causal ? min(n, i0 + TROWS) : n;
    for (int j0 = 0; j0 < jend; j0 += COLS) {
        blk.stage_tile(K, V, j0, vec);
        float s[4][CPT], dp[4][CPT];
#pragma unroll
        for (int a = 0; a < 4; a++)
#pragma unroll
            for (int k = 0; k < CPT; k++) s[a][k] = dp[a][k] = 0.0f;
        tile_dots<CPT, T::LD>(s, QT, Ks, r0, cl, dlim);
        tile_dots<CPT, T::LD>(dp, GT, VS, r0, cl, dlim);
#pragma unroll
        for (int a = 0; a < 4; a++) {
            const int i = i0 + r0 + a;
#pragma unroll
            for (int k = 0; k < CPT; k++) {
                const int j = j0 + cl + 8 * k;
                const bool ok = i < n && j < n && attends(mask, causal, n, i, j);
                s[a][k] = ok ? expf(s[a][k] - L[a]) * (dp[a][k] - Di[a]) * scale : 0.0f;
            }
        }
        __syncthreads();  // every thread is done reading the values: VS takes dS
        put_tile<CPT>(VS, s, r0, cl);
        __syncthreads();
        tile_products<DC, T::LD>(acc, VS, Ks, r0, cl, min(COLS, n - j0));
    }
    store_rows<DC>(acc, dQ, base, i0, r0, cl, n, HD, hd);
}

// dK, dV: a block owns 64 keys and walks the queries in tiles of 8 DKV_CPT: S^T = (K scale)
// Q^T and dP^T = V dO^T, P and dS from lse and D, then dV += P^T dO and dK += dS^T Q.
template <int HDP>
__global__ void __launch_bounds__(TTHREADS, Tiled<HDP>::DKV_BLOCKS) attn_dkv_tiled(
    const float *__restrict__ Q, const float *__restrict__ K, const float *__restrict__ V,
    const float *__restrict__ dO, const float *__restrict__ lse, const float *__restrict__ D,
    const float *__restrict__ mask, float *__restrict__ dK, float *__restrict__ dV, int n, int H,
    int hd, float scale, bool causal, bool vec) {
    using T = Tiled<HDP>;
    constexpr int CPT = T::DKV_CPT, COLS = 8 * CPT, DC = T::DC;
    extern __shared__ float4 smem4[];
    BwdBlock<HDP, COLS> blk(smem4, n, H, hd);  // K^T, V^T; queries, dO (later dS); P; lse, D
    float *KT = blk.RT, *VT = blk.RT2, *Qs = blk.C1, *GS = blk.C2;
    float *PT = blk.PT, *Ls = blk.Ls, *Ds = blk.Ds;
    const int cl = blk.cl, r0 = blk.r0, HD = blk.HD;
    const size_t base = blk.base;
    const int j0 = blockIdx.x * TROWS;  // causal: the low blocks see the most queries and run first
    const int dlim = (hd + 3) & ~3;
    blk.stage_own(K, scale, V, j0, vec);
    float dk[4][4 * DC], dv[4][4 * DC];
#pragma unroll
    for (int a = 0; a < 4; a++)
#pragma unroll
        for (int d = 0; d < 4 * DC; d++) dk[a][d] = dv[a][d] = 0.0f;
    for (int i0 = causal ? j0 / COLS * COLS : 0; i0 < n; i0 += COLS) {
        blk.stage_tile(Q, dO, i0, vec, lse, D);
        float s[4][CPT], dp[4][CPT];
#pragma unroll
        for (int a = 0; a < 4; a++)
#pragma unroll
            for (int k = 0; k < CPT; k++) s[a][k] = dp[a][k] = 0.0f;
        tile_dots<CPT, T::LD>(s, KT, Qs, r0, cl, dlim);
        tile_dots<CPT, T::LD>(dp, VT, GS, r0, cl, dlim);
#pragma unroll
        for (int k = 0; k < CPT; k++) {
            const int c = cl + 8 * k, i = i0 + c;
#pragma unroll
            for (int a = 0; a < 4; a++) {
                const int j = j0 + r0 + a;
                const bool ok = i < n && j < n && attends(mask, causal, n, i, j);
                const float p = ok ? expf(s[a][k] - Ls[c]) : 0.0f;
                s[a][k] = p;
                // a blocked pair adds nothing, even when its row's dP or D is NaN (as the dQ
                // kernel and the stub): its dS is 0, not 0 * NaN
                dp[a][k] = ok ? p * (dp[a][k] - Ds[c]) * scale : 0.0f;
            }
        }
        const int cols = min(COLS, n - i0);
        put_tile<CPT>(PT, s, r0, cl);  // PT's last readers passed this tile's first barrier
        __syncthreads();
        tile_products<DC, T::LD>(dv, PT, GS, r0, cl, cols);
        __syncthreads();  // every thread is done reading dO: GS takes dS
        put_tile<CPT>(GS, dp, r0, cl);
        __syncthreads();
        tile_products<DC, T::LD>(dk, GS, Qs, r0, cl, cols);
    }
    store_rows<DC>(dk, dK, base, j0, r0, cl, n, HD, hd);
    store_rows<DC>(dv, dV, base, j0, r0, cl, n, HD, hd);
}

// ---------------------------------------------------------------- one-pass backward
// The dK/dV kernel's walk, which also turns each query tile's dS into that tile's share of dQ
// (dQ_i += sum over the block's 64 keys of dS_ij K_j): the scores and dP are computed once, five
// tile GEMMs instead of the two kernels' seven. The shares of one query tile arrive from every
// key block that sees it and are summed into dQ in a fixed order, the tile's "rank" order, so
// the bits do not depend on timing:
//   causal: key block jb walks query tiles 2 jb .. T-1 upward (its diagonal first), so tile qt
//           meets the key blocks qt/2, qt/2 - 1, .. 0 two steps apart: rank = qt/2 - jb;
//   else:   key block jb starts at tile jb T / NB and wraps around, so the blocks of one head
//           start spread over the tiles; rank = how many blocks reach the tile before jb does.
// Sink owns the ordering (attention.cu: a counter per query tile in global memory, a block
// waits until the tile's earlier ranks are in; the CPU emulation: per-rank partials summed in
// rank order afterwards), and the block numbering: sink.block_id() (heads major, key blocks
// ascending) is the order in which blocks started, so a block only ever waits for blocks
// that run or ran.
// A rank's wait depends only on blocks of its head that reached the tile at an earlier step,
// so the walk cannot deadlock while one head's key blocks fit on the GPU at once (attention.cu
// checks that and otherwise runs the two kernels).
__device__ __forceinline__ int dst_swz(int r) { return ((r >> 2) & 3) << 1; }

template <int HDP, int CPT, class Sink>
__global__ void __launch_bounds__(TTHREADS, (Onepass<HDP, CPT>::BLOCKS)) attn_bwd_onepass(
    const float *__restrict__ Q, const float *__restrict__ K, const float *__restrict__ V,
    const float *__restrict__ dO, const float *__restrict__ lse, const float *__restrict__ D,
    const float *__restrict__ mask, Sink sink, float *__restrict__ dK, float *__restrict__ dV,
    int n, int H, int hd, float scale, bool causal, bool vec) {
    using T = Tiled<HDP>;
    constexpr int COLS = 8 * CPT, DC = T::DC;
    // dQ share: a group of TPG threads owns 4 queries, each thread MC float4 chunks of dims
    constexpr int TPG = TTHREADS / (COLS / 4), MC = (HDP + 4 * TPG - 1) / (4 * TPG);
    extern __shared__ float4 smem4[];
    float *KT = reinterpret_cast<float *>(smem4);  // [HDP][64]
    float *VT = KT + HDP * TROWS;                  // [HDP][64]
    float *Qs = VT + HDP * TROWS;                  // [COLS][LD]
    float *GS = Qs + COLS * T::LD;                 // [COLS][LD] dO, then [COLS][PTR] dS
    float *PT = GS + COLS * T::LD;                 // [COLS][PTR] P, then [64][COLS] dS key-major
    float *Ls = PT + COLS * PTR, *Ds = Ls + COLS;  // [COLS] each
    int &rank_s = *reinterpret_cast<int *>(Ds + COLS);
    const int lane = threadIdx.x & 31, cl = lane & 7;
    const int r0 = (threadIdx.x >> 5) * 16 + (lane >> 3) * 4;
    const int NB = gridDim.x, vid = sink.block_id(), bh = vid / NB, jb = vid % NB;
    const int HD = H * hd, b = bh / H, h = bh % H;
    const int j0 = jb * TROWS, Tq = (n + COLS - 1) / COLS;
    const int keys = min(TROWS, n - j0);
    const size_t base = (size_t)b * n * HD + (size_t)h * hd;
    const int dlim = (hd + 3) & ~3;
    // dQ share: thread t owns queries 4 (t / TPG) .. + 3 of the tile, dims 4 (t % TPG) + 4 TPG m
    const int qg = 4 * (threadIdx.x / TPG), dl = 4 * (threadIdx.x % TPG);
    stage_rows_t<HDP>(KT, K, base, j0, n, HD, hd, scale, vec);
    stage_rows_t<HDP>(VT, V, base, j0, n, HD, hd, 1.0f, vec);
    float dk[4][4 * DC], dv[4][4 * DC];
#pragma unroll
    for (int a = 0; a < 4; a++)
#pragma unroll
        for (int d = 0; d < 4 * DC; d++) dk[a][d] = dv[a][d] = 0.0f;
    const int qlo = causal ? j0 / COLS : 0, steps = Tq - qlo;
    const int start = causal ? 0 : (int)((int64_t)jb * Tq / NB);
    for (int t = 0; t < steps; t++) {
        const int qt = causal ? qlo + t : (start + t) % Tq, i0 = qt * COLS;
        __syncthreads();  // the previous tile's reads of Qs, GS, Ls, Ds, PT are done
        if (threadIdx.x == 0) {
            int r = 0;
            if (causal) {
                r = qt * COLS / TROWS - jb;
            } else {
                for (int o = 0; o < NB; o++) {
                    const int so = (int)((int64_t)o * Tq / NB);
                    r += o != jb && (qt - so + Tq) % Tq < t;
                }
            }
            rank_s = r;
        }
        stage_cols<HDP, COLS, T::LD>(Qs, Q, base, i0, n, HD, hd, vec);
        stage_cols<HDP, COLS, T::LD>(GS, dO, base, i0, n, HD, hd, vec);
        if (threadIdx.x < COLS) {
            const int i = i0 + threadIdx.x;
            Ls[threadIdx.x] = i < n ? lse[(size_t)bh * n + i] : 0.0f;
            Ds[threadIdx.x] = i < n ? D[(size_t)bh * n + i] : 0.0f;
        }
        __syncthreads();
        float s[4][CPT], dp[4][CPT];
#pragma unroll
        for (int a = 0; a < 4; a++)
#pragma unroll
            for (int k = 0; k < CPT; k++) s[a][k] = dp[a][k] = 0.0f;
        tile_dots<CPT, T::LD>(s, KT, Qs, r0, cl, dlim);
        tile_dots<CPT, T::LD>(dp, VT, GS, r0, cl, dlim);
        // every pair of the tile takes part (queries i0.., keys j0..): no pair tests
        const bool inside = !mask && i0 + COLS <= n && j0 + TROWS <= n && (!causal || j0 + TROWS <= i0 + 1);
#pragma unroll
        for (int k = 0; k < CPT; k++) {
            const int c = cl + 8 * k, i = i0 + c;
#pragma unroll
            for (int a = 0; a < 4; a++) {
                const int j = j0 + r0 + a;
                const bool ok = inside || (i < n && j < n && attends(mask, causal, n, i, j));
                const float p = ok ? expf(s[a][k] - Ls[c]) : 0.0f;
                s[a][k] = p;
                dp[a][k] = ok ? p * (dp[a][k] - Ds[c]) * scale : 0.0f;
            }
        }
        const int cols = min(COLS, n - i0);
        put_tile<CPT>(PT, s, r0, cl);
        __syncthreads();
        tile_products<DC, T::LD>(dv, PT, GS, r0, cl, cols);
        __syncthreads();  // every thread is done reading dO: GS takes dS
        put_tile<CPT>(GS, dp, r0, cl);
        // dS key-major over P (read by now): key r's queries as float4 chunks, chunk q / 4
        // stored at (q / 4) ^ swz(r), so a warp's stores hit 32 distinct banks
#pragma unroll
        for (int a = 0; a < 4; a++)
#pragma unroll
            for (int k = 0; k < CPT; k++) {
                const int r = r0 + a, c = cl + 8 * k;
                PT[r * COLS + 4 * ((c >> 2) ^ dst_swz(r)) + (c & 3)] = dp[a][k];
            }
        __syncthreads();
        tile_products<DC, T::LD>(dk, GS, Qs, r0, cl, cols);
        // this key block's share of the tile's dQ: dS (queries x keys) times K (keys ascending)
        float dq[4][4 * MC];
#pragma unroll
        for (int a = 0; a < 4; a++)
#pragma unroll
            for (int d = 0; d < 4 * MC; d++) dq[a][d] = 0.0f;
#pragma unroll 4
        for (int r = 0; r < keys; r++) {
            const float4 p =
                *reinterpret_cast<const float4 *>(PT + r * COLS + 4 * ((qg >> 2) ^ dst_swz(r)));
            const size_t row = base + (size_t)(j0 + r) * HD;
#pragma unroll
            for (int m = 0; m < MC; m++) {
                const int d = dl + 4 * TPG * m;
                float4 kv = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
                if (vec) {
                    if (d < hd) kv = *reinterpret_cast<const float4 *>(K + row + d);
                } else {
                    kv.x = d < hd ? K[row + d] : 0.0f;
                    kv.y = d + 1 < hd ? K[row + d + 1] : 0.0f;
                    kv.z = d + 2 < hd ? K[row + d + 2] : 0.0f;
                    kv.w = d + 3 < hd ? K[row + d + 3] : 0.0f;
                }
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const float kd = f4at(kv, e);
                    dq[0][4 * m + e] = __fmaf_rn(p.x, kd, dq[0][4 * m + e]);
                    dq[1][4 * m + e] = __fmaf_rn(p.y, kd, dq[1][4 * m + e]);
                    dq[2][4 * m + e] = __fmaf_rn(p.z, kd, dq[2][4 * m + e]);
                    dq[3][4 * m + e] = __fmaf_rn(p.w, kd, dq[3][4 * m + e]);
                }
            }
        }
        const int rank = rank_s, slot = bh * Tq + qt;
        sink.wait(slot, rank);
#pragma unroll
        for (int a = 0; a < 4; a++) {
            const int i = i0 + qg + a;
            if (i >= n) continue;
#pragma unroll
            for (int m = 0; m < MC; m++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int d = dl + 4 * TPG * m + e;
                    if (d < hd) sink.add(base + (size_t)i * HD + d, dq[a][4 * m + e], rank);
                }
        }
        sink.done(slot, rank);
    }
    store_rows<DC>(dk, dK, base, j0, r0, cl, n, HD, hd);
    store_rows<DC>(dv, dV, base, j0, r0, cl, n, HD, hd);
}

}  // namespace
