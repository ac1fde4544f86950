// audit.cu (CUDA): the digest of a buffer's bits (formulas/audit.h). A grid-stride pass sums
// each thread's terms, a block adds its threads' sums in shared memory into one partial per
// block, and one block adds the partials and writes the final mix into the ring. Every sum is
// of unsigned 64-bit integers, so the grid shape never changes the digest: the stub's bits.
//
// digest_batch: one launch for a whole batch. Each buffer is cut into chunks of kChunk elements
// (at least one, so an empty buffer is finished too); a grid-stride loop over all chunks finds
// each chunk's buffer by binary search over the chunk offsets, sums its terms, adds the block's
// sum into the buffer's total (an integer atomicAdd: order-free, so the same sum), and the block
// that finishes a buffer's last chunk writes its digest. The table (pointer, length, first
// chunk), the totals and the counters go up in one upload.
//
// A small batch (audit_small.cuh: at most 64 buffers of at most 2^16 elements each, as a training
// step's batches of a small model are) skips that upload and the scratch: its table is the
// kernel's argument, and one block per buffer sums its terms and writes its digest. Only the
// host's cost differs (one launch, no copy, no event): the sums, so the digests, are the same.
#include <cstdlib>
#include "common.cuh"
#include "audit_small.cuh"
#include "formulas/audit.h"
#include "generated/audit_kernels.h"

namespace {

using tl_audit::block_sum;

constexpr int kMaxBlocks = 1024;

constexpr int64_t kChunk = 16 * TL_THREADS;   // elements one block sums at a time (batch)

// one buffer of a batch, as uploaded: its payload, its length and its first chunk's index
struct BatchItem {
    unsigned long long ptr;
    long long n;
    long long chunk0;
};

__global__ void digest_batch_kernel(const BatchItem *__restrict__ items, int64_t count,
                                    int64_t chunks, unsigned long long *__restrict__ total,
                                    unsigned long long *__restrict__ done, float *__restrict__ rows) {
    __shared__ int64_t k_s;
    for (int64_t c = blockIdx.x; c < chunks; c += gridDim.x) {
        if (threadIdx.x == 0) {   // the last item whose first chunk is <= c
            int64_t lo = 0, hi = count - 1;
            while (lo < hi) {
                int64_t mid = (lo + hi + 1) / 2;
                if (items[mid].chunk0 <= c) lo = mid; else hi = mid - 1;
            }
            k_s = lo;
        }
        __syncthreads();
        const int64_t k = k_s;
        const BatchItem it = items[k];
        const uint32_t *w = reinterpret_cast<const uint32_t *>(it.ptr);
        const int64_t start = (c - it.chunk0) * kChunk;
        const int64_t end = start + kChunk < it.n ? start + kChunk : it.n;
        uint64_t s = 0;
        for (int64_t i = start + threadIdx.x; i < end; i += blockDim.x) s += tlf_digest_term(i, w[i]);
        s = block_sum(s);   // (its syncs also keep k_s until every thread has read it)
        if (threadIdx.x == 0) {
            atomicAdd(&total[k], (unsigned long long)s);
            __threadfence();
            const int64_t mine = it.n ? (it.n + kChunk - 1) / kChunk : 1;
            if ((int64_t)atomicAdd(&done[k], 1ULL) == mine - 1) {   // the buffer's last chunk
                __threadfence();
                const uint64_t sum = atomicAdd(&total[k], 0ULL);
                tlf_digest_store(rows + 4 * k, tlf_digest_final(sum, it.n));
            }
        }
    }
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

extern "C" int tlk_digest_batch(const char *op, tl_buf ring, const int64_t *handles,
                                int64_t handles_len, int64_t count, int64_t slots, int64_t first) {
    if (count == 0) return TL_OK;
    bool small = count <= tl_audit::kSmallItems;
    for (int64_t k = 0; k < count; k++) {
        tl_buf b = (tl_buf)(intptr_t)handles[k];
        if (!b || !b->live) {
            if (!b) return tl_fail(TL_E_ARG, "%s: handles[%lld] is a null buffer", op, (long long)k);
            return tl_fail(TL_E_RELEASED, "%s: handles[%lld] (a buffer of %lld elements) was "
                           "already released", op, (long long)k, (long long)b->n);
        }
        if (b->n > tl_audit::kSmallElements) small = false;
    }
    if (small) {
        tl_audit::SmallBatch t;
        for (int64_t k = 0; k < count; k++) {
            tl_buf b = (tl_buf)(intptr_t)handles[k];
            t.ptr[k] = (unsigned long long)(uintptr_t)b->data;
            t.n[k] = b->n;
        }
        tl_audit::digest_small_kernel<<<(unsigned)count, TL_THREADS, 0, tl_stream()>>>(
            t, ring->data + 4 * first);
        TL_LAUNCHED(op);
        return TL_OK;
    }
    // the table, then the totals and the counters (zeros), uploaded together
    const size_t bytes = (size_t)count * (sizeof(BatchItem) + 2 * sizeof(unsigned long long));
    BatchItem *host = static_cast<BatchItem *>(calloc(1, bytes));
    if (!host) return tl_fail(TL_E_OOM, "%s: no host memory for a table of %lld buffers", op,
                              (long long)count);
    int64_t chunks = 0;
    for (int64_t k = 0; k < count; k++) {   // (every handle was checked above)
        tl_buf b = (tl_buf)(intptr_t)handles[k];
        host[k].ptr = (unsigned long long)(uintptr_t)b->data;
        host[k].n = b->n;
        host[k].chunk0 = chunks;
        chunks += b->n ? (b->n + kChunk - 1) / kChunk : 1;
    }
    void *dev = nullptr;
    int st = tl_scratch(op, bytes, &dev);
    if (!st) st = tl_upload(op, dev, host, bytes);
    free(host);
    if (st) {
        if (dev) tl_scratch_free(dev);
        return st;
    }
    BatchItem *items = static_cast<BatchItem *>(dev);
    unsigned long long *total = reinterpret_cast<unsigned long long *>(items + count);
    int64_t blocks = chunks < (int64_t)kMaxBlocks * 8 ? chunks : (int64_t)kMaxBlocks * 8;
    digest_batch_kernel<<<(unsigned)blocks, TL_THREADS, 0, tl_stream()>>>(
        items, count, chunks, total, total + count, ring->data + 4 * first);
    tl_scratch_free(dev);
    TL_LAUNCHED(op);
    return TL_OK;
}
