// conv_grouped.cu: grouped and dilated convolution on the GPU around the formulas of
// native/common/conv_grouped.h (the stub runs the same functions in loops).
//
// Grouped 2-D convolutions with a 3x3, 5x5 or 7x7 kernel, and depthwise 3x3 ones, take the
// fixed-size tiles of conv_grouped_tiles.cuh (takes_fixed says why these): the forward pass and
// the input gradient stage the image or gradient tile with its halo in shared memory and run the
// formulas' chains, so every mode gives the stub's bits; depthwise tiles give each thread several
// rows, grouped ones several channels. In default and deterministic modes their kernel and bias
// gradients are one reduction over (sample, position) slices with every lane busy and a fixed
// tree (run to run identical, not the stub's order).
// Other depthwise 2-D convolutions take 32 x 8 tiles of any kernel size (k_dw_forward, and
// k_dw_dinput at stride 1) and a block per plane for the kernel gradient (k_dw_dkernel); the
// rest one thread per value (k_forward, k_dinput, k_dkernel_samples). Those kernel gradients,
// and all of exact mode's, are the stub's orders: a chain per (weight, sample), then rule 4 over
// the samples; the bias gradient by chunks of TLM_CHUNK values, then the tree.
#include <stdlib.h>
#include <type_traits>
#include "common.cuh"
#include "bench_switches.h"
#include "conv_grouped.h"
#include "conv_grouped_tiles.cuh"
#include "generated/conv_grouped_kernels.h"

namespace {

// grid-stride over n values; indices never depend on the grid size
#define TL_GRID_LOOP(i, n) \
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n); \
         i += (int64_t)gridDim.x * blockDim.x)

// (plane, position) of value i; 32-bit division (every count is under the uint32 limit)
__device__ __forceinline__ void unravel(uint32_t i, uint32_t planes_of, const int64_t *dims,
                                        uint32_t *pl, int64_t *a0, int64_t *a1, int64_t *a2) {
    const uint32_t d1 = (uint32_t)dims[1], d2 = (uint32_t)dims[2];
    const uint32_t q = i % planes_of;
    *pl = i / planes_of;
    *a2 = q % d2;
    *a1 = (q / d2) % d1;
    *a0 = q / d2 / d1;
}

__global__ void k_forward(tl_gconv C, const float *w, const float *b, const float *x, float *y,
                          int64_t total) {
    const uint32_t ctot = (uint32_t)(C.cout * C.groups);
    TL_GRID_LOOP(i, total) {
        uint32_t pl;
        int64_t o0, o1, o2;
        unravel((uint32_t)i, (uint32_t)C.out_n, C.out, &pl, &o0, &o1, &o2);
        y[i] = tl_gconv_forward(&C, w, b, x, pl / ctot, pl % ctot, o0, o1, o2);
    }
}

__global__ void k_dinput(tl_gconv C, const float *w, const float *g, float *dx, int64_t total) {
    const uint32_t ctot = (uint32_t)(C.cin * C.groups);
    TL_GRID_LOOP(i, total) {
        uint32_t pl;
        int64_t q0, q1, q2;
        unravel((uint32_t)i, (uint32_t)C.in_n, C.in, &pl, &q0, &q1, &q2);
        dx[i] = tl_gconv_dinput(&C, w, g, pl / ctot, pl % ctot, q0, q1, q2);
    }
}

// part[j * N + n]: sample n's share of weight j; threads of a warp take neighbouring weights
__global__ void k_dkernel_samples(tl_gconv C, const float *x, const float *g, float *part,
                                  int64_t nw) {
    TL_GRID_LOOP(t, nw * C.n) {
        const uint32_t j = (uint32_t)(t % nw), n = (uint32_t)(t / nw);
        const uint32_t kn = (uint32_t)C.k_n, cin = (uint32_t)C.cin;
        const uint32_t kk = j % kn, cl = (j / kn) % cin, co = j / kn / cin;
        const uint32_t k2 = kk % (uint32_t)C.k[2], k1 = (kk / (uint32_t)C.k[2]) % (uint32_t)C.k[1];
        const uint32_t k0 = kk / (uint32_t)C.k[2] / (uint32_t)C.k[1];
        part[(int64_t)j * C.n + n] = tl_gconv_dkernel_sample(&C, x, g, co, cl, k0, k1, k2, n);
    }
}

// rule 4 over `len` partials per row (samples of a weight, chunks of a bias gradient): pushing
// whole-chunk partials (chunked = 1) or single values (chunked = 0) in order
__global__ void k_rows_rule4(const float *part, int64_t len, int64_t rows, int chunked,
                             float *out) {
    TL_GRID_LOOP(r, rows) {
        tlm_sum4 acc;
        tlm_sum4_init(&acc);
        const float *p = part + r * len;
        for (int64_t i = 0; i < len; i++) {
            if (chunked) tlm_sum4_push(&acc, p[i]);
            else tlm_sum4_add(&acc, p[i]);
        }
        out[r] = tlm_sum4_result(&acc);
    }
}

__global__ void k_dbias_chunks(tl_gconv C, const float *g, float *part, int64_t chunks) {
    const int64_t ctot = C.cout * C.groups;
    TL_GRID_LOOP(t, ctot * chunks) part[t] = tl_gconv_dbias_chunk(&C, g, t / chunks, t % chunks);
}

// out[r] = rule 4 over the `len` partials of row r (k_rows_rule4, `chunked` as there), for
// `rows` rows that fill(part) launches into scratch; zeros when a row has no partials
template <class Fill>
int rule4_of_partials(const char *op, int64_t rows, int64_t len, int chunked, float *out,
                      Fill fill) {
    if (rows == 0) return TL_OK;
    if (len == 0) {
        TL_CUDA_TRY(op, cudaMemsetAsync(out, 0, (size_t)rows * sizeof(float), tl_stream()));
        return TL_OK;
    }
    float *part;
    TL_TRY(tl_scratch(op, (size_t)(rows * len) * sizeof(float), (void **)&part));
    fill(part);
    int st = tl_cuda_launched(op);
    if (!st) {
        k_rows_rule4<<<tl_blocks(rows), TL_THREADS, 0, tl_stream()>>>(part, len, rows, chunked,
                                                                      out);
        st = tl_cuda_launched(op);
    }
    tl_scratch_free(part);
    return st;
}


// ---------------------------------------------------------------- depthwise 2-D (tiled)
constexpr int DW_TW = GC_TW, DW_TH = GC_TH; // output tile: 32 x 8 threads, one value each
constexpr int DW_SMEM = 48 * 1024;         // staged planes beyond this take the generic kernels

// the next plane's window into patch (0 off the plane), between barriers: every thread is done
// reading the previous plane's before it is overwritten
__device__ __forceinline__ void dw_stage(float *patch, const float *plane, int H, int W, int y0,
                                         int x0, int ph, int pw) {
    __syncthreads();
    gc_stage(patch, plane, 1, 0, H, W, y0, x0, ph, pw, threadIdx.x, threadIdx.y);
    __syncthreads();
}

// y over a DW_TH x DW_TW tile of plane (n, c): the input window with its halo staged first
__global__ void k_dw_forward(tl_gconv C, const float *w, const float *b, const float *x, float *y,
                             int pw, int ph) {
    extern __shared__ float patch[];   // ph x pw input values (0 in the padding)
    const int H = (int)C.in[0], W = (int)C.in[1], OH = (int)C.out[0], OW = (int)C.out[1];
    const int kh = (int)C.k[0], kw = (int)C.k[1], sy = (int)C.s[0], sx = (int)C.s[1];
    const int dy = (int)C.d[0], dx = (int)C.d[1];
    const int tiles_w = (OW + DW_TW - 1) / DW_TW;
    const int oy0 = (blockIdx.x / tiles_w) * DW_TH, ox0 = (blockIdx.x % tiles_w) * DW_TW;
    const int64_t planes = C.n * C.groups;
    for (int64_t pl = blockIdx.y; pl < planes; pl += gridDim.y) {
        const int c = (int)(pl % C.groups);
        const float *xp = x + pl * (int64_t)H * W;
        const int iy0 = oy0 * sy - (int)C.p[0], ix0 = ox0 * sx - (int)C.p[1];
        dw_stage(patch, xp, H, W, iy0, ix0, ph, pw);
        const int oy = oy0 + threadIdx.y, ox = ox0 + threadIdx.x;
        if (oy < OH && ox < OW) {
            const float *wk = w + (int64_t)c * kh * kw;
            const float *pp = patch + threadIdx.y * sy * pw + threadIdx.x * sx;
            float acc = b[c];
            for (int ky = 0; ky < kh; ky++)
                for (int kx = 0; kx < kw; kx++)
                    acc = tlm_fma(wk[ky * kw + kx], pp[ky * dy * pw + kx * dx], acc);
            y[pl * (int64_t)OH * OW + (int64_t)oy * OW + ox] = acc;
        }
    }
}

// dinput at stride 1 over a DW_TH x DW_TW tile: the gradient window staged (0 off the plane)
__global__ void k_dw_dinput(tl_gconv C, const float *w, const float *g, float *dxo, int pw, int ph) {
    extern __shared__ float patch[];   // ph x pw gradient values
    const int H = (int)C.in[0], W = (int)C.in[1], OH = (int)C.out[0], OW = (int)C.out[1];
    const int kh = (int)C.k[0], kw = (int)C.k[1], dy = (int)C.d[0], dx = (int)C.d[1];
    const int tiles_w = (W + DW_TW - 1) / DW_TW;
    const int qy0 = (blockIdx.x / tiles_w) * DW_TH, qx0 = (blockIdx.x % tiles_w) * DW_TW;
    // output rows reaching this tile: q + p - k d for k = kh-1 .. 0
    const int gy0 = qy0 + (int)C.p[0] - (kh - 1) * dy, gx0 = qx0 + (int)C.p[1] - (kw - 1) * dx;
    const int64_t planes = C.n * C.groups;
    for (int64_t pl = blockIdx.y; pl < planes; pl += gridDim.y) {
        const int c = (int)(pl % C.groups);
        const float *gp = g + pl * (int64_t)OH * OW;
        dw_stage(patch, gp, OH, OW, gy0, gx0, ph, pw);
        const int qy = qy0 + threadIdx.y, qx = qx0 + threadIdx.x;
        if (qy < H && qx < W) {
            const float *wk = w + (int64_t)c * kh * kw;
            float acc = 0.0f;
            for (int ky = 0; ky < kh; ky++) {
                const int oy = qy + (int)C.p[0] - ky * dy;
                if (oy < 0 || oy >= OH) continue;
                for (int kx = 0; kx < kw; kx++) {
                    const int ox = qx + (int)C.p[1] - kx * dx;
                    if (ox < 0 || ox >= OW) continue;
                    const float gv = patch[(oy - gy0) * pw + (ox - gx0)];
                    acc = tlm_add(acc, tlm_fma(wk[ky * kw + kx], gv, 0.0f));
                }
            }
            dxo[pl * (int64_t)H * W + (int64_t)qy * W + qx] = acc;
        }
    }
}

// one block per plane (n, c): both planes staged, one thread per tap runs the sample's chain
__global__ void k_dw_dkernel(tl_gconv C, const float *x, const float *g, float *part) {
    extern __shared__ float planes_s[];   // the input plane, then the gradient plane
    const int H = (int)C.in[0], W = (int)C.in[1], OH = (int)C.out[0], OW = (int)C.out[1];
    const int kh = (int)C.k[0], kw = (int)C.k[1];
    float *xs = planes_s, *gs = planes_s + H * W;
    const int64_t planes = C.n * C.groups;
    for (int64_t pl = blockIdx.x; pl < planes; pl += gridDim.x) {
        const int64_t n = pl / C.groups, c = pl % C.groups;
        __syncthreads();
        for (int t = threadIdx.x; t < H * W; t += blockDim.x) xs[t] = x[pl * (int64_t)H * W + t];
        for (int t = threadIdx.x; t < OH * OW; t += blockDim.x) gs[t] = g[pl * (int64_t)OH * OW + t];
        __syncthreads();
        for (int tap = threadIdx.x; tap < kh * kw; tap += blockDim.x) {
            const int ky = tap / kw, kx = tap % kw;
            float acc = 0.0f;
            for (int oy = 0; oy < OH; oy++) {
                const int iy = oy * (int)C.s[0] - (int)C.p[0] + ky * (int)C.d[0];
                const bool rin = iy >= 0 && iy < H;
                for (int ox = 0; ox < OW; ox++) {
                    const int ix = ox * (int)C.s[1] - (int)C.p[1] + kx * (int)C.d[1];
                    const float v = (rin && ix >= 0 && ix < W) ? xs[iy * W + ix] : 0.0f;
                    acc = tlm_fma(gs[oy * OW + ox], v, acc);
                }
            }
            part[(c * kh * kw + tap) * C.n + n] = acc;
        }
    }
}

// ---------------------------------------------------------------- dispatch

// Knobs for comparing schedules, read once in benchmark builds (bench_switches.h): TORCHLEAN_CONV_GROUPED_LEGACY=1 runs the earlier
// per-value and tiled kernels throughout; TORCHLEAN_DW_ROWS (1, 2, 4) the most rows per thread
// of a depthwise tile (rows_for).
int env_int(const char *name, int dflt) {
    const char *v = tl_bench_env(name);
    return v && *v ? atoi(v) : dflt;
}
bool legacy() {
    static const bool v = env_int("TORCHLEAN_CONV_GROUPED_LEGACY", 0) != 0;
    return v;
}
int dw_rows() {
    static const int v = env_int("TORCHLEAN_DW_ROWS", 4);
    return v == 1 || v == 2 || v == 4 ? v : 4;
}

// the tiled kernels serve 2-D convolutions; depthwise ones have one channel in and out a group
bool two_d(const tl_gconv &C) { return C.k[2] == 1 && C.in[2] == 1 && C.out[2] == 1; }
bool dw_2d(const tl_gconv &C) { return C.cin == 1 && C.cout == 1 && two_d(C); }

unsigned dw_planes_grid(int64_t planes) {
    return (unsigned)(planes < 65535 ? (planes > 0 ? planes : 1) : 65535);
}

// dW[r][tap] and db[co] (from the rows with cl = 0): the slices of each added in order
__global__ void k_wgrad_finish(const float *part, int64_t rows, int64_t slices, int T, int64_t cin,
                               float *dw, float *db) {
    TL_GRID_LOOP(i, rows * T) {
        const int64_t r = i / T, t = i % T;
        if (t == T - 1 && r % cin) continue;
        const float *p = part + r * slices * T + t;
        float s = p[0];
        for (int64_t k = 1; k < slices; k++) s += p[k * T];
        if (t < T - 1) dw[r * (T - 1) + t] = s;
        else db[r / cin] = s;
    }
}

// f(std::integral_constant<int, k>) for the compiled square sizes k (3, 5, 7)
template <class F>
void by_size(int k, F f) {
    if (k == 3) f(std::integral_constant<int, 3>());
    else if (k == 5) f(std::integral_constant<int, 5>());
    else f(std::integral_constant<int, 7>());
}
// f(std::integral_constant<int, ry>) for the compiled rows per thread (1, 2, 4)
template <class F>
void by_rows(int ry, F f) {
    if (ry == 1) f(std::integral_constant<int, 1>());
    else if (ry == 2) f(std::integral_constant<int, 2>());
    else f(std::integral_constant<int, 4>());
}

unsigned planes_grid(const tl_gconv &C) { return dw_planes_grid(C.n * C.groups); }

// Which convolutions take the fixed-size kernels (measured on an H200 against the earlier
// kernels, bench/results/depthwise.md): grouped ones always (the per-value kernels were 5-13x
// slower); depthwise 3x3 (a quarter of the earlier forward's loads per output, and 9-tap kernel
// gradients that left 23 of 32 lanes idle); depthwise 5x5 and 7x7 stay on the 32 x 8 tiles and
// per-plane kernel-gradient blocks, which keep 25 or 49 lanes of 32 or 64 busy and measured
// faster than the fixed-size tiles at 7x7.
bool takes_fixed(const tl_gconv &C) {
    const bool dw = C.cin == 1 && C.cout == 1;
    return !legacy() && two_d(C) && gc_square(C) && (!dw || gc_square(C) == 3);
}

// rows per thread of a depthwise tile: TORCHLEAN_DW_ROWS, halved while half the tile still
// covers a plane of `height` rows (a 7x7 plane takes one row a thread, not 32 mostly idle rows)
int rows_for(int64_t height) {
    int ry = dw_rows();
    while (ry > 1 && GC_TH * ry / 2 >= height) ry /= 2;
    return ry;
}

// the fixed-size tiled forward (depthwise or grouped); false when the shape does not take it
bool tiled_forward(const tl_gconv &C, const float *w, const float *b, const float *x, float *y) {
    const bool dw = C.cin == 1 && C.cout == 1;
    const int ry = rows_for(C.out[0]);
    GcShape L;
    if (!takes_fixed(C) || !gc_shape(C, false, !dw, ry, &L)) return false;
    const dim3 grid((unsigned)L.tiles, planes_grid(C));
    if (dw)
        by_rows(ry, [&](auto R) {   // 3x3 (takes_fixed)
            k_dw_forward_t<3, 3, R.value><<<grid, GC_THREADS, L.smem, tl_stream()>>>(
                C, w, b, x, y, L.pw, L.ph);
        });
    else
        by_size(gc_square(C), [&](auto K) {
            k_grp_forward_t<K.value, K.value><<<grid, GC_THREADS, L.smem, tl_stream()>>>(
                C, w, b, x, y, L.pw, L.ph, L.woff, L.cpad);
        });
    return true;
}

// the fixed-size tiled input gradient (depthwise at any stride, grouped at stride 1)
bool tiled_dinput(const tl_gconv &C, const float *w, const float *g, float *dx) {
    const bool dw = C.cin == 1 && C.cout == 1;
    const int ry = rows_for(C.in[0]);
    GcShape L;
    if (!takes_fixed(C) || !gc_shape(C, true, !dw, ry, &L)) return false;
    const dim3 grid((unsigned)L.tiles, planes_grid(C));
    if (dw && (C.s[0] != 1 || C.s[1] != 1))
        by_rows(ry, [&](auto R) {
            k_dw_dinput_strided_t<3, 3, R.value><<<grid, GC_THREADS, L.smem, tl_stream()>>>(
                C, w, g, dx);
        });
    else if (dw)
        by_rows(ry, [&](auto R) {
            k_dw_dinput_t<3, 3, R.value><<<grid, GC_THREADS, L.smem, tl_stream()>>>(
                C, w, g, dx, L.pw, L.ph);
        });
    else
        by_size(gc_square(C), [&](auto K) {
            k_grp_dinput_t<K.value, K.value><<<grid, GC_THREADS, L.smem, tl_stream()>>>(
                C, w, g, dx, L.pw, L.ph, L.woff, L.cpad);
        });
    return true;
}

// default/deterministic kernel and bias gradients by slices (*done false: the shape takes the
// per-sample kernels instead)
int wgrad_slices(const char *op, const tl_gconv &C, const float *x, const float *g, float *dw,
                 float *db, bool *done) {
    *done = false;
    const int k = gc_square(C);
    if (!takes_fixed(C) || tl_exact() || C.n < 1 || C.out_n < 1) return TL_OK;
    const int64_t E = C.n * C.out_n, rows = C.cout * C.groups * C.cin, T = C.k_n + 1;
    const int64_t chunk = gc_wgrad_chunk(C, GC_WG_CHUNK);
    const int64_t slices = (E + chunk - 1) / chunk;
    if (rows < 1 || rows > TL_MAX_GRID_X) return TL_OK;
    float *part;
    TL_TRY(tl_scratch(op, (size_t)(rows * slices * T) * sizeof(float), (void **)&part));
    const dim3 grid((unsigned)rows, (unsigned)slices);
    by_size(k, [&](auto K) {
        k_wgrad_slices<K.value, K.value><<<grid, GC_THREADS, (size_t)(8 * T) * sizeof(float),
                                           tl_stream()>>>(C, x, g, part, chunk);
    });
    int st = tl_cuda_launched(op);
    if (!st) {
        k_wgrad_finish<<<tl_blocks(rows * T), TL_THREADS, 0, tl_stream()>>>(part, rows, slices,
                                                                          (int)T, C.cin, dw, db);
        st = tl_cuda_launched(op);
    }
    tl_scratch_free(part);
    *done = !st;
    return st;
}

}  // namespace

extern "C" {

int tlk_conv_grouped_forward(const char *op, tl_buf kernel, tl_buf bias, tl_buf input, tl_buf y,
                             const tl_geom *geom, const int64_t *dilation, int64_t dilation_len,
                             int64_t groups) {
    tl_gconv C;
    TL_TRY(tl_gconv_make(op, geom, dilation, groups, &C));
    const int64_t total = C.n * C.cout * C.groups * C.out_n;
    if (total > 0 && tiled_forward(C, kernel->data, bias->data, input->data, y->data)) {
        TL_LAUNCHED(op);
        return TL_OK;
    }
    if (dw_2d(C)) {
        const int pw = (DW_TW - 1) * (int)C.s[1] + ((int)C.k[1] - 1) * (int)C.d[1] + 1;
        const int ph = (DW_TH - 1) * (int)C.s[0] + ((int)C.k[0] - 1) * (int)C.d[0] + 1;
        if ((size_t)pw * ph * sizeof(float) <= DW_SMEM) {
            const int64_t tiles = ((C.out[0] + DW_TH - 1) / DW_TH) * ((C.out[1] + DW_TW - 1) / DW_TW);
            if (tiles <= TL_MAX_GRID_X) {
                k_dw_forward<<<dim3((unsigned)tiles, dw_planes_grid(C.n * C.groups)),
                               dim3(DW_TW, DW_TH), (size_t)pw * ph * sizeof(float), tl_stream()>>>(
                    C, kernel->data, bias->data, input->data, y->data, pw, ph);
                TL_LAUNCHED(op);
                return TL_OK;
            }
        }
    }
    k_forward<<<tl_blocks(total), TL_THREADS, 0, tl_stream()>>>(C, kernel->data, bias->data,
                                                               input->data, y->data, total);
    TL_LAUNCHED(op);
    return TL_OK;
}

int tlk_conv_grouped_backward(const char *op, tl_buf kernel, tl_buf input, tl_buf grad_out,
                              tl_buf dkernel, tl_buf dbias, tl_buf dinput, const tl_geom *geom,
                              const int64_t *dilation, int64_t dilation_len, int64_t groups) {
    tl_gconv C;
    TL_TRY(tl_gconv_make(op, geom, dilation, groups, &C));
    const int64_t ctot = C.cout * C.groups, nin = C.n * C.cin * C.groups * C.in_n;
    const int64_t nw = ctot * C.cin * C.k_n, chunks = (C.n * C.out_n + TLM_CHUNK - 1) / TLM_CHUNK;
    bool dinput_done = nin > 0 && tiled_dinput(C, kernel->data, grad_out->data, dinput->data);
    if (dinput_done) TL_LAUNCHED(op);
    if (nin > 0 && !dinput_done && dw_2d(C) && C.s[0] == 1 && C.s[1] == 1) {
        const int pw = DW_TW + ((int)C.k[1] - 1) * (int)C.d[1];
        const int ph = DW_TH + ((int)C.k[0] - 1) * (int)C.d[0];
        const int64_t tiles = ((C.in[0] + DW_TH - 1) / DW_TH) * ((C.in[1] + DW_TW - 1) / DW_TW);
        if ((size_t)pw * ph * sizeof(float) <= DW_SMEM && tiles <= TL_MAX_GRID_X) {
            k_dw_dinput<<<dim3((unsigned)tiles, dw_planes_grid(C.n * C.groups)), dim3(DW_TW, DW_TH),
                          (size_t)pw * ph * sizeof(float), tl_stream()>>>(
                C, kernel->data, grad_out->data, dinput->data, pw, ph);
            TL_LAUNCHED(op);
            dinput_done = true;
        }
    }
    if (nin > 0 && !dinput_done) {
        k_dinput<<<tl_blocks(nin), TL_THREADS, 0, tl_stream()>>>(C, kernel->data, grad_out->data,
                                                                dinput->data, nin);
        TL_LAUNCHED(op);
    }
    bool sliced;
    TL_TRY(wgrad_slices(op, C, input->data, grad_out->data, dkernel->data, dbias->data, &sliced));
    if (sliced) return TL_OK;
    TL_TRY(rule4_of_partials(op, nw, C.n, 0, dkernel->data, [&](float *part) {
        const size_t planes_bytes = (size_t)(C.in_n + C.out_n) * sizeof(float);
        if (dw_2d(C) && planes_bytes <= DW_SMEM) {
            const int threads = (int)((C.k_n + 31) / 32 * 32);
            k_dw_dkernel<<<dw_planes_grid(C.n * C.groups), threads < 1024 ? threads : 1024,
                           planes_bytes, tl_stream()>>>(C, input->data, grad_out->data, part);
        } else {
            k_dkernel_samples<<<tl_blocks(nw * C.n), TL_THREADS, 0, tl_stream()>>>(
                C, input->data, grad_out->data, part, nw);
        }
    }));
    TL_TRY(rule4_of_partials(op, ctot, chunks, 1, dbias->data, [&](float *part) {
        k_dbias_chunks<<<tl_blocks(ctot * chunks), TL_THREADS, 0, tl_stream()>>>(
            C, grad_out->data, part, chunks);
    }));
    return TL_OK;
}

}  // extern "C"
