// pointwise_extra.cu (CUDA): pow, erf, exact GELU and PyTorch's softplus with their VJPs,
// mirroring native/stub/pointwise_extra.c. The per-element formulas are the shared ones of
// native/common/pointwise_extra.h (canonical tl_math arithmetic), so every mode gives the
// stub's bits. One thread per element, grid-stride.
#include "common.cuh"
#include "pointwise_extra.h"
#include "entry/pointwise_extra_kernels.h"

namespace {

struct PowF { __device__ float operator()(float a, float b) const { return tlm_pow(a, b); } };
struct PowScalarF {
    float p;
    __device__ float operator()(float x) const { return tlm_pow(x, p); }
};
struct PowScalarGradF {
    float p;
    __device__ float operator()(float x, float g) const { return tlx_pow_grad_base(x, p, g); }
};
struct ErfF { __device__ float operator()(float x) const { return tlm_erf(x); } };
struct ErfGradF { __device__ float operator()(float x, float g) const { return tlx_erf_grad(x, g); } };
struct GeluErfF { __device__ float operator()(float x) const { return tlx_gelu_erf(x); } };
struct GeluErfGradF {
    __device__ float operator()(float x, float g) const { return tlx_gelu_erf_grad(x, g); }
};
struct SoftplusBetaF {
    float beta, threshold;
    __device__ float operator()(float x) const { return tlx_softplus_beta(x, beta, threshold); }
};
struct SoftplusBetaGradF {
    float beta, threshold;
    __device__ float operator()(float x, float g) const {
        return tlx_softplus_beta_grad(x, g, beta, threshold);
    }
};

template <class F>
__global__ void map1(const float *__restrict__ x, float *__restrict__ y, int64_t n, F f) {
    TL_GRID_STRIDE(i, n) y[i] = f(x[i]);
}

template <class F>
__global__ void map2(const float *__restrict__ a, const float *__restrict__ b,
                     float *__restrict__ y, int64_t n, F f) {
    TL_GRID_STRIDE(i, n) y[i] = f(a[i], b[i]);
}

__global__ void pow_grad_base_kernel(const float *__restrict__ a, const float *__restrict__ b,
                                     const float *__restrict__ g, float *__restrict__ d, int64_t n) {
    TL_GRID_STRIDE(i, n) d[i] = tlx_pow_grad_base(a[i], b[i], g[i]);
}

__global__ void pow_grad_exponent_kernel(const float *__restrict__ a, const float *__restrict__ b,
                                         const float *__restrict__ y, const float *__restrict__ g,
                                         float *__restrict__ d, int64_t n) {
    TL_GRID_STRIDE(i, n) d[i] = tlx_pow_grad_exponent(a[i], b[i], y[i], g[i]);
}

template <class F>
int launch1(const char *op, tl_buf x, tl_buf y, int64_t n, F f) {
    map1<<<tl_blocks(n), TL_THREADS, 0, tl_stream()>>>(x->data, y->data, n, f);
    TL_LAUNCHED(op);
    return TL_OK;
}

template <class F>
int launch2(const char *op, tl_buf a, tl_buf b, tl_buf y, int64_t n, F f) {
    map2<<<tl_blocks(n), TL_THREADS, 0, tl_stream()>>>(a->data, b->data, y->data, n, f);
    TL_LAUNCHED(op);
    return TL_OK;
}

}  // namespace

int tlk_pow(const char *op, tl_buf a, tl_buf b, tl_buf y, int64_t n) {
    return launch2(op, a, b, y, n, PowF{});
}

int tlk_pow_backward_base(const char *op, tl_buf a, tl_buf b, tl_buf g, tl_buf da, int64_t n) {
    pow_grad_base_kernel<<<tl_blocks(n), TL_THREADS, 0, tl_stream()>>>(a->data, b->data, g->data, da->data, n);
    TL_LAUNCHED(op);
    return TL_OK;
}

int tlk_pow_backward_exponent(const char *op, tl_buf a, tl_buf b, tl_buf y, tl_buf g, tl_buf db,
                              int64_t n) {
    pow_grad_exponent_kernel<<<tl_blocks(n), TL_THREADS, 0, tl_stream()>>>(a->data, b->data, y->data,
                                                                           g->data, db->data, n);
    TL_LAUNCHED(op);
    return TL_OK;
}

int tlk_pow_scalar(const char *op, tl_buf x, tl_buf y, int64_t n, double p) {
    return launch1(op, x, y, n, PowScalarF{(float)p});
}

int tlk_pow_scalar_backward(const char *op, tl_buf x, tl_buf g, tl_buf dx, int64_t n, double p) {
    return launch2(op, x, g, dx, n, PowScalarGradF{(float)p});
}

int tlk_erf(const char *op, tl_buf x, tl_buf y, int64_t n) { return launch1(op, x, y, n, ErfF{}); }

int tlk_erf_backward(const char *op, tl_buf x, tl_buf g, tl_buf dx, int64_t n) {
    return launch2(op, x, g, dx, n, ErfGradF{});
}

int tlk_gelu_erf(const char *op, tl_buf x, tl_buf y, int64_t n) {
    return launch1(op, x, y, n, GeluErfF{});
}

int tlk_gelu_erf_backward(const char *op, tl_buf x, tl_buf g, tl_buf dx, int64_t n) {
    return launch2(op, x, g, dx, n, GeluErfGradF{});
}

int tlk_softplus_beta(const char *op, tl_buf x, tl_buf y, int64_t n, double beta, double threshold) {
    return launch1(op, x, y, n, SoftplusBetaF{(float)beta, (float)threshold});
}

int tlk_softplus_beta_backward(const char *op, tl_buf x, tl_buf g, tl_buf dx, int64_t n,
                               double beta, double threshold) {
    return launch2(op, x, g, dx, n, SoftplusBetaGradF{(float)beta, (float)threshold});
}
