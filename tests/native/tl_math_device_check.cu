// tl_math_device_check.cu: native/common/tl_math.h compiled as CUDA device code gives the same
// bits as the same header compiled for the host, for every function on all 2^32 float32 inputs.
// The host side is proven correctly rounded by `make check-math` (tests/native/check_math.c), so
// equal bits make the device side correctly rounded too.
//
//     make check-math-cuda                       # build, then every function (GPU machine)
//     build/tl_math_device_check exp tanh        # some functions
//
// Digests, so that no output crosses the bus: the inputs are cut into 256 blocks of 2^24 bit
// patterns; a block's digest is the sum mod 2^64 of mix(input, output bits) over its inputs (a sum,
// so the device may add in any order). The device computes all digests in one launch, the host
// the same digests on all its CPU threads (OpenMP). A NaN output counts as one canonical NaN
// (payloads differ between CPUs and GPUs where a formula makes a new NaN, gelu(-inf) = -inf * 0).
// A block whose digests differ is evaluated again on both sides in full and its first mismatching
// inputs are printed. One line per function with the device and host seconds; exit 1 on any
// mismatch. CPU CI only builds it.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <chrono>
#include <cuda_runtime.h>
#include <omp.h>
#include "tl_math_more.h"
#include "formulas/pointwise_math.h"   // the special functions' float32 formulas

static const char *NAMES[] = {"exp", "log", "log1p", "tanh", "sigmoid", "softplus", "erf", "gelu",
                              "gelu_grad", "sqrt", "rsqrt", "sin_2pi", "cos_2pi", "expm1",
                              "log2", "log10", "exp2", "sinh", "cosh", "asinh", "acosh", "atanh",
                              "atan", "asin", "acos", "sin", "cos", "tan",
                              // the special functions' formulas (tests/native/check_special.c
                              // checks the host side of the first 16: bench/results/check-math-special.md)
                              "erfc", "erfcx", "ndtr", "log_ndtr", "lgamma", "digamma", "erfinv",
                              "ndtri", "i0", "i0e", "i1", "i1e", "bessel_j0", "bessel_j1", "bessel_y0",
                              "bessel_y1", "airy_ai", "modified_bessel_k0", "modified_bessel_k1",
                              "scaled_modified_bessel_k0", "scaled_modified_bessel_k1",
                              "spherical_bessel_j0", "sinc", "frexp_mantissa", "frexp_exponent"};
constexpr int NFN = 53;
constexpr int BLOCK_BITS = 24;                       // a digest covers 2^24 inputs
constexpr int NBLOCKS = 1 << (32 - BLOCK_BITS);      // 256 digests per function
constexpr int PER_THREAD = 16;                       // inputs per device thread
constexpr int THREADS = 256;

template <int FN> __host__ __device__ __forceinline__ float eval(float x) {
    switch (FN) {
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
    case 13: return tlm_expm1(x);
    case 14: return tlm_log2(x);
    case 15: return tlm_log10(x);
    case 16: return tlm_exp2(x);
    case 17: return tlm_sinh(x);
    case 18: return tlm_cosh(x);
    case 19: return tlm_asinh(x);
    case 20: return tlm_acosh(x);
    case 21: return tlm_atanh(x);
    case 22: return tlm_atan(x);
    case 23: return tlm_asin(x);
    case 24: return tlm_acos(x);
    case 25: return tlm_sin(x);
    case 26: return tlm_cos(x);
    case 27: return tlm_tan(x);
    case 28: return tlf_erfc(x);
    case 29: return tlf_erfcx(x);
    case 30: return tlf_ndtr(x);
    case 31: return tlf_log_ndtr(x);
    case 32: return tlf_lgamma(x);
    case 33: return tlf_digamma(x);
    case 34: return tlf_erfinv(x);
    case 35: return tlf_ndtri(x);
    case 36: return tlf_i0(x);
    case 37: return tlf_i0e(x);
    case 38: return tlf_i1(x);
    case 39: return tlf_i1e(x);
    case 40: return tlf_bessel_j0(x);
    case 41: return tlf_bessel_j1(x);
    case 42: return tlf_bessel_y0(x);
    case 43: return tlf_bessel_y1(x);
    case 44: return tlf_airy_ai(x);
    case 45: return tlf_modified_bessel_k0(x);
    case 46: return tlf_modified_bessel_k1(x);
    case 47: return tlf_scaled_modified_bessel_k0(x);
    case 48: return tlf_scaled_modified_bessel_k1(x);
    case 49: return tlf_spherical_bessel_j0(x);
    case 50: return tlf_sinc(x);
    case 51: return tlf_frexp_mantissa(x);
    default: return tlf_frexp_exponent(x);
    }
}

// the output's bits, every NaN as 0x7fc00000
__host__ __device__ __forceinline__ uint32_t canon_bits(float y) {
    return y != y ? 0x7fc00000u : (uint32_t)tlm_to_bits(y);
}

// splitmix64's finaliser over (input, output): a digest term
__host__ __device__ __forceinline__ uint64_t mix(uint32_t in, uint32_t out) {
    uint64_t z = ((uint64_t)in << 32 | out) + 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

// grid (2^24 / (THREADS * PER_THREAD), NBLOCKS): blockIdx.y is the digest block
template <int FN> __global__ void k_digest(unsigned long long *dig) {
    const uint32_t span = (uint32_t)gridDim.x * THREADS;   // 2^24 / PER_THREAD
    uint32_t base = ((uint32_t)blockIdx.y << BLOCK_BITS) + blockIdx.x * THREADS + threadIdx.x;
    uint64_t s = 0;
    for (int j = 0; j < PER_THREAD; j++) {
        uint32_t u = base + (uint32_t)j * span;
        s += mix(u, canon_bits(eval<FN>(tlm_from_bits((int32_t)u))));
    }
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if ((threadIdx.x & 31) == 0) atomicAdd(&dig[blockIdx.y], (unsigned long long)s);
}

// one block's outputs in full (for listing mismatches)
template <int FN> __global__ void k_block(uint32_t base, uint32_t *out) {
    uint32_t i = blockIdx.x * THREADS + threadIdx.x;
    out[i] = canon_bits(eval<FN>(tlm_from_bits((int32_t)(base + i))));
}

template <int FN> static uint64_t host_block_digest(uint32_t blk) {
    uint64_t s = 0;
    const uint32_t base = blk << BLOCK_BITS;
    for (uint32_t i = 0; i < (1u << BLOCK_BITS); i++) {
        uint32_t u = base + i;
        s += mix(u, canon_bits(eval<FN>(tlm_from_bits((int32_t)u))));
    }
    return s;
}

template <int FN> static int check(const char *name) {
    unsigned long long *ddig;
    uint64_t dev_dig[NBLOCKS], host_dig[NBLOCKS];
    if (cudaMalloc(&ddig, sizeof dev_dig) != cudaSuccess) { printf("no device memory\n"); exit(2); }
    cudaMemset(ddig, 0, sizeof dev_dig);
    auto t0 = std::chrono::steady_clock::now();
    dim3 grid((1u << BLOCK_BITS) / (THREADS * PER_THREAD), NBLOCKS);
    k_digest<FN><<<grid, THREADS>>>(ddig);
    if (cudaMemcpy(dev_dig, ddig, sizeof dev_dig, cudaMemcpyDeviceToHost) != cudaSuccess) {
        printf("cuda error: %s\n", cudaGetErrorString(cudaGetLastError()));
        exit(2);
    }
    auto t1 = std::chrono::steady_clock::now();
#pragma omp parallel for schedule(dynamic, 1)
    for (int b = 0; b < NBLOCKS; b++) host_dig[b] = host_block_digest<FN>((uint32_t)b);
    auto t2 = std::chrono::steady_clock::now();
    int bad_blocks = 0;
    for (int b = 0; b < NBLOCKS; b++) bad_blocks += dev_dig[b] != host_dig[b];
    printf("%-10s inputs=4294967296 blocks=%d mismatching_blocks=%d device_s=%.2f host_s=%.2f\n", name,
           NBLOCKS, bad_blocks, std::chrono::duration<double>(t1 - t0).count(),
           std::chrono::duration<double>(t2 - t1).count());
    if (bad_blocks) {   // list the first mismatching inputs of the first few such blocks
        uint32_t *dout, *hout = (uint32_t *)malloc(sizeof(uint32_t) << BLOCK_BITS);
        cudaMalloc(&dout, sizeof(uint32_t) << BLOCK_BITS);
        for (int b = 0, shown = 0; b < NBLOCKS && shown < 4; b++) {
            if (dev_dig[b] == host_dig[b]) continue;
            shown++;
            uint32_t base = (uint32_t)b << BLOCK_BITS;
            k_block<FN><<<(1u << BLOCK_BITS) / THREADS, THREADS>>>(base, dout);
            cudaMemcpy(hout, dout, sizeof(uint32_t) << BLOCK_BITS, cudaMemcpyDeviceToHost);
            long long count = 0;
            for (uint32_t i = 0; i < (1u << BLOCK_BITS); i++) {
                uint32_t h = canon_bits(eval<FN>(tlm_from_bits((int32_t)(base + i))));
                if (h == hout[i]) continue;
                if (count++ < 8)
                    printf("  mismatch %s x=0x%08x host=0x%08x device=0x%08x\n", name, base + i, h, hout[i]);
            }
            printf("  block %d (inputs 0x%08x..): %lld mismatching inputs\n", b, base, count);
        }
        cudaFree(dout);
        free(hout);
    }
    cudaFree(ddig);
    return bad_blocks != 0;
}

typedef int (*check_fn)(const char *);
static const check_fn CHECKS[NFN] = {check<0>, check<1>, check<2>, check<3>, check<4>, check<5>, check<6>,
                                     check<7>, check<8>, check<9>, check<10>, check<11>, check<12>, check<13>,
                                     check<14>, check<15>, check<16>, check<17>, check<18>, check<19>,
                                     check<20>, check<21>, check<22>, check<23>, check<24>, check<25>,
                                     check<26>, check<27>, check<28>, check<29>, check<30>, check<31>,
                                     check<32>, check<33>, check<34>, check<35>, check<36>, check<37>,
                                     check<38>, check<39>, check<40>, check<41>, check<42>, check<43>,
                                     check<44>, check<45>, check<46>, check<47>, check<48>, check<49>,
                                     check<50>, check<51>, check<52>};

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);   // each function's line appears as soon as it is done
    int want[NFN] = {0}, any = 0, bad_fns = 0;
    for (int a = 1; a < argc; a++) {
        int found = 0;
        for (int f = 0; f < NFN; f++)
            if (!strcmp(argv[a], NAMES[f])) { want[f] = 1; any = found = 1; }
        if (!found) { fprintf(stderr, "unknown function %s\n", argv[a]); return 2; }
    }
    printf("all 2^32 inputs per function, %d host threads\n", omp_get_max_threads());
    auto t0 = std::chrono::steady_clock::now();
    for (int f = 0; f < NFN; f++)
        if (!any || want[f]) bad_fns += CHECKS[f](NAMES[f]);
    printf("tl_math device check: %s (%.1f s)\n", bad_fns ? "FAIL" : "all bit-identical",
           std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    return bad_fns ? 1 : 0;
}
