// gemm_x64_emu.cpp: CUDA's exact GEMM kernels (native/cuda/gemm_x64.cuh: x64_pipe over all of K
// and split per chunk, x64_fold, x64_general, and the staged path: x64::plan, x64_stage) compiled for the CPU with the emulation in
// cuda_emu/cuda_runtime.h, behind a C API that tests/test_gemm_x64_kernels.py loads. The launch
// shapes are gemm.cu's (launch_pipe, launch_general); the MMA is emulated as the float64 FMA
// chain in k order over the warp's fragments (TL_CUDA_EMU in gemm_x64.cuh).
#define TL_CUDA_EMU 1
#include <cuda_runtime.h>  // the emulation (tests/native/cuda_emu)

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

struct alignas(8) float2 {
    float x, y;
};
struct alignas(16) double2 {
    double x, y;
};
inline float2 make_float2(float x, float y) { return float2{x, y}; }
inline double2 make_double2(double x, double y) { return double2{x, y}; }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __fma_rn(double a, double b, double c) { return std::fma(a, b, c); }
inline float __double2float_rn(double a) { return (float)a; }

#include "gemm_x64.cuh"

namespace x64 {
constexpr size_t SMEM_MAX = SMEM_FOLD + (size_t)STAGES * 2 * (BM * (BK + 4)) * sizeof(float);
double2 x64_smem[SMEM_MAX / sizeof(double2)];   // the dynamic shared memory
}  // namespace x64

namespace {
template <bool TA, bool TB>
void pipe(int64_t batch, int M, int N, int K, const float *A, int64_t lda, int64_t sa,
          const float *B, int64_t ldb, int64_t sb, float *C, int64_t ldc, int64_t sc,
          int accumulate, int split, bool reverse) {
    using namespace x64;
    const int tiles = ((M + BM - 1) / BM) * ((N + BN - 1) / BN), chunks = (K + KC - 1) / KC;
    std::memset(x64_smem, 0xff, sizeof x64_smem);   // NaN: nothing may read before writing
    if (split) {
        std::vector<double> W((size_t)tiles * chunks * BM * BN, NAN);
        double *w = W.data();
        emu::launch(dim3((unsigned)tiles, (unsigned)chunks, 1), dim3(THREADS), [=] {
            x64_pipe<TA, TB, true>(A, lda, sa, B, ldb, sb, C, ldc, sc, w, M, N, K, accumulate, 0);
        }, reverse);
        const long long n = (long long)tiles * BM * BN;
        emu::launch(dim3((unsigned)((n + 255) / 256)), dim3(256), [=] {
            x64_fold(w, tiles, chunks, M, N, C, ldc);
        }, reverse);
        return;
    }
    emu::launch(dim3((unsigned)tiles, 1, (unsigned)batch), dim3(THREADS), [=] {
        x64_pipe<TA, TB, false>(A, lda, sa, B, ldb, sb, C, ldc, sc, nullptr, M, N, K, accumulate, 0);
    }, reverse);
}
// gemm.cu's launch_staged: the plan's operands copied into padded scratch, then the tiles
// (split when `split`) over the plan's K
void staged(int ta, int tb, int64_t batch, int M, int N, int K, const float *A, int64_t lda,
            int64_t sa, const float *B, int64_t ldb, int64_t sb, float *C, int64_t ldc, int64_t sc,
            int accumulate, int split, bool reverse) {
    using namespace x64;
    const Plan p = plan(ta, tb, batch, M, N, K, accumulate, A, lda, sa, B, ldb, sb);
    std::vector<float> as, bs;
    auto stage = [&](std::vector<float> &D, bool kcontig, int X, const float *&P, int64_t &ld,
                     int64_t &s, float pad) {
        int rows, cols, drows, dcols;
        stored_dims(kcontig, X, K, rows, cols);
        staged_dims(kcontig, X, p.K, drows, dcols);
        const int64_t n = (int64_t)drows * dcols;
        D.assign((size_t)(batch * n), NAN);   // every element is written
        float *d = D.data();
        const float *src = P;
        const int64_t sld = ld, ss = s;
        emu::launch(dim3((unsigned)((n + 255) / 256), (unsigned)batch), dim3(256), [=] {
            x64_stage(src, sld, ss, rows, cols, d, drows, dcols, pad, 0);
        }, reverse);
        P = d;
        ld = dcols;
        s = n;
    };
    if (p.stage_a) stage(as, !ta, M, A, lda, sa, -0.0f);
    if (p.stage_b) stage(bs, tb, N, B, ldb, sb, 0.0f);
    if (!ta && !tb) pipe<false, false>(batch, M, N, p.K, A, lda, sa, B, ldb, sb, C, ldc, sc, accumulate, split, reverse);
    else if (!ta && tb) pipe<false, true>(batch, M, N, p.K, A, lda, sa, B, ldb, sb, C, ldc, sc, accumulate, split, reverse);
    else if (ta && !tb) pipe<true, false>(batch, M, N, p.K, A, lda, sa, B, ldb, sb, C, ldc, sc, accumulate, split, reverse);
    else pipe<true, true>(batch, M, N, p.K, A, lda, sa, B, ldb, sb, C, ldc, sc, accumulate, split, reverse);
}
}  // namespace

extern "C" {
// kind 0: x64_pipe over all of K, 1: split per chunk then x64_fold (batch 1), 2: x64_general,
// 3 and 4: the staged path (x64::plan, x64_stage) then 0 or 1
int emu_gemm64(int kind, int ta, int tb, int64_t batch, int M, int N, int K, const float *A,
               int64_t lda, int64_t sa, const float *B, int64_t ldb, int64_t sb, float *C,
               int64_t ldc, int64_t sc, int accumulate, int reverse) {
    if (kind == 2) {
        const long long n = (long long)M * N;
        emu::launch(dim3((unsigned)((n + 255) / 256), (unsigned)batch), dim3(256), [=] {
            x64::x64_general(ta, tb, M, N, K, A, lda, sa, B, ldb, sb, C, ldc, sc, accumulate, 0);
        }, reverse != 0);
        return 0;
    }
    if ((kind == 1 || kind == 4) && batch != 1) return -1;
    const bool r = reverse != 0;
    if (kind >= 3) {
        staged(ta, tb, batch, M, N, K, A, lda, sa, B, ldb, sb, C, ldc, sc, accumulate, kind == 4, r);
        return 0;
    }
    if (!ta && !tb) pipe<false, false>(batch, M, N, K, A, lda, sa, B, ldb, sb, C, ldc, sc, accumulate, kind, r);
    else if (!ta && tb) pipe<false, true>(batch, M, N, K, A, lda, sa, B, ldb, sb, C, ldc, sc, accumulate, kind, r);
    else if (ta && !tb) pipe<true, false>(batch, M, N, K, A, lda, sa, B, ldb, sb, C, ldc, sc, accumulate, kind, r);
    else pipe<true, true>(batch, M, N, K, A, lda, sa, B, ldb, sb, C, ldc, sc, accumulate, kind, r);
    return 0;
}
}  // extern "C"
