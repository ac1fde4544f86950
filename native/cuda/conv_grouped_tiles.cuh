// conv_grouped_tiles.cuh: the tiled kernels of grouped 2-D convolution for kernel sizes known at
// compile time (3x3, 5x5, 7x7), included by conv_grouped.cu and, for the CPU emulation that
// tests them without a GPU, by tests/native/conv_grouped_emu.cpp. Blocks are GC_THREADS threads
// in one dimension, read as GC_TH rows of GC_TW lanes; dynamic shared memory only.
//
// Forward and input gradient compute tl_gconv_forward's and tl_gconv_dinput's chains (so every
// mode keeps the stub's bits); the kernel and bias gradients of k_wgrad_slices are the default
// and deterministic modes' (a fixed tree, not the exact order).
#pragma once

#include "conv_grouped.h"

constexpr int GC_TW = 32, GC_TH = 8, GC_THREADS = GC_TW * GC_TH;

// Stage a window with its halo into shared memory, every kernel's first step: nplanes planes
// (plane_stride apart, H x W each, row-major) from row y0 and column x0, ph x pw per plane:
// sm[(p * ph + r) * pw + q] = src[p][y0 + r][x0 + q], 0 outside the plane. The block's threads
// walk it as GC_TH rows (ty) of GC_TW lanes (tx).
__device__ __forceinline__ void gc_stage(float *sm, const float *src, int nplanes,
                                         int64_t plane_stride, int H, int W, int y0, int x0,
                                         int ph, int pw, int tx, int ty) {
    for (int cr = ty; cr < nplanes * ph; cr += GC_TH) {
        const int y = y0 + cr % ph;
        const bool rin = y >= 0 && y < H;
        const float *sp = src + (int64_t)(cr / ph) * plane_stride;
        for (int q = tx; q < pw; q += GC_TW) {
            const int x = x0 + q;
            sm[cr * pw + q] = (rin && x >= 0 && x < W) ? sp[(int64_t)y * W + x] : 0.0f;
        }
    }
}
constexpr int GC_OCB = 8;   // grouped kernels: channels per register block (two float4 loads)

__device__ __forceinline__ float *gc_smem() {
    extern __shared__ float4 smem4[];
    return reinterpret_cast<float *>(smem4);
}

// The kernels below are written for a kernel size known at compile time: the weights sit in
// registers and the tap loops unroll. A depthwise thread computes RY vertically adjacent values
// of one column, so a block covers a 32 x 8*RY tile. (conv_grouped.cu launches the depthwise
// ones at 3x3 only, the grouped ones and the kernel gradient at 3x3, 5x5 and 7x7; the CPU
// emulation tests all three sizes.)

// y over a tile of depthwise plane (n, c): the same chain as tl_gconv_forward
template <int KH, int KW, int RY>
__global__ void __launch_bounds__(GC_THREADS)
k_dw_forward_t(
    tl_gconv C, const float *__restrict__ w, const float *__restrict__ b,
    const float *__restrict__ x, float *__restrict__ y, int pw, int ph) {
    float *patch = gc_smem();   // ph x pw input values (0 in the padding)
    const int H = (int)C.in[0], W = (int)C.in[1], OH = (int)C.out[0], OW = (int)C.out[1];
    const int sy = (int)C.s[0], sx = (int)C.s[1], dy = (int)C.d[0], dx = (int)C.d[1];
    const int tx = threadIdx.x % GC_TW, ty = threadIdx.x / GC_TW;
    const int tiles_w = (OW + GC_TW - 1) / GC_TW;
    const int oy0 = (blockIdx.x / tiles_w) * (GC_TH * RY), ox0 = (blockIdx.x % tiles_w) * GC_TW;
    const int iy0 = oy0 * sy - (int)C.p[0], ix0 = ox0 * sx - (int)C.p[1];
    const int64_t planes = C.n * C.groups;
    for (int64_t pl = blockIdx.y; pl < planes; pl += gridDim.y) {
        const int c = (int)(pl % C.groups);
        float wr[KH * KW];
#pragma unroll
        for (int t = 0; t < KH * KW; t++) wr[t] = w[(int64_t)c * KH * KW + t];
        const float bias = b[c];
        const float *xp = x + pl * (int64_t)H * W;
        __syncthreads();
        gc_stage(patch, xp, 1, 0, H, W, iy0, ix0, ph, pw, tx, ty);
        __syncthreads();
        const int ox = ox0 + tx;
        if (ox >= OW) continue;
        float *yp = y + pl * (int64_t)OH * OW + ox;
#pragma unroll
        for (int r = 0; r < RY; r++) {
            const int ly = ty * RY + r;
            if (oy0 + ly >= OH) break;
            const float *pp = patch + ly * sy * pw + tx * sx;
            float acc = bias;
#pragma unroll
            for (int ky = 0; ky < KH; ky++)
#pragma unroll
                for (int kx = 0; kx < KW; kx++)
                    acc = tlm_fma(wr[ky * KW + kx], pp[ky * dy * pw + kx * dx], acc);
            yp[(int64_t)(oy0 + ly) * OW] = acc;
        }
    }
}

// dinput at stride 1 over a tile of depthwise plane (n, c): the chain of tl_gconv_dinput (taps
// off the output plane skipped, as there), the gradient window staged with the flipped kernel's
// halo
template <int KH, int KW, int RY>
__global__ void __launch_bounds__(GC_THREADS)
k_dw_dinput_t(
    tl_gconv C, const float *__restrict__ w, const float *__restrict__ g, float *__restrict__ dxo,
    int pw, int ph) {
    float *patch = gc_smem();   // ph x pw gradient values (0 off the plane)
    const int H = (int)C.in[0], W = (int)C.in[1], OH = (int)C.out[0], OW = (int)C.out[1];
    const int dy = (int)C.d[0], dx = (int)C.d[1], py = (int)C.p[0], px = (int)C.p[1];
    const int tx = threadIdx.x % GC_TW, ty = threadIdx.x / GC_TW;
    const int tiles_w = (W + GC_TW - 1) / GC_TW;
    const int qy0 = (blockIdx.x / tiles_w) * (GC_TH * RY), qx0 = (blockIdx.x % tiles_w) * GC_TW;
    const int gy0 = qy0 + py - (KH - 1) * dy, gx0 = qx0 + px - (KW - 1) * dx;
    const int qx = qx0 + tx;
    unsigned cols = 0;   // the taps kx whose output column lies on the plane
#pragma unroll
    for (int kx = 0; kx < KW; kx++) {
        const int ox = qx + px - kx * dx;
        if (ox >= 0 && ox < OW) cols |= 1u << kx;
    }
    const int64_t planes = C.n * C.groups;
    for (int64_t pl = blockIdx.y; pl < planes; pl += gridDim.y) {
        const int c = (int)(pl % C.groups);
        float wr[KH * KW];
#pragma unroll
        for (int t = 0; t < KH * KW; t++) wr[t] = w[(int64_t)c * KH * KW + t];
        const float *gp = g + pl * (int64_t)OH * OW;
        __syncthreads();
        gc_stage(patch, gp, 1, 0, OH, OW, gy0, gx0, ph, pw, tx, ty);
        __syncthreads();
        if (qx >= W) continue;
        float *dp = dxo + pl * (int64_t)H * W + qx;
#pragma unroll
        for (int r = 0; r < RY; r++) {
            const int ly = ty * RY + r, qy = qy0 + ly;
            if (qy >= H) break;
            float acc = 0.0f;
#pragma unroll
            for (int ky = 0; ky < KH; ky++) {
                const int oy = qy + py - ky * dy;
                if (oy < 0 || oy >= OH) continue;
                const float *pr = patch + (ly + (KH - 1 - ky) * dy) * pw + tx;
#pragma unroll
                for (int kx = 0; kx < KW; kx++)
                    if (cols >> kx & 1u)
                        acc = tlm_add(acc, tlm_fma(wr[ky * KW + kx], pr[(KW - 1 - kx) * dx], 0.0f));
            }
            dp[(int64_t)qy * W] = acc;
        }
    }
}

// dinput at stride > 1 over a tile of depthwise plane (n, c): cell q takes tap k when
// q + p - k d is a multiple of the stride s (output (q + p - k d) / s), as tl_gconv_from; the
// output rows and columns the tile reaches are staged (at most ph x pw, given by gc_shape)
__device__ __forceinline__ int gc_floor_div(int a, int b) {
    return a >= 0 ? a / b : -((-a + b - 1) / b);
}

template <int KH, int KW, int RY>
__global__ void __launch_bounds__(GC_THREADS)
k_dw_dinput_strided_t(
    tl_gconv C, const float *__restrict__ w, const float *__restrict__ g,
    float *__restrict__ dxo) {
    float *patch = gc_smem();
    const int H = (int)C.in[0], W = (int)C.in[1], OH = (int)C.out[0], OW = (int)C.out[1];
    const int sy = (int)C.s[0], sx = (int)C.s[1], dy = (int)C.d[0], dx = (int)C.d[1];
    const int py = (int)C.p[0], px = (int)C.p[1];
    const int tx = threadIdx.x % GC_TW, ty = threadIdx.x / GC_TW;
    const int tiles_w = (W + GC_TW - 1) / GC_TW;
    const int qy0 = (blockIdx.x / tiles_w) * (GC_TH * RY), qx0 = (blockIdx.x % tiles_w) * GC_TW;
    const int gy0 = gc_floor_div(qy0 + py - (KH - 1) * dy, sy);
    const int gx0 = gc_floor_div(qx0 + px - (KW - 1) * dx, sx);
    const int ph = gc_floor_div(qy0 + GC_TH * RY - 1 + py, sy) - gy0 + 1;
    const int pw = gc_floor_div(qx0 + GC_TW - 1 + px, sx) - gx0 + 1;
    const int qx = qx0 + tx;
    int col[KW];   // the staged column of tap kx, or -1 when it reaches no output
#pragma unroll
    for (int kx = 0; kx < KW; kx++) {
        const int t = qx + px - kx * dx;
        col[kx] = (t >= 0 && t % sx == 0 && t / sx < OW) ? t / sx - gx0 : -1;
    }
    const int64_t planes = C.n * C.groups;
    for (int64_t pl = blockIdx.y; pl < planes; pl += gridDim.y) {
        const int c = (int)(pl % C.groups);
        float wr[KH * KW];
#pragma unroll
        for (int t = 0; t < KH * KW; t++) wr[t] = w[(int64_t)c * KH * KW + t];
        const float *gp = g + pl * (int64_t)OH * OW;
        __syncthreads();
        gc_stage(patch, gp, 1, 0, OH, OW, gy0, gx0, ph, pw, tx, ty);
        __syncthreads();
        if (qx >= W) continue;
        float *dp = dxo + pl * (int64_t)H * W + qx;
#pragma unroll
        for (int r = 0; r < RY; r++) {
            const int qy = qy0 + ty * RY + r;
            if (qy >= H) break;
            float acc = 0.0f;
#pragma unroll
            for (int ky = 0; ky < KH; ky++) {
                const int t = qy + py - ky * dy;
                if (t < 0 || t % sy || t / sy >= OH) continue;
                const float *pr = patch + (t / sy - gy0) * pw;
#pragma unroll
                for (int kx = 0; kx < KW; kx++)
                    if (col[kx] >= 0)
                        acc = tlm_add(acc, tlm_fma(wr[ky * KW + kx], pr[col[kx]], 0.0f));
            }
            dp[(int64_t)qy * W] = acc;
        }
    }
}

// grouped forward over a 32 x 8 tile of sample n, group grp: the group's input channels staged
// (with halo) and its weights transposed to [c][tap][co], so each staged value feeds GC_OCB
// chains; every chain is tl_gconv_forward's (bias, then c and taps in order)
template <int KH, int KW>
__global__ void __launch_bounds__(GC_THREADS)
k_grp_forward_t(
    tl_gconv C, const float *__restrict__ w, const float *__restrict__ b,
    const float *__restrict__ x, float *__restrict__ y, int pw, int ph, int woff, int cpad) {
    constexpr int KK = KH * KW;
    float *sm = gc_smem();   // cin patches of ph x pw, then (at woff) the weights
    float *wt = sm + woff;
    const int H = (int)C.in[0], W = (int)C.in[1], OH = (int)C.out[0], OW = (int)C.out[1];
    const int sy = (int)C.s[0], sx = (int)C.s[1], dy = (int)C.d[0], dx = (int)C.d[1];
    const int cin = (int)C.cin, cout = (int)C.cout;
    const int tid = threadIdx.x, tx = tid % GC_TW, ty = tid / GC_TW;
    const int tiles_w = (OW + GC_TW - 1) / GC_TW;
    const int oy0 = (blockIdx.x / tiles_w) * GC_TH, ox0 = (blockIdx.x % tiles_w) * GC_TW;
    const int iy0 = oy0 * sy - (int)C.p[0], ix0 = ox0 * sx - (int)C.p[1];
    const int64_t planes = C.n * C.groups, ctot = C.cout * C.groups;
    for (int64_t pl = blockIdx.y; pl < planes; pl += gridDim.y) {
        const int64_t n = pl / C.groups, grp = pl % C.groups;
        const float *wg = w + grp * cout * cin * KK;
        const float *xg = x + (n * C.groups + grp) * cin * (int64_t)H * W;
        __syncthreads();
        for (int i = tid; i < cin * KK * cpad; i += GC_THREADS) {
            const int co = i % cpad, ct = i / cpad;
            wt[i] = co < cout ? wg[(int64_t)co * cin * KK + ct] : 0.0f;
        }
        gc_stage(sm, xg, cin, (int64_t)H * W, H, W, iy0, ix0, ph, pw, tx, ty);
        __syncthreads();
        const int oy = oy0 + ty, ox = ox0 + tx;
        if (oy >= OH || ox >= OW) continue;
        for (int co0 = 0; co0 < cout; co0 += GC_OCB) {
            float acc[GC_OCB];
#pragma unroll
            for (int j = 0; j < GC_OCB; j++)
                acc[j] = co0 + j < cout ? b[grp * cout + co0 + j] : 0.0f;
            for (int c = 0; c < cin; c++) {
                const float *pp = sm + (c * ph + ty * sy) * pw + tx * sx;
                const float *wc = wt + c * KK * cpad + co0;
#pragma unroll
                for (int t = 0; t < KK; t++) {
                    const float v = pp[(t / KW) * dy * pw + (t % KW) * dx];
                    const float4 w0 = *(const float4 *)(wc + t * cpad);
                    const float4 w1 = *(const float4 *)(wc + t * cpad + 4);
                    acc[0] = tlm_fma(w0.x, v, acc[0]); acc[1] = tlm_fma(w0.y, v, acc[1]);
                    acc[2] = tlm_fma(w0.z, v, acc[2]); acc[3] = tlm_fma(w0.w, v, acc[3]);
                    acc[4] = tlm_fma(w1.x, v, acc[4]); acc[5] = tlm_fma(w1.y, v, acc[5]);
                    acc[6] = tlm_fma(w1.z, v, acc[6]); acc[7] = tlm_fma(w1.w, v, acc[7]);
                }
            }
            float *yp = y + ((n * ctot + grp * cout + co0) * OH + oy) * (int64_t)OW + ox;
#pragma unroll
            for (int j = 0; j < GC_OCB; j++)
                if (co0 + j < cout) yp[(int64_t)j * OH * OW] = acc[j];
        }
    }
}

// grouped dinput at stride 1 over a 32 x 8 tile of sample n, group grp: the group's gradient
// planes staged, weights as [tap][co][cl]; per tap reaching the plane, the chain over co from 0
// is added onto the cell's sum (tl_gconv_dinput's order)
template <int KH, int KW>
__global__ void __launch_bounds__(GC_THREADS)
k_grp_dinput_t(
    tl_gconv C, const float *__restrict__ w, const float *__restrict__ g, float *__restrict__ dxo,
    int pw, int ph, int woff, int cpad) {
    constexpr int KK = KH * KW;
    float *sm = gc_smem();   // cout gradient patches of ph x pw, then the weights
    float *wt = sm + woff;
    const int H = (int)C.in[0], W = (int)C.in[1], OH = (int)C.out[0], OW = (int)C.out[1];
    const int dy = (int)C.d[0], dx = (int)C.d[1], py = (int)C.p[0], px = (int)C.p[1];
    const int cin = (int)C.cin, cout = (int)C.cout;
    const int tid = threadIdx.x, tx = tid % GC_TW, ty = tid / GC_TW;
    const int tiles_w = (W + GC_TW - 1) / GC_TW;
    const int qy0 = (blockIdx.x / tiles_w) * GC_TH, qx0 = (blockIdx.x % tiles_w) * GC_TW;
    const int gy0 = qy0 + py - (KH - 1) * dy, gx0 = qx0 + px - (KW - 1) * dx;
    const int64_t planes = C.n * C.groups, ctot = C.cout * C.groups, cin_tot = C.cin * C.groups;
    for (int64_t pl = blockIdx.y; pl < planes; pl += gridDim.y) {
        const int64_t n = pl / C.groups, grp = pl % C.groups;
        const float *wg = w + grp * cout * cin * KK;
        const float *gg = g + (n * ctot + grp * cout) * (int64_t)OH * OW;
        __syncthreads();
        for (int i = tid; i < KK * cout * cpad; i += GC_THREADS) {
            const int cl = i % cpad, co = (i / cpad) % cout, t = i / cpad / cout;
            wt[i] = cl < cin ? wg[((int64_t)co * cin + cl) * KK + t] : 0.0f;
        }
        gc_stage(sm, gg, cout, (int64_t)OH * OW, OH, OW, gy0, gx0, ph, pw, tx, ty);
        __syncthreads();
        const int qy = qy0 + ty, qx = qx0 + tx;
        if (qy >= H || qx >= W) continue;
        for (int c0 = 0; c0 < cin; c0 += GC_OCB) {
            float acc[GC_OCB];
#pragma unroll
            for (int j = 0; j < GC_OCB; j++) acc[j] = 0.0f;
#pragma unroll
            for (int t = 0; t < KK; t++) {
                const int ky = t / KW, kx = t % KW;
                const int oy = qy + py - ky * dy, ox = qx + px - kx * dx;
                if (oy < 0 || oy >= OH || ox < 0 || ox >= OW) continue;
                const float *pp = sm + (ty + (KH - 1 - ky) * dy) * pw + tx + (KW - 1 - kx) * dx;
                const float *wc = wt + t * cout * cpad + c0;
                float s[GC_OCB];
#pragma unroll
                for (int j = 0; j < GC_OCB; j++) s[j] = 0.0f;
                for (int co = 0; co < cout; co++) {
                    const float v = pp[co * ph * pw];
                    const float4 w0 = *(const float4 *)(wc + co * cpad);
                    const float4 w1 = *(const float4 *)(wc + co * cpad + 4);
                    s[0] = tlm_fma(w0.x, v, s[0]); s[1] = tlm_fma(w0.y, v, s[1]);
                    s[2] = tlm_fma(w0.z, v, s[2]); s[3] = tlm_fma(w0.w, v, s[3]);
                    s[4] = tlm_fma(w1.x, v, s[4]); s[5] = tlm_fma(w1.y, v, s[5]);
                    s[6] = tlm_fma(w1.z, v, s[6]); s[7] = tlm_fma(w1.w, v, s[7]);
                }
#pragma unroll
                for (int j = 0; j < GC_OCB; j++) acc[j] = tlm_add(acc[j], s[j]);
            }
            float *dp = dxo + ((n * cin_tot + grp * cin + c0) * H + qy) * (int64_t)W + qx;
#pragma unroll
            for (int j = 0; j < GC_OCB; j++)
                if (c0 + j < cin) dp[(int64_t)j * H * W] = acc[j];
        }
    }
}

// Default and deterministic modes: the kernel and bias gradients of 2-D convolutions as one
// reduction over (sample, output position). Block (r, s) owns weight row r = (co, cl) and the
// s-th slice of GC_WG_CHUNK positions of the N*P sequence; each thread walks the slice with
// stride 256, keeping one fma chain per tap (and a sum of g for the bias), then the block adds
// its threads in a fixed tree (warp butterflies, then the 8 warps in order) into part[r][s][T].
// k_wgrad_finish adds the slices in order. Nothing depends on timing: run to run identical.
template <int KH, int KW>
__global__ void __launch_bounds__(GC_THREADS)
k_wgrad_slices(
    tl_gconv C, const float *__restrict__ x, const float *__restrict__ g, float *__restrict__ part,
    int64_t chunk) {
    constexpr int T = KH * KW + 1;
    float (*red)[T] = reinterpret_cast<float (*)[T]>(gc_smem());   // [8][T]
    const int H = (int)C.in[0], W = (int)C.in[1], OH = (int)C.out[0], OW = (int)C.out[1];
    const int sy = (int)C.s[0], sx = (int)C.s[1], dy = (int)C.d[0], dx = (int)C.d[1];
    const int py = (int)C.p[0], px = (int)C.p[1];
    const int64_t P = (int64_t)OH * OW, E = C.n * P, r = blockIdx.x;
    const int64_t co = r / C.cin, xc = (co / C.cout) * C.cin + r % C.cin;
    const int64_t ctot = C.cout * C.groups, cin_tot = C.cin * C.groups;
    const int64_t e1 = (blockIdx.y + 1) * chunk < E ? (blockIdx.y + 1) * chunk : E;
    float a[T];
#pragma unroll
    for (int t = 0; t < T; t++) a[t] = 0.0f;
    int64_t e = blockIdx.y * chunk + threadIdx.x;
    int64_t n = e / P;
    int oy = (int)((e - n * P) / OW), ox = (int)((e - n * P) % OW);
    const int st_y = (int)(blockDim.x / OW), st_x = (int)(blockDim.x % OW);
    for (; e < e1; e += blockDim.x) {
        const float gv = g[(n * ctot + co) * P + (int64_t)oy * OW + ox];
        const float *xp = x + (n * cin_tot + xc) * (int64_t)H * W;
        a[T - 1] += gv;
#pragma unroll
        for (int ky = 0; ky < KH; ky++) {
            const int iy = oy * sy - py + ky * dy;
            const bool rin = iy >= 0 && iy < H;
#pragma unroll
            for (int kx = 0; kx < KW; kx++) {
                const int ix = ox * sx - px + kx * dx;
                const float v = (rin && ix >= 0 && ix < W) ? xp[(int64_t)iy * W + ix] : 0.0f;
                a[ky * KW + kx] = fmaf(gv, v, a[ky * KW + kx]);
            }
        }
        ox += st_x;
        oy += st_y;
        if (ox >= OW) { ox -= OW; oy++; }
        while (oy >= OH) { oy -= OH; n++; }
    }
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
    for (int t = 0; t < T; t++) {
        float v = a[t];
#pragma unroll
        for (int off = 16; off; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
        if (lane == 0) red[warp][t] = v;
    }
    __syncthreads();
    for (int t = threadIdx.x; t < T; t += blockDim.x) {
        float s = red[0][t];
        for (int k = 1; k < 8; k++) s += red[k][t];
        part[(r * gridDim.y + blockIdx.y) * T + t] = s;
    }
}

// ---------------------------------------------------------------- launch shapes (host)
constexpr size_t GC_SMEM = 48 * 1024;   // a tiled launch's shared memory at most

// the square kernel size the tiled kernels were compiled for (3, 5, 7), else 0
inline int gc_square(const tl_gconv &C) {
    const int64_t k = C.k[0];
    return C.k[2] == 1 && k == C.k[1] && (k == 3 || k == 5 || k == 7) ? (int)k : 0;
}

// a tiled launch: tiles of one plane (grid x), staged patch, weights offset and padding
struct GcShape {
    int64_t tiles;
    int pw, ph, woff, cpad;
    size_t smem;
};

// the shape of k_dw_forward_t / k_dw_dinput_t (k_dw_dinput_strided_t at a stride) (rows: RY)
// or, with grouped, k_grp_forward_t / k_grp_dinput_t (one row per thread; the input gradient at
// stride 1 only); false when it does not fit
inline bool gc_shape(const tl_gconv &C, bool dinput, bool grouped, int rows, GcShape *L) {
    const int k = gc_square(C);
    if (!k || C.in[2] != 1 || C.out[2] != 1) return false;
    const bool strided = C.s[0] != 1 || C.s[1] != 1;
    if (dinput && strided && grouped) return false;
    const int th = GC_TH * (grouped ? 1 : rows);
    const int64_t sy = dinput ? 1 : C.s[0], sx = dinput ? 1 : C.s[1];
    int64_t ph = (th - 1) * sy + (k - 1) * C.d[0] + 1, pw = (GC_TW - 1) * sx + (k - 1) * C.d[1] + 1;
    if (dinput && strided) {   // the output rows/columns a tile reaches, at most
        ph = (th - 1 + (k - 1) * C.d[0]) / C.s[0] + 2;
        pw = (GC_TW - 1 + (k - 1) * C.d[1]) / C.s[1] + 2;
    }
    const int64_t *img = dinput ? C.in : C.out;
    L->tiles = ((img[0] + th - 1) / th) * ((img[1] + GC_TW - 1) / GC_TW);
    L->ph = (int)ph;
    L->pw = (int)pw;
    int64_t total = ph * pw;
    L->woff = 0;
    L->cpad = 0;
    if (grouped) {   // the patches of every staged channel, then the weights [.][tap][blocked]
        const int64_t planes = dinput ? C.cout : C.cin, blocked = dinput ? C.cin : C.cout;
        L->cpad = (int)((blocked + GC_OCB - 1) / GC_OCB * GC_OCB);
        L->woff = (int)((planes * ph * pw + 3) / 4 * 4);
        total = L->woff + C.k_n * planes * L->cpad;
    }
    L->smem = (size_t)total * sizeof(float);
    return ph * pw < (1 << 24) && L->smem <= GC_SMEM && L->tiles <= 2147483647LL;
}

constexpr int64_t GC_WG_CHUNK = 16384;   // positions a kernel-gradient slice (4096 and 65536
                                         // measured no faster at 3x3)

// slices of k_wgrad_slices: `chunk` positions each, at most 65535 (grid y)
inline int64_t gc_wgrad_chunk(const tl_gconv &C, int64_t want) {
    const int64_t E = C.n * C.out_n;
    return (E + want - 1) / want > 65535 ? (E + 65534) / 65535 : want;
}

