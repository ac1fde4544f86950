// attention_exact.cuh: exact mode's attention kernels (head dims 1..128), tiled like the default
// kernels of attention_tiled.cuh and giving the bits of the stub's canonical order
// (native/stub/attention.c, rule 5 of tl_math.h). Device code only: attention.cu launches them,
// and tests/native/attention_tiled_emu.cpp runs the same source on the CPU against the stub.
// Needs attention_tiled.cuh (tiles, staging, products) and tl_math.h included before it.
//
// The blocks, threads and shared tiles are the default kernels' (64 rows a block, a row group of
// 8 lanes owning 4 rows); what changes is the arithmetic, which is the stub's, operation for
// operation:
//  - every score and dP is a rule-3 chain over the head dims in order from 0, exactly hd long
//    (no padding dims, no pre-scaled queries), then times the scale;
//  - forward (tiles of TLM_ATTN_TILE keys, in order): the tile max is the first maximal score
//    (a butterfly over (value, index) pairs, lower index on ties, so a -0/+0 tie picks the
//    stub's zero), alpha and p by tlm_exp, the tile's p summed in column order by each lane of
//    the row group (the same bits on all 8), acc = fma(p_j, v_j, acc) over the tile's keys in
//    order, blocked ones included (p = 0, as the stub);
//  - backward: dQ walks key tiles, dK/dV query tiles, in order, one fma chain per output from 0;
//    a blocked pair adds nothing (its fma is skipped, not made with 0), so tiles that hold one
//    take a guarded product loop;
//  - causal: a forward block skips the key tiles wholly after its queries. The stub walks them
//    with p = 0, and fma(0, v, acc) changes acc only when v is inf or NaN (acc becomes NaN) or
//    acc is -0 and v's sign bit is clear (acc becomes +0): the block records those two facts per
//    head dim over the skipped values and applies them at the end, the same bits for far less
//    work. The backward's skipped tiles hold only blocked pairs, which add nothing.
#pragma once

#include <math.h>
#include <stdint.h>

namespace {

static_assert(TLM_ATTN_TILE == TROWS, "exact forward: one key tile of rule 5 per staged tile");

template <int HDP> struct Exact {
    using T = Tiled<HDP>;
    // forward: the default kernel's tiles, then per-thread and per-dim flags of the skipped keys
    static constexpr size_t FWD_SMEM = T::FWD_SMEM + sizeof(int) * (TTHREADS + HDP);
};

// s[a][k] = the rule-3 chain over d < hd of XT[d][r0 + a] * Yc[cl + 8 k][d], continuing s
template <int CPT, int LDY>
__device__ __forceinline__ void exact_dots(float (&s)[4][CPT], const float *XT, const float *Yc,
                                           int r0, int cl, int hd) {
    const int hd4 = hd & ~3;
    tile_dots<CPT, LDY>(s, XT, Yc, r0, cl, hd4);
    for (int d = hd4; d < hd; d++) {
        const float4 x = *reinterpret_cast<const float4 *>(XT + d * TROWS + r0);
#pragma unroll
        for (int k = 0; k < CPT; k++) {
            const float yv = Yc[(cl + 8 * k) * LDY + d];
            s[0][k] = tlm_fma(x.x, yv, s[0][k]);
            s[1][k] = tlm_fma(x.y, yv, s[1][k]);
            s[2][k] = tlm_fma(x.z, yv, s[2][k]);
            s[3][k] = tlm_fma(x.w, yv, s[3][k]);
        }
    }
}

// a tile's pair bits: bit c of a row's mask is column c (32-bit masks for tiles of 32 columns)
template <int COLS> struct PairBits { using type = unsigned long long; };
template <> struct PairBits<32> { using type = unsigned; };

// bits[a] |= the same of the row group's other 7 lanes (every lane of the group calls it)
template <class Bits>
__device__ __forceinline__ void group_or(Bits (&bits)[4]) {
#pragma unroll
    for (int a = 0; a < 4; a++)
#pragma unroll
        for (int o = 1; o < 8; o <<= 1) bits[a] |= __shfl_xor_sync(0xffffffffu, bits[a], o);
}

// acc[a][.] = fma(P[c][r0 + a], Y[c][.], acc) over columns c < cols in order, skipping the pairs
// whose bit c of ok[a] is clear (blocked pairs add nothing)
template <int DC, int LDY, class Bits>
__device__ __forceinline__ void exact_products(float (&acc)[4][4 * DC], const float *P,
                                               const float *Y, int r0, int cl, int cols,
                                               const Bits (&ok)[4]) {
    constexpr int W = 8 * sizeof(Bits);
    const Bits full = cols >= W ? ~Bits(0) : (Bits(1) << cols) - 1;
    if ((ok[0] & ok[1] & ok[2] & ok[3] & full) == full) {
        tile_products<DC, LDY>(acc, P, Y, r0, cl, cols);
        return;
    }
    for (int c = 0; c < cols; c++) {
        const float4 p = *reinterpret_cast<const float4 *>(P + c * PTR + r0);
        const bool k0 = (ok[0] >> c) & 1, k1 = (ok[1] >> c) & 1, k2 = (ok[2] >> c) & 1,
                   k3 = (ok[3] >> c) & 1;
#pragma unroll
        for (int c4 = 0; c4 < DC; c4++) {
            const float4 y = *reinterpret_cast<const float4 *>(Y + c * LDY + 4 * cl + 32 * c4);
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const float yv = f4at(y, e);
                if (k0) acc[0][4 * c4 + e] = tlm_fma(p.x, yv, acc[0][4 * c4 + e]);
                if (k1) acc[1][4 * c4 + e] = tlm_fma(p.y, yv, acc[1][4 * c4 + e]);
                if (k2) acc[2][4 * c4 + e] = tlm_fma(p.z, yv, acc[2][4 * c4 + e]);
                if (k3) acc[3][4 * c4 + e] = tlm_fma(p.w, yv, acc[3][4 * c4 + e]);
            }
        }
    }
}

// What fma(0, v, acc) over values v of keys [j1, n) would do, per head dim d < hd, into
// colf[d]: bit 0, some v is inf or NaN; bit 1, some v has its sign bit clear. part holds
// TTHREADS ints. Every thread of the block calls it; colf is ready after the next barrier.
__device__ __forceinline__ int tail_flag(float v) {
    const int32_t b = tlm_to_bits(v);
    return ((b & 0x7f800000) == 0x7f800000 ? 1 : 0) | (b >= 0 ? 2 : 0);
}

__device__ __forceinline__ void tail_flags(int *part, int *colf, const float *__restrict__ V,
                                           size_t base, int j1, int n, int HD, int hd, bool vec) {
    const int units = vec ? hd / 4 : hd, reps = TTHREADS / units, t = threadIdx.x;
    int f = 0;
    if (t < reps * units) {
        const int d = (t % units) * (vec ? 4 : 1);
        for (int j = j1 + t / units; j < n; j += reps) {
            const float *p = V + base + (size_t)j * HD + d;
            if (vec) {
                const float4 v = *reinterpret_cast<const float4 *>(p);
                f |= tail_flag(v.x) | tail_flag(v.y) << 2 | tail_flag(v.z) << 4 | tail_flag(v.w) << 6;
            } else {
                f |= tail_flag(*p);
            }
        }
    }
    part[t] = f;
    __syncthreads();
    if (t < hd) {
        const int u = vec ? t / 4 : t, shift = vec ? 2 * (t % 4) : 0;
        int g = 0;
        for (int r = 0; r < reps; r++) g |= part[r * units + u] >> shift;
        colf[t] = g & 3;
    }
}

// Forward (rule 5): a block owns 64 queries and walks the keys in tiles of TLM_ATTN_TILE.
template <int HDP>
__global__ void __launch_bounds__(TTHREADS, Tiled<HDP>::FWD_BLOCKS) attn_fwd_exact(
    const float *__restrict__ Q, const float *__restrict__ K, const float *__restrict__ V,
    const float *__restrict__ mask, float *__restrict__ O, float *__restrict__ lse, int n, int H,
    int hd, float scale, bool causal, bool vec) {
    using T = Tiled<HDP>;
    constexpr int KEYS = TLM_ATTN_TILE, CPT = KEYS / 8, DC = T::DC;
    extern __shared__ float4 smem4[];
    float *QT = reinterpret_cast<float *>(smem4);                   // [HDP][64]
    float *KP = QT + HDP * TROWS;                                   // [64][LD] keys, [64][PTR] p
    float *Vs = KP + (KEYS * T::LD > KEYS * PTR ? KEYS * T::LD : KEYS * PTR);  // [64][HDP]
    int *part = reinterpret_cast<int *>(Vs + KEYS * HDP), *colf = part + TTHREADS;
    const int lane = threadIdx.x & 31, cl = lane & 7;
    const int r0 = (threadIdx.x >> 5) * 16 + (lane >> 3) * 4;
    const int HD = H * hd, bh = blockIdx.y, b = bh / H, h = bh % H;
    const int i0 = (causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x) * TROWS;
    const size_t base = (size_t)b * n * HD + (size_t)h * hd;
    const float neg_inf = tlm_from_bits((int32_t)0xff800000), nan = tlm_from_bits(0x7fc00000);
    const int jend = causal ? min(n, i0 + TROWS) : n;
    if (jend < n) tail_flags(part, colf, V, base, jend, n, HD, hd, vec);
    stage_rows_t<HDP>(QT, Q, base, i0, n, HD, hd, 1.0f, vec);
    float m[4], l[4], o[4][4 * DC];
    bool bad[4];  // a NaN score among this lane's allowed pairs of the row
#pragma unroll
    for (int a = 0; a < 4; a++) {
        m[a] = neg_inf;
        l[a] = 0.0f;
        bad[a] = false;
#pragma unroll
        for (int d = 0; d < 4 * DC; d++) o[a][d] = 0.0f;
    }
    for (int j0 = 0; j0 < jend; j0 += KEYS) {
        const int nt = min(KEYS, n - j0);
        __syncthreads();  // the previous tile's reads of KP and Vs are done
        stage_cols<HDP, KEYS, T::LD>(KP, K, base, j0, n, HD, hd, vec);
        stage_cols<HDP, KEYS, HDP>(Vs, V, base, j0, n, HD, hd, vec);
        __syncthreads();
        float s[4][CPT];
#pragma unroll
        for (int a = 0; a < 4; a++)
#pragma unroll
            for (int k = 0; k < CPT; k++) s[a][k] = 0.0f;
        exact_dots<CPT, T::LD>(s, QT, KP, r0, cl, hd);
        float alpha[4];
#pragma unroll
        for (int a = 0; a < 4; a++) {
            const int i = i0 + r0 + a;
            // the tile's first maximal score: this lane's columns ascending, then the group
            float tv = neg_inf, tj = (float)KEYS;
#pragma unroll
            for (int k = 0; k < CPT; k++) {
                const int c = cl + 8 * k, j = j0 + c;
                float v = neg_inf;
                if (c < nt && i < n && attends(mask, causal, n, i, j)) v = tlm_mul(s[a][k], scale);
                bad[a] |= v != v;
                s[a][k] = v;
                if (v > tv) { tv = v; tj = (float)c; }
            }
#pragma unroll
            for (int off = 1; off < 8; off <<= 1) {
                const float ov = __shfl_xor_sync(0xffffffffu, tv, off);
                const float oj = __shfl_xor_sync(0xffffffffu, tj, off);
                if (ov > tv || (ov == tv && oj < tj)) { tv = ov; tj = oj; }
            }
            const float mn = tv > m[a] ? tv : m[a];
            const bool none = mn == neg_inf;
            alpha[a] = m[a] == mn ? 1.0f : tlm_exp(tlm_sub(m[a], mn));
#pragma unroll
            for (int k = 0; k < CPT; k++) s[a][k] = none ? 0.0f : tlm_exp(tlm_sub(s[a][k], mn));
            m[a] = mn;
        }
        __syncthreads();  // every thread is done reading the keys: KP takes the probabilities
        put_tile<CPT>(KP, s, r0, cl);
        __syncthreads();
        // l = l alpha + (p_0 + p_1 + ... in column order), on each lane of the row group
        float4 t = *reinterpret_cast<const float4 *>(KP + r0);
        for (int c = 1; c < nt; c++) {
            const float4 p = *reinterpret_cast<const float4 *>(KP + c * PTR + r0);
            t = make_float4(tlm_add(t.x, p.x), tlm_add(t.y, p.y), tlm_add(t.z, p.z), tlm_add(t.w, p.w));
        }
        l[0] = tlm_add(tlm_mul(l[0], alpha[0]), t.x);
        l[1] = tlm_add(tlm_mul(l[1], alpha[1]), t.y);
        l[2] = tlm_add(tlm_mul(l[2], alpha[2]), t.z);
        l[3] = tlm_add(tlm_mul(l[3], alpha[3]), t.w);
#pragma unroll
        for (int a = 0; a < 4; a++)
#pragma unroll
            for (int d = 0; d < 4 * DC; d++) o[a][d] = tlm_mul(o[a][d], alpha[a]);
        tile_products<DC, HDP>(o, KP, Vs, r0, cl, nt);
    }
#pragma unroll
    for (int a = 0; a < 4; a++) {
#pragma unroll
        for (int off = 1; off < 8; off <<= 1)
            bad[a] |= __shfl_xor_sync(0xffffffffu, bad[a] ? 1.0f : 0.0f, off) != 0.0f;
#pragma unroll
        for (int c4 = 0; c4 < DC; c4++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int d = 4 * cl + 32 * c4 + e;
                float &x = o[a][4 * c4 + e];
                if (jend < n && d < hd) {  // the skipped keys' fma(0, v, acc)
                    const int f = colf[d];
                    if (f & 1) x = nan;
                    else if ((f & 2) && tlm_to_bits(x) == (int32_t)0x80000000) x = 0.0f;
                }
                x = bad[a] ? nan : l[a] == 0.0f ? 0.0f : tlm_div(x, l[a]);
            }
        const int i = i0 + r0 + a;
        if (cl == 0 && i < n)
            lse[(size_t)bh * n + i] = tlm_attn_lse(m[a], l[a], bad[a]);
    }
    store_rows<DC>(o, O, base, i0, r0, cl, n, HD, hd);
}

// D_i = dot(dO_i, O_i) (rule 3) per (sample, head, row): one thread per row
__global__ void attn_rowdot_exact(const float *__restrict__ dO, const float *__restrict__ O,
                                  float *__restrict__ D, int64_t rows, int n, int H, int hd) {
    const int64_t HD = (int64_t)H * hd;
    for (int64_t r = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; r < rows;
         r += (int64_t)gridDim.x * blockDim.x) {
        const int64_t b = r / ((int64_t)H * n), h = (r / n) % H, i = r % n;
        const int64_t off = (b * n + i) * HD + h * hd;
        D[r] = tlm_dot(dO + off, 1, O + off, 1, hd, 0.0f);
    }
}

// p and dS of one (query, key) pair from its score s and dP (both rule-3 chains) and the
// query's lse and D, as the stub's tlm_attn_prob/dscore: s becomes p, dp becomes dS
__device__ __forceinline__ void exact_pair(float &s, float &dp, float L, float Dv, float scale) {
    const float p = tlm_attn_prob(tlm_mul(s, scale), L);
    dp = tlm_attn_dscore(p, dp, Dv, scale);
    s = p;
}

// dQ: a block owns 64 queries and walks the keys in tiles of 8 DQ_CPT, in order:
// dQ_i = sum over allowed keys j in order of dS_ij k_j, one fma chain from 0.
template <int HDP>
__global__ void __launch_bounds__(TTHREADS, Tiled<HDP>::DQ_BLOCKS) attn_dq_exact(
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
    blk.stage_own(Q, 1.0f, dO, i0, vec);
    float L[4], Di[4], acc[4][4 * DC];
    blk.own_stats(L, Di, lse, D, i0);
#pragma unroll
    for (int a = 0; a < 4; a++)
#pragma unroll
        for (int d = 0; d < 4 * DC; d++) acc[a][d] = 0.0f;
    // causal: keys after the block's last query meet only blocked pairs
    const int jend = causal ? min(n, i0 + TROWS) : n;
    for (int j0 = 0; j0 < jend; j0 += COLS) {
        blk.stage_tile(K, V, j0, vec);
        float s[4][CPT], dp[4][CPT];
#pragma unroll
        for (int a = 0; a < 4; a++)
#pragma unroll
            for (int k = 0; k < CPT; k++) s[a][k] = dp[a][k] = 0.0f;
        exact_dots<CPT, T::LD>(s, QT, Ks, r0, cl, hd);
        exact_dots<CPT, T::LD>(dp, GT, VS, r0, cl, hd);
        using Bits = typename PairBits<COLS>::type;
        Bits ok[4];
#pragma unroll
        for (int a = 0; a < 4; a++) {
            const int i = i0 + r0 + a;
            ok[a] = i < n ? Bits(0) : ~Bits(0);  // rows past n are never stored: no guard for them
#pragma unroll
            for (int k = 0; k < CPT; k++) {
                const int c = cl + 8 * k, j = j0 + c;
                exact_pair(s[a][k], dp[a][k], L[a], Di[a], scale);
                if (i < n && j < n && attends(mask, causal, n, i, j)) ok[a] |= Bits(1) << c;
            }
        }
        group_or(ok);
        __syncthreads();  // every thread is done reading the values: VS takes dS
        put_tile<CPT>(VS, dp, r0, cl);
        __syncthreads();
        exact_products<DC, T::LD>(acc, VS, Ks, r0, cl, min(COLS, n - j0), ok);
    }
    store_rows<DC>(acc, dQ, base, i0, r0, cl, n, HD, hd);
}

// dK, dV: a block owns 64 keys and walks the queries in tiles of 8 DKV_CPT, in order:
// dV_j = sum over allowed queries i of P_ij dO_i and dK_j = sum of dS_ij q_i, chains from 0.
template <int HDP>
__global__ void __launch_bounds__(TTHREADS, Tiled<HDP>::DKV_BLOCKS) attn_dkv_exact(
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
    blk.stage_own(K, 1.0f, V, j0, vec);
    float dk[4][4 * DC], dv[4][4 * DC];
#pragma unroll
    for (int a = 0; a < 4; a++)
#pragma unroll
        for (int d = 0; d < 4 * DC; d++) dk[a][d] = dv[a][d] = 0.0f;
    // causal: queries before the block's first key meet only blocked pairs
    for (int i0 = causal ? j0 / COLS * COLS : 0; i0 < n; i0 += COLS) {
        blk.stage_tile(Q, dO, i0, vec, lse, D);
        float s[4][CPT], dp[4][CPT];
#pragma unroll
        for (int a = 0; a < 4; a++)
#pragma unroll
            for (int k = 0; k < CPT; k++) s[a][k] = dp[a][k] = 0.0f;
        exact_dots<CPT, T::LD>(s, KT, Qs, r0, cl, hd);   // fma(k, q, .) is fma(q, k, .)
        exact_dots<CPT, T::LD>(dp, VT, GS, r0, cl, hd);
        using Bits = typename PairBits<COLS>::type;
        Bits ok[4];
#pragma unroll
        for (int a = 0; a < 4; a++) {
            const int j = j0 + r0 + a;
            ok[a] = j < n ? Bits(0) : ~Bits(0);  // keys past n are never stored: no guard for them
#pragma unroll
            for (int k = 0; k < CPT; k++) {
                const int c = cl + 8 * k, i = i0 + c;
                exact_pair(s[a][k], dp[a][k], Ls[c], Ds[c], scale);
                if (i < n && j < n && attends(mask, causal, n, i, j)) ok[a] |= Bits(1) << c;
            }
        }
        group_or(ok);
        const int cols = min(COLS, n - i0);
        put_tile<CPT>(PT, s, r0, cl);  // PT's last readers passed this tile's first barrier
        __syncthreads();
        exact_products<DC, T::LD>(dv, PT, GS, r0, cl, cols, ok);
        __syncthreads();  // every thread is done reading dO: GS takes dS
        put_tile<CPT>(GS, dp, r0, cl);
        __syncthreads();
        exact_products<DC, T::LD>(dk, GS, Qs, r0, cl, cols, ok);
    }
    store_rows<DC>(dk, dK, base, j0, r0, cl, n, HD, hd);
    store_rows<DC>(dv, dV, base, j0, r0, cl, n, HD, hd);
}

}  // namespace
