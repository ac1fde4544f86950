// softmax.cu (CUDA): softmax, log_softmax, masked softmax over the last axis and the two
// backward kernels, over the stub's formulas (native/common/formulas/normalize.h): the row max,
// exp(x - max) (tlm_exp), the row sum and a division (log_softmax: (x - max) - log(sum)); the
// backward from the row sum of the rounded products g * y (softmax) or of g (log_softmax).
// Leading axes are folded into rows. The schedules differ only in their sums:
//
// Default: a row is handled by a group of G threads (a warp for rows up to 1024 columns, a
// 256-thread block beyond), each thread's strided chain then a fixed shuffle tree (no atomics).
// Rows of up to 8192 columns with cols % 4 == 0 stay in registers (x, or y and g, read once).
//
// Exact mode sums as the stub does (the schedule of native/stub/softmax.c): a block per row,
// the row max in index order (first of equal values kept), the row sum by rule 4 of tl_math.h
// (tl_exact_block_reduce). NaN propagates as on the stub.
#include "common.cuh"
#include "formulas/normalize.h"
#include "entry/softmax_kernels.h"
#include <math.h>

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

// Register rows (cols % 4 == 0, cols <= G * 4 * R): a group of G threads per row (a warp, or
// the whole 256-thread block) keeps the row in registers, R float4 per thread, so x is read
// once and each entry costs one exp: a max pass, a sum-of-exp pass and the write. The group
// reductions run in the fixed order of reduce_util.cuh (deterministic).
template <class F> __device__ __forceinline__ float4 tl_map4(float4 v, F f) {
    return make_float4(f(v.x), f(v.y), f(v.z), f(v.w));
}

template <int G, int R, int LOG>
__global__ void __launch_bounds__(256) softmax_fwd_rows(const float4 *__restrict__ x,
                                                         float4 *__restrict__ y, int64_t rows,
                                                         int64_t cols4) {
    const int64_t row = (int64_t)blockIdx.x * (256 / G) + threadIdx.x / G;
    const int lane = threadIdx.x % G;
    const bool ok = row < rows;  // whole groups agree, so the group reductions stay convergent
    const float4 *xr = x + (ok ? row : 0) * cols4;
    float4 *yr = y + (ok ? row : 0) * cols4;
    float4 v[R];
    float m = -INFINITY;
#pragma unroll
    for (int j = 0; j < R; j++) {
        const int64_t k = lane + (int64_t)j * G;
        v[j] = ok && k < cols4 ? xr[k] : make_float4(-INFINITY, -INFINITY, -INFINITY, -INFINITY);
        m = tl_max_nan(m, tl_max_nan(tl_max_nan(v[j].x, v[j].y), tl_max_nan(v[j].z, v[j].w)));
    }
    m = tl_group_max<G>(m);
    float s = 0.0f;
#pragma unroll
    for (int j = 0; j < R; j++) {
        if (lane + (int64_t)j * G < cols4) {
            const float4 e = tl_map4(v[j], [m](float t) { return tlf_softmax_exp(t, m); });
            s += (e.x + e.y) + (e.z + e.w);
            if (!LOG) v[j] = e;
        }
    }
    s = tl_group_sum<G>(s);
    if (!ok) return;
    const float ls = LOG ? tlm_log(s) : 0.0f;
#pragma unroll
    for (int j = 0; j < R; j++) {
        const int64_t k = lane + (int64_t)j * G;
        if (k < cols4)
            yr[k] = LOG ? tl_map4(v[j], [m, ls](float t) { return tlf_log_softmax(t, m, ls); })
                        : tl_map4(v[j], [s](float e) { return tlf_softmax_div(e, s); });
    }
}

// the backward over register rows: y and g read once, the row sum, then the map
template <int G, int R, int LOG>
__global__ void __launch_bounds__(256) softmax_bwd_rows(const float4 *__restrict__ y,
                                                         const float4 *__restrict__ g,
                                                         float4 *__restrict__ dx, int64_t rows,
                                                         int64_t cols4) {
    const int64_t row = (int64_t)blockIdx.x * (256 / G) + threadIdx.x / G;
    const int lane = threadIdx.x % G;
    const bool ok = row < rows;
    const int64_t off = (ok ? row : 0) * cols4;
    float4 yv[R], gv[R];
    float acc = 0.0f;
#pragma unroll
    for (int j = 0; j < R; j++) {
        const int64_t k = lane + (int64_t)j * G;
        const bool in = ok && k < cols4;
        yv[j] = in ? y[off + k] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        gv[j] = in ? g[off + k] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (in)
            acc += LOG ? (gv[j].x + gv[j].y) + (gv[j].z + gv[j].w)
                       : (tlm_mul(gv[j].x, yv[j].x) + tlm_mul(gv[j].y, yv[j].y)) +
                             (tlm_mul(gv[j].z, yv[j].z) + tlm_mul(gv[j].w, yv[j].w));
    }
    const float s = tl_group_sum<G>(acc);
    if (!ok) return;
#pragma unroll
    for (int j = 0; j < R; j++) {
        const int64_t k = lane + (int64_t)j * G;
        if (k < cols4) {
            const float4 a = yv[j], b = gv[j];
            dx[off + k] = LOG ? make_float4(tlf_log_softmax_backward(a.x, b.x, s), tlf_log_softmax_backward(a.y, b.y, s),
                                            tlf_log_softmax_backward(a.z, b.z, s), tlf_log_softmax_backward(a.w, b.w, s))
                              : make_float4(tlf_softmax_backward(a.x, b.x, s), tlf_softmax_backward(a.y, b.y, s),
                                            tlf_softmax_backward(a.z, b.z, s), tlf_softmax_backward(a.w, b.w, s));
        }
    }
}

// the register-row schedule for cols: 0 none (cols % 4 != 0 or cols > 8192), else an index into
// the (G, R) pairs (32, 1) (32, 2) (32, 4) (32, 8) (256, 4) (256, 8)
int rows_schedule(int64_t cols) {
    if (cols % 4 != 0) return 0;
    const int64_t c4 = cols / 4;
    return c4 <= 32 ? 1 : c4 <= 64 ? 2 : c4 <= 128 ? 3 : c4 <= 256 ? 4 : c4 <= 1024 ? 5 : c4 <= 2048 ? 6 : 0;
}

template <int G, int R, int LOG>
void fwd_rows(const float *x, float *y, int64_t rows, int64_t cols, cudaStream_t st) {
    softmax_fwd_rows<G, R, LOG><<<(unsigned)((rows * G + 255) / 256), 256, 0, st>>>(
        (const float4 *)x, (float4 *)y, rows, cols / 4);
}

template <int G, int R, int LOG>
void bwd_rows(const float *y, const float *g, float *dx, int64_t rows, int64_t cols, cudaStream_t st) {
    softmax_bwd_rows<G, R, LOG><<<(unsigned)((rows * G + 255) / 256), 256, 0, st>>>(
        (const float4 *)y, (const float4 *)g, (float4 *)dx, rows, cols / 4);
}

// one table for both directions: schedule i launches KERNEL<G_i, R_i, LOG>
#define TL_ROWS_DISPATCH(sched, KERNEL, LOG, ...)          \
    switch (sched) {                                       \
    case 1: KERNEL<32, 1, LOG>(__VA_ARGS__); break;        \
    case 2: KERNEL<32, 2, LOG>(__VA_ARGS__); break;        \
    case 3: KERNEL<32, 4, LOG>(__VA_ARGS__); break;        \
    case 4: KERNEL<32, 8, LOG>(__VA_ARGS__); break;        \
    case 5: KERNEL<256, 4, LOG>(__VA_ARGS__); break;       \
    default: KERNEL<256, 8, LOG>(__VA_ARGS__); break;      \
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
    const int sched = KIND != 2 ? rows_schedule(cols) : 0;
    if (sched && rows <= INT32_MAX) {
        TL_ROWS_DISPATCH(sched, fwd_rows, KIND, x, y, rows, cols, st);
        TL_LAUNCHED(op);
        return TL_OK;
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
    const int sched = rows_schedule(cols);
    if (sched && rows <= INT32_MAX) {
        TL_ROWS_DISPATCH(sched, bwd_rows, LOG, y, g, dx, rows, cols, st);
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
