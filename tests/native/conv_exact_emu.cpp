// conv_exact_emu.cpp: exact mode's convolution kernels (native/cuda/conv_exact.cuh) compiled for
// the CPU with the emulation in cuda_emu/cuda_runtime.h, behind a C API that
// tests/test_conv_exact_kernels.py loads. The passes are conv_exact.cuh's own (cx_forward,
// cx_input_grad, cx_kernel_grad), with the launch shapes, tiles and shared-memory sizes
// conv_pool.cu uses; the kernel gradient's per-sample partials are summed over the samples by
// rule 4 (tlm_sumacc, what linalg.cuh's Rule4Stream computes on the GPU). Shared memory past a
// kernel's size is poisoned with NaN and checked for stray writes.
#include <cuda_runtime.h>  // the emulation (tests/native/cuda_emu)

#include "conv_exact.cuh"

namespace {
constexpr size_t kSmemBytes = 64 * 1024;
alignas(16) float4 smem4[kSmemBytes / sizeof(float4)];  // the dynamic shared memory
constexpr size_t kSmemFloats = kSmemBytes / sizeof(float);

// -2 when a kernel wrote past its shared-memory size
int launch(dim3 grid, size_t bytes, std::function<void()> body, bool reverse) {
    float *f = reinterpret_cast<float *>(smem4);
    const size_t used = bytes / sizeof(float);
    std::fill(f, f + used, NAN);  // nothing may read shared memory before writing it
    std::fill(f + used, f + kSmemFloats, NAN);
    emu::launch(grid, dim3(CX_THREADS), std::move(body), reverse);
    for (size_t i = used; i < kSmemFloats; i++)
        if (f[i] == f[i]) return -2;
    return 0;
}

unsigned tiles(int64_t n, int t) { return (unsigned)((n + t - 1) / t); }

struct EmuLauncher {
    bool reverse;
    template <class T>
    int gather(T, int M, int ncols, const float *A, const float *bias, const float *img, float *out,
               ConvShape s) {
        static_assert(T::SMEM <= (int)kSmemBytes, "shared memory");
        return launch(dim3(tiles(ncols, T::BN), tiles(M, T::BM)), T::SMEM, [=] {
            switch (cx_ks(s)) {
            case 1: cx_gather<T::RM, T::RN, 1>(M, ncols, A, bias, img, out, s); break;
            case 3: cx_gather<T::RM, T::RN, 3>(M, ncols, A, bias, img, out, s); break;
            default: cx_gather<T::RM, T::RN, 0>(M, ncols, A, bias, img, out, s);
            }
        }, reverse);
    }
    template <class T>
    int scatter(T, int D, int N, const float *Wt, const float *bias, const float *src,
                float *out, ConvShape s) {
        return launch(dim3(tiles(cx_class_cols(N, s), T::BN), tiles(s.C, T::BM),
                           (unsigned)(s.SD * s.SH * s.SW)), T::SMEM, [=] {
            if (cx_3d(s)) cx_scatter<T::RM, T::RN, true>(D, N, Wt, bias, src, out, s);
            else cx_scatter<T::RM, T::RN, false>(D, N, Wt, bias, src, out, s);
        }, reverse);
    }
    template <class T>
    int wgrad(T, int M, int m, const float *A, const float *img, float *part, ConvShape s) {
        const int nk = s.C * s.KD * s.KH * s.KW;
        return launch(dim3(tiles(nk, T::BN), tiles(M, T::BM), (unsigned)m), T::SMEM, [=] {
            cx_wgrad<T::RM, T::RN>(M, A, img, part, s);
        }, reverse);
    }
};

ConvDims dims(const int *g) {
    ConvDims d;
    int *f[] = {&d.N, &d.Cin, &d.Cout, &d.D, &d.H, &d.W, &d.OD, &d.OH, &d.OW, &d.KD, &d.KH,
                &d.KW, &d.SD, &d.SH, &d.SW, &d.PD, &d.PH, &d.PW};
    for (int i = 0; i < 18; i++) *f[i] = g[i];
    return d;
}
}  // namespace

extern "C" {

// g: N, Cin, Cout, D, H, W, OD, OH, OW, KD, KH, KW, SD, SH, SW, PD, PH, PW (ConvDims). 0: done,
// -2: a kernel wrote past its shared memory
int emu_conv_exact_forward(const int *g, int transpose, const float *W, const float *bias,
                           const float *X, float *Y, int reverse) {
    EmuLauncher l{reverse != 0};
    return cx_forward(l, dims(g), transpose != 0, W, bias, X, Y);
}

// dW (the rule-4 sum over samples of the per-sample partials, `chunk` samples per launch, as
// conv_pool.cu's chunks) and dX
int emu_conv_exact_backward(const int *g, int transpose, const float *W, const float *X,
                            const float *G, float *dW, float *dX, int chunk, int reverse) {
    EmuLauncher l{reverse != 0};
    const ConvDims d = dims(g);
    int st = cx_input_grad(l, d, transpose != 0, W, G, dX);
    const int64_t nk = (int64_t)d.Cin * d.Cout * d.KD * d.KH * d.KW;
    std::vector<tlm_sumacc> acc((size_t)nk);
    for (auto &a : acc) tlm_sumacc_init(&a);
    std::vector<float> part((size_t)(nk * chunk), NAN);
    for (int n0 = 0; n0 < d.N && !st; n0 += chunk) {
        const int m = d.N - n0 < chunk ? d.N - n0 : chunk;
        std::fill(part.begin(), part.end(), NAN);  // an output never written shows
        st = cx_kernel_grad(l, d, transpose != 0, X, G, n0, m, part.data());
        for (int z = 0; z < m && nk; z++)
            for (int64_t i = 0; i < nk; i++) tlm_sumacc_push(&acc[(size_t)i], part[(size_t)(z * nk + i)]);
    }
    for (int64_t i = 0; i < nk; i++) dW[i] = tlm_sumacc_finish(&acc[(size_t)i]);
    return st;
}

}  // extern "C"
