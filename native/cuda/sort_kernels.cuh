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

// chunk c's running values of row xr; with `carry` (c > 0) each is carry (+|*) the local value
static __device__ float cum_chunk(const float *__restrict__ xr, float *__restrict__ yr, int64_t c, int64_t cols,
                           int64_t reverse, int64_t kind, float carry, bool write) {
    int64_t c0 = c * TL_CUM_CHUNK, c1 = min(c0 + (int64_t)TL_CUM_CHUNK, cols);
    float local = 0.0f;
    for (int64_t j = c0; j < c1; j++) {
        int64_t p = pos_of(j, cols, reverse);
        local = j == c0 ? xr[p] : tlf_cum_step(local, xr[p], kind);
        if (write) yr[p] = c == 0 ? local : tlf_cum_step(carry, local, kind);
    }
    return local;
}

// one thread per row: the stub's loop (the chunked order), for rows of one chunk or a grid
// too wide for a block per row
static __global__ void k_cum_thread(const float *__restrict__ x, float *__restrict__ y, int64_t rows, int64_t cols,
                             int64_t reverse, int64_t kind) {
    SK_GRID_STRIDE(r, rows) {
        const float *xr = x + r * cols;
        float *yr = y + r * cols;
        float carry = 0.0f;
        for (int64_t c = 0; c * TL_CUM_CHUNK < cols; c++) {
            float local = cum_chunk(xr, yr, c, cols, reverse, kind, carry, true);
            carry = c == 0 ? local : tlf_cum_step(carry, local, kind);
        }
    }
}

// many chunks: three launches over (row, chunk) pairs, the same bits as k_cum_thread. 1: each
// chunk's total (tot[r * nch + c]); 2: per row, the carries into its chunks, summed in chunk
// order (carry[c] = t0 (+) t1 ... (+) t[c-1]; thread 0 of a block per row, from rounds of totals
// staged in shared memory); 3: each chunk's running values with its carry.
static __global__ void k_cum_totals(const float *__restrict__ x, float *__restrict__ tot, int64_t rows,
                                    int64_t cols, int64_t nch, int64_t reverse, int64_t kind) {
    SK_GRID_STRIDE(t, rows * nch) {
        const int64_t r = t / nch, c = t % nch;
        tot[t] = cum_chunk(x + r * cols, nullptr, c, cols, reverse, kind, 0.0f, false);
    }
}

static __global__ void k_cum_carries(float *__restrict__ tot, int64_t nch, int64_t kind) {
    extern __shared__ float4 smem4[];   // blockDim.x floats: a round of chunk totals
    float *buf = reinterpret_cast<float *>(smem4);
    float *tr = tot + (int64_t)blockIdx.x * nch;
    float run = 0.0f;   // thread 0: the running total of the chunks so far
    for (int64_t base = 0; base < nch; base += blockDim.x) {
        const int64_t c = base + threadIdx.x;
        buf[threadIdx.x] = c < nch ? tr[c] : 0.0f;
        __syncthreads();
        if (threadIdx.x == 0) {
            const int64_t m = min((int64_t)blockDim.x, nch - base);
            for (int64_t i = 0; i < m; i++) {
                const float t = buf[i];
                buf[i] = run;   // the carry into chunk base + i (unused for chunk 0)
                run = base + i == 0 ? t : tlf_cum_step(run, t, kind);
            }
        }
        __syncthreads();
        if (c < nch) tr[c] = buf[threadIdx.x];
        __syncthreads();
    }
}

static __global__ void k_cum_apply(const float *__restrict__ x, float *__restrict__ y,
                                   const float *__restrict__ carry, int64_t rows, int64_t cols, int64_t nch,
                                   int64_t reverse, int64_t kind) {
    SK_GRID_STRIDE(t, rows * nch) {
        const int64_t r = t / nch, c = t % nch;
        cum_chunk(x + r * cols, y + r * cols, c, cols, reverse, kind, carry[t], true);
    }
}

// deterministic put_add_rows: a warp per row takes the row's updates 32 at a time; lanes that
// hit the same column form a group (__match_any_sync) whose lowest lane adds the group's values
// to the column in lane order, which is index order: each column gets the stub's adds in the
// stub's order, with no atomics and 32 updates in flight instead of one (4096 x 4096: 3.5 ms
// on one thread per row). __syncwarp orders a column's write before a later batch reads it.
constexpr int PUT_ADD_WARPS = 8;
static __global__ void __launch_bounds__(PUT_ADD_WARPS * 32)
k_put_add_ordered(const float *__restrict__ idx, const float *__restrict__ v, float *__restrict__ y,
                  int64_t rows, int64_t k, int64_t cols) {
    const unsigned all = 0xffffffffu;
    const int lane = threadIdx.x % 32;
    const int64_t per_block = blockDim.x / 32, nwarps = (int64_t)gridDim.x * per_block;
    for (int64_t r = (int64_t)blockIdx.x * per_block + threadIdx.x / 32; r < rows; r += nwarps) {
        float *yr = y + r * cols;
        for (int64_t j0 = 0; j0 < k; j0 += 32) {
            const int64_t j = j0 + lane;
            const long long c = j < k ? (long long)tlf_row_index(idx[r * k + j], cols) : -1;
            const float val = j < k ? v[r * k + j] : 0.0f;
            const unsigned group = __match_any_sync(all, c);
            const bool leader = c >= 0 && lane == __ffs(group) - 1;
            float s = leader ? yr[c] : 0.0f;
            for (int l = 0; l < 32; l++) {       // every lane shuffles; leaders keep their group's
                const float vl = __shfl_sync(all, val, l);
                if (leader && (group >> l & 1u)) s = tlm_add(s, vl);
            }
            if (leader) yr[c] = s;
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
