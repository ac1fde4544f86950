// bn_exact.cuh: exact mode's batchnorm (channel first) with its rule-4 channel sums computed in
// parallel: the chunks of every channel side by side (one thread per chunk of TLM_CHUNK
// elements, each summed sequentially from its first value), then the fixed tree over each
// channel's chunk sums (tl_exact_block_tree), then the per-element map on a flat grid. The
// bits are the stub's (stub/norm.c: a channel's elements sample by sample, e = b s + j, by
// rule 4 of tl_math.h; the arithmetic around the sums from formulas/normalize.h). Device code
// and the pass order: norm.cu launches these, tests/native/bn_exact_emu.cpp runs them on the
// CPU (tests/native/cuda_emu).
#pragma once

#include <stdint.h>
#include "tl_math.h"
#include "reduce_util.cuh"
#include "formulas/normalize.h"

namespace {

constexpr int BNX_CHUNK_THREADS = 64;  // chunks per block of bnx_chunks
constexpr int BNX_BATCH = 8;           // loads a chunk thread issues before adding them
enum { BNX_X = 0, BNX_SQDEV = 1, BNX_GRAD = 2 };

// chunks of n * s elements
__host__ __device__ inline int64_t bnx_chunks_of(int64_t cnt) { return (cnt + TLM_CHUNK - 1) / TLM_CHUNK; }

// part[ch nc + k] = the sequential sum of chunk k of channel ch (blockIdx.x) of: x (BNX_X);
// tlf_sqdev(x, mean[ch]) (BNX_SQDEV); g, and g * xhat into part2 (BNX_GRAD, a = g, b = xhat).
// Grid: channels x bnx_groups(nc) blocks of BNX_CHUNK_THREADS, channel-major.
__host__ __device__ inline int64_t bnx_groups(int64_t nc) {
    return (nc + BNX_CHUNK_THREADS - 1) / BNX_CHUNK_THREADS;
}

template <int KIND>
__global__ void __launch_bounds__(BNX_CHUNK_THREADS)
bnx_chunks(const float *__restrict__ a, const float *__restrict__ b, const float *__restrict__ mean,
           int64_t n, int64_t c, int64_t s, float *__restrict__ part, float *__restrict__ part2) {
    const int64_t cnt = n * s, nc = bnx_chunks_of(cnt), groups = bnx_groups(nc);
    const int64_t ch = blockIdx.x / groups;
    const int64_t k = (int64_t)(blockIdx.x % groups) * BNX_CHUNK_THREADS + threadIdx.x;
    if (k >= nc) return;
    const int64_t lo = k * TLM_CHUNK, hi = lo + TLM_CHUNK < cnt ? lo + TLM_CHUNK : cnt;
    const int64_t b0 = lo / s;
    int64_t j = lo - b0 * s, off = (b0 * c + ch) * s + j;  // element e = b s + j of the channel
    const float mu = KIND == BNX_SQDEV ? mean[ch] : 0.0f;
    float s1 = 0.0f, s2 = 0.0f;
    // BNX_BATCH loads in flight per thread, then their adds in order
    for (int64_t e0 = lo; e0 < hi; e0 += BNX_BATCH) {
        float va[BNX_BATCH], vb[BNX_BATCH];
#pragma unroll
        for (int u = 0; u < BNX_BATCH; u++) {
            if (e0 + u < hi) {
                va[u] = a[off];
                vb[u] = KIND == BNX_GRAD ? b[off] : 0.0f;
                off++;
                if (++j == s) { j = 0; off += (c - 1) * s; }  // the channel's plane of the next sample
            }
        }
#pragma unroll
        for (int u = 0; u < BNX_BATCH; u++) {
            if (e0 + u >= hi) break;
            float v1, v2 = 0.0f;
            if (KIND == BNX_X) v1 = va[u];
            else if (KIND == BNX_SQDEV) v1 = tlf_sqdev(va[u], mu);
            else { v1 = va[u]; v2 = tlm_mul(va[u], vb[u]); }
            if (e0 + u == lo) { s1 = v1; s2 = v2; }  // a chunk's sum starts from its first value
            else { s1 = tlm_add(s1, v1); s2 = tlm_add(s2, v2); }
        }
    }
    part[ch * nc + k] = s1;
    if (KIND == BNX_GRAD) part2[ch * nc + k] = s2;
}

// One block per channel: the tree over its nc chunk sums (in place), then the statistics:
// BNX_X: o1 = mean; BNX_SQDEV: o1 = var, o2 = inv_std, o3 = std; BNX_GRAD: o1 = the sum of g
// (dbeta), o2 = the sum of g * xhat (dgamma, from part2).
template <int KIND>
__global__ void bnx_tree(float *part, float *part2, int64_t nc, float inv_cnt, float eps, float *o1,
                         float *o2, float *o3) {
    const int64_t ch = blockIdx.x;
    const float r = tl_exact_block_tree(part + ch * nc, nc, TlExactSum{});
    float r2 = 0.0f;
    if (KIND == BNX_GRAD) r2 = tl_exact_block_tree(part2 + ch * nc, nc, TlExactSum{});
    if (threadIdx.x != 0) return;
    if (KIND == BNX_X) {
        o1[ch] = tlf_mean(r, inv_cnt);
    } else if (KIND == BNX_SQDEV) {
        const float var = tlf_mean(r, inv_cnt), sd = tlf_norm_std(var, eps);
        o1[ch] = var;
        o2[ch] = tlf_norm_inv(sd);
        o3[ch] = sd;
    } else {
        o1[ch] = r;
        o2[ch] = r2;
    }
}

// forward map: xhat and y of every element i (channel (i / s) mod c); I: the index type
template <class I>
__global__ void bnx_apply_fwd(const float *__restrict__ x, const float *__restrict__ gamma,
                              const float *__restrict__ beta, const float *__restrict__ mean,
                              const float *__restrict__ sd, float *__restrict__ y,
                              float *__restrict__ xhat, I total, I c, I s) {
    for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (I)gridDim.x * blockDim.x) {
        const I ch = (i / s) % c;
        const float xh = tlf_norm_xhat(x[i], mean[ch], sd[ch]);
        xhat[i] = xh;
        y[i] = tlf_affine(xh, gamma[ch], beta[ch]);
    }
}

// backward map: dx of every element from the channel sums (dbeta = sum g, dgamma = sum g xhat)
template <class I>
__global__ void bnx_apply_bwd(const float *__restrict__ g, const float *__restrict__ xhat,
                              const float *__restrict__ inv_std, const float *__restrict__ gamma,
                              const float *__restrict__ dbeta, const float *__restrict__ dgamma,
                              float *__restrict__ dx, I total, I c, I s, float fcnt, float inv_cnt) {
    for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (I)gridDim.x * blockDim.x) {
        const I ch = (i / s) % c;
        const float ga = gamma[ch];
        const float S1 = tlm_mul(dbeta[ch], ga), S2 = tlm_mul(dgamma[ch], ga);
        dx[i] = tlf_norm_dx(tlm_mul(g[i], ga), xhat[i], S1, S2, fcnt, inv_std[ch], inv_cnt);
    }
}

// ---------------------------------------------------------------- the passes (host side)
// Launched through L: L::chunks<KIND>(nc, a, b, mean, n, c, s, part, part2), L::tree<KIND>(nc,
// part, part2, inv_cnt, eps, o1, o2, o3), L::fwd(...) and L::bwd(...) (the apply kernels), each
// returning 0 or an error code. part and part2: c * nc floats of scratch; sd: c floats.

template <class L>
int bnx_forward(L &l, const float *x, const float *gamma, const float *beta, float *y, float *xhat,
                float *mean, float *var, float *inv_std, int64_t n, int64_t c, int64_t s, float eps,
                float *part, float *sd) {
    const int64_t nc = bnx_chunks_of(n * s);
    const float inv_cnt = (float)(1.0 / (double)(n * s));
    int st = l.template chunks<BNX_X>(nc, x, nullptr, nullptr, n, c, s, part, nullptr);
    if (!st) st = l.template tree<BNX_X>(nc, part, nullptr, inv_cnt, eps, mean, nullptr, nullptr);
    if (!st) st = l.template chunks<BNX_SQDEV>(nc, x, nullptr, mean, n, c, s, part, nullptr);
    if (!st) st = l.template tree<BNX_SQDEV>(nc, part, nullptr, inv_cnt, eps, var, inv_std, sd);
    if (!st) st = l.fwd(x, gamma, beta, mean, sd, y, xhat, n * c * s, c, s);
    return st;
}

template <class L>
int bnx_backward(L &l, const float *g, const float *xhat, const float *inv_std, const float *gamma,
                 float *dx, float *dgamma, float *dbeta, int64_t n, int64_t c, int64_t s,
                 float *part, float *part2) {
    const int64_t cnt = n * s, nc = bnx_chunks_of(cnt);
    int st = l.template chunks<BNX_GRAD>(nc, g, xhat, nullptr, n, c, s, part, part2);
    if (!st) st = l.template tree<BNX_GRAD>(nc, part, part2, 0.0f, 0.0f, dbeta, dgamma, nullptr);
    if (!st) st = l.bwd(g, xhat, inv_std, gamma, dbeta, dgamma, dx, n * c * s, c, s, (float)cnt,
                        cnt ? (float)(1.0 / (double)cnt) : 0.0f);
    return st;
}

}  // namespace
