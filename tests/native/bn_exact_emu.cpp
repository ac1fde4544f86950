// bn_exact_emu.cpp: exact mode's batchnorm kernels (native/cuda/bn_exact.cuh) compiled for the
// CPU with the emulation in cuda_emu/cuda_runtime.h, behind a C API that
// tests/test_bn_exact_kernels.py loads. The passes are bn_exact.cuh's own (bnx_forward,
// bnx_backward) with norm.cu's launch shapes.
#include <cuda_runtime.h>  // the emulation (tests/native/cuda_emu)

#include "bn_exact.cuh"

namespace {
struct EmuLauncher {
    bool reverse;
    template <int KIND>
    int chunks(int64_t nc, const float *a, const float *b, const float *mean, int64_t n, int64_t c,
               int64_t s, float *part, float *part2) {
        if (nc == 0) return 0;
        emu::launch(dim3((unsigned)(c * bnx_groups(nc))), dim3(BNX_CHUNK_THREADS), [=] {
            bnx_chunks<KIND>(a, b, mean, n, c, s, part, part2);
        }, reverse);
        return 0;
    }
    template <int KIND>
    int tree(int64_t nc, float *part, float *part2, float inv_cnt, float eps, float *o1, float *o2,
             float *o3) {
        emu::launch(dim3((unsigned)o1_channels), dim3(threads), [=] {
            bnx_tree<KIND>(part, part2, nc, inv_cnt, eps, o1, o2, o3);
        }, reverse);
        return 0;
    }
    int fwd(const float *x, const float *gamma, const float *beta, const float *mean, const float *sd,
            float *y, float *xhat, int64_t total, int64_t c, int64_t s) {
        if (total == 0) return 0;
        emu::launch(dim3(3), dim3(64), [=] {  // a short grid: the grid-stride loop wraps
            bnx_apply_fwd<unsigned>(x, gamma, beta, mean, sd, y, xhat, (unsigned)total, (unsigned)c,
                                    (unsigned)s);
        }, reverse);
        return 0;
    }
    int bwd(const float *g, const float *xhat, const float *inv_std, const float *gamma,
            const float *dbeta, const float *dgamma, float *dx, int64_t total, int64_t c, int64_t s,
            float fcnt, float inv_cnt) {
        if (total == 0) return 0;
        emu::launch(dim3(3), dim3(64), [=] {
            bnx_apply_bwd<int64_t>(g, xhat, inv_std, gamma, dbeta, dgamma, dx, total, c, s, fcnt,
                                   inv_cnt);
        }, reverse);
        return 0;
    }
    int64_t o1_channels;
    unsigned threads;
};
}  // namespace

extern "C" {

int emu_bn_forward(const float *x, const float *gamma, const float *beta, float *y, float *xhat,
                   float *mean, float *var, float *inv_std, int64_t n, int64_t c, int64_t s,
                   float eps, int threads, int reverse) {
    EmuLauncher l{reverse != 0, c, (unsigned)threads};
    std::vector<float> part((size_t)(c * bnx_chunks_of(n * s) + 1), NAN), sd((size_t)c + 1, NAN);
    return bnx_forward(l, x, gamma, beta, y, xhat, mean, var, inv_std, n, c, s, eps, part.data(),
                       sd.data());
}

int emu_bn_backward(const float *g, const float *xhat, const float *inv_std, const float *gamma,
                    float *dx, float *dgamma, float *dbeta, int64_t n, int64_t c, int64_t s,
                    int threads, int reverse) {
    EmuLauncher l{reverse != 0, c, (unsigned)threads};
    const size_t np = (size_t)(c * bnx_chunks_of(n * s) + 1);
    std::vector<float> part(np, NAN), part2(np, NAN);
    return bnx_backward(l, g, xhat, inv_std, gamma, dx, dgamma, dbeta, n, c, s, part.data(),
                        part2.data());
}

}  // extern "C"
