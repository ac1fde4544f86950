// attention_tiled_emu.cpp: native/cuda/attention_tiled.cuh's kernels (default mode) and
// attention_exact.cuh's (exact mode) compiled for the CPU with the emulation in
// cuda_emu/cuda_runtime.h, behind a C API that tests/test_attention_tiles.py loads. Launch shapes, shared-memory sizes and the block order are attention.cu's; shared
// memory past a kernel's size is poisoned with NaN and checked for stray writes.
#include <cuda_runtime.h>  // the emulation (tests/native/cuda_emu)

#include <vector>

#include "reduce_util.cuh"
#include "attention_tiled.cuh"
#include "attention_exact.cuh"

namespace {
constexpr size_t kSmemBytes = 256 * 1024;
alignas(16) float4 smem4[kSmemBytes / sizeof(float4)];  // the dynamic shared memory
constexpr size_t kSmemFloats = kSmemBytes / sizeof(float);

// A kernel launch with `bytes` of dynamic shared memory, as attention.cu sizes it. The floats
// past that size hold NaN: a read past the kernel's share shows as NaN in its outputs, and a
// write there makes the launch fail (return false).
bool launch(dim3 grid, size_t bytes, std::function<void()> body, bool reverse) {
    float *f = reinterpret_cast<float *>(smem4);
    const size_t used = bytes / sizeof(float);
    std::fill(f, f + used, 0.0f);
    std::fill(f + used, f + kSmemFloats, NAN);
    emu::launch(grid, dim3(TTHREADS), std::move(body), reverse);
    for (size_t i = used; i < kSmemFloats; i++)
        if (f[i] == f[i]) return false;
    return true;
}

int g_fwd_keys = 64;  // the forward's key tile (emu_set_fwd_keys)

template <int HDP, int KEYS>
bool fwd_keys(const float *Q, const float *K, const float *V, const float *M, float *O, float *L,
              int B, int n, int H, int hd, float scale, bool causal, bool vec, bool reverse) {
    using F = FwdTiles<HDP, KEYS>;
    static_assert(F::SMEM < sizeof(smem4), "shared memory");
    dim3 grid((n + TROWS - 1) / TROWS, B * H);
    return launch(grid, F::SMEM, [=] {
        attn_fwd_tiled<HDP, KEYS>(Q, K, V, M, O, L, n, H, hd, scale, causal, vec);
    }, reverse);
}

template <int HDP>
bool fwd(const float *Q, const float *K, const float *V, const float *M, float *O, float *L, int B,
         int n, int H, int hd, float scale, bool causal, bool vec, bool reverse) {
    if (g_fwd_keys == 32)
        return fwd_keys<HDP, 32>(Q, K, V, M, O, L, B, n, H, hd, scale, causal, vec, reverse);
    return fwd_keys<HDP, 64>(Q, K, V, M, O, L, B, n, H, hd, scale, causal, vec, reverse);
}

template <int HDP>
bool bwd(const float *Q, const float *K, const float *V, const float *dO, const float *L,
         const float *D, const float *M, float *dQ, float *dK, float *dV, int B, int n, int H,
         int hd, float scale, bool causal, bool vec, bool reverse) {
    static_assert(Tiled<HDP>::DQ_SMEM < sizeof(smem4) && Tiled<HDP>::DKV_SMEM < sizeof(smem4),
                  "shared memory");
    dim3 grid((n + TROWS - 1) / TROWS, B * H);
    return launch(grid, Tiled<HDP>::DQ_SMEM, [=] {
               attn_dq_tiled<HDP>(Q, K, V, dO, L, D, M, dQ, n, H, hd, scale, causal, vec);
           }, reverse) &&
           launch(grid, Tiled<HDP>::DKV_SMEM, [=] {
               attn_dkv_tiled<HDP>(Q, K, V, dO, L, D, M, dK, dV, n, H, hd, scale, causal, vec);
           }, reverse);
}
// The one-pass backward's dQ on the CPU: blocks run one after another here, so no block can
// wait for another; each rank's share goes to its own slot instead, and the caller sums the
// slots in rank order (first rank stored, later ranks added), the order attention.cu's
// counters enforce. A rank written twice, or a share missing below a written rank, fails.
// It also records the step of its walk at which each block reached each (tile, rank): on the
// GPU rank r waits for rank r - 1, so that one must come at an earlier step of its own walk
// (then no wait can close a cycle, and the walk cannot deadlock while one head's blocks are
// all resident).
struct DqSlots {
    float *part;             // [ranks][B n HD]
    unsigned char *written;  // the same shape
    size_t size;
    int *step_at;            // [ranks][tiles of all heads]: the step, -1 if none
    int *cur;                // the running block's step (blocks run one after another)
    size_t slots;
    int block_id() const {
        if (threadIdx.x == 0) *cur = 0;
        return (int)(blockIdx.x + gridDim.x * blockIdx.y);
    }
    void wait(int, int) const { __syncthreads(); }
    void add(size_t i, float v, int rank) const {
        const size_t k = (size_t)rank * size + i;
        if (written[k]) abort();
        part[k] = v;
        written[k] = 1;
    }
    void done(int slot, int rank) const {
        if (threadIdx.x == 0) step_at[(size_t)rank * slots + slot] = (*cur)++;
        __syncthreads();
    }
};

int g_onepass_cols = 32;  // the one-pass backward's query tile (emu_set_onepass_cols)

template <int HDP, int CPT>
bool bwd_onepass_cpt(const float *Q, const float *K, const float *V, const float *dO,
                     const float *L, const float *D, const float *M, float *dQ, float *dK,
                     float *dV, int B, int n, int H, int hd, float scale, bool causal, bool vec,
                     bool reverse) {
    using P = Onepass<HDP, CPT>;
    static_assert(P::SMEM < sizeof(smem4), "shared memory");
    const int nb = (n + TROWS - 1) / TROWS;
    const size_t size = (size_t)B * n * H * hd;
    std::vector<float> part((size_t)nb * size);
    std::vector<unsigned char> written((size_t)nb * size, 0);
    const size_t slots = (size_t)B * H * ((n + P::COLS - 1) / P::COLS);
    std::vector<int> step_at((size_t)nb * slots, -1);
    int cur = 0;
    DqSlots sink{part.data(), written.data(), size, step_at.data(), &cur, slots};
    dim3 grid(nb, B * H);
    if (!launch(grid, P::SMEM, [=] {
            attn_bwd_onepass<HDP, CPT, DqSlots>(Q, K, V, dO, L, D, M, sink, dK, dV, n, H, hd,
                                                scale, causal, vec);
        }, reverse))
        return false;
    for (size_t t = 0; t < slots; t++) {  // every tile: ranks 0.. without gaps, steps rising
        if (step_at[t] < 0) return false;  // every tile has a first share
        for (int r = 1; r < nb && step_at[(size_t)r * slots + t] >= 0; r++)
            if (step_at[(size_t)r * slots + t] <= step_at[(size_t)(r - 1) * slots + t])
                return false;
    }
    for (size_t i = 0; i < size; i++) {
        if (!written[i]) continue;  // past hd in the padded layout: never the case here
        float acc = part[i];
        int r = 1;
        for (; r < nb && written[(size_t)r * size + i]; r++) acc += part[(size_t)r * size + i];
        for (int q = r; q < nb; q++)
            if (written[(size_t)q * size + i]) return false;  // a gap in the ranks
        dQ[i] = acc;
    }
    return true;
}

template <int HDP>
bool bwd_onepass(const float *Q, const float *K, const float *V, const float *dO, const float *L,
                 const float *D, const float *M, float *dQ, float *dK, float *dV, int B, int n,
                 int H, int hd, float scale, bool causal, bool vec, bool reverse) {
    if constexpr (HDP == 64)
        if (g_onepass_cols == 64)
            return bwd_onepass_cpt<64, 8>(Q, K, V, dO, L, D, M, dQ, dK, dV, B, n, H, hd, scale,
                                          causal, vec, reverse);
    return bwd_onepass_cpt<HDP, 4>(Q, K, V, dO, L, D, M, dQ, dK, dV, B, n, H, hd, scale, causal,
                                   vec, reverse);
}

template <int HDP>
bool fwd_exact(const float *Q, const float *K, const float *V, const float *M, float *O, float *L,
               int B, int n, int H, int hd, float scale, bool causal, bool vec, bool reverse) {
    static_assert(Exact<HDP>::FWD_SMEM < sizeof(smem4), "shared memory");
    dim3 grid((n + TROWS - 1) / TROWS, B * H);
    return launch(grid, Exact<HDP>::FWD_SMEM, [=] {
        attn_fwd_exact<HDP>(Q, K, V, M, O, L, n, H, hd, scale, causal, vec);
    }, reverse);
}

template <int HDP>
bool bwd_exact(const float *Q, const float *K, const float *V, const float *dO, const float *L,
               const float *D, const float *M, float *dQ, float *dK, float *dV, int B, int n,
               int H, int hd, float scale, bool causal, bool vec, bool reverse) {
    dim3 grid((n + TROWS - 1) / TROWS, B * H);
    return launch(grid, Tiled<HDP>::DQ_SMEM, [=] {
               attn_dq_exact<HDP>(Q, K, V, dO, L, D, M, dQ, n, H, hd, scale, causal, vec);
           }, reverse) &&
           launch(grid, Tiled<HDP>::DKV_SMEM, [=] {
               attn_dkv_exact<HDP>(Q, K, V, dO, L, D, M, dK, dV, n, H, hd, scale, causal, vec);
           }, reverse);
}

// the padded head dim attention.cu's exact path picks for hd (0: a wide head, the row kernels)
int exact_hdp(int hd) { return hd > 128 ? 0 : hd > 96 ? 128 : hd > 64 ? 96 : 64; }
}  // namespace

extern "C" {

// the one-pass backward's query tile for the next calls (attention.cu: TORCHLEAN_ATTN_BWD=
// onepass64 takes 64 for head dims up to 64)
void emu_set_onepass_cols(int cols) { g_onepass_cols = cols; }

// the forward's key tile for the next emu_attention_fwd calls (attention.cu:
// TORCHLEAN_ATTN_FWD_KEYS)
void emu_set_fwd_keys(int keys) { g_fwd_keys = keys; }

// the padded head dim attention.cu picks for hd (0: not a tiled head dim)
int emu_tiled_hdp(int hd) { return hd > 128 || hd <= 32 ? 0 : hd > 96 ? 128 : hd > 64 ? 96 : 64; }

// 0: done; -1: not a tiled head dim; -2: a kernel wrote past its shared-memory size
int emu_attention_fwd(const float *Q, const float *K, const float *V, const float *M, float *O,
                      float *L, int B, int n, int H, int hd, float scale, int causal, int vec,
                      int reverse) {
    bool ok;
    switch (emu_tiled_hdp(hd)) {
    case 64: ok = fwd<64>(Q, K, V, M, O, L, B, n, H, hd, scale, causal, vec, reverse); break;
    case 96: ok = fwd<96>(Q, K, V, M, O, L, B, n, H, hd, scale, causal, vec, reverse); break;
    case 128: ok = fwd<128>(Q, K, V, M, O, L, B, n, H, hd, scale, causal, vec, reverse); break;
    default: return -1;
    }
    return ok ? 0 : -2;
}

int emu_attention_bwd(const float *Q, const float *K, const float *V, const float *dO,
                      const float *L, const float *D, const float *M, float *dQ, float *dK,
                      float *dV, int B, int n, int H, int hd, float scale, int causal, int vec,
                      int reverse) {
    bool ok;
    switch (emu_tiled_hdp(hd)) {
    case 64: ok = bwd<64>(Q, K, V, dO, L, D, M, dQ, dK, dV, B, n, H, hd, scale, causal, vec, reverse); break;
    case 96: ok = bwd<96>(Q, K, V, dO, L, D, M, dQ, dK, dV, B, n, H, hd, scale, causal, vec, reverse); break;
    case 128: ok = bwd<128>(Q, K, V, dO, L, D, M, dQ, dK, dV, B, n, H, hd, scale, causal, vec, reverse); break;
    default: return -1;
    }
    return ok ? 0 : -2;
}

// the one-pass backward (attn_bwd_onepass), the same contract as emu_attention_bwd
int emu_attention_bwd_onepass(const float *Q, const float *K, const float *V, const float *dO,
                              const float *L, const float *D, const float *M, float *dQ,
                              float *dK, float *dV, int B, int n, int H, int hd, float scale,
                              int causal, int vec, int reverse) {
    bool ok;
    switch (emu_tiled_hdp(hd)) {
    case 64: ok = bwd_onepass<64>(Q, K, V, dO, L, D, M, dQ, dK, dV, B, n, H, hd, scale, causal, vec, reverse); break;
    case 96: ok = bwd_onepass<96>(Q, K, V, dO, L, D, M, dQ, dK, dV, B, n, H, hd, scale, causal, vec, reverse); break;
    case 128: ok = bwd_onepass<128>(Q, K, V, dO, L, D, M, dQ, dK, dV, B, n, H, hd, scale, causal, vec, reverse); break;
    default: return -1;
    }
    return ok ? 0 : -2;
}

// exact mode: the same contract as emu_attention_fwd/bwd, plus D (b*h*n) computed as
// attention.cu does (attn_rowdot_exact) from dO and O; -1: a head dim above 128
int emu_exact_fwd(const float *Q, const float *K, const float *V, const float *M, float *O,
                  float *L, int B, int n, int H, int hd, int causal, int vec, int reverse) {
    const float scale = (float)(1.0 / sqrt((double)hd));  // attention.cu's and the stub's
    bool ok;
    switch (exact_hdp(hd)) {
    case 64: ok = fwd_exact<64>(Q, K, V, M, O, L, B, n, H, hd, scale, causal, vec, reverse); break;
    case 96: ok = fwd_exact<96>(Q, K, V, M, O, L, B, n, H, hd, scale, causal, vec, reverse); break;
    case 128: ok = fwd_exact<128>(Q, K, V, M, O, L, B, n, H, hd, scale, causal, vec, reverse); break;
    default: return -1;
    }
    return ok ? 0 : -2;
}

int emu_exact_bwd(const float *Q, const float *K, const float *V, const float *O,
                  const float *dO, const float *L, const float *M, float *D, float *dQ,
                  float *dK, float *dV, int B, int n, int H, int hd, int causal, int vec,
                  int reverse) {
    const float scale = (float)(1.0 / sqrt((double)hd));
    const int64_t rows = (int64_t)B * H * n;
    launch(dim3((unsigned)((rows + TTHREADS - 1) / TTHREADS)), 0, [=] {
        attn_rowdot_exact(dO, O, D, rows, n, H, hd);
    }, reverse);
    bool ok;
    switch (exact_hdp(hd)) {
    case 64: ok = bwd_exact<64>(Q, K, V, dO, L, D, M, dQ, dK, dV, B, n, H, hd, scale, causal, vec, reverse); break;
    case 96: ok = bwd_exact<96>(Q, K, V, dO, L, D, M, dQ, dK, dV, B, n, H, hd, scale, causal, vec, reverse); break;
    case 128: ok = bwd_exact<128>(Q, K, V, dO, L, D, M, dQ, dK, dV, B, n, H, hd, scale, causal, vec, reverse); break;
    default: return -1;
    }
    return ok ? 0 : -2;
}

}  // extern "C"
