// rng.cu (CUDA): counter-based random kernels, mirroring native/stub/rng.c.
//
// Element i is a pure function of (key, i) via tl_sm64/tl_uniform_at (shared with the stub), so
// the output is bit-identical to the stub and to torchlean/random.py whatever the grid shape.
// The normal kernel works in double (as the contract says), using CUDA's correctly-rounded-ish
// double log/cos/sqrt; results round to float32 and match the host reference. In exact mode it
// runs the stub's canonical float32 Box-Muller (tl_math.h) instead, bit for bit.
#include "common.cuh"
#include "tl_math.h"
#include "entry/rng_kernels.h"

namespace {

__global__ void k_uniform(float *y, int64_t n, uint64_t key) {
    TL_GRID_STRIDE(i, n) y[i] = tl_uniform_at(key, (uint64_t)i);
}

__global__ void k_bernoulli(float *y, int64_t n, uint64_t key, float p) {
    TL_GRID_STRIDE(i, n) y[i] = tl_uniform_at(key, (uint64_t)i) < p ? 1.0f : 0.0f;
}

__global__ void k_normal(float *y, int64_t n, uint64_t key, double mean, double std) {
    TL_GRID_STRIDE(i, n) {
        uint32_t d1 = (uint32_t)tl_sm64(key + 2 * (uint64_t)i);
        uint32_t d2 = (uint32_t)tl_sm64(key + 2 * (uint64_t)i + 1);
        double u1 = ((double)(d1 >> 8) + 1.0) * (1.0 / 16777216.0);
        double u2 = (double)(d2 >> 8) * (1.0 / 16777216.0);
        double z = sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
        y[i] = (float)(mean + std * z);
    }
}

// exact mode: the stub's tl_normal_exact_at, the same canonical operations in the same order
__global__ void k_normal_exact(float *y, int64_t n, uint64_t key, float mean, float std) {
    TL_GRID_STRIDE(i, n) {
        uint32_t d1 = (uint32_t)tl_sm64(key + 2 * (uint64_t)i);
        uint32_t d2 = (uint32_t)tl_sm64(key + 2 * (uint64_t)i + 1);
        float u1 = tlm_mul((float)((d1 >> 8) + 1u), 5.9604644775390625e-8f);   // 2^-24
        float u2 = tlm_mul((float)(d2 >> 8), 5.9604644775390625e-8f);
        float z = tlm_mul(tlm_sqrt(tlm_mul(-2.0f, tlm_log(u1))), tlm_cos_2pi(u2));
        y[i] = tlm_add(mean, tlm_mul(std, z));
    }
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
    if (tl_exact()) {
        k_normal_exact<<<tl_blocks(n), TL_THREADS, 0, tl_stream()>>>(y->data, n, key, (float)mean, (float)std);
        TL_LAUNCHED(op);
        return TL_OK;
    }
    k_normal<<<tl_blocks(n), TL_THREADS, 0, tl_stream()>>>(y->data, n, key, mean, std);
    TL_LAUNCHED(op);
    return TL_OK;
}

}  // extern "C"
