// softmax.cu (CUDA): softmax, log_softmax, masked softmax over the last axis and the two
// backward kernels, over the stub's formulas (native/common/formulas/normalize.h): the row max,
// exp(x - max) (tlm_exp), the row sum and a division (log_softmax: (x - max) - log(sum)); the
// backward from the row sum of the rounded products g * y (softmax) or of g (log_softmax).
// Leading axes are folded into rows. The schedules differ only in their sums:
//
// Default: rows of up to 8192 columns stay in registers (x, or y and g, read once; "register
// rows" below), longer unmasked forward rows in shared memory ("long rows"); the rest (masked
// rows and the backward past 8192 columns, rows past shared memory) are handled by a group of
// G threads (a warp for rows up to 1024 columns, a 256-thread block beyond), each thread's
// strided chain over global memory. Each thread's chain is followed by a fixed-order tree (no
// atomics).
//
// Exact mode sums as the stub does (the schedule of native/stub/softmax.c): a block per row,
// the row max in index order (first of equal values kept), the row sum by rule 4 of tl_math.h
// (tl_exact_block_reduce). NaN propagates as on the stub.
#include "common.cuh"
#include "formulas/normalize.h"
#include "generated/softmax_kernels.h"
#include <math.h>
#include <stdint.h>
#include <initializer_list>

namespace {

// KIND: 0 softmax, 1 log_softmax, 2 masked softmax (mask row r % mask_rows; NULL = all allowed)
template <int G, int KIND>
__global__ void softmax_fwd(const float *__restrict__ x, const float *__restrict__ mask,
                            float *__restrict__ y, int64_t rows, int64_t cols, int64_t mask_rows) {
    int64_t row = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / G;
    int lane = threadIdx.x % G;
    bool ok = row < rows;  // whole groups agree, so the group reductions stay convergent
    const float *xr = x + (ok ? row : 0) * cols;
    float *yr = y + (ok ? row : 0) * cols;
    const float *mr = (KIND == 2 && mask) ? mask + ((ok ? row : 0) % mask_rows) * cols : nullptr;
    // the row max (NaN wins: a NaN row stays NaN), the sum of exp(x - max), then the map:
    // the stub's formulas, each pass over the row's allowed entries in the group's lane order;
    // softmax's exps wait in y for the division, so each entry costs one exp
    float m = -INFINITY;
    if (ok)
        for (int64_t k = lane; k < cols; k += G)
            if (KIND != 2 || !mr || mr[k] != 0.0f) m = tl_max_nan(m, xr[k]);
    m = tl_group_max<G>(m);
    const bool zero = KIND == 2 && m == -INFINITY;  // nothing allowed (or only -inf, no NaN)
    float s = 0.0f;
    if (ok && !zero)
        for (int64_t k = lane; k < cols; k += G) {
            const bool allowed = KIND != 2 || !mr || mr[k] != 0.0f;
            const float e = allowed ? tlf_softmax_exp(xr[k], m) : 0.0f;
            s += e;
            if (KIND != 1) yr[k] = e;
        }
    s = tl_group_sum<G>(s);
    if (!ok) return;
    if (zero) {  // the row is all 0
        for (int64_t k = lane; k < cols; k += G) yr[k] = 0.0f;
    } else if (KIND == 1) {
        const float ls = tlm_log(s);
        for (int64_t k = lane; k < cols; k += G) yr[k] = tlf_log_softmax(xr[k], m, ls);
    } else {
        for (int64_t k = lane; k < cols; k += G)  // blocked entries stay exactly 0, even for a NaN s
            if (KIND != 2 || !mr || mr[k] != 0.0f) yr[k] = tlf_softmax_div(yr[k], s);
    }
}

// Register rows (cols <= 8192): a group of G threads per row (a warp, 64 threads or the whole
// 256-thread block) keeps the row in registers, R units of W floats per thread (W = 4, one
// float4 load, when cols % 4 == 0 and the buffers are 16-byte aligned, else W = 1), so x is
// read once and each entry costs one exp: a max pass, a sum-of-exp pass and the write. The
// group reductions run in the fixed order of reduce_util.cuh (deterministic). A row's bits
// depend on cols and the buffers' alignment (allocations are aligned), never on the row's
// index, so a row alone and in a batch agree.

// threads per block: 256 (several rows) for warp groups, else the group itself
__host__ __device__ constexpr int rows_block(int G) { return G <= 32 ? 256 : G; }

template <int W> __device__ __forceinline__ void load_unit(const float *p, int64_t k, float *v) {
    if constexpr (W == 4) {
        const float4 t = reinterpret_cast<const float4 *>(p)[k];
        v[0] = t.x, v[1] = t.y, v[2] = t.z, v[3] = t.w;
    } else {
        v[0] = p[k];
    }
}
template <int W> __device__ __forceinline__ void store_unit(float *p, int64_t k, const float *v) {
    if constexpr (W == 4) reinterpret_cast<float4 *>(p)[k] = make_float4(v[0], v[1], v[2], v[3]);
    else p[k] = v[0];
}
// a unit's sum: (v0 + v1) + (v2 + v3), or v0
template <int W> __device__ __forceinline__ float unit_sum(const float *v) {
    if constexpr (W == 4) return (v[0] + v[1]) + (v[2] + v[3]);
    else return v[0];
}

// KIND: 0 softmax, 1 log_softmax, 2 masked softmax (as softmax_fwd: blocked entries never win
// the max, count 0 in the sum and give exactly 0; a row with nothing allowed, or only -inf,
// gives 0 unless an allowed NaN makes it NaN); allowed entries are one bit each (R W <= 32)
template <int G, int R, int W, int KIND>
__global__ void __launch_bounds__(rows_block(G)) softmax_fwd_rows(const float *__restrict__ x,
                                                                   const float *__restrict__ mask,
                                                                   float *__restrict__ y,
                                                                   int64_t rows, int64_t cols,
                                                                   int64_t mask_rows) {
    const int64_t row = (int64_t)blockIdx.x * (rows_block(G) / G) + threadIdx.x / G;
    const int lane = threadIdx.x % G;
    const bool ok = row < rows;  // whole groups agree, so the group reductions stay convergent
    const int64_t units = cols / W;
    const float *xr = x + (ok ? row : 0) * cols;
    float *yr = y + (ok ? row : 0) * cols;
    const float *mr = (KIND == 2 && mask) ? mask + ((ok ? row : 0) % mask_rows) * cols : nullptr;
    float v[R][W];
    uint32_t allowed = ~0u;  // bit j W + c: entry c of unit j
    float m = -INFINITY;
#pragma unroll
    for (int j = 0; j < R; j++) {
        const int64_t k = lane + (int64_t)j * G;
        if (ok && k < units) {
            load_unit<W>(xr, k, v[j]);
            if (KIND == 2 && mr) {
                float mv[W];
                load_unit<W>(mr, k, mv);
#pragma unroll
                for (int c = 0; c < W; c++)
                    if (mv[c] == 0.0f) allowed &= ~(1u << (j * W + c));
            }
        } else {
#pragma unroll
            for (int c = 0; c < W; c++) v[j][c] = -INFINITY;
        }
#pragma unroll
        for (int c = 0; c < W; c++)
            if (KIND != 2 || (allowed >> (j * W + c)) & 1u) m = tl_max_nan(m, v[j][c]);
    }
    m = tl_group_max<G>(m);
    const bool zero = KIND == 2 && m == -INFINITY;  // nothing allowed (or only -inf, no NaN)
    float s = 0.0f;
#pragma unroll
    for (int j = 0; j < R; j++) {
        if (!zero && lane + (int64_t)j * G < units) {
            float e[W];
#pragma unroll
            for (int c = 0; c < W; c++)
                e[c] = KIND != 2 || (allowed >> (j * W + c)) & 1u ? tlf_softmax_exp(v[j][c], m) : 0.0f;
            s += unit_sum<W>(e);
            if (KIND != 1)
#pragma unroll
                for (int c = 0; c < W; c++) v[j][c] = e[c];
        }
    }
    s = tl_group_sum<G>(s);
    if (!ok) return;
    const float ls = KIND == 1 ? tlm_log(s) : 0.0f;
#pragma unroll
    for (int j = 0; j < R; j++) {
        const int64_t k = lane + (int64_t)j * G;
        if (k < units) {
#pragma unroll
            for (int c = 0; c < W; c++)  // blocked entries stay exactly 0, even for a NaN s
                v[j][c] = zero ? 0.0f
                        : KIND == 1 ? tlf_log_softmax(v[j][c], m, ls)
                        : KIND != 2 || (allowed >> (j * W + c)) & 1u ? tlf_softmax_div(v[j][c], s)
                                                                     : 0.0f;
            store_unit<W>(yr, k, v[j]);
        }
    }
}

// the backward over register rows: y and g read once, the row sum, then the map
template <int G, int R, int W, int LOG>
__global__ void __launch_bounds__(rows_block(G)) softmax_bwd_rows(const float *__restrict__ y,
                                                                   const float *__restrict__ g,
                                                                   float *__restrict__ dx,
                                                                   int64_t rows, int64_t cols) {
    const int64_t row = (int64_t)blockIdx.x * (rows_block(G) / G) + threadIdx.x / G;
    const int lane = threadIdx.x % G;
    const bool ok = row < rows;
    const int64_t units = cols / W, off = (ok ? row : 0) * cols;
    float yv[R][W], gv[R][W];
    float acc = 0.0f;
#pragma unroll
    for (int j = 0; j < R; j++) {
        const int64_t k = lane + (int64_t)j * G;
        if (ok && k < units) {
            load_unit<W>(y + off, k, yv[j]);
            load_unit<W>(g + off, k, gv[j]);
            float t[W];
#pragma unroll
            for (int c = 0; c < W; c++) t[c] = LOG ? gv[j][c] : tlm_mul(gv[j][c], yv[j][c]);
            acc += unit_sum<W>(t);
        }
    }
    const float s = tl_group_sum<G>(acc);
    if (!ok) return;
#pragma unroll
    for (int j = 0; j < R; j++) {
        const int64_t k = lane + (int64_t)j * G;
        if (k < units) {
            float d[W];
#pragma unroll
            for (int c = 0; c < W; c++)
                d[c] = LOG ? tlf_log_softmax_backward(yv[j][c], gv[j][c], s)
                           : tlf_softmax_backward(yv[j][c], gv[j][c], s);
            store_unit<W>(dx + off, k, d);
        }
    }
}

// the register-row schedule for cols: the index i of the (G, R) pair TL_ROWS_DISPATCH launches.
// The group grows with the row as for float4 units: a warp up to 512 columns, 64 threads up to
// 1024, a 256-thread block up to 8192 (measured on 65536 x 1024: warp 1.28x torch's time, 64
// threads 0.98x, 128 1.05x, 256 1.26x); R is the fewest units per thread that cover the row.
int rows_schedule(int64_t cols, int W) {
    static const int64_t cover4[] = {128, 256, 512, 1024, 4096, 8192};                 // W = 4
    static const int64_t cover1[] = {32, 64, 128, 256, 512, 1024, 2048, 4096, 8192};   // W = 1
    const int64_t *cover = W == 4 ? cover4 : cover1;
    const int n = W == 4 ? 6 : 9;
    for (int i = 0; i < n; i++)
        if (cols <= cover[i]) return i;
    return n - 1;  // unreachable: callers take cols <= 8192
}
// float4 units need cols % 4 == 0 and 16-byte aligned buffers (then every row start is too)
bool aligned16(std::initializer_list<const float *> ps) {
    for (const float *p : ps)
        if ((uintptr_t)p & 15u) return false;
    return true;
}
int rows_width(int64_t cols, bool aligned) { return cols % 4 == 0 && aligned ? 4 : 1; }

template <int G, int R, int W, int KIND>
void fwd_rows(const float *x, const float *mask, float *y, int64_t rows, int64_t cols,
              int64_t mask_rows, cudaStream_t st) {
    static_assert(W * R <= 32, "one allowed bit per entry");
    constexpr int B = rows_block(G);
    softmax_fwd_rows<G, R, W, KIND><<<(unsigned)((rows * G + B - 1) / B), B, 0, st>>>(
        x, mask, y, rows, cols, mask_rows);
}

template <int G, int R, int W, int LOG>
void bwd_rows(const float *y, const float *g, float *dx, int64_t rows, int64_t cols, cudaStream_t st) {
    constexpr int B = rows_block(G);
    softmax_bwd_rows<G, R, W, LOG><<<(unsigned)((rows * G + B - 1) / B), B, 0, st>>>(y, g, dx, rows, cols);
}

// schedule i launches KERNEL<G_i, R_i, W, LOG>: the pairs covering cover4 / cover1 above
#define TL_ROWS_DISPATCH4(sched, KERNEL, LOG, ...)             \
    switch (sched) {                                           \
    case 0: KERNEL<32, 1, 4, LOG>(__VA_ARGS__); break;         \
    case 1: KERNEL<32, 2, 4, LOG>(__VA_ARGS__); break;         \
    case 2: KERNEL<32, 4, 4, LOG>(__VA_ARGS__); break;         \
    case 3: KERNEL<64, 4, 4, LOG>(__VA_ARGS__); break;         \
    case 4: KERNEL<256, 4, 4, LOG>(__VA_ARGS__); break;        \
    default: KERNEL<256, 8, 4, LOG>(__VA_ARGS__); break;       \
    }
#define TL_ROWS_DISPATCH1(sched, KERNEL, LOG, ...)             \
    switch (sched) {                                           \
    case 0: KERNEL<32, 1, 1, LOG>(__VA_ARGS__); break;         \
    case 1: KERNEL<32, 2, 1, LOG>(__VA_ARGS__); break;         \
    case 2: KERNEL<32, 4, 1, LOG>(__VA_ARGS__); break;         \
    case 3: KERNEL<32, 8, 1, LOG>(__VA_ARGS__); break;         \
    case 4: KERNEL<32, 16, 1, LOG>(__VA_ARGS__); break;        \
    case 5: KERNEL<64, 16, 1, LOG>(__VA_ARGS__); break;        \
    case 6: KERNEL<256, 8, 1, LOG>(__VA_ARGS__); break;        \
    case 7: KERNEL<256, 16, 1, LOG>(__VA_ARGS__); break;       \
    default: KERNEL<256, 32, 1, LOG>(__VA_ARGS__); break;      \
    }
#define TL_ROWS_LAUNCH(cols, aligned, KERNEL, LOG, ...)                                  \
    do {                                                                                  \
        const int w_ = rows_width(cols, aligned), s_ = rows_schedule(cols, w_);           \
        if (w_ == 4) { TL_ROWS_DISPATCH4(s_, KERNEL, LOG, __VA_ARGS__) }                  \
        else { TL_ROWS_DISPATCH1(s_, KERNEL, LOG, __VA_ARGS__) }                          \
    } while (0)

// Long rows (8192 < cols, the row's 4 cols bytes within one block's shared memory: about 56K
// columns on Hopper): a 1024-thread block per row stages the row in shared memory, so x is read from
// global memory once and y written once; each thread's chain runs over its own entries
// (k = t, t + 1024, ...), then the block's fixed-order tree.
template <int LOG>
__global__ void __launch_bounds__(1024) softmax_fwd_staged(const float *__restrict__ x,
                                                           float *__restrict__ y, int64_t cols) {
    extern __shared__ float row_s[];
    const float *xr = x + (int64_t)blockIdx.x * cols;
    float *yr = y + (int64_t)blockIdx.x * cols;
    float m = -INFINITY;
#pragma unroll 8
    for (int64_t k = threadIdx.x; k < cols; k += 1024) {
        const float v = xr[k];
        row_s[k] = v;
        m = tl_max_nan(m, v);
    }
    m = tl_group_max<1024>(m);
    float s = 0.0f;
    for (int64_t k = threadIdx.x; k < cols; k += 1024) {
        const float e = tlf_softmax_exp(row_s[k], m);
        s += e;
        if (!LOG) row_s[k] = e;
    }
    s = tl_group_sum<1024>(s);
    const float ls = LOG ? tlm_log(s) : 0.0f;
#pragma unroll 8
    for (int64_t k = threadIdx.x; k < cols; k += 1024)
        yr[k] = LOG ? tlf_log_softmax(row_s[k], m, ls) : tlf_softmax_div(row_s[k], s);
}

// the most columns a staged row may have on this device (0: unknown); the kernels' opt-in to
// that much dynamic shared memory is made once per process
int64_t staged_cols_max() {
    static int64_t cols_max = -1;
    if (cols_max < 0) {
        int dev = 0, optin = 0;
        if (cudaGetDevice(&dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess ||
            cudaFuncSetAttribute(softmax_fwd_staged<0>, cudaFuncAttributeMaxDynamicSharedMemorySize, optin - 1024) != cudaSuccess ||
            cudaFuncSetAttribute(softmax_fwd_staged<1>, cudaFuncAttributeMaxDynamicSharedMemorySize, optin - 1024) != cudaSuccess) {
            (void)cudaGetLastError();  // no staging: the strided schedule serves every width
            cols_max = 0;
        } else {
            cols_max = (optin - 1024) / 4;  // 1 KiB left for the block reductions' partials
        }
    }
    return cols_max;
}

// LOG: 0 softmax (dx = y (g - sum g y)), 1 log_softmax (dx = g - exp(y) sum g)
template <int G, int LOG>
__global__ void softmax_bwd(const float *__restrict__ y, const float *__restrict__ g,
                            float *__restrict__ dx, int64_t rows, int64_t cols) {
    int64_t row = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / G;
    int lane = threadIdx.x % G;
    bool ok = row < rows;
    const float *yr = y + (ok ? row : 0) * cols, *gr = g + (ok ? row : 0) * cols;
    float *dr = dx + (ok ? row : 0) * cols;
    float acc = 0.0f;
    if (ok)
        for (int64_t k = lane; k < cols; k += G) acc += LOG ? gr[k] : tlm_mul(gr[k], yr[k]);
    float s = tl_group_sum<G>(acc);
    if (!ok) return;
    for (int64_t k = lane; k < cols; k += G)
        dr[k] = LOG ? tlf_log_softmax_backward(yr[k], gr[k], s) : tlf_softmax_backward(yr[k], gr[k], s);
}

// ---- exact mode: a block per row, partials in shared memory (or gpart, a slice per row) ----
template <int KIND>
__global__ void exact_softmax_fwd(const float *__restrict__ x, const float *__restrict__ mask,
                                  float *__restrict__ y, int64_t cols, int64_t mask_rows,
                                  float *gpart) {
    extern __shared__ float smem[];
    float *part = tl_exact_part(smem, gpart, cols);
    const int64_t row = blockIdx.x;
    const float *xr = x + row * cols;
    float *yr = y + row * cols;
    const float *mr = (KIND == 2 && mask) ? mask + (row % mask_rows) * cols : nullptr;
    auto allowed = [=](int64_t e) { return KIND != 2 || !mr || mr[e] != 0.0f; };
    // blocked entries read as -inf: they never win the first-wins max over the allowed ones
    const float m = tl_exact_block_reduce([=](int64_t e) { return allowed(e) ? xr[e] : -INFINITY; },
                                          cols, part, TlExactMaxFirst{});
    if (KIND == 2 && m == -INFINITY) {  // nothing allowed, or all -inf: 0, unless a NaN hides there
        float nan = tl_exact_block_reduce(
            [=](int64_t e) { return allowed(e) && xr[e] != xr[e] ? 1.0f : 0.0f; }, cols, part,
            TlExactMax{});
        for (int64_t e = threadIdx.x; e < cols; e += blockDim.x)
            yr[e] = nan != 0.0f && allowed(e) ? NAN : 0.0f;
        return;
    }
    const float s = tl_exact_block_reduce(
        [=](int64_t e) { return allowed(e) ? tlf_softmax_exp(xr[e], m) : 0.0f; }, cols, part,
        TlExactSum{});
    if (KIND == 1) {
        const float ls = tlm_log(s);
        for (int64_t e = threadIdx.x; e < cols; e += blockDim.x) yr[e] = tlf_log_softmax(xr[e], m, ls);
    } else {
        for (int64_t e = threadIdx.x; e < cols; e += blockDim.x)
            yr[e] = allowed(e) ? tlf_softmax_div(tlf_softmax_exp(xr[e], m), s) : 0.0f;
    }
}

template <int LOG>
__global__ void exact_softmax_bwd(const float *__restrict__ y, const float *__restrict__ g,
                                  float *__restrict__ dx, int64_t cols, float *gpart) {
    extern __shared__ float smem[];
    float *part = tl_exact_part(smem, gpart, cols);
    const int64_t off = (int64_t)blockIdx.x * cols;
    const float *yr = y + off, *gr = g + off;
    float *dr = dx + off;
    const float s = tl_exact_block_reduce(
        [=](int64_t e) { return LOG ? gr[e] : tlm_mul(gr[e], yr[e]); }, cols, part, TlExactSum{});
    for (int64_t e = threadIdx.x; e < cols; e += blockDim.x)
        dr[e] = LOG ? tlf_log_softmax_backward(yr[e], gr[e], s) : tlf_softmax_backward(yr[e], gr[e], s);
}

// the exact kernels' launch check: one block per row
int exact_rows_fit(const char *op, int64_t rows) {
    if (rows > TL_MAX_GRID_X)
        return tl_fail(TL_E_SHAPE, "%s: %lld rows exceed the CUDA grid limit", op, (long long)rows);
    return TL_OK;
}

unsigned group_blocks(int64_t rows, int G) { return (unsigned)((rows * G + TL_THREADS - 1) / TL_THREADS); }

template <int KIND>
int launch_fwd(const char *op, const float *x, const float *mask, float *y, int64_t rows,
               int64_t cols, int64_t mask_rows) {
    if (rows == 0) return TL_OK;
    cudaStream_t st = tl_stream();
    if (tl_exact()) {
        TlExactParts ex;
        TL_TRY(exact_rows_fit(op, rows));
        TL_TRY(ex.setup(op, rows, cols));
        exact_softmax_fwd<KIND><<<(unsigned)rows, tl_exact_threads(cols), ex.smem, st>>>(
            x, mask, y, cols, mask_rows, ex.gpart);
        return ex.finish(op);
    }
    if (cols <= 8192 && rows <= INT32_MAX) {
        TL_ROWS_LAUNCH(cols, aligned16({x, mask, y}), fwd_rows, KIND, x, mask, y, rows, cols, mask_rows, st);
        TL_LAUNCHED(op);
        return TL_OK;
    }
    if constexpr (KIND != 2) {
        if (cols > 8192 && cols <= staged_cols_max() && rows <= INT32_MAX) {
            softmax_fwd_staged<KIND><<<(unsigned)rows, 1024, (size_t)cols * 4, st>>>(x, y, cols);
            TL_LAUNCHED(op);
            return TL_OK;
        }
    }
    if (cols <= 1024)
        softmax_fwd<32, KIND><<<group_blocks(rows, 32), TL_THREADS, 0, st>>>(x, mask, y, rows, cols, mask_rows);
    else
        softmax_fwd<256, KIND><<<group_blocks(rows, 256), TL_THREADS, 0, st>>>(x, mask, y, rows, cols, mask_rows);
    TL_LAUNCHED(op);
    return TL_OK;
}

template <int LOG>
int launch_bwd(const char *op, const float *y, const float *g, float *dx, int64_t rows, int64_t cols) {
    if (rows == 0) return TL_OK;
    cudaStream_t st = tl_stream();
    if (tl_exact()) {
        TlExactParts ex;
        TL_TRY(exact_rows_fit(op, rows));
        TL_TRY(ex.setup(op, rows, cols));
        exact_softmax_bwd<LOG><<<(unsigned)rows, tl_exact_threads(cols), ex.smem, st>>>(
            y, g, dx, cols, ex.gpart);
        return ex.finish(op);
    }
    if (cols <= 8192 && rows <= INT32_MAX) {
        TL_ROWS_LAUNCH(cols, aligned16({y, g, dx}), bwd_rows, LOG, y, g, dx, rows, cols, st);
        TL_LAUNCHED(op);
        return TL_OK;
    }
    if (cols <= 1024)
        softmax_bwd<32, LOG><<<group_blocks(rows, 32), TL_THREADS, 0, st>>>(y, g, dx, rows, cols);
    else
        softmax_bwd<256, LOG><<<group_blocks(rows, 256), TL_THREADS, 0, st>>>(y, g, dx, rows, cols);
    TL_LAUNCHED(op);
    return TL_OK;
}

}  // namespace

extern "C" int tlk_softmax(const char *op, tl_buf x, tl_buf y, int64_t rows, int64_t cols) {
    return launch_fwd<0>(op, x->data, nullptr, y->data, rows, cols, 1);
}

extern "C" int tlk_log_softmax(const char *op, tl_buf x, tl_buf y, int64_t rows, int64_t cols) {
    return launch_fwd<1>(op, x->data, nullptr, y->data, rows, cols, 1);
}

extern "C" int tlk_masked_softmax(const char *op, tl_buf x, tl_buf mask, tl_buf y, int64_t rows, int64_t cols,
                                 int64_t mask_rows) {
    return launch_fwd<2>(op, x->data, mask_rows ? mask->data : nullptr, y->data, rows, cols,
                         mask_rows ? mask_rows : 1);
}

extern "C" int tlk_softmax_backward(const char *op, tl_buf y, tl_buf g, tl_buf dx, int64_t rows, int64_t cols) {
    return launch_bwd<0>(op, y->data, g->data, dx->data, rows, cols);
}

extern "C" int tlk_log_softmax_backward(const char *op, tl_buf y, tl_buf g, tl_buf dx, int64_t rows, int64_t cols) {
    return launch_bwd<1>(op, y->data, g->data, dx->data, rows, cols);
}
