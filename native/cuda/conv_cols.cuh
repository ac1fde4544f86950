// conv_cols.cuh (CUDA): im2col and col2im, the column matrix of conv_pool.cu's GEMM path (the
// stub's are native/stub/conv_cols.c). The columns of a chunk of nb samples are laid out
// col[(c, k)][b * P + o]: rows channel and kernel offset, columns sample-major output positions.
// col2im is a gather: every image cell sums the columns that read it in kernel-offset order onto
// its start value (the bias, or 0), so it needs no atomics and its bits are fixed. Geometries
// of one or two spatial axes take the 32-bit kernels (conv_geom.cuh Geom2).
#pragma once

#include "common.cuh"
#include "tl_math.h"
#include "conv_geom.cuh"

namespace {  // each including file gets its own copy

// col[(c * K + k) * (nb * P) + b * P + o] = img[b][c][tap(k, o)] (0 in the padding)
__global__ void k_im2col(Geom G, int64_t C, int64_t nb, const float *img, float *col) {
    const int64_t K = G.k_n, P = G.out_n, total = C * K * nb * P;
    TL_GRID_STRIDE(i, total) {
        int64_t o = i % P, rest = i / P;
        int64_t b = rest % nb, ck = rest / nb;
        int64_t c = ck / K, kk = ck % K;
        int64_t ko[8], oo[8];
        unravel(kk, G.k, G.r, ko);
        unravel(o, G.out, G.r, oo);
        int64_t t = tap(G, ko, oo);
        col[i] = t < 0 ? 0.0f : img[(b * C + c) * G.in_n + t];
    }
}

// img[b][c][i] = (bias ? bias[c] : 0), then + the column entry that read cell i at offset k for
// each kernel offset k in row-major order. A gather: one writer per cell, fixed order.
__global__ void k_col2im(Geom G, int64_t C, int64_t nb, const float *col, const float *bias,
                         float *img) {
    const int64_t K = G.k_n, P = G.out_n, total = nb * C * G.in_n;
    TL_GRID_STRIDE(i, total) {
        int64_t cell = i % G.in_n, bc = i / G.in_n;
        int64_t c = bc % C, b = bc / C;
        int64_t ii[8], ko[8];
        unravel(cell, G.in, G.r, ii);
        float s = bias ? bias[c] : 0.0f;
        for (int64_t kk = 0; kk < K; kk++) {
            unravel(kk, G.k, G.r, ko);
            int64_t o;
            if (reader(G, ii, ko, &o)) s = tlm_add(s, col[(c * K + kk) * (nb * P) + b * P + o]);
        }
        img[i] = s;
    }
}

__global__ void k_im2col_2d(Geom2 g, int nb, const float *img, float *col) {
    const int P = g.OH * g.OW, total = g.C * nb * P, K = g.KH * g.KW;
    const size_t nbP = (size_t)nb * P;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
        int ox = i % g.OW, t = i / g.OW;
        int oy = t % g.OH; t /= g.OH;
        int b = t % nb, c = t / nb;
        const float *plane = img + ((size_t)b * g.C + c) * g.H * g.W;
        float *dst = col + (size_t)c * K * nbP + (size_t)b * P + oy * g.OW + ox;
        for (int ky = 0; ky < g.KH; ky++) {
            int iy = oy * g.SH + ky - g.PH;
            bool rok = iy >= 0 && iy < g.H;
            for (int kx = 0; kx < g.KW; kx++) {
                int ix = ox * g.SW + kx - g.PW;
                dst[(size_t)(ky * g.KW + kx) * nbP] =
                    (rok && ix >= 0 && ix < g.W) ? plane[iy * g.W + ix] : 0.0f;
            }
        }
    }
}

__global__ void k_col2im_2d(Geom2 g, int nb, const float *col, const float *bias, float *img) {
    const int P = g.OH * g.OW, total = nb * g.C * g.H * g.W, K = g.KH * g.KW;
    const size_t nbP = (size_t)nb * P;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
        int ix = i % g.W, t = i / g.W;
        int iy = t % g.H; t /= g.H;
        int c = t % g.C, b = t / g.C;
        const float *src = col + (size_t)c * K * nbP + (size_t)b * P;
        float s = bias ? bias[c] : 0.0f;
        const int ky_end = min(g.KH, iy + g.PH + 1), kx_end = min(g.KW, ix + g.PW + 1);
        for (int ky = 0; ky < ky_end; ky++) {
            const int oy = reading_output(iy, g.PH, ky, g.SH, g.OH);
            if (oy < 0) continue;
            for (int kx = 0; kx < kx_end; kx++) {
                const int ox = reading_output(ix, g.PW, kx, g.SW, g.OW);
                if (ox >= 0) s = tlm_add(s, src[(size_t)(ky * g.KW + kx) * nbP + oy * g.OW + ox]);
            }
        }
        img[i] = s;
    }
}

bool fits_2d(const Geom &G, int64_t C, int64_t nb) {
    if (G.r > 2) return false;
    const int64_t lim = INT32_MAX / 2;  // int loop indices plus one grid stride never overflow
    return C * nb * G.in_n < lim && C * G.k_n * nb * G.out_n < lim && C * nb * G.out_n < lim;
}

// col (C*K x nb*P) from nb images of C channels
int im2col(const char *op, const Geom &G, int64_t C, int64_t nb, const float *img, float *col) {
    const int64_t n = C * G.k_n * nb * G.out_n;
    if (n == 0) return TL_OK;
    if (fits_2d(G, C, nb))
        k_im2col_2d<<<tl_blocks(C * nb * G.out_n), TL_THREADS, 0, tl_stream()>>>(
            to_2d(G, C), (int)nb, img, col);
    else
        k_im2col<<<tl_blocks(n), TL_THREADS, 0, tl_stream()>>>(G, C, nb, img, col);
    return tl_cuda_launched(op);
}

// nb images of C channels = (bias or 0) + the columns gathered back
int col2im(const char *op, const Geom &G, int64_t C, int64_t nb, const float *col,
           const float *bias, float *img) {
    const int64_t n = nb * C * G.in_n;
    if (n == 0) return TL_OK;
    if (fits_2d(G, C, nb))
        k_col2im_2d<<<tl_blocks(n), TL_THREADS, 0, tl_stream()>>>(to_2d(G, C), (int)nb, col, bias,
                                                                   img);
    else
        k_col2im<<<tl_blocks(n), TL_THREADS, 0, tl_stream()>>>(G, C, nb, col, bias, img);
    return tl_cuda_launched(op);
}

}  // namespace
