// reduce_util.cuh: the one set of cross-thread reductions every CUDA kernel uses (reduce,
// softmax, norm, attention, conv, linalg).
//
// Fixed order, so a result depends only on the group width or blockDim.x, never on timing:
//   lanes: an xor butterfly over W aligned lanes with offsets W/2, W/4, ..., 1, after which
//          every lane holds the same bits;
//   block: each warp reduces its lanes, then every thread combines the per-warp results in
//          warp order 0, 1, 2, ... (blockDim.x a multiple of 32, at most 1024).
// Exact mode does not use these trees: its reductions (the tl_exact_* helpers at the end) follow
// rule 4 of tl_math.h, chunks of TLM_CHUNK summed sequentially and then tlm_tree_sum's tree, so
// they give the stub's bits.
// One NaN rule: NaN propagates. Sums do by IEEE arithmetic; tl_max_nan returns NaN when either
// operand is NaN (fmaxf would drop it). The helpers are templates over the value type: a kernel
// reducing its own type supplies tl_shfl_xor and a combine.
#pragma once

#include <cuda_runtime.h>
#include "tl_math.h"

__device__ __forceinline__ float tl_max_nan(float a, float b) {
    return (a != a || b != b) ? a + b : (b > a ? b : a);
}

struct TlSum {
    __device__ __forceinline__ float operator()(float a, float b) const { return a + b; }
};
struct TlMax {
    __device__ __forceinline__ float operator()(float a, float b) const { return tl_max_nan(a, b); }
};

__device__ __forceinline__ float tl_shfl_xor(unsigned mask, float v, int o) {
    return __shfl_xor_sync(mask, v, o);
}

// reduce over W aligned lanes (W a power of two <= 32); every lane of the group must call it
template <int W, class T, class Op>
__device__ __forceinline__ T tl_lanes_reduce(T v, Op op) {
    static_assert(W >= 1 && W <= 32 && (W & (W - 1)) == 0, "W must be a power of two <= 32");
    const unsigned mask =
        W == 32 ? 0xffffffffu : ((1u << W) - 1u) << ((threadIdx.x & 31u) & ~(unsigned)(W - 1));
#pragma unroll
    for (int o = W / 2; o > 0; o >>= 1) v = op(v, tl_shfl_xor(mask, v, o));
    return v;
}

// combine the first `warps` warps' lane results in warp order; every thread of the block calls it
template <class T, class Op>
__device__ __forceinline__ T tl_warps_reduce(T v, Op op, int warps) {
    __shared__ T part[32];
    v = tl_lanes_reduce<32>(v, op);
    __syncthreads();  // part may still be read from the previous call
    if ((threadIdx.x & 31u) == 0) part[threadIdx.x >> 5] = v;
    __syncthreads();
    T r = part[0];
    for (int w = 1; w < warps; w++) r = op(r, part[w]);
    return r;
}

// G = 1..32: aligned lane groups; G > 32: the whole block, G == blockDim.x
template <int G, class T, class Op>
__device__ __forceinline__ T tl_group_reduce(T v, Op op) {
    if constexpr (G <= 32) return tl_lanes_reduce<G>(v, op);
    else return tl_warps_reduce(v, op, G / 32);
}

template <int G> __device__ __forceinline__ float tl_group_sum(float v) { return tl_group_reduce<G>(v, TlSum{}); }
template <int G> __device__ __forceinline__ float tl_group_max(float v) { return tl_group_reduce<G>(v, TlMax{}); }
__device__ __forceinline__ float tl_block_sum(float v) { return tl_warps_reduce(v, TlSum{}, blockDim.x >> 5); }
__device__ __forceinline__ float tl_block_max(float v) { return tl_warps_reduce(v, TlMax{}, blockDim.x >> 5); }

// ---- exact mode: rule 4 of tl_math.h computed by a block ----

struct TlExactSum {
    __device__ __forceinline__ float operator()(float a, float b) const { return tlm_add(a, b); }
};
// the maximum of ordered operands (a earlier): the first of equal values wins, NaN propagates
struct TlExactMax {
    __device__ __forceinline__ float operator()(float a, float b) const { return tl_max_nan(a, b); }
};
// tlm_max_first: the first of equal values wins, NaN never replaces (softmax's row max)
struct TlExactMaxFirst {
    __device__ __forceinline__ float operator()(float a, float b) const { return tlm_max_first(a, b); }
};

// tlm_tree_sum's tree over p[0..count) (shared or global memory), computed in place by the
// whole block: at distance step = 1, 2, 4, ..., p[i] (i a multiple of 2 step) absorbs
// p[i + step]. Those are the pairs of tlm_tree_sum's level log2(step), and an odd last partial
// stays where it is, which is the carry. Every thread calls it; every thread gets the result.
template <class Op>
__device__ float tl_exact_block_tree(float *p, int64_t count, Op op) {
    __syncthreads();  // the partials were written by other threads
    for (int64_t step = 1; step < count; step *= 2) {
        for (int64_t i = 2 * step * threadIdx.x; i + step < count; i += 2 * step * blockDim.x)
            p[i] = op(p[i], p[i + step]);
        __syncthreads();
    }
    float r = count > 0 ? p[0] : 0.0f;
    __syncthreads();  // p may be reused once everyone has read the result
    return r;
}

// Rule 4 over the values f(0), ..., f(n - 1) by the whole block: thread t reduces chunks
// t, t + blockDim.x, ... sequentially from each chunk's first value into part[c] (part holds
// ceil(n / TLM_CHUNK) floats), then tl_exact_block_tree. n == 0 gives 0.
template <class F, class Op>
__device__ float tl_exact_block_reduce(F f, int64_t n, float *part, Op op) {
    const int64_t nc = (n + TLM_CHUNK - 1) / TLM_CHUNK;
    for (int64_t c = threadIdx.x; c < nc; c += blockDim.x) {
        int64_t lo = c * TLM_CHUNK, hi = lo + TLM_CHUNK < n ? lo + TLM_CHUNK : n;
        float s = f(lo);
        for (int64_t e = lo + 1; e < hi; e++) s = op(s, f(e));
        part[c] = s;
    }
    return tl_exact_block_tree(part, nc, op);
}

// Launch shape of a block-per-row exact kernel for rows of n values: threads = the chunk count
// rounded up to a power of two, 32..256; partials in dynamic shared memory when they fit
// (TL_EXACT_SMEM_CHUNKS), else in a global scratch of one slice per row (the kernel's gpart).
#define TL_EXACT_SMEM_CHUNKS 8192
static __host__ __device__ inline int64_t tl_exact_chunks(int64_t n) { return (n + TLM_CHUNK - 1) / TLM_CHUNK; }
static inline int tl_exact_threads(int64_t n) {
    int64_t nc = tl_exact_chunks(n);
    int t = 32;
    while (t < 256 && t < nc) t *= 2;
    return t;
}
static inline size_t tl_exact_smem(int64_t n) {
    int64_t nc = tl_exact_chunks(n);
    return nc <= TL_EXACT_SMEM_CHUNKS ? (size_t)(nc > 0 ? nc : 1) * sizeof(float) : 0;
}

// ---- the two schedules of a block-per-row sum (the generated normalize kernels) ----

// The row's sum of f(0), ..., f(n - 1): rule 4 in exact mode (part: tl_exact_part), else each
// thread's chain over j = t, t + blockDim.x, ... then tl_block_sum (fixed order, not rule 4).
template <bool EXACT, class F>
__device__ __forceinline__ float tl_row_sum(F f, int64_t n, float *part) {
    if constexpr (EXACT) {
        return tl_exact_block_reduce(f, n, part, TlExactSum{});
    } else {
        float s = 0.0f;
        for (int64_t j = threadIdx.x; j < n; j += blockDim.x) s = tlm_add(s, f(j));
        return tl_block_sum(s);
    }
}
// threads of a default-mode block per row of n values: n rounded up to a power of two, 32..256
static inline int tl_rows_threads(int64_t n) {
    int t = 32;
    while (t < 256 && t < n) t *= 2;
    return t;
}
