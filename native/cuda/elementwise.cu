// elementwise.cu (CUDA): the schedules of the pointwise kernels; their arithmetic is
// native/common/formulas/elementwise.h, shared with the stub.
//
// One templated map kernel per arity: a grid-stride loop over float4 packets when every pointer
// is 16-byte aligned (the pool's allocations are), then a scalar tail. The maps ops.yaml gives a
// `formula:` are generated (generated/elementwise_maps_cuda.inc: a functor per op over launch1..3);
// binary_broadcast reads its inputs through broadcast strides instead (the ops add to minimum
// when input shapes differ), with the same functors. Element i's value depends only on the
// inputs at i, never on the grid, and the formulas use no CUDA math intrinsics: the kernels are
// memory-bound, so exact and default are one path and give the stub's canonical bits.
#include "common.cuh"
#include "formulas/elementwise.h"
#include "generated/elementwise_kernels.h"

namespace {

inline bool aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

template <class F>
__global__ void map1(const float *__restrict__ x, float *__restrict__ y, int64_t n, int64_t n4, F f) {
    const float4 *x4 = reinterpret_cast<const float4 *>(x);
    float4 *y4 = reinterpret_cast<float4 *>(y);
    TL_GRID_STRIDE(i, n4) {
        float4 v = x4[i];
        y4[i] = make_float4(f(v.x), f(v.y), f(v.z), f(v.w));
    }
    for (int64_t i = 4 * n4 + (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        y[i] = f(x[i]);
}

template <class F>
__global__ void map2(const float *__restrict__ a, const float *__restrict__ b, float *__restrict__ y,
                     int64_t n, int64_t n4, F f) {
    const float4 *a4 = reinterpret_cast<const float4 *>(a);
    const float4 *b4 = reinterpret_cast<const float4 *>(b);
    float4 *y4 = reinterpret_cast<float4 *>(y);
    TL_GRID_STRIDE(i, n4) {
        float4 u = a4[i], v = b4[i];
        y4[i] = make_float4(f(u.x, v.x), f(u.y, v.y), f(u.z, v.z), f(u.w, v.w));
    }
    for (int64_t i = 4 * n4 + (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        y[i] = f(a[i], b[i]);
}

template <class F>
__global__ void map3(const float *__restrict__ a, const float *__restrict__ b, const float *__restrict__ c,
                     float *__restrict__ y, int64_t n, F f) {
    TL_GRID_STRIDE(i, n) y[i] = f(a[i], b[i], c[i]);
}

template <class F>
int launch1(const char *op, tl_buf x, tl_buf y, int64_t n, F f) {
    if (n == 0) return TL_OK;
    int64_t n4 = (aligned16(x->data) && aligned16(y->data)) ? n / 4 : 0;
    map1<<<tl_blocks(n4 ? n4 : n), TL_THREADS, 0, tl_stream()>>>(x->data, y->data, n, n4, f);
    TL_LAUNCHED(op);
    return TL_OK;
}

template <class F>
int launch2(const char *op, tl_buf a, tl_buf b, tl_buf y, int64_t n, F f) {
    if (n == 0) return TL_OK;
    int64_t n4 = (aligned16(a->data) && aligned16(b->data) && aligned16(y->data)) ? n / 4 : 0;
    map2<<<tl_blocks(n4 ? n4 : n), TL_THREADS, 0, tl_stream()>>>(a->data, b->data, y->data, n, n4, f);
    TL_LAUNCHED(op);
    return TL_OK;
}

template <class F>
int launch3(const char *op, tl_buf a, tl_buf b, tl_buf c, tl_buf y, int64_t n, F f) {
    if (n == 0) return TL_OK;
    map3<<<tl_blocks(n), TL_THREADS, 0, tl_stream()>>>(a->data, b->data, c->data, y->data, n, f);
    TL_LAUNCHED(op);
    return TL_OK;
}

// binary_broadcast: y = f(a, b) with a and b read through strides (0 along the axes they are
// broadcast on) over at most TL_MAX_RANK coalesced axes. Buffers hold < 2^32 elements (the
// ABI's limit), so the index arithmetic runs in 32 bits.
struct BcastGeom {
    int r;
    uint32_t dims[TL_MAX_RANK], sa[TL_MAX_RANK], sb[TL_MAX_RANK];
};

template <class F>
__global__ void map2_bcast(const float *__restrict__ a, const float *__restrict__ b, float *__restrict__ y,
                           int64_t n, BcastGeom g, F f) {
    TL_GRID_STRIDE(i, n) {
        uint32_t rest = (uint32_t)i, ao = 0, bo = 0;
#pragma unroll
        for (int k = TL_MAX_RANK - 1; k >= 0; k--) {
            if (k < g.r) {
                uint32_t d = g.dims[k], idx = rest % d;
                rest /= d;
                ao += idx * g.sa[k];
                bo += idx * g.sb[k];
            }
        }
        y[i] = f(a[ao], b[bo]);
    }
}

// layer_norm's y from xhat, the two rounded operations of norm.cu's forward kernels
__global__ void affine_rows_kernel(const float *__restrict__ x, const float *__restrict__ g,
                                   const float *__restrict__ b, float *__restrict__ y, int64_t n,
                                   uint32_t cols) {
    TL_GRID_STRIDE(i, n) {
        uint32_t j = (uint32_t)i % cols;
        y[i] = tlf_affine(x[i], g[j], b[j]);
    }
}

template <class F>
int launch2_bcast(const char *op, tl_buf a, tl_buf b, tl_buf y, int64_t n, const BcastGeom &g, F f) {
    map2_bcast<<<tl_blocks(n), TL_THREADS, 0, tl_stream()>>>(a->data, b->data, y->data, n, g, f);
    TL_LAUNCHED(op);
    return TL_OK;
}

}  // namespace

// the generated bodies of every formula map (ops.yaml `formula:`), over the launchers above
#include "generated/elementwise_maps_cuda.inc"

extern "C" {

// The broadcasting form of add, sub, mul, div, maximum and minimum (fn 0..5): each op's own
// functor per element, so the bits of the op on expanded copies, without the copies.
int tlk_binary_broadcast(const char *op, tl_buf a, tl_buf b, tl_buf y, const int64_t *y_dims, int64_t y_dims_len,
                        const int64_t *a_dims, int64_t a_dims_len, const int64_t *b_dims, int64_t b_dims_len,
                        int64_t fn) {
    int64_t r = y_dims_len;
    if (r < 1 || r > TL_MAX_RANK || a_dims_len != r || b_dims_len != r)
        return tl_fail(TL_E_ARG, "%s: expected 1 to %d coalesced axes, the same number for a, b and y; got %lld, "
                       "%lld and %lld", op, TL_MAX_RANK, (long long)a_dims_len, (long long)b_dims_len,
                       (long long)r);
    BcastGeom g;
    g.r = (int)r;
    int64_t ea = 1, eb = 1, n = 1;
    for (int64_t k = r - 1; k >= 0; k--) {  // row-major strides, 0 where broadcast
        g.dims[k] = (uint32_t)y_dims[k];
        g.sa[k] = a_dims[k] == 1 ? 0u : (uint32_t)ea;
        g.sb[k] = b_dims[k] == 1 ? 0u : (uint32_t)eb;
        ea *= a_dims[k];
        eb *= b_dims[k];
        n *= y_dims[k];
    }
    switch (fn) {
    case 0: return launch2_bcast(op, a, b, y, n, g, Map_add{});
    case 1: return launch2_bcast(op, a, b, y, n, g, Map_sub{});
    case 2: return launch2_bcast(op, a, b, y, n, g, Map_mul{});
    case 3: return launch2_bcast(op, a, b, y, n, g, Map_div{});
    case 4: return launch2_bcast(op, a, b, y, n, g, Map_maximum{});
    default: return launch2_bcast(op, a, b, y, n, g, Map_minimum{});
    }
}

int tlk_affine_rows(const char *op, tl_buf x, tl_buf gamma, tl_buf beta, tl_buf y, int64_t rows, int64_t cols) {
    int64_t n = rows * cols;
    affine_rows_kernel<<<tl_blocks(n), TL_THREADS, 0, tl_stream()>>>(x->data, gamma->data, beta->data, y->data,
                                                                      n, (uint32_t)cols);
    TL_LAUNCHED(op);
    return TL_OK;
}

}  // extern "C"
