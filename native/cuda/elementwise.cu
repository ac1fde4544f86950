// elementwise.cu (CUDA): pointwise kernels, mirroring native/stub/elementwise.c.
//
// One templated map kernel per arity: a grid-stride loop over float4 packets when every pointer
// is 16-byte aligned (the pool's allocations are), then a scalar tail; binary_broadcast reads its
// inputs through broadcast strides instead (the ops add to minimum when input shapes differ). Element i's value depends
// only on the inputs at i, never on the grid. Every functor below is the stub's expression in
// the canonical arithmetic of tl_math.h (the same tlm_ calls in the same order, no CUDA math
// intrinsics), in every mode: the kernels are memory-bound, so exact and default are one path
// and give the stub's bits.
#include "common.cuh"
#include "tl_math.h"
#include "entry/elementwise_kernels.h"

namespace {

__device__ __forceinline__ float maxf_nan(float a, float b) { return (a != a || a >= b) ? a : b; }
__device__ __forceinline__ float minf_nan(float a, float b) { return (a != a || a <= b) ? a : b; }

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

struct Add { __device__ float operator()(float a, float b) const { return tlm_add(a, b); } };
struct Sub { __device__ float operator()(float a, float b) const { return tlm_sub(a, b); } };
struct Mul { __device__ float operator()(float a, float b) const { return tlm_mul(a, b); } };
struct Div { __device__ float operator()(float a, float b) const { return tlm_div(a, b); } };
struct Max { __device__ float operator()(float a, float b) const { return maxf_nan(a, b); } };
struct Min { __device__ float operator()(float a, float b) const { return minf_nan(a, b); } };
struct Axpy { float c; __device__ float operator()(float a, float b) const { return tlm_add(a, tlm_mul(c, b)); } };

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
        y[i] = tlm_add(tlm_mul(x[i], g[j]), b[j]);
    }
}

template <class F>
int launch2_bcast(const char *op, tl_buf a, tl_buf b, tl_buf y, int64_t n, const BcastGeom &g, F f) {
    map2_bcast<<<tl_blocks(n), TL_THREADS, 0, tl_stream()>>>(a->data, b->data, y->data, n, g, f);
    TL_LAUNCHED(op);
    return TL_OK;
}

struct Relu { __device__ float operator()(float v) const { return (v > 0.0f || v != v) ? v : 0.0f; } };
struct Abs { __device__ float operator()(float v) const { return tlm_abs(v); } };
struct Sqrt { __device__ float operator()(float v) const { return tlm_sqrt(v); } };
struct Recip { __device__ float operator()(float v) const { return tlm_div(1.0f, v); } };
struct Exp { __device__ float operator()(float v) const { return tlm_exp(v); } };
struct Log { __device__ float operator()(float v) const { return tlm_log(v); } };
struct Gelu { __device__ float operator()(float v) const { return tlm_gelu(v); } };
struct Sigmoid { __device__ float operator()(float v) const { return tlm_sigmoid(v); } };
struct Tanh { __device__ float operator()(float v) const { return tlm_tanh(v); } };
struct Softplus { __device__ float operator()(float v) const { return tlm_softplus(v); } };
struct Scale { float c; __device__ float operator()(float v) const { return tlm_mul(c, v); } };
struct SafeLog { float e; __device__ float operator()(float v) const { return tlm_log(tlm_add(tlm_softplus(v), e)); } };
struct Clamp { float l, h; __device__ float operator()(float v) const { return v < l ? l : (v > h ? h : v); } };

// backward maps: (x, g) -> dx
struct ReluB { __device__ float operator()(float v, float g) const { return v > 0.0f ? g : 0.0f; } };
struct AbsB { __device__ float operator()(float v, float g) const { return v > 0.0f ? g : (v < 0.0f ? -g : 0.0f); } };
struct SqrtB {
    __device__ float operator()(float v, float g) const { return v > 0.0f ? tlm_div(tlm_mul(g, 0.5f), tlm_sqrt(v)) : 0.0f; }
};
struct GeluB { __device__ float operator()(float v, float g) const { return tlm_mul(g, tlm_gelu_grad(v)); } };
struct SigmoidB { __device__ float operator()(float y, float g) const { return tlm_mul(tlm_mul(g, y), tlm_sub(1.0f, y)); } };
struct TanhB { __device__ float operator()(float y, float g) const { return tlm_mul(g, tlm_sub(1.0f, tlm_mul(y, y))); } };
struct SoftplusB { __device__ float operator()(float v, float g) const { return tlm_mul(g, tlm_sigmoid(v)); } };
struct SafeLogB {
    float e;
    __device__ float operator()(float v, float g) const {
        return tlm_div(tlm_mul(g, tlm_sigmoid(v)), tlm_add(tlm_softplus(v), e));
    }
};
struct ClampB { float l, h; __device__ float operator()(float v, float g) const { return (v > l && v < h) ? g : 0.0f; } };
struct MaxB { __device__ float operator()(float a, float b, float g) const { return tlm_mul(a > b ? 1.0f : (a == b ? 0.5f : 0.0f), g); } };
struct MinB { __device__ float operator()(float a, float b, float g) const { return tlm_mul(a < b ? 1.0f : (a == b ? 0.5f : 0.0f), g); } };

}  // namespace

extern "C" {

int tlk_add(const char *op, tl_buf a, tl_buf b, tl_buf y, int64_t n) { return launch2(op, a, b, y, n, Add{}); }
int tlk_sub(const char *op, tl_buf a, tl_buf b, tl_buf y, int64_t n) { return launch2(op, a, b, y, n, Sub{}); }
int tlk_mul(const char *op, tl_buf a, tl_buf b, tl_buf y, int64_t n) { return launch2(op, a, b, y, n, Mul{}); }
int tlk_div(const char *op, tl_buf a, tl_buf b, tl_buf y, int64_t n) { return launch2(op, a, b, y, n, Div{}); }
int tlk_maximum(const char *op, tl_buf a, tl_buf b, tl_buf y, int64_t n) { return launch2(op, a, b, y, n, Max{}); }
int tlk_minimum(const char *op, tl_buf a, tl_buf b, tl_buf y, int64_t n) { return launch2(op, a, b, y, n, Min{}); }
int tlk_axpy(const char *op, tl_buf a, tl_buf b, tl_buf y, int64_t n, double c) { return launch2(op, a, b, y, n, Axpy{(float)c}); }

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
    case 0: return launch2_bcast(op, a, b, y, n, g, Add{});
    case 1: return launch2_bcast(op, a, b, y, n, g, Sub{});
    case 2: return launch2_bcast(op, a, b, y, n, g, Mul{});
    case 3: return launch2_bcast(op, a, b, y, n, g, Div{});
    case 4: return launch2_bcast(op, a, b, y, n, g, Max{});
    default: return launch2_bcast(op, a, b, y, n, g, Min{});
    }
}

int tlk_affine_rows(const char *op, tl_buf x, tl_buf gamma, tl_buf beta, tl_buf y, int64_t rows, int64_t cols) {
    int64_t n = rows * cols;
    affine_rows_kernel<<<tl_blocks(n), TL_THREADS, 0, tl_stream()>>>(x->data, gamma->data, beta->data, y->data,
                                                                      n, (uint32_t)cols);
    TL_LAUNCHED(op);
    return TL_OK;
}

int tlk_relu(const char *op, tl_buf x, tl_buf y, int64_t n) { return launch1(op, x, y, n, Relu{}); }
int tlk_abs(const char *op, tl_buf x, tl_buf y, int64_t n) { return launch1(op, x, y, n, Abs{}); }
int tlk_sqrt(const char *op, tl_buf x, tl_buf y, int64_t n) { return launch1(op, x, y, n, Sqrt{}); }
int tlk_reciprocal(const char *op, tl_buf x, tl_buf y, int64_t n) { return launch1(op, x, y, n, Recip{}); }
int tlk_exp(const char *op, tl_buf x, tl_buf y, int64_t n) { return launch1(op, x, y, n, Exp{}); }
int tlk_log(const char *op, tl_buf x, tl_buf y, int64_t n) { return launch1(op, x, y, n, Log{}); }
int tlk_gelu(const char *op, tl_buf x, tl_buf y, int64_t n) { return launch1(op, x, y, n, Gelu{}); }
int tlk_sigmoid(const char *op, tl_buf x, tl_buf y, int64_t n) { return launch1(op, x, y, n, Sigmoid{}); }
int tlk_tanh(const char *op, tl_buf x, tl_buf y, int64_t n) { return launch1(op, x, y, n, Tanh{}); }
int tlk_softplus(const char *op, tl_buf x, tl_buf y, int64_t n) { return launch1(op, x, y, n, Softplus{}); }
int tlk_scale(const char *op, tl_buf x, tl_buf y, int64_t n, double c) { return launch1(op, x, y, n, Scale{(float)c}); }
int tlk_safe_log(const char *op, tl_buf x, tl_buf y, int64_t n, double eps) { return launch1(op, x, y, n, SafeLog{(float)eps}); }
int tlk_clamp(const char *op, tl_buf x, tl_buf y, int64_t n, double lo, double hi) {
    return launch1(op, x, y, n, Clamp{(float)lo, (float)hi});
}

int tlk_relu_backward(const char *op, tl_buf x, tl_buf g, tl_buf dx, int64_t n) { return launch2(op, x, g, dx, n, ReluB{}); }
int tlk_abs_backward(const char *op, tl_buf x, tl_buf g, tl_buf dx, int64_t n) { return launch2(op, x, g, dx, n, AbsB{}); }
int tlk_sqrt_backward(const char *op, tl_buf x, tl_buf g, tl_buf dx, int64_t n) { return launch2(op, x, g, dx, n, SqrtB{}); }
int tlk_gelu_backward(const char *op, tl_buf x, tl_buf g, tl_buf dx, int64_t n) { return launch2(op, x, g, dx, n, GeluB{}); }
int tlk_sigmoid_backward(const char *op, tl_buf y, tl_buf g, tl_buf dx, int64_t n) { return launch2(op, y, g, dx, n, SigmoidB{}); }
int tlk_tanh_backward(const char *op, tl_buf y, tl_buf g, tl_buf dx, int64_t n) { return launch2(op, y, g, dx, n, TanhB{}); }
int tlk_softplus_backward(const char *op, tl_buf x, tl_buf g, tl_buf dx, int64_t n) { return launch2(op, x, g, dx, n, SoftplusB{}); }
int tlk_safe_log_backward(const char *op, tl_buf x, tl_buf g, tl_buf dx, int64_t n, double eps) {
    return launch2(op, x, g, dx, n, SafeLogB{(float)eps});
}
int tlk_clamp_backward(const char *op, tl_buf x, tl_buf g, tl_buf dx, int64_t n, double lo, double hi) {
    return launch2(op, x, g, dx, n, ClampB{(float)lo, (float)hi});
}
int tlk_maximum_backward(const char *op, tl_buf a, tl_buf b, tl_buf g, tl_buf da, int64_t n) { return launch3(op, a, b, g, da, n, MaxB{}); }
int tlk_minimum_backward(const char *op, tl_buf a, tl_buf b, tl_buf g, tl_buf da, int64_t n) { return launch3(op, a, b, g, da, n, MinB{}); }

}  // extern "C"
