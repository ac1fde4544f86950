// reduce_util.cuh: the one set of cross-thread reductions every CUDA kernel uses (reduce,
// softmax, norm, attention, conv, linalg).
//
// Fixed order, so a result depends only on the group width or blockDim.x, never on timing:
//   lanes: an xor butterfly over W aligned lanes with offsets W/2, W/4, ..., 1, after which
//          every lane holds the same bits;
//   block: each warp reduces its lanes, then every thread combines the per-warp results in
//          warp order 0, 1, 2, ... (blockDim.x a multiple of 32, at most 1024).
// One NaN rule: NaN propagates. Sums do by IEEE arithmetic; tl_max_nan returns NaN when either
// operand is NaN (fmaxf would drop it). The helpers are templates over the value type: a kernel
// reducing its own type (softmax's running max and sum) supplies tl_shfl_xor and a combine.
#pragma once

#include <cuda_runtime.h>

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
