// attention_exact_rows.cuh (CUDA): exact mode's attention kernels for head dims above 128,
// where the tiled kernels of attention_exact.cuh run out of registers: one warp per row, the
// stub's order (native/stub/attention.c). Included by attention.cu.
#pragma once

#include "common.cuh"
#include "tl_math.h"
#include "attention_tiled.cuh"

namespace {

// Head dims above 128 (past the tiled kernels' registers): one warp owns one row. Its lanes
// compute the row's dot products for 32 or 64 keys (queries) at once, each a whole rule-3
// chain, then accumulate the row's head dims (lane + 32 c) in key order. A row's dims are taken
// EX_DCHUNK at a time (the softmax state is recomputed per chunk, identically). Causal pairs
// are blocked like masked ones: the forward keeps every key (as the stub), the backward skips
// the runs of keys (queries) that are all blocked, which add nothing.
constexpr int EX_WARPS = 4;         // rows per block
constexpr int EX_DCHUNK = 256;      // head dims per pass: 8 registers per lane
constexpr int EX_PER_LANE = EX_DCHUNK / 32;
constexpr unsigned EX_FULL = 0xffffffffu;

inline unsigned ex_blocks(int64_t rows) {
    int64_t nb = (rows + EX_WARPS - 1) / EX_WARPS;
    return (unsigned)(nb < (1 << 20) ? nb : (1 << 20));
}

__device__ __forceinline__ bool ex_blocked(const float *M, bool causal, int64_t n, int64_t i, int64_t j) {
    return !attends(M, causal, n, i, j);
}

// forward: rule 5 per (sample, head, query row); tlm_osm_tile's steps with its exps spread
// over the lanes (same operations, same order)
__global__ void __launch_bounds__(EX_WARPS * 32) exact_fwd_kernel(
    const float *__restrict__ Q, const float *__restrict__ K, const float *__restrict__ V,
    const float *__restrict__ M, float *__restrict__ O, float *__restrict__ L, int64_t B, int64_t n,
    int64_t H, int64_t hd, float scale, bool causal) {
    __shared__ float tile[EX_WARPS][TLM_ATTN_TILE];
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    const int64_t HD = H * hd, rows = B * H * n;
    const float neg_inf = tlm_from_bits((int32_t)0xff800000), nan = tlm_from_bits(0x7fc00000);
    float *s = tile[w];
    for (int64_t row = (int64_t)blockIdx.x * EX_WARPS + w; row < rows; row += (int64_t)gridDim.x * EX_WARPS) {
        int64_t bb = row / (H * n), hh = (row / n) % H, i = row % n;
        const float *qi = Q + (bb * n + i) * HD + hh * hd;
        const float *Kb = K + bb * n * HD + hh * hd, *Vb = V + bb * n * HD + hh * hd;
        float *oi = O + (bb * n + i) * HD + hh * hd;
        for (int64_t d0 = 0; d0 < hd; d0 += EX_DCHUNK) {
            float acc[EX_PER_LANE];
#pragma unroll
            for (int c = 0; c < EX_PER_LANE; c++) acc[c] = 0.0f;
            tlm_osm st;
            tlm_osm_init(&st);
            bool nan_seen = false;
            for (int64_t j0 = 0; j0 < n; j0 += TLM_ATTN_TILE) {
                int nt = (int)(n - j0 < TLM_ATTN_TILE ? n - j0 : TLM_ATTN_TILE);
                bool mine = false;
                for (int jj = lane; jj < nt; jj += 32) {
                    float sj = ex_blocked(M, causal, n, i, j0 + jj) ? neg_inf
                                                            : tlm_attn_score(qi, Kb + (j0 + jj) * HD, hd, scale);
                    mine |= sj != sj;
                    s[jj] = sj;
                }
                nan_seen |= __any_sync(EX_FULL, mine) != 0;
                __syncwarp();
                float m_new = st.m;
                for (int jj = 0; jj < nt; jj++) m_new = s[jj] > m_new ? s[jj] : m_new;
                bool none = m_new == neg_inf;
                float alpha = (st.m == m_new) ? 1.0f : tlm_exp(tlm_sub(st.m, m_new));
                __syncwarp();
                for (int jj = lane; jj < nt; jj += 32) s[jj] = none ? 0.0f : tlm_exp(tlm_sub(s[jj], m_new));
                __syncwarp();
                float t = s[0];
                for (int jj = 1; jj < nt; jj++) t = tlm_add(t, s[jj]);
                st.l = tlm_add(tlm_mul(st.l, alpha), t);
                st.m = m_new;
#pragma unroll
                for (int c = 0; c < EX_PER_LANE; c++) acc[c] = tlm_mul(acc[c], alpha);
                for (int jj = 0; jj < nt; jj++) {
                    const float pj = s[jj], *vj = Vb + (j0 + jj) * HD;
#pragma unroll
                    for (int c = 0; c < EX_PER_LANE; c++) {
                        int64_t d = d0 + lane + 32 * c;
                        if (d < hd) acc[c] = tlm_fma(pj, vj[d], acc[c]);
                    }
                }
                __syncwarp();
            }
#pragma unroll
            for (int c = 0; c < EX_PER_LANE; c++) {
                int64_t d = d0 + lane + 32 * c;
                if (d < hd) oi[d] = nan_seen ? nan : tlm_osm_finish(&st, acc[c]);
            }
            if (d0 == 0 && lane == 0)
                L[row] = tlm_attn_lse(st.m, st.l, nan_seen);
        }
    }
}

// key_rows = 0: dQ_i = sum_j ds_ij k_j over keys in order (G1 = dQ);
// key_rows = 1: dK_j = sum_i ds_ij q_i and dV_j = sum_i p_ij dO_i over queries (G1 = dK, G2 = dV).
// Lane l computes the pair (row, c0 + l); masked pairs add nothing.
__global__ void __launch_bounds__(EX_WARPS * 32) exact_grad_kernel(
    int key_rows, const float *__restrict__ Q, const float *__restrict__ K, const float *__restrict__ V,
    const float *__restrict__ dO, const float *__restrict__ L, const float *__restrict__ D,
    const float *__restrict__ M, float *__restrict__ G1, float *__restrict__ G2, int64_t B, int64_t n,
    int64_t H, int64_t hd, float scale, bool causal) {
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    const int64_t HD = H * hd, rows = B * H * n;
    for (int64_t row = (int64_t)blockIdx.x * EX_WARPS + w; row < rows; row += (int64_t)gridDim.x * EX_WARPS) {
        int64_t bb = row / (H * n), bh = row / n, r = row % n;
        const int64_t base = bb * n * HD + (bh % H) * hd;   // (sample, head) block, row 0
        for (int64_t d0 = 0; d0 < hd; d0 += EX_DCHUNK) {
            float g1[EX_PER_LANE], g2[EX_PER_LANE];
#pragma unroll
            for (int c = 0; c < EX_PER_LANE; c++) { g1[c] = 0.0f; g2[c] = 0.0f; }
            // causal: query row r meets keys <= r, key row r queries >= r (the rest add nothing)
            const int64_t c_lo = causal && key_rows ? r / 32 * 32 : 0, c_hi = causal && !key_rows ? r + 1 : n;
            for (int64_t c0 = c_lo; c0 < c_hi; c0 += 32) {
                int64_t other = c0 + lane;
                int64_t i = key_rows ? other : r, j = key_rows ? r : other;
                bool ok = other < n && !ex_blocked(M, causal, n, i, j);
                float p = 0.0f, ds = 0.0f;
                if (ok) {
                    const int64_t qo = base + i * HD, ko = base + j * HD;
                    float sc = tlm_attn_score(Q + qo, K + ko, hd, scale);
                    p = tlm_attn_prob(sc, L[bh * n + i]);
                    float dp = tlm_dot(dO + qo, 1, V + ko, 1, hd, 0.0f);
                    ds = tlm_attn_dscore(p, dp, D[bh * n + i], scale);
                }
                unsigned okm = __ballot_sync(EX_FULL, ok);
                int cnt = (int)(n - c0 < 32 ? n - c0 : 32);
                for (int cc = 0; cc < cnt; cc++) {
                    float pv = __shfl_sync(EX_FULL, p, cc), dsv = __shfl_sync(EX_FULL, ds, cc);
                    if (!((okm >> cc) & 1u)) continue;
                    const int64_t co = base + (c0 + cc) * HD;
                    if (key_rows) {
#pragma unroll
                        for (int c = 0; c < EX_PER_LANE; c++) {
                            int64_t d = d0 + lane + 32 * c;
                            if (d < hd) {
                                g1[c] = tlm_fma(dsv, Q[co + d], g1[c]);
                                g2[c] = tlm_fma(pv, dO[co + d], g2[c]);
                            }
                        }
                    } else {
#pragma unroll
                        for (int c = 0; c < EX_PER_LANE; c++) {
                            int64_t d = d0 + lane + 32 * c;
                            if (d < hd) g1[c] = tlm_fma(dsv, K[co + d], g1[c]);
                        }
                    }
                }
            }
#pragma unroll
            for (int c = 0; c < EX_PER_LANE; c++) {
                int64_t d = d0 + lane + 32 * c;
                if (d < hd) {
                    G1[base + r * HD + d] = g1[c];
                    if (key_rows) G2[base + r * HD + d] = g2[c];
                }
            }
        }
    }
}

}  // namespace
