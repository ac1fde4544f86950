// argreduce.cu (CUDA): argmax/argmin over one axis and selecting one entry per position,
// mirroring native/stub/argreduce.c.
//
// The stub scans in index order keeping the first best entry, a NaN beating every number. The
// same answer comes from combining (value, index) pairs with one rule: a NaN beats a number,
// then the better value, then the smaller index. That rule is associative and commutative, so
// any split of the axis gives the stub's index: one thread per output when there are many
// outputs, a block per output (strided partial scans, then a shared-memory tree) for few long
// rows. No arithmetic, so every mode gives the stub's bits.
#include "common.cuh"
#include "entry/argreduce_kernels.h"

namespace {

constexpr int64_t kBlockPerRowMaxOutputs = 4096;  // below this many outputs...
constexpr int64_t kBlockPerRowMinLen = 512;       // ...and from this axis length: a block per output

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

template <int KIND>
__global__ void argreduce_block(const float *__restrict__ x, float *__restrict__ y, int64_t len,
                                int64_t inner) {
    __shared__ float sv[TL_THREADS];
    __shared__ int64_t sk[TL_THREADS];
    const int64_t j = blockIdx.x;
    const float *row = x + (j / inner) * len * inner + j % inner;
    float best = row[0];
    int64_t at = 0;
    for (int64_t k = threadIdx.x; k < len; k += blockDim.x) {
        float v = row[k * inner];
        if (beats<KIND>(v, k, best, at)) { best = v; at = k; }
    }
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
    if (threadIdx.x == 0) y[j] = (float)sk[0];
}

template <int KIND>
void launch_argreduce(const float *x, float *y, int64_t m, int64_t len, int64_t inner) {
    if (m <= kBlockPerRowMaxOutputs && len >= kBlockPerRowMinLen)
        argreduce_block<KIND><<<(unsigned)m, TL_THREADS, 0, tl_stream()>>>(x, y, len, inner);
    else
        argreduce_thread<KIND><<<tl_blocks(m), TL_THREADS, 0, tl_stream()>>>(x, y, m, len, inner);
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
    if (kind == 0) launch_argreduce<0>(x->data, y->data, m, len, inner);
    else launch_argreduce<1>(x->data, y->data, m, len, inner);
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
