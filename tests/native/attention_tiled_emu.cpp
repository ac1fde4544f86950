// attention_tiled_emu.cpp: native/cuda/attention_tiled.cuh's kernels compiled for the CPU with
// the emulation in cuda_emu/cuda_runtime.h, behind a C API that tests/test_attention_tiles.py
// loads. Launch shapes, shared-memory sizes and the block order are attention.cu's.
#include <cuda_runtime.h>  // the emulation (tests/native/cuda_emu)

#include "reduce_util.cuh"
#include "attention_tiled.cuh"

namespace {
alignas(16) float4 smem4[(256 * 1024) / sizeof(float4)];  // the dynamic shared memory

template <int HDP>
void fwd(const float *Q, const float *K, const float *V, const float *M, float *O, float *L, int B,
         int n, int H, int hd, float scale, bool causal, bool vec, bool reverse) {
    static_assert(Tiled<HDP>::FWD_SMEM <= sizeof(smem4), "shared memory");
    dim3 grid((n + TROWS - 1) / TROWS, B * H);
    emu::launch(grid, dim3(TTHREADS), [=] {
        attn_fwd_tiled<HDP>(Q, K, V, M, O, L, n, H, hd, scale, causal, vec);
    }, reverse);
}

template <int HDP>
void bwd(const float *Q, const float *K, const float *V, const float *dO, const float *L,
         const float *D, const float *M, float *dQ, float *dK, float *dV, int B, int n, int H,
         int hd, float scale, bool causal, bool vec, bool reverse) {
    static_assert(Tiled<HDP>::DQ_SMEM <= sizeof(smem4) && Tiled<HDP>::DKV_SMEM <= sizeof(smem4),
                  "shared memory");
    dim3 grid((n + TROWS - 1) / TROWS, B * H);
    emu::launch(grid, dim3(TTHREADS), [=] {
        attn_dq_tiled<HDP>(Q, K, V, dO, L, D, M, dQ, n, H, hd, scale, causal, vec);
    }, reverse);
    emu::launch(grid, dim3(TTHREADS), [=] {
        attn_dkv_tiled<HDP>(Q, K, V, dO, L, D, M, dK, dV, n, H, hd, scale, causal, vec);
    }, reverse);
}
}  // namespace

extern "C" {

// the padded head dim attention.cu picks for hd (0: not a tiled head dim)
int emu_tiled_hdp(int hd) { return hd > 128 || hd <= 32 ? 0 : hd > 96 ? 128 : hd > 64 ? 96 : 64; }

int emu_attention_fwd(const float *Q, const float *K, const float *V, const float *M, float *O,
                      float *L, int B, int n, int H, int hd, float scale, int causal, int vec,
                      int reverse) {
    switch (emu_tiled_hdp(hd)) {
    case 64: fwd<64>(Q, K, V, M, O, L, B, n, H, hd, scale, causal, vec, reverse); return 0;
    case 96: fwd<96>(Q, K, V, M, O, L, B, n, H, hd, scale, causal, vec, reverse); return 0;
    case 128: fwd<128>(Q, K, V, M, O, L, B, n, H, hd, scale, causal, vec, reverse); return 0;
    }
    return -1;
}

int emu_attention_bwd(const float *Q, const float *K, const float *V, const float *dO,
                      const float *L, const float *D, const float *M, float *dQ, float *dK,
                      float *dV, int B, int n, int H, int hd, float scale, int causal, int vec,
                      int reverse) {
    switch (emu_tiled_hdp(hd)) {
    case 64: bwd<64>(Q, K, V, dO, L, D, M, dQ, dK, dV, B, n, H, hd, scale, causal, vec, reverse); return 0;
    case 96: bwd<96>(Q, K, V, dO, L, D, M, dQ, dK, dV, B, n, H, hd, scale, causal, vec, reverse); return 0;
    case 128: bwd<128>(Q, K, V, dO, L, D, M, dQ, dK, dV, B, n, H, hd, scale, causal, vec, reverse); return 0;
    }
    return -1;
}

}  // extern "C"
