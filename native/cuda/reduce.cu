// reduce.cu (CUDA): sum of all elements, sums/means/maxes over one axis, their backward kernels.
//
// Every axis reduction sees x as (outer, len, inner) row-major. Two kernel shapes keep loads
// coalesced: inner == 1 ("rows"): a group of G threads (a warp, or a 256-thread block for long
// rows) reads each row with lane-strided loads and reduces with a fixed shuffle tree; inner > 1
// ("columns"): one thread per output walks the axis, neighbouring threads reading neighbouring
// addresses. When there are too few outputs to fill the GPU, the axis is split into S chunks
// (S depends only on the sizes): by default the chunk results are atomicAdd-ed into a zeroed
// output; in deterministic mode they go to a scratch array and a second kernel adds the S
// partials of each output in chunk order, so the result is bit-identical run to run.
// sum() is the rows case with outer = 1; views.cu reuses tl_cuda_axis_sum for sum_to.
//
// Exact mode replaces the splits and shuffle trees by rule 4 of tl_math.h, the stub's order:
// an output's values in chunks of TLM_CHUNK, each summed sequentially, then tlm_tree_sum's tree
// over the chunk partials. Work is split into groups of G chunks, G a power of two: an aligned
// group is a complete subtree of that tree (the last group the tree of what is left), so the
// group results combined by tlm_tree_sum give the whole tree. Rows (inner == 1): a block per
// (row, group) with the group's tree in shared memory; columns: a thread per (output, group)
// running tlm_sum down the column. reduce_max's exact rows take a block per row the same way
// (the maximum of ordered segments, first of equal values kept).
#include "common.cuh"
#include "generated/reduce_kernels.h"
#include <math.h>

namespace {

constexpr int64_t TARGET_THREADS = 1 << 18;  // about one full wave of resident threads on an H100

// mode: 0 write (S == 1), 1 atomicAdd into y, 2 write partial[s * M + out]
template <int G>
__global__ void rows_sum_kernel(const float *__restrict__ x, float *__restrict__ y, int64_t rows,
                                int64_t len, int64_t S, int64_t chunk, int mode, float scale) {
    int64_t gid = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / G;
    int lane = threadIdx.x % G;
    bool ok = gid < rows * S;  // whole groups share ok, so the group reduction stays convergent per group
    int64_t row = ok ? gid / S : 0, s = ok ? gid % S : 0;
    float acc = 0.0f;
    if (ok) {
        int64_t lo = s * chunk, hi = lo + chunk < len ? lo + chunk : len;
        const float *xr = x + row * len;
        // 8 independent loads in flight per thread; the combination order is fixed
        float a[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
        int64_t k = lo + lane;
        for (; k + 7 * G < hi; k += 8 * G) {
#pragma unroll
            for (int u = 0; u < 8; u++) a[u] += xr[k + u * G];
        }
        for (; k < hi; k += G) a[0] += xr[k];
        acc = ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
    }
    acc = tl_group_sum<G>(acc);
    if (ok && lane == 0) {
        if (mode == 0) y[row] = acc * scale;
        else if (mode == 1) atomicAdd(y + row, acc);
        else y[s * rows + row] = acc;
    }
}

__global__ void cols_sum_kernel(const float *__restrict__ x, float *__restrict__ y, int64_t outer,
                                int64_t len, int64_t inner, int64_t S, int64_t chunk, int mode,
                                float scale) {
    int64_t M = outer * inner;
    TL_GRID_STRIDE(t, M * S) {
        int64_t s = t / M, j = t % M, o = j / inner, i = j % inner;
        int64_t lo = s * chunk, hi = lo + chunk < len ? lo + chunk : len;
        const float *p = x + o * len * inner + i;
        float a0 = 0.f, a1 = 0.f, a2 = 0.f, a3 = 0.f;
        int64_t k = lo;
        for (; k + 3 < hi; k += 4) {
            a0 += p[k * inner]; a1 += p[(k + 1) * inner];
            a2 += p[(k + 2) * inner]; a3 += p[(k + 3) * inner];
        }
        for (; k < hi; k++) a0 += p[k * inner];
        float acc = (a0 + a1) + (a2 + a3);
        if (mode == 0) y[j] = acc * scale;
        else if (mode == 1) atomicAdd(y + j, acc);
        else y[s * M + j] = acc;
    }
}

// y[j] = scale * sum_s part[s * M + j], s increasing
__global__ void finish_kernel(const float *__restrict__ part, float *__restrict__ y, int64_t M,
                              int64_t S, float scale) {
    TL_GRID_STRIDE(j, M) {
        float acc = 0.0f;
        for (int64_t s = 0; s < S; s++) acc += part[s * M + j];
        y[j] = acc * scale;
    }
}

// same sum for many partials per output: one warp per output, lanes take s = lane, lane + 32, ...
// in order, then a fixed shuffle tree
__global__ void finish_warp_kernel(const float *__restrict__ part, float *__restrict__ y, int64_t M,
                                   int64_t S, float scale) {
    int64_t j = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    int lane = threadIdx.x & 31;
    float acc = 0.0f;
    if (j < M)
        for (int64_t s = lane; s < S; s += 32) acc += part[s * M + j];
    acc = tl_group_sum<32>(acc);
    if (j < M && lane == 0) y[j] = acc * scale;
}

__global__ void scale_kernel(float *y, int64_t n, float scale) {
    TL_GRID_STRIDE(i, n) y[i] *= scale;
}

__global__ void fill_kernel(float *y, int64_t n, float v) {
    TL_GRID_STRIDE(i, n) y[i] = v;
}

int launch_fill(const char *op, float *y, int64_t n, float v) {
    if (n == 0) return TL_OK;
    fill_kernel<<<tl_blocks(n), TL_THREADS, 0, tl_stream()>>>(y, n, v);
    TL_LAUNCHED(op);
    return TL_OK;
}

int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// ---- exact mode ----
constexpr int64_t EXACT_MAX_GROUP = 4096;  // chunks per block-reduced group (16 KB of partials)

__device__ __forceinline__ float exact_out(float s, int mean, float scale) {
    return mean ? tlm_mul(s, scale) : s;
}

// block per (row, group): dst[row] (ng == 1) or dst[row * ng + group]
__global__ void exact_rows_sum_kernel(const float *__restrict__ x, float *__restrict__ dst,
                                      int64_t len, int64_t G, int64_t ng, int mean, float scale) {
    extern __shared__ float part[];
    const int64_t row = blockIdx.x / ng, g = blockIdx.x % ng;
    const int64_t lo = g * G * TLM_CHUNK, hi = lo + G * TLM_CHUNK < len ? lo + G * TLM_CHUNK : len;
    const float *xr = x + row * len + lo;
    float s = tl_exact_block_reduce([=](int64_t e) { return xr[e]; }, hi - lo, part, TlExactSum{});
    if (threadIdx.x == 0) {
        if (ng == 1) dst[row] = exact_out(s, mean, scale);
        else dst[row * ng + g] = s;
    }
}

// thread per (output j, group), j fastest (coalesced down the columns)
__global__ void exact_cols_sum_kernel(const float *__restrict__ x, float *__restrict__ dst,
                                      int64_t outer, int64_t len, int64_t inner, int64_t G,
                                      int64_t ng, int mean, float scale) {
    const int64_t M = outer * inner;
    TL_GRID_STRIDE(t, M * ng) {
        int64_t g = t / M, j = t % M, o = j / inner, i = j % inner;
        int64_t lo = g * G * TLM_CHUNK, hi = lo + G * TLM_CHUNK < len ? lo + G * TLM_CHUNK : len;
        float s = tlm_sum(x + (o * len + lo) * inner + i, inner, hi - lo);
        if (ng == 1) dst[j] = exact_out(s, mean, scale);
        else dst[j * ng + g] = s;
    }
}

// y[j] = tlm_tree_sum over output j's ng group results (in place in gp)
__global__ void exact_finish_kernel(float *gp, float *__restrict__ y, int64_t M, int64_t ng,
                                    int mean, float scale) {
    TL_GRID_STRIDE(j, M) y[j] = exact_out(tlm_tree_sum(gp + j * ng, ng), mean, scale);
}

int exact_axis_sum(const char *op, const float *x, float *y, int64_t outer, int64_t len,
                   int64_t inner, int mean, float scale) {
    const int64_t M = outer * inner, nc = cdiv(len, TLM_CHUNK);
    const bool rows = inner == 1 && nc > 1;
    const int64_t want = rows ? cdiv(2048, outer) : cdiv(TARGET_THREADS, M);  // groups per output
    int64_t G = 1;
    while (G * want < nc && (!rows || G < EXACT_MAX_GROUP)) G *= 2;
    const int64_t ng = cdiv(nc, G);
    if (rows && M * ng > TL_MAX_GRID_X)
        return tl_fail(TL_E_SHAPE, "%s: %lld rows exceed the CUDA grid limit", op, (long long)M);
    cudaStream_t st = tl_stream();
    float *gp = nullptr;
    if (ng > 1) TL_TRY(tl_scratch(op, (size_t)(M * ng) * sizeof(float), (void **)&gp));
    float *dst = ng > 1 ? gp : y;
    if (rows) {
        int threads = 32;
        while (threads < 256 && threads < G) threads *= 2;
        exact_rows_sum_kernel<<<(unsigned)(M * ng), threads, (size_t)G * sizeof(float), st>>>(
            x, dst, len, G, ng, mean, scale);
    } else {
        exact_cols_sum_kernel<<<tl_blocks(M * ng), TL_THREADS, 0, st>>>(x, dst, outer, len, inner, G,
                                                                         ng, mean, scale);
    }
    int rc = tl_cuda_launched(op);
    if (!rc && ng > 1) {
        exact_finish_kernel<<<tl_blocks(M), TL_THREADS, 0, st>>>(gp, y, M, ng, mean, scale);
        rc = tl_cuda_launched(op);
    }
    if (gp) tl_scratch_free(gp);
    return rc;
}

}  // namespace

// y[o, i] = scale * sum_k x[o, k, i] (scale = 1/len when mean, NaN for an empty mean).
// Device pointers; y holds outer * inner floats. Shared with views.cu (sum_to).
extern "C" TL_HIDDEN int tl_cuda_axis_sum(const char *op, const float *x, float *y, int64_t outer,
                                          int64_t len, int64_t inner, int mean) {
    int64_t M = outer * inner;
    if (M == 0) return TL_OK;
    float scale = mean ? (len ? 1.0f / (float)len : NAN) : 1.0f;
    if (len == 0) return launch_fill(op, y, M, mean ? NAN : 0.0f);
    if (tl_exact()) return exact_axis_sum(op, x, y, outer, len, inner, mean, scale);
    cudaStream_t st = tl_stream();
    int det = tl_deterministic();
    int64_t S, chunk;
    bool rows = inner == 1 && len >= 32;  // short rows: one thread per row is cheaper
    int G = 32;
    if (rows) {
        G = len >= 2048 ? 256 : 32;
        S = cdiv(TARGET_THREADS, outer * G);
        int64_t smax = cdiv(len, (int64_t)G * 16);  // at least 16 loads per thread per chunk
        S = S < smax ? S : smax;
    } else {
        S = cdiv(TARGET_THREADS, M);
        int64_t smax = cdiv(len, 32);
        S = S < smax ? S : smax;
    }
    if (S < 1) S = 1;
    chunk = cdiv(len, S);
    S = cdiv(len, chunk);
    float *part = nullptr;
    int mode = 0;
    if (S > 1) {
        if (det) {
            TL_TRY(tl_scratch(op, (size_t)(S * M) * sizeof(float), (void **)&part));
            mode = 2;
        } else {
            TL_CUDA_TRY(op, cudaMemsetAsync(y, 0, (size_t)M * sizeof(float), st));
            mode = 1;
        }
    }
    float *dst = mode == 2 ? part : y;
    if (rows) {
        int64_t threads = outer * S * G;
        unsigned blocks = (unsigned)cdiv(threads, TL_THREADS);
        if (G == 256) rows_sum_kernel<256><<<blocks, TL_THREADS, 0, st>>>(x, dst, outer, len, S, chunk, mode, scale);
        else rows_sum_kernel<32><<<blocks, TL_THREADS, 0, st>>>(x, dst, outer, len, S, chunk, mode, scale);
    } else {
        cols_sum_kernel<<<tl_blocks(M * S), TL_THREADS, 0, st>>>(x, dst, outer, len, inner, S, chunk,
                                                                 mode, scale);
    }
    int lst = tl_cuda_launched(op);
    if (!lst && mode == 2) {
        if (S >= 64)
            finish_warp_kernel<<<(unsigned)cdiv(M * 32, TL_THREADS), TL_THREADS, 0, st>>>(part, y, M, S, scale);
        else
            finish_kernel<<<tl_blocks(M), TL_THREADS, 0, st>>>(part, y, M, S, scale);
        lst = tl_cuda_launched(op);
    } else if (!lst && mode == 1 && mean) {
        scale_kernel<<<tl_blocks(M), TL_THREADS, 0, st>>>(y, M, scale);
        lst = tl_cuda_launched(op);
    }
    if (part) tl_scratch_free(part);
    return lst;
}

extern "C" int tlk_sum(const char *op, tl_buf x, tl_buf y, int64_t n) {
    if (n == 0) return launch_fill(op, y->data, 1, 0.0f);
    return tl_cuda_axis_sum(op, x->data, y->data, 1, n, 1, 0);
}

// reduce_sum (mean = 0) and reduce_mean (mean = 1)
extern "C" int tlk_reduce_sum(const char *op, tl_buf x, tl_buf y, int64_t outer, int64_t len,
                              int64_t inner, int64_t mean) {
    return tl_cuda_axis_sum(op, x->data, y->data, outer, len, inner, (int)mean);
}

namespace {
__global__ void axis_bwd_kernel(const float *__restrict__ g, float *__restrict__ dx, int64_t n,
                                int64_t len, int64_t inner, float scale) {
    TL_GRID_STRIDE(t, n) {
        int64_t i = t % inner, o = t / (len * inner);
        dx[t] = g[o * inner + i] * scale;
    }
}

template <int G>
__global__ void rows_max_kernel(const float *__restrict__ x, float *__restrict__ y, int64_t rows,
                                int64_t len) {
    int64_t row = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / G;
    int lane = threadIdx.x % G;
    bool ok = row < rows;
    float m = -INFINITY;
    if (ok) {
        const float *xr = x + row * len;
        for (int64_t k = lane; k < len; k += G) m = tl_max_nan(m, xr[k]);
    }
    m = tl_group_max<G>(m);
    if (ok && lane == 0) y[row] = m;
}

__global__ void cols_max_kernel(const float *__restrict__ x, float *__restrict__ y, int64_t outer,
                                int64_t len, int64_t inner) {
    TL_GRID_STRIDE(j, outer * inner) {
        int64_t o = j / inner, i = j % inner;
        const float *p = x + o * len * inner + i;
        float m = p[0];
        for (int64_t k = 1; k < len; k++) m = tl_max_nan(m, p[k * inner]);
        y[j] = m;
    }
}

// exact mode, rows of more than one chunk: a block per row, rule 4's chunks and tree with the
// ordered maximum (partials in shared memory, or in gpart, one slice per row, when too many)
__global__ void exact_rows_max_kernel(const float *__restrict__ x, float *__restrict__ y,
                                      int64_t len, float *gpart) {
    extern __shared__ float smem[];
    float *part = tl_exact_part(smem, gpart, len);
    const float *xr = x + (int64_t)blockIdx.x * len;
    float m = tl_exact_block_reduce([=](int64_t e) { return xr[e]; }, len, part, TlExactMax{});
    if (threadIdx.x == 0) y[blockIdx.x] = m;
}

// ties: cnt[j] = number of entries of output j's axis equal to its max y[j]
template <int G>
__global__ void rows_tie_count(const float *__restrict__ x, const float *__restrict__ y,
                               float *__restrict__ cnt, int64_t rows, int64_t len) {
    int64_t row = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / G;
    int lane = threadIdx.x % G;
    bool ok = row < rows;
    float c = 0.0f;  // counts are exact in float up to 2^24 per lane
    if (ok) {
        const float *xr = x + row * len;
        float m = y[row];
        for (int64_t k = lane; k < len; k += G) c += xr[k] == m ? 1.0f : 0.0f;
    }
    c = tl_group_sum<G>(c);
    if (ok && lane == 0) cnt[row] = c;
}

__global__ void cols_tie_count(const float *__restrict__ x, const float *__restrict__ y,
                               float *__restrict__ cnt, int64_t outer, int64_t len, int64_t inner) {
    TL_GRID_STRIDE(j, outer * inner) {
        int64_t o = j / inner, i = j % inner;
        const float *p = x + o * len * inner + i;
        float m = y[j], c = 0.0f;
        for (int64_t k = 0; k < len; k++) c += p[k * inner] == m ? 1.0f : 0.0f;
        cnt[j] = c;
    }
}

// dx = g / cnt where x equals the max, else 0 (one thread per input element)
__global__ void max_bwd_kernel(const float *__restrict__ x, const float *__restrict__ y,
                               const float *__restrict__ g, const float *__restrict__ cnt,
                               float *__restrict__ dx, int64_t n, int64_t len, int64_t inner) {
    TL_GRID_STRIDE(t, n) {
        int64_t i = t % inner, o = t / (len * inner), j = o * inner + i;
        float c = cnt[j];
        dx[t] = (x[t] == y[j] && c > 0.0f) ? g[j] / c : 0.0f;
    }
}
}  // namespace

extern "C" int tlk_reduce_axis_backward(const char *op, tl_buf g, tl_buf dx, int64_t outer, int64_t len, int64_t inner,
                                       int64_t mean) {
    int64_t n = outer * len * inner;
    if (n == 0) return TL_OK;
    float scale = mean ? 1.0f / (float)len : 1.0f;
    axis_bwd_kernel<<<tl_blocks(n), TL_THREADS, 0, tl_stream()>>>(g->data, dx->data, n, len, inner, scale);
    TL_LAUNCHED(op);
    return TL_OK;
}

extern "C" int tlk_reduce_max(const char *op, tl_buf x, tl_buf y, int64_t outer, int64_t len, int64_t inner) {
    int64_t M = outer * inner;
    if (M == 0) return TL_OK;
    if (len == 0) return launch_fill(op, y->data, M, 0.0f);  // totalised: empty max is 0
    cudaStream_t st = tl_stream();
    if (tl_exact() && inner == 1 && len > TLM_CHUNK) {
        // the sequential cols kernel below is already the stub's order; long rows need the tree
        if (outer > TL_MAX_GRID_X)
            return tl_fail(TL_E_SHAPE, "%s: %lld rows exceed the CUDA grid limit", op, (long long)outer);
        TlExactParts ex;
        TL_TRY(ex.setup(op, outer, len));
        exact_rows_max_kernel<<<(unsigned)outer, tl_exact_threads(len), ex.smem, st>>>(x->data, y->data, len,
                                                                                        ex.gpart);
        return ex.finish(op);
    }
    if (!tl_exact() && inner == 1 && len >= 32) {
        if (len >= 2048)
            rows_max_kernel<256><<<(unsigned)outer, 256, 0, st>>>(x->data, y->data, outer, len);
        else
            rows_max_kernel<32><<<(unsigned)cdiv(outer * 32, TL_THREADS), TL_THREADS, 0, st>>>(
                x->data, y->data, outer, len);
    } else {
        cols_max_kernel<<<tl_blocks(M), TL_THREADS, 0, st>>>(x->data, y->data, outer, len, inner);
    }
    TL_LAUNCHED(op);
    return TL_OK;
}

extern "C" int tlk_reduce_max_backward(const char *op, tl_buf x, tl_buf y, tl_buf g, tl_buf dx, int64_t outer,
                                      int64_t len, int64_t inner) {
    int64_t M = outer * inner, n = M * len;
    if (n == 0) return TL_OK;
    cudaStream_t st = tl_stream();
    float *cnt = nullptr;
    TL_TRY(tl_scratch(op, (size_t)M * sizeof(float), (void **)&cnt));
    if (inner == 1 && len >= 32) {
        if (len >= 2048)
            rows_tie_count<256><<<(unsigned)outer, 256, 0, st>>>(x->data, y->data, cnt, outer, len);
        else
            rows_tie_count<32><<<(unsigned)cdiv(outer * 32, TL_THREADS), TL_THREADS, 0, st>>>(
                x->data, y->data, cnt, outer, len);
    } else {
        cols_tie_count<<<tl_blocks(M), TL_THREADS, 0, st>>>(x->data, y->data, cnt, outer, len, inner);
    }
    int rc = tl_cuda_launched(op);
    if (!rc) {
        max_bwd_kernel<<<tl_blocks(n), TL_THREADS, 0, st>>>(x->data, y->data, g->data, cnt, dx->data,
                                                            n, len, inner);
        rc = tl_cuda_launched(op);
    }
    tl_scratch_free(cnt);
    return rc;
}
