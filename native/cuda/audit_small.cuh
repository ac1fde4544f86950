// audit_small.cuh: the block sum of the digest kernels and the kernel of a small digest batch,
// whose table (at most kSmallItems buffers of at most kSmallElements elements each) is its
// argument. Compiled by audit.cu, and for the CPU by tests/native/audit_emu.cpp (the CUDA
// emulation of tests/native/cuda_emu), so tests/test_audit_kernels.py checks it without a GPU.
#pragma once

#include <cstdint>
#include "formulas/audit.h"

namespace tl_audit {

// the sum of v over the block's TL_THREADS threads, in every thread; the block may call it again
__device__ inline uint64_t block_sum(uint64_t v) {
    static __shared__ uint64_t s[TL_THREADS];
    s[threadIdx.x] = v;
    __syncthreads();
    for (int w = TL_THREADS / 2; w > 0; w >>= 1) {
        if ((int)threadIdx.x < w) s[threadIdx.x] += s[threadIdx.x + w];
        __syncthreads();
    }
    uint64_t r = s[0];
    __syncthreads();
    return r;
}

constexpr int kSmallItems = 64;
constexpr int64_t kSmallElements = 1 << 16;

// a small batch's table, passed by value (1 KB of kernel parameters)
struct SmallBatch {
    unsigned long long ptr[kSmallItems];
    long long n[kSmallItems];
};

// block k: the digest of buffer k into rows[4k..4k+3], launched with TL_THREADS threads
__global__ void digest_small_kernel(const __grid_constant__ SmallBatch b,
                                    float *__restrict__ rows) {
    const int k = blockIdx.x;
    const uint32_t *w = reinterpret_cast<const uint32_t *>(b.ptr[k]);
    const int64_t n = b.n[k];
    uint64_t s = 0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += tlf_digest_term(i, w[i]);
    s = block_sum(s);
    if (threadIdx.x == 0) tlf_digest_store(rows + 4 * k, tlf_digest_final(s, n));
}

}  // namespace tl_audit
