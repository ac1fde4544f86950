// bench_tl_math.cu: device time of tl_math.h's transcendental functions as an elementwise kernel
// (one thread per element, out[i] = f(in[i]) over 2^26 floats), compiled once per header version
// (bench/bench_tl_math.sh). Prints `name microseconds`: best of 10 launches after a warm-up.
#include <cstdio>
#include <cstdint>
#include <cuda_runtime.h>
#include "tl_math.h"

constexpr int N = 1 << 26;

#define KERNEL(NAME) \
    __global__ void k_##NAME(const float *x, float *y, int n) { \
        int i = blockIdx.x * blockDim.x + threadIdx.x; \
        if (i < n) y[i] = tlm_##NAME(x[i]); \
    }
KERNEL(exp) KERNEL(log) KERNEL(log1p) KERNEL(tanh) KERNEL(sigmoid) KERNEL(softplus) KERNEL(erf)
KERNEL(gelu) KERNEL(gelu_grad) KERNEL(sin_2pi) KERNEL(cos_2pi)

// inputs lo + (hi - lo) u from a fixed LCG (log: e^that)
__global__ void k_fill(float *x, int n, float lo, float hi, int expo) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    uint32_t s = (uint32_t)i * 2654435761u + 12345u;
    s ^= s >> 15; s *= 2246822519u; s ^= s >> 13;
    float v = lo + (hi - lo) * (float)(s >> 8) * (1.0f / 16777216.0f);
    x[i] = expo ? expf(v) : v;
}

typedef void (*kern)(const float *, float *, int);
static void run(const char *name, kern k, float lo, float hi, int expo, float *x, float *y) {
    k_fill<<<N / 256, 256>>>(x, N, lo, hi, expo);
    cudaEvent_t a, b;
    cudaEventCreate(&a); cudaEventCreate(&b);
    k<<<N / 256, 256>>>(x, y, N);
    float best = 1e30f;
    for (int r = 0; r < 10; r++) {
        cudaEventRecord(a);
        k<<<N / 256, 256>>>(x, y, N);
        cudaEventRecord(b);
        cudaEventSynchronize(b);
        float ms;
        cudaEventElapsedTime(&ms, a, b);
        best = ms < best ? ms : best;
    }
    printf("%s %.1f\n", name, best * 1000.0f);
}

int main() {
    float *x, *y;
    if (cudaMalloc(&x, N * sizeof(float)) != cudaSuccess || cudaMalloc(&y, N * sizeof(float)) != cudaSuccess) {
        printf("no device memory\n");
        return 2;
    }
    run("exp", k_exp, -10, 10, 0, x, y);
    run("log", k_log, -10, 10, 1, x, y);
    run("log1p", k_log1p, -0.9f, 10, 0, x, y);
    run("tanh", k_tanh, -5, 5, 0, x, y);
    run("sigmoid", k_sigmoid, -10, 10, 0, x, y);
    run("softplus", k_softplus, -10, 10, 0, x, y);
    run("erf", k_erf, -3, 3, 0, x, y);
    run("gelu", k_gelu, -5, 5, 0, x, y);
    run("gelu_grad", k_gelu_grad, -5, 5, 0, x, y);
    run("sin_2pi", k_sin_2pi, 0, 1, 0, x, y);
    run("cos_2pi", k_cos_2pi, 0, 1, 0, x, y);
    return 0;
}
