// pointwise_math.cu (CUDA): the schedule of PyTorch's pointwise math catalog (log1p ... atan2,
// hypot, fmod, remainder, rounding, logit, xlogy, logaddexp) and their VJPs: one thread per
// element, grid-stride. Every op is a formula map (native/common/formulas/pointwise_math.h,
// shared with the stub, canonical tl_math arithmetic, so every mode gives the stub's bits);
// codegen emits the bodies over these launchers.
#include "common.cuh"
#include "generated/pointwise_math_kernels.h"

namespace {

template <class F>
__global__ void map1(const float *__restrict__ x, float *__restrict__ y, int64_t n, F f) {
    TL_GRID_STRIDE(i, n) y[i] = f(x[i]);
}

template <class F>
__global__ void map2(const float *__restrict__ a, const float *__restrict__ b,
                     float *__restrict__ y, int64_t n, F f) {
    TL_GRID_STRIDE(i, n) y[i] = f(a[i], b[i]);
}

template <class F>
__global__ void map3(const float *__restrict__ a, const float *__restrict__ b, const float *__restrict__ c,
                     float *__restrict__ y, int64_t n, F f) {
    TL_GRID_STRIDE(i, n) y[i] = f(a[i], b[i], c[i]);
}

template <class F>
__global__ void map4(const float *__restrict__ a, const float *__restrict__ b, const float *__restrict__ c,
                     const float *__restrict__ d, float *__restrict__ y, int64_t n, F f) {
    TL_GRID_STRIDE(i, n) y[i] = f(a[i], b[i], c[i], d[i]);
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

template <class F>
int launch3(const char *op, tl_buf a, tl_buf b, tl_buf c, tl_buf y, int64_t n, F f) {
    map3<<<tl_blocks(n), TL_THREADS, 0, tl_stream()>>>(a->data, b->data, c->data, y->data, n, f);
    TL_LAUNCHED(op);
    return TL_OK;
}

template <class F>
int launch4(const char *op, tl_buf a, tl_buf b, tl_buf c, tl_buf d, tl_buf y, int64_t n, F f) {
    map4<<<tl_blocks(n), TL_THREADS, 0, tl_stream()>>>(a->data, b->data, c->data, d->data, y->data, n, f);
    TL_LAUNCHED(op);
    return TL_OK;
}

}  // namespace

#include "generated/pointwise_math_maps_cuda.inc"
