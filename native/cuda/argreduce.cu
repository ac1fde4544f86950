// argreduce.cu (CUDA): argmax/argmin over one axis and selecting one entry per position,
// mirroring native/stub/argreduce.c.
//
// The stub scans in index order keeping the first best entry, a NaN beating every number. The
// same answer comes from combining (value, index) pairs with one rule: a NaN beats a number,
// then the better value, then the smaller index. That rule is associative and commutative, so
// any split of the axis gives the stub's index: one thread per output when there are many
// outputs; for few long rows, blocks over chunks of each row (strided scans, a shared-memory
// tree) into partials, then one block per row over its partials. No arithmetic, so every mode gives the stub's bits.
#include "common.cuh"
#include "generated/argreduce_kernels.h"

namespace {

constexpr int64_t kBlockPerRowMaxOutputs = 4096;  // at most this many outputs (a valid grid.y)...
constexpr int64_t kBlockPerRowMinLen = 512;       // ...and from this axis length: blocks per output
constexpr int64_t kChunk = 8192;                  // entries one block scans in the chunked pass

// does (v, k) beat (best, at)? KIND 0: max, 1: min
template <int KIND>
__device__ __forceinline__ bool beats(float v, int64_t k, float best, int64_t at) {
    bool vn = v != v, bn = best != best;
    if (vn || bn) return vn && (!bn || k < at);
    if (v != best) return KIND == 0 ? v > best : v < best;
    return k < at;
}

template <int KIND>
__global__ void argreduce_thread(const float *__restrict__ x, float *__restrict__ y, int64_t m,
                                 int64_t len, int64_t inner) {
    TL_GRID_STRIDE(j, m) {
        const float *row = x + (j / inner) * len * inner + j % inner;
        float best = row[0];
        int64_t at = 0;
        for (int64_t k = 1; k < len; k++) {
            float v = row[k * inner];
            if (beats<KIND>(v, k, best, at)) { best = v; at = k; }
        }
        y[j] = (float)at;
    }
}

// the block's best of its threads' (best, at) pairs: a shared-memory tree, pairs at distance
// blockDim.x / 2, / 4, ... (the rule is a total order with index ties, so the result is the
// row's best whatever the tree); every thread gets it
template <int KIND>
__device__ void block_pick(float best, int64_t at, float *best_v, int64_t *best_k) {
    __shared__ float sv[TL_THREADS];
    __shared__ int64_t sk[TL_THREADS];
    sv[threadIdx.x] = best;
    sk[threadIdx.x] = at;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s && beats<KIND>(sv[threadIdx.x + s], sk[threadIdx.x + s],
                                           sv[threadIdx.x], sk[threadIdx.x])) {
            sv[threadIdx.x] = sv[threadIdx.x + s];
            sk[threadIdx.x] = sk[threadIdx.x + s];
        }
        __syncthreads();
    }
    *best_v = sv[0];
    *best_k = sk[0];
}

// one block reduces entries [lo, hi) of row j (strided by `inner`) to its best (value, index)
template <int KIND>
__device__ void block_best(const float *__restrict__ row, int64_t inner, int64_t lo, int64_t hi,
                           float *best_v, int64_t *best_k) {
    float best = row[lo * inner];
    int64_t at = lo;
    for (int64_t k = lo + threadIdx.x; k < hi; k += blockDim.x) {
        float v = row[k * inner];
        if (beats<KIND>(v, k, best, at)) { best = v; at = k; }
    }
    block_pick<KIND>(best, at, best_v, best_k);
}

// pass 1: block (c, j) reduces chunk c of row j into the partials
template <int KIND>
__global__ void argreduce_chunks(const float *__restrict__ x, float *__restrict__ pv,
                                 int64_t *__restrict__ pk, int64_t len, int64_t inner) {
    const int64_t j = blockIdx.y, c = blockIdx.x, chunks = gridDim.x;
    const int64_t lo = c * kChunk, hi = lo + kChunk < len ? lo + kChunk : len;
    float v;
    int64_t k;
    block_best<KIND>(x + (j / inner) * len * inner + j % inner, inner, lo, hi, &v, &k);
    if (threadIdx.x == 0) { pv[j * chunks + c] = v; pk[j * chunks + c] = k; }
}

// pass 2: one block per row combines its chunk partials (the same rule, so any order)
template <int KIND>
__global__ void argreduce_partials(const float *__restrict__ pv, const int64_t *__restrict__ pk,
                                   float *__restrict__ y, int64_t chunks) {
    const int64_t j = blockIdx.x;
    float best = pv[j * chunks];
    int64_t at = pk[j * chunks];
    for (int64_t c = threadIdx.x; c < chunks; c += blockDim.x) {
        if (beats<KIND>(pv[j * chunks + c], pk[j * chunks + c], best, at)) {
            best = pv[j * chunks + c];
            at = pk[j * chunks + c];
        }
    }
    float v;
    int64_t k;
    block_pick<KIND>(best, at, &v, &k);
    if (threadIdx.x == 0) y[j] = (float)k;
}

template <int KIND>
int launch_argreduce(const char *op, const float *x, float *y, int64_t m, int64_t len, int64_t inner) {
    if (m > kBlockPerRowMaxOutputs || len < kBlockPerRowMinLen) {
        argreduce_thread<KIND><<<tl_blocks(m), TL_THREADS, 0, tl_stream()>>>(x, y, m, len, inner);
        return TL_OK;
    }
    const int64_t chunks = (len + kChunk - 1) / kChunk;   // <= 2^24 / kChunk: a valid grid.x
    void *scratch = nullptr;
    int st = tl_scratch(op, (size_t)(m * chunks) * (sizeof(float) + sizeof(int64_t)), &scratch);
    if (st) return st;
    int64_t *pk = static_cast<int64_t *>(scratch);
    float *pv = reinterpret_cast<float *>(pk + m * chunks);
    argreduce_chunks<KIND><<<dim3((unsigned)chunks, (unsigned)m), TL_THREADS, 0, tl_stream()>>>(
        x, pv, pk, len, inner);
    argreduce_partials<KIND><<<(unsigned)m, TL_THREADS, 0, tl_stream()>>>(pv, pk, y, chunks);
    tl_scratch_free(scratch);
    return TL_OK;
}

// a whole-number index in [0, len), or -1 (outside, or NaN)
__device__ __forceinline__ int64_t index_of(float v, int64_t len) {
    return (v >= 0.0f && v < (float)len) ? (int64_t)v : -1;
}

__global__ void select_kernel(const float *__restrict__ x, const float *__restrict__ idx,
                              float *__restrict__ y, int64_t m, int64_t len, int64_t inner) {
    TL_GRID_STRIDE(j, m) {
        int64_t k = index_of(idx[j], len);
        y[j] = k < 0 ? 0.0f : x[(j / inner) * len * inner + k * inner + j % inner];
    }
}

__global__ void select_backward_kernel(const float *__restrict__ idx, const float *__restrict__ g,
                                       float *__restrict__ dx, int64_t total, int64_t len,
                                       int64_t inner) {
    TL_GRID_STRIDE(e, total) {
        int64_t o = e / (len * inner), k = (e / inner) % len, i = e % inner;
        int64_t j = o * inner + i;
        dx[e] = index_of(idx[j], len) == k ? g[j] : 0.0f;
    }
}

}  // namespace

int tlk_argreduce(const char *op, tl_buf x, tl_buf y, int64_t outer, int64_t len, int64_t inner,
                  int64_t kind) {
    const int64_t m = outer * inner;
    int st = kind == 0 ? launch_argreduce<0>(op, x->data, y->data, m, len, inner)
                       : launch_argreduce<1>(op, x->data, y->data, m, len, inner);
    if (st) return st;
    TL_LAUNCHED(op);
    return TL_OK;
}

int tlk_select_along_axis(const char *op, tl_buf x, tl_buf idx, tl_buf y, int64_t outer,
                          int64_t len, int64_t inner) {
    const int64_t m = outer * inner;
    select_kernel<<<tl_blocks(m), TL_THREADS, 0, tl_stream()>>>(x->data, idx->data, y->data, m, len, inner);
    TL_LAUNCHED(op);
    return TL_OK;
}

int tlk_select_along_axis_backward(const char *op, tl_buf idx, tl_buf g, tl_buf dx, int64_t outer,
                                   int64_t len, int64_t inner) {
    const int64_t total = outer * len * inner;
    select_backward_kernel<<<tl_blocks(total), TL_THREADS, 0, tl_stream()>>>(idx->data, g->data, dx->data,
                                                                             total, len, inner);
    TL_LAUNCHED(op);
    return TL_OK;
}
