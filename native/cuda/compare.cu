// compare.cu (CUDA): comparisons as 0/1 masks, where and its VJP, mirroring native/stub/compare.c.
//
// Broadcasting is done before the call; one thread per element (grid-stride). No arithmetic
// happens, so the results are the stub's bits in every mode.
#include "common.cuh"
#include "generated/compare_kernels.h"

namespace {

template <int KIND>
__global__ void compare_kernel(const float *__restrict__ a, const float *__restrict__ b,
                               float *__restrict__ y, int64_t n) {
    TL_GRID_STRIDE(i, n) {
        float u = a[i], v = b[i];
        bool r = KIND == 0 ? u < v : KIND == 1 ? u <= v : KIND == 2 ? u > v
               : KIND == 3 ? u >= v : KIND == 4 ? u == v : u != v;
        y[i] = r ? 1.0f : 0.0f;
    }
}

__global__ void where_kernel(const float *__restrict__ c, const float *__restrict__ a,
                             const float *__restrict__ b, float *__restrict__ y, int64_t n) {
    TL_GRID_STRIDE(i, n) y[i] = c[i] != 0.0f ? a[i] : b[i];
}

__global__ void where_backward_kernel(const float *__restrict__ c, const float *__restrict__ g,
                                      float *__restrict__ d, int64_t n, int want) {
    TL_GRID_STRIDE(i, n) d[i] = ((c[i] != 0.0f) == (want != 0)) ? g[i] : 0.0f;
}

template <int KIND>
void launch_compare(tl_buf a, tl_buf b, tl_buf y, int64_t n) {
    compare_kernel<KIND><<<tl_blocks(n), TL_THREADS, 0, tl_stream()>>>(a->data, b->data, y->data, n);
}

}  // namespace

int tlk_compare(const char *op, tl_buf a, tl_buf b, tl_buf y, int64_t n, int64_t kind) {
    switch (kind) {   // the registry's kind constants: lt le gt ge eq ne
    case 0: launch_compare<0>(a, b, y, n); break;
    case 1: launch_compare<1>(a, b, y, n); break;
    case 2: launch_compare<2>(a, b, y, n); break;
    case 3: launch_compare<3>(a, b, y, n); break;
    case 4: launch_compare<4>(a, b, y, n); break;
    default: launch_compare<5>(a, b, y, n); break;
    }
    TL_LAUNCHED(op);
    return TL_OK;
}

int tlk_where(const char *op, tl_buf cond, tl_buf a, tl_buf b, tl_buf y, int64_t n) {
    where_kernel<<<tl_blocks(n), TL_THREADS, 0, tl_stream()>>>(cond->data, a->data, b->data, y->data, n);
    TL_LAUNCHED(op);
    return TL_OK;
}

int tlk_where_backward(const char *op, tl_buf cond, tl_buf g, tl_buf dx, int64_t n, int64_t take_a) {
    where_backward_kernel<<<tl_blocks(n), TL_THREADS, 0, tl_stream()>>>(cond->data, g->data, dx->data,
                                                                         n, take_a != 0);
    TL_LAUNCHED(op);
    return TL_OK;
}
