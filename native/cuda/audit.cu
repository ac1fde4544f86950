// audit.cu (CUDA): the digest of a buffer's bits (formulas/audit.h). A grid-stride pass sums
// each thread's terms, a block adds its threads' sums in shared memory into one partial per
// block, and one block adds the partials and writes the final mix into the ring. Every sum is
// of unsigned 64-bit integers, so the grid shape never changes the digest: the stub's bits.
#include "common.cuh"
#include "formulas/audit.h"
#include "entry/audit_kernels.h"

namespace {

constexpr int kMaxBlocks = 1024;

// the sum of v over the block's TL_THREADS threads, in thread 0
__device__ uint64_t block_sum(uint64_t v) {
    __shared__ uint64_t s[TL_THREADS];
    s[threadIdx.x] = v;
    __syncthreads();
    for (int w = TL_THREADS / 2; w > 0; w >>= 1) {
        if ((int)threadIdx.x < w) s[threadIdx.x] += s[threadIdx.x + w];
        __syncthreads();
    }
    return s[0];
}

__global__ void digest_terms(const uint32_t *__restrict__ w, int64_t n, uint64_t *__restrict__ part) {
    uint64_t s = 0;
    TL_GRID_STRIDE(i, n) s += tlf_digest_term(i, w[i]);
    s = block_sum(s);
    if (threadIdx.x == 0) part[blockIdx.x] = s;
}

__global__ void digest_finish(const uint64_t *__restrict__ part, int64_t parts, int64_t n,
                              float *__restrict__ row) {
    uint64_t s = 0;
    for (int64_t b = threadIdx.x; b < parts; b += blockDim.x) s += part[b];
    s = block_sum(s);
    if (threadIdx.x == 0) tlf_digest_store(row, tlf_digest_final(s, n));
}

}  // namespace

extern "C" int tlk_digest(const char *op, tl_buf x, tl_buf ring, int64_t n, int64_t slots,
                          int64_t slot) {
    int64_t blocks = n ? (int64_t)tl_blocks(n) : 0;
    if (blocks > kMaxBlocks) blocks = kMaxBlocks;
    void *scratch = nullptr;
    if (blocks) TL_TRY(tl_scratch(op, (size_t)blocks * sizeof(uint64_t), &scratch));
    uint64_t *part = static_cast<uint64_t *>(scratch);
    if (blocks)
        digest_terms<<<(unsigned)blocks, TL_THREADS, 0, tl_stream()>>>(
            reinterpret_cast<const uint32_t *>(x->data), n, part);
    digest_finish<<<1, TL_THREADS, 0, tl_stream()>>>(part, blocks, n, ring->data + 4 * slot);
    if (scratch) tl_scratch_free(scratch);
    TL_LAUNCHED(op);
    return TL_OK;
}
