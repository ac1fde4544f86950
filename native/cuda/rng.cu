// rng.cu (CUDA): the schedule of the counter-based random kernels (grid-stride loops); the
// transforms are native/common/formulas/rng.h, shared with the stub, so the output is the
// stub's whatever the grid shape, in every mode.
#include "common.cuh"
#include "formulas/rng.h"
#include "entry/rng_kernels.h"

namespace {

__global__ void k_uniform(float *y, int64_t n, uint64_t key) {
    TL_GRID_STRIDE(i, n) y[i] = tlf_uniform(key, i);
}

__global__ void k_bernoulli(float *y, int64_t n, uint64_t key, float p) {
    TL_GRID_STRIDE(i, n) y[i] = tlf_bernoulli(key, i, p);
}

__global__ void k_normal(float *y, int64_t n, uint64_t key, float mean, float std) {
    TL_GRID_STRIDE(i, n) y[i] = tlf_normal(key, i, mean, std);
}

}  // namespace

extern "C" {

int tlk_rand_uniform(const char *op, tl_buf y, int64_t n, uint64_t key) {
    if (n == 0) return TL_OK;
    k_uniform<<<tl_blocks(n), TL_THREADS, 0, tl_stream()>>>(y->data, n, key);
    TL_LAUNCHED(op);
    return TL_OK;
}

int tlk_bernoulli_mask(const char *op, tl_buf y, int64_t n, uint64_t key, double p) {
    if (n == 0) return TL_OK;
    k_bernoulli<<<tl_blocks(n), TL_THREADS, 0, tl_stream()>>>(y->data, n, key, (float)p);
    TL_LAUNCHED(op);
    return TL_OK;
}

int tlk_rand_normal(const char *op, tl_buf y, int64_t n, uint64_t key, double mean, double std) {
    if (n == 0) return TL_OK;
    k_normal<<<tl_blocks(n), TL_THREADS, 0, tl_stream()>>>(y->data, n, key, (float)mean, (float)std);
    TL_LAUNCHED(op);
    return TL_OK;
}

}  // extern "C"
