// conv_geom.cuh (CUDA): the window geometry convolution (conv_pool.cu) and pooling (pooling.cu)
// share: which image cell a kernel offset reads at an output position (tap), its inverse (reader,
// reading_output), and the 32-bit form of a geometry with at most two spatial axes (Geom2).
#pragma once

#include "common.cuh"
#include "contract.h"

namespace {  // each including file gets its own copy

// the geometry the generated entry parsed (native/common/contract.h)
typedef tl_geom Geom;

// row-major multi-index of flat i over dims[0..r)
__device__ __forceinline__ void unravel(int64_t i, const int64_t *dims, int r, int64_t *idx) {
    for (int a = r - 1; a >= 0; a--) { idx[a] = i % dims[a]; i /= dims[a]; }
}

// image offset read by kernel offset ko at output position oo, or -1 in the padding
__device__ __forceinline__ int64_t tap(const Geom &G, const int64_t *ko, const int64_t *oo) {
    int64_t off = 0;
    for (int a = 0; a < G.r; a++) {
        int64_t i = oo[a] * G.s[a] + ko[a] - G.p[a];
        if (i < 0 || i >= G.in[a]) return -1;
        off = off * G.in[a] + i;
    }
    return off;
}

// the inverse of tap: whether a window reads image cell ii at kernel offset ko (not in a
// stride gap, not past the edge), and if so its output position *o (flat, row-major over G.out)
__device__ __forceinline__ bool reader(const Geom &G, const int64_t *ii, const int64_t *ko,
                                       int64_t *o) {
    int64_t at = 0;
    bool ok = true;
    for (int a = 0; a < G.r && ok; a++) {
        int64_t t = ii[a] + G.p[a] - ko[a];
        if (t < 0 || t % G.s[a] != 0 || t / G.s[a] >= G.out[a]) ok = false;
        else at = at * G.out[a] + t / G.s[a];
    }
    *o = at;
    return ok;
}

// The 1-D/2-D fast paths (im2col / col2im in conv_pool.cu, the deterministic pooling backward in
// pooling.cu) read the geometry with 32-bit index arithmetic: 64-bit divisions in the N-D
// kernels cost more than the memory traffic. C: the channels of the image.
struct Geom2 {
    int C, H, W, OH, OW, KH, KW, SH, SW, PH, PW;
};

// G with one or two spatial axes as a Geom2 of C channels
Geom2 to_2d(const Geom &G, int64_t C) {
    const int a = G.r == 2 ? 1 : 0;  // rank 1 is rank 2 with a unit leading axis
    Geom2 g;
    g.C = (int)C;
    g.H = a ? (int)G.in[0] : 1;  g.W = (int)G.in[a];
    g.OH = a ? (int)G.out[0] : 1; g.OW = (int)G.out[a];
    g.KH = a ? (int)G.k[0] : 1;  g.KW = (int)G.k[a];
    g.SH = a ? (int)G.s[0] : 1;  g.SW = (int)G.s[a];
    g.PH = a ? (int)G.p[0] : 0;  g.PW = (int)G.p[a];
    return g;
}

// Along one axis: the output position whose window reads image coordinate i at kernel offset
// k, or -1 (k lands between strides, or past the last output). k < i + pad + 1 (the walks'
// bound), so i + pad - k >= 0.
__device__ __forceinline__ int reading_output(int i, int pad, int k, int stride, int out) {
    const int t = i + pad - k;
    if (t % stride) return -1;
    return t / stride < out ? t / stride : -1;
}

}  // namespace
