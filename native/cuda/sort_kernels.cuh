// sort_kernels.cuh: the sort family's CUDA kernels other than CUB's sorts (native/cuda/sort.cu
// launches them), in a header so that tests/native/sort_emu.cpp runs the same source on the CPU
// with the emulation in tests/native/cuda_emu and compares it with the stub. The rules they follow
// are formulas/sort.h's; see sort.cu for the schedules.
#pragma once

#include <stdint.h>
#include "formulas/sort.h"

// grid-stride loop over n items (results never depend on the grid size)
#define SK_GRID_STRIDE(i, n) \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

static __global__ void k_sort_keys(const float *__restrict__ x, uint32_t *__restrict__ keys, int32_t *__restrict__ pos,
                            int64_t n, int64_t cols, int64_t descending) {
    SK_GRID_STRIDE(t, n) {
        keys[t] = tlf_sort_key(x[t], descending);
        pos[t] = (int32_t)(t % cols);
    }
}

static __global__ void k_take_rows(const float *__restrict__ x, const float *__restrict__ idx, float *__restrict__ y,
                            int64_t rows, int64_t cols, int64_t k) {
    SK_GRID_STRIDE(t, rows * k) {
        int64_t c = tlf_row_index(idx[t], cols);
        y[t] = c < 0 ? 0.0f : x[(t / k) * cols + c];
    }
}

// distinct positions: every target is written by at most one update, 0 + g as the stub's sum
static __global__ void k_take_back_distinct(const float *__restrict__ idx, const float *__restrict__ g,
                                     float *__restrict__ dx, int64_t rows, int64_t k, int64_t cols) {
    SK_GRID_STRIDE(t, rows * k) {
        int64_t c = tlf_row_index(idx[t], cols);
        if (c >= 0) dx[(t / k) * cols + c] = tlm_add(0.0f, g[t]);
    }
}

// repeated positions: each row's updates in index order on one thread (the stub's order)
static __global__ void k_take_back_ordered(const float *__restrict__ idx, const float *__restrict__ g,
                                    float *__restrict__ dx, int64_t rows, int64_t k, int64_t cols) {
    SK_GRID_STRIDE(r, rows) {
        for (int64_t j = 0; j < k; j++) {
            int64_t c = tlf_row_index(idx[r * k + j], cols);
            if (c >= 0) dx[r * cols + c] = tlm_add(dx[r * cols + c], g[r * k + j]);
        }
    }
}

static __device__ __forceinline__ int64_t pos_of(int64_t j, int64_t cols, int64_t reverse) {
    return reverse ? cols - 1 - j : j;
}

// Running values by tiles: a warp owns 32 consecutive chunks (chunk u = (row u / nch, chunk u %
// nch)), lane l the chunk u0 + l, and walks them 32 entries at a time through a 32 x 33 tile of
// shared memory: the warp loads entry q of all 32 chunks together (32 neighbouring floats per
// chunk: coalesced), each lane then runs its chunk's sequential steps over its tile row (the
// stub's chunk loop, formulas/sort.h), and the warp stores the tile back the same way. With
// `carry` (many chunks) chunk c > 0 writes carry[u] (+|*) its local value; `tot`, when given,
// receives each chunk's total; `y` null writes nothing. One chunk per row (nch 1) is a row.
constexpr int CUM_WARPS = 8;                      // warps per block
constexpr int CUM_TILE = 32 * 33;                 // floats of shared memory per warp
template <int KIND>
static __global__ void __launch_bounds__(CUM_WARPS * 32)
k_cum_tiles(const float *__restrict__ x, float *__restrict__ y, const float *__restrict__ carry,
            float *__restrict__ tot, int64_t rows, int64_t cols, int64_t nch, int64_t reverse) {
    extern __shared__ float4 smem4[];
    const unsigned all = 0xffffffffu;
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    float *tile = reinterpret_cast<float *>(smem4) + warp * CUM_TILE;
    const int64_t units = rows * nch, groups = (units + 31) / 32;
    for (int64_t gi = (int64_t)blockIdx.x * CUM_WARPS + warp; gi < groups; gi += (int64_t)gridDim.x * CUM_WARPS) {
        // this lane's chunk: its first entry's address, direction and length
        const int64_t u = gi * 32 + lane;
        const bool mine = u < units;
        const int64_t r = mine ? u / nch : 0, c = mine ? u % nch : 0;
        const int64_t j0 = c * TL_CUM_CHUNK;
        const int len = mine ? (int)min((int64_t)TL_CUM_CHUNK, cols - j0) : 0;
        const long long a0 = r * cols + pos_of(j0, cols, reverse);
        const bool carried = carry != nullptr && c > 0;
        const float cin = carried ? carry[u] : 0.0f;
        const long long step = reverse ? -1 : 1;
        int most = len;                            // the warp's longest chunk
        for (int o = 16; o > 0; o /= 2) most = max(most, __shfl_xor_sync(all, most, o));
        float local = 0.0f;
        for (int q0 = 0; q0 < most; q0 += 32) {
            float v[32];                           // entry q0 + lane of chunk i: all loads in flight
#pragma unroll
            for (int i = 0; i < 32; i++) {
                const long long ai = __shfl_sync(all, a0, i);
                const int li = __shfl_sync(all, len, i);
                v[i] = q0 + lane < li ? x[ai + step * (q0 + lane)] : 0.0f;
            }
#pragma unroll
            for (int i = 0; i < 32; i++) tile[i * 33 + lane] = v[i];
            __syncwarp();
#pragma unroll
            for (int q = 0; q < 32; q++) v[q] = tile[lane * 33 + q];   // this lane's chunk
            const int m = min(32, len - q0);
#pragma unroll
            for (int q = 0; q < 32; q++) {         // its steps, in order
                if (q < m) {
                    local = q0 + q == 0 ? v[q] : tlf_cum_step(local, v[q], KIND);
                    v[q] = carried ? tlf_cum_step(cin, local, KIND) : local;
                }
            }
#pragma unroll
            for (int q = 0; q < 32; q++) tile[lane * 33 + q] = v[q];
            __syncwarp();
            if (y != nullptr) {
#pragma unroll
                for (int i = 0; i < 32; i++) {
                    const long long ai = __shfl_sync(all, a0, i);
                    const int li = __shfl_sync(all, len, i);
                    if (q0 + lane < li) y[ai + step * (q0 + lane)] = tile[i * 33 + lane];
                }
            }
            __syncwarp();
        }
        if (tot != nullptr && mine) tot[u] = local;
    }
}

// The carries into a row's chunks, summed in chunk order (carry[c] = t0 (+) t1 ... (+) t[c-1],
// replacing tot's totals; chunk 0's entry is unused): a warp per row stages 32 totals at a time
// in shared memory (the next 32 in flight), every lane reads all 32 into registers and runs the
// chain over them, lane i keeping the carry into chunk base + i: one dependent step per chunk.
template <int KIND>
static __global__ void __launch_bounds__(CUM_WARPS * 32)
k_cum_carries(float *__restrict__ tot, int64_t rows, int64_t nch) {
    extern __shared__ float4 smem4[];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    float *stage = reinterpret_cast<float *>(smem4) + warp * 32;
    for (int64_t r = (int64_t)blockIdx.x * CUM_WARPS + warp; r < rows; r += (int64_t)gridDim.x * CUM_WARPS) {
        float *tr = tot + r * nch;
        float run = 0.0f;                          // the running total of the chunks so far
        float next = lane < nch ? tr[lane] : 0.0f;
        for (int64_t base = 0; base < nch; base += 32) {
            stage[lane] = next;
            next = base + 32 + lane < nch ? tr[base + 32 + lane] : 0.0f;
            __syncwarp();
            float t[32];
#pragma unroll
            for (int i = 0; i < 32; i++) t[i] = stage[i];
            __syncwarp();                          // stage is rewritten by the next batch
            const int m = (int)min((int64_t)32, nch - base);
            float mine = 0.0f;
            if (base == 0) run = t[0];                 // chunk 0 starts the chain (no step)
            if (m == 32) {                             // a whole batch: only the steps are a chain
#pragma unroll
                for (int i = 0; i < 32; i++) {
                    mine = lane == i ? run : mine;
                    if (base + i > 0) run = tlf_cum_step(run, t[i], KIND);
                }
            } else {
#pragma unroll
                for (int i = 0; i < 32; i++) {
                    if (i < m) {
                        mine = lane == i ? run : mine;
                        if (base + i > 0) run = tlf_cum_step(run, t[i], KIND);
                    }
                }
            }
            if (lane < m) tr[base + lane] = mine;
        }
    }
}

// topk_rows: the first k positions of each row in argsort_rows's order (the stable sort of the
// keys), found without sorting the row: a block per row (1) selects the key T at sorted place
// k - 1 by four 8-bit radix passes (a shared histogram of the keys that share the digits found
// so far; warp 0 scans it), (2) walks the row once in position order, 256 entries at a time,
// keeping every key below T and the first of the keys equal to T (ranks from warp ballots, so
// each kept entry has one slot), and (3) sorts the k kept (key, position) pairs, all distinct,
// with a bitonic network in shared memory: the same positions as the whole-row stable sort.
constexpr int TOPK_THREADS = 256;
constexpr int TOPK_MAX = 1024;                    // larger k: sort.cu sorts whole rows
// shared memory: 256 histogram counts, 8 warp counts x 2, the scan's answer, then TOPK_MAX keys and positions
constexpr int TOPK_SMEM_WORDS = 256 + 16 + 4 + 2 * TOPK_MAX;

static __device__ __forceinline__ bool topk_before(uint32_t ka, int32_t pa, uint32_t kb, int32_t pb) {
    return ka < kb || (ka == kb && pa < pb);
}

static __global__ void __launch_bounds__(TOPK_THREADS)
k_topk_rows(const float *__restrict__ x, float *__restrict__ idx, int64_t rows, int64_t cols, int64_t k,
            int64_t descending) {
    extern __shared__ float4 smem4[];
    const unsigned all = 0xffffffffu;
    unsigned *hist = reinterpret_cast<unsigned *>(smem4), *wcount = hist + 256, *found = wcount + 16;
    uint32_t *skey = found + 4;
    int32_t *spos = reinterpret_cast<int32_t *>(skey + TOPK_MAX);
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    int P = 1;                                    // the sorting network's width
    while (P < k) P *= 2;
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const float *xr = x + r * cols;
        // (1) T and `want`, the number of entries equal to T among the first k
        uint32_t prefix = 0, mask = 0;
        unsigned want = (unsigned)k;
        for (int shift = 24; shift >= 0; shift -= 8) {
            for (int b = tid; b < 256; b += TOPK_THREADS) hist[b] = 0;
            __syncthreads();
            for (int64_t j = tid; j < cols; j += TOPK_THREADS) {
                const uint32_t key = tlf_sort_key(xr[j], descending);
                if ((key & mask) == prefix) atomicAdd(&hist[(key >> shift) & 255u], 1u);
            }
            __syncthreads();
            if (warp == 0) {                      // lane l holds bins 8l .. 8l + 7
                unsigned own = 0;
                for (int b = 0; b < 8; b++) own += hist[8 * lane + b];
                unsigned incl = own;              // inclusive scan over lanes
                for (int d = 1; d < 32; d *= 2) {
                    const unsigned v = __shfl_sync(all, incl, lane >= d ? lane - d : lane);
                    if (lane >= d) incl += v;
                }
                unsigned before = incl - own;
                if (before < want && want <= incl) {   // one lane: the digit is in its bins
                    int b = 0;
                    while (before + hist[8 * lane + b] < want) before += hist[8 * lane + b++];
                    found[0] = (unsigned)(8 * lane + b);
                    found[1] = want - before;
                }
            }
            __syncthreads();
            prefix |= found[0] << shift;
            mask |= 255u << shift;
            want = found[1];
            __syncthreads();                      // found is read before the next pass writes it
        }
        const uint32_t T = prefix;
        // (2) keys below T take slots 0 .. k - want - 1, the first `want` equal to T the rest
        unsigned less = 0, equal = 0;             // kept so far (every thread keeps the counts)
        const unsigned below = (unsigned)k - want;
        for (int64_t base = 0; base < cols; base += TOPK_THREADS) {
            const int64_t j = base + tid;
            const uint32_t key = j < cols ? tlf_sort_key(xr[j], descending) : 0xffffffffu;
            const bool lt = j < cols && key < T, eq = j < cols && key == T;
            const unsigned blt = __ballot_sync(all, lt), beq = __ballot_sync(all, eq);
            const unsigned under = (1u << lane) - 1u;
            if (lane == 0) { wcount[warp] = (unsigned)__popc(blt); wcount[8 + warp] = (unsigned)__popc(beq); }
            __syncthreads();
            unsigned rlt = less + (unsigned)__popc(blt & under), req = equal + (unsigned)__popc(beq & under);
            for (int w = 0; w < TOPK_THREADS / 32; w++) {
                if (w < warp) { rlt += wcount[w]; req += wcount[8 + w]; }
                less += wcount[w];
                equal += wcount[8 + w];
            }
            if (lt) { skey[rlt] = key; spos[rlt] = (int32_t)j; }
            if (eq && req < want) { skey[below + req] = key; spos[below + req] = (int32_t)j; }
            __syncthreads();                      // wcount is rewritten by the next round
        }
        for (int i = (int)k + tid; i < P; i += TOPK_THREADS) { skey[i] = 0xffffffffu; spos[i] = 0x7fffffff; }
        __syncthreads();
        // (3) ascending (key, position) by a bitonic network over P slots
        for (int size = 2; size <= P; size *= 2) {
            for (int stride = size / 2; stride > 0; stride /= 2) {
                for (int i = tid; i < P; i += TOPK_THREADS) {
                    const int o = i ^ stride;
                    if (o > i) {
                        const bool up = (i & size) == 0;
                        if (topk_before(skey[o], spos[o], skey[i], spos[i]) == up) {
                            const uint32_t tk = skey[i]; skey[i] = skey[o]; skey[o] = tk;
                            const int32_t tp = spos[i]; spos[i] = spos[o]; spos[o] = tp;
                        }
                    }
                }
                __syncthreads();
            }
        }
        for (int i = tid; i < k; i += TOPK_THREADS) idx[r * k + i] = (float)spos[i];
        __syncthreads();                          // the next row reuses the slots
    }
}

// deterministic put_add_rows: a warp per row takes the row's updates 32 at a time; lanes that
// hit the same column form a group (__match_any_sync) whose lowest lane adds the group's values
// (staged in shared memory) to the column in lane order, which is index order: each column gets
// the stub's adds in the stub's order, with no atomics and 32 updates in flight instead of one.
// The next 32 updates load while this batch adds; __syncwarp orders a column's write before a
// later batch reads it.
constexpr int PUT_ADD_WARPS = 8;
static __global__ void __launch_bounds__(PUT_ADD_WARPS * 32)
k_put_add_ordered(const float *__restrict__ idx, const float *__restrict__ v, float *__restrict__ y,
                  int64_t rows, int64_t k, int64_t cols) {
    extern __shared__ float4 smem4[];             // a batch's values, 32 per warp
    const unsigned all = 0xffffffffu;
    const int lane = threadIdx.x % 32;
    float *vals = reinterpret_cast<float *>(smem4) + threadIdx.x / 32 * 32;
    const int64_t per_block = blockDim.x / 32, nwarps = (int64_t)gridDim.x * per_block;
    for (int64_t r = (int64_t)blockIdx.x * per_block + threadIdx.x / 32; r < rows; r += nwarps) {
        float *yr = y + r * cols;
        const float *ir = idx + r * k, *vr = v + r * k;
        float ni = lane < k ? ir[lane] : -1.0f, nv = lane < k ? vr[lane] : 0.0f;
        for (int64_t j0 = 0; j0 < k; j0 += 32) {
            const int64_t c = tlf_row_index(ni, cols);   // -1: outside the row (or past k)
            const float val = nv;
            const int64_t jn = j0 + 32 + lane;            // the next batch, in flight
            ni = jn < k ? ir[jn] : -1.0f;
            nv = jn < k ? vr[jn] : 0.0f;
            const unsigned group = cols <= 0x7fffffff ? __match_any_sync(all, (int)c)   // 32-bit match: faster
                                                      : __match_any_sync(all, (long long)c);
            vals[lane] = val;
            __syncwarp();
            if (c >= 0 && lane == __ffs(group) - 1) {
                float s = yr[c];
                for (unsigned g = group; g; g &= g - 1) s = tlm_add(s, vals[__ffs(g) - 1]);
                yr[c] = s;
            }
            __syncwarp();
        }
    }
}

static __global__ void k_cumprod_back(const float *__restrict__ x, const float *__restrict__ g, float *__restrict__ dx,
                               int64_t rows, int64_t cols, int64_t reverse) {
    SK_GRID_STRIDE(r, rows) {
        const float *xr = x + r * cols, *gr = g + r * cols;
        float *dr = dx + r * cols;
        float s = gr[pos_of(cols - 1, cols, reverse)];
        dr[pos_of(cols - 1, cols, reverse)] = s;
        for (int64_t j = cols - 2; j >= 0; j--) {
            s = tlf_cumprod_carry(gr[pos_of(j, cols, reverse)], xr[pos_of(j + 1, cols, reverse)], s);
            dr[pos_of(j, cols, reverse)] = s;
        }
        float before = 1.0f;
        for (int64_t j = 0; j < cols; j++) {
            int64_t p = pos_of(j, cols, reverse);
            dr[p] = tlm_mul(before, dr[p]);
            before = tlm_mul(before, xr[p]);
        }
    }
}

static __global__ void k_cumarg(const float *__restrict__ x, float *__restrict__ idx, int64_t rows, int64_t cols,
                         int64_t kind) {
    SK_GRID_STRIDE(r, rows) {
        const float *xr = x + r * cols;
        float best = xr[0];
        int64_t at = 0;
        for (int64_t j = 0; j < cols; j++) {
            if (j > 0 && tlf_cumarg_takes(xr[j], best, kind)) { best = xr[j]; at = j; }
            idx[r * cols + j] = (float)at;
        }
    }
}
