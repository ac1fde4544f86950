// tl_math_device_check.cu: native/common/tl_math.h compiled as CUDA device code gives the same
// bits as the same header compiled for the host, for every function on every float32 input.
// The host side is proven correctly rounded by `make check-math` (tests/native/check_math.c), so
// equal bits make the device side correctly rounded too.
// `make build/tl_math_device_check` builds it (CPU CI only builds it); on a GPU machine
// `build/tl_math_device_check [stride]` prints one line per function (with its seconds) and
// exits 1 on a mismatch.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <chrono>
#include <cuda_runtime.h>
#include "tl_math.h"

static const char *NAMES[] = {"exp", "log", "log1p", "tanh", "sigmoid", "softplus", "erf", "gelu",
                              "gelu_grad", "sqrt", "rsqrt", "sin_2pi", "cos_2pi", "expm1"};
constexpr int NFN = 14;

__host__ __device__ static float eval(int fn, float x) {
    switch (fn) {
    case 0: return tlm_exp(x);
    case 1: return tlm_log(x);
    case 2: return tlm_log1p(x);
    case 3: return tlm_tanh(x);
    case 4: return tlm_sigmoid(x);
    case 5: return tlm_softplus(x);
    case 6: return tlm_erf(x);
    case 7: return tlm_gelu(x);
    case 8: return tlm_gelu_grad(x);
    case 9: return tlm_sqrt(x);
    case 10: return tlm_rsqrt(x);
    case 11: return tlm_sin_2pi(x);
    case 12: return tlm_cos_2pi(x);
    default: return tlm_expm1(x);
    }
}

__global__ void k_eval(int fn, unsigned long long start, unsigned stride, long long n, float *out) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) out[i] = eval(fn, tlm_from_bits((int32_t)(uint32_t)(start + (unsigned long long)i * stride)));
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);   // each function's line appears as soon as it is done
    unsigned stride = argc > 1 ? (unsigned)atoi(argv[1]) : 1;
    const long long chunk = 1LL << 27;
    float *dev, *host = (float *)malloc(chunk * sizeof(float));
    if (cudaMalloc(&dev, chunk * sizeof(float)) != cudaSuccess || !host) {
        printf("no device memory\n");
        return 2;
    }
    long long total = (((1ULL << 32) - 1) / stride) + 1;
    int bad_fns = 0;
    for (int fn = 0; fn < NFN; fn++) {
        long long mismatches = 0;
        uint32_t first = 0;
        auto t0 = std::chrono::steady_clock::now();
        for (long long s = 0; s < total; s += chunk) {
            long long n = total - s < chunk ? total - s : chunk;
            unsigned long long start = (unsigned long long)s * stride;
            k_eval<<<(unsigned)((n + 255) / 256), 256>>>(fn, start, stride, n, dev);
            if (cudaMemcpy(host, dev, n * sizeof(float), cudaMemcpyDeviceToHost) != cudaSuccess) {
                printf("cuda error\n");
                return 2;
            }
            long long local = 0;
#pragma omp parallel for reduction(+ : local)
            for (long long i = 0; i < n; i++) {
                uint32_t b = (uint32_t)(start + (unsigned long long)i * stride);
                float h = eval(fn, tlm_from_bits((int32_t)b)), d = host[i];
                bool same = (h != h && d != d) || tlm_to_bits(h) == tlm_to_bits(d);
                if (!same) {
                    local++;
#pragma omp critical
                    first = b;   // any one mismatching input is enough to report
                }
            }
            mismatches += local;
        }
        double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        printf("%-10s inputs=%lld mismatches=%lld seconds=%.1f\n", NAMES[fn], total, mismatches, secs);
        if (mismatches) { printf("  first mismatch bits 0x%08x\n", first); bad_fns++; }
    }
    printf("tl_math device check: %s\n", bad_fns ? "FAIL" : "all bit-identical");
    return bad_fns ? 1 : 0;
}
