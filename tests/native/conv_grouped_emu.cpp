// conv_grouped_emu.cpp: the tiled grouped/depthwise convolution kernels
// (native/cuda/conv_grouped_tiles.cuh) compiled for the CPU with the emulation in
// cuda_emu/cuda_runtime.h, behind a C API that tests/test_conv_grouped_tiles.py loads. Launch
// shapes are gc_shape's, as conv_grouped.cu launches them; the last pass that adds the
// kernel-gradient slices runs here on the host in the GPU's order.
// Shared memory past a launch's size is poisoned with NaN and checked for stray writes.
#include <cuda_runtime.h>  // the emulation (tests/native/cuda_emu)

#include "conv_grouped_tiles.cuh"

constexpr size_t kSmemBytes = 64 * 1024;
// the dynamic shared memory: gc_smem's block-scope extern names this global
alignas(16) float4 smem4[kSmemBytes / sizeof(float4)];

namespace {
constexpr size_t kSmemFloats = kSmemBytes / sizeof(float);

// -2 when a kernel wrote past its shared-memory size
int launch(dim3 grid, size_t bytes, std::function<void()> body, bool reverse) {
    float *f = reinterpret_cast<float *>(smem4);
    std::fill(f, f + kSmemFloats, NAN);
    emu::launch(grid, dim3(GC_THREADS), std::move(body), reverse);
    for (size_t i = bytes / sizeof(float); i < kSmemFloats; i++)
        if (f[i] == f[i]) return -2;
    return 0;
}

// g: n, cin, cout (per group), groups, H, W, KH, KW, OH, OW, SH, SW, PH, PW, DH, DW
tl_gconv geom(const int *g) {
    tl_gconv C;
    C.n = g[0]; C.cin = g[1]; C.cout = g[2]; C.groups = g[3];
    C.in[0] = g[4]; C.in[1] = g[5]; C.in[2] = 1;
    C.k[0] = g[6]; C.k[1] = g[7]; C.k[2] = 1;
    C.out[0] = g[8]; C.out[1] = g[9]; C.out[2] = 1;
    C.s[0] = g[10]; C.s[1] = g[11]; C.s[2] = 1;
    C.p[0] = g[12]; C.p[1] = g[13]; C.p[2] = 0;
    C.d[0] = g[14]; C.d[1] = g[15]; C.d[2] = 1;
    C.in_n = C.in[0] * C.in[1]; C.k_n = C.k[0] * C.k[1]; C.out_n = C.out[0] * C.out[1];
    return C;
}

// grid y as conv_grouped.cu's (capped small here, so the plane loop wraps)
unsigned planes_grid(const tl_gconv &C, int cap) {
    const int64_t p = C.n * C.groups;
    return (unsigned)(p < cap ? (p > 0 ? p : 1) : cap);
}

template <int K, int R>
int tiled(const tl_gconv &C, bool dinput, const float *w, const float *b, const float *src,
          float *dst, int cap, bool reverse) {
    const bool dw = C.cin == 1 && C.cout == 1;
    GcShape L;
    if (!gc_shape(C, dinput, !dw, R, &L)) return -1;
    const dim3 grid((unsigned)L.tiles, planes_grid(C, cap));
    return launch(grid, L.smem, [=] {
        if (dw && !dinput) k_dw_forward_t<K, K, R>(C, w, b, src, dst, L.pw, L.ph);
        else if (dw && (C.s[0] != 1 || C.s[1] != 1)) k_dw_dinput_strided_t<K, K, R>(C, w, src, dst);
        else if (dw) k_dw_dinput_t<K, K, R>(C, w, src, dst, L.pw, L.ph);
        else if (!dinput) k_grp_forward_t<K, K>(C, w, b, src, dst, L.pw, L.ph, L.woff, L.cpad);
        else k_grp_dinput_t<K, K>(C, w, src, dst, L.pw, L.ph, L.woff, L.cpad);
    }, reverse);
}

template <int K>
int tiled_rows(const tl_gconv &C, bool dinput, int rows, const float *w, const float *b,
               const float *src, float *dst, int cap, bool reverse) {
    if (rows == 1) return tiled<K, 1>(C, dinput, w, b, src, dst, cap, reverse);
    if (rows == 2) return tiled<K, 2>(C, dinput, w, b, src, dst, cap, reverse);
    return tiled<K, 4>(C, dinput, w, b, src, dst, cap, reverse);
}

template <int K>
int wgrad(const tl_gconv &C, const float *x, const float *g, float *dw, float *db, int64_t want,
          bool reverse) {
    const int64_t T = C.k_n + 1, rows = C.cout * C.groups * C.cin;
    const int64_t chunk = gc_wgrad_chunk(C, want), slices = (C.n * C.out_n + chunk - 1) / chunk;
    std::vector<float> part((size_t)(rows * slices * T), NAN);
    float *pp = part.data();
    const int st = launch(dim3((unsigned)rows, (unsigned)slices), (size_t)(8 * T) * sizeof(float),
                          [=] { k_wgrad_slices<K, K>(C, x, g, pp, chunk); }, reverse);
    for (int64_t r = 0; r < rows; r++)   // k_wgrad_finish
        for (int64_t t = 0; t < T; t++) {
            if (t == T - 1 && r % C.cin) continue;
            float s = part[(size_t)(r * slices * T + t)];
            for (int64_t k = 1; k < slices; k++) s += part[(size_t)((r * slices + k) * T + t)];
            if (t < T - 1) dw[r * (T - 1) + t] = s;
            else db[r / C.cin] = s;
        }
    return st;
}
}  // namespace

extern "C" {

// y (dinput = 0) or dX (dinput = 1, src = the output gradient) by the tiled kernels; -1 when the
// shape does not take them, -2 on a stray shared-memory write
int emu_gconv_tiled(const int *g, int dinput, int rows, const float *w, const float *b,
                    const float *src, float *dst, int cap, int reverse) {
    const tl_gconv C = geom(g);
    switch (gc_square(C)) {
    case 3: return tiled_rows<3>(C, dinput != 0, rows, w, b, src, dst, cap, reverse != 0);
    case 5: return tiled_rows<5>(C, dinput != 0, rows, w, b, src, dst, cap, reverse != 0);
    case 7: return tiled_rows<7>(C, dinput != 0, rows, w, b, src, dst, cap, reverse != 0);
    default: return -1;
    }
}

// default mode's dW and db by k_wgrad_slices (`want` positions a slice)
int emu_gconv_wgrad(const int *g, const float *x, const float *gy, float *dw, float *db,
                    long long want, int reverse) {
    const tl_gconv C = geom(g);
    switch (gc_square(C)) {
    case 3: return wgrad<3>(C, x, gy, dw, db, want, reverse != 0);
    case 5: return wgrad<5>(C, x, gy, dw, db, want, reverse != 0);
    case 7: return wgrad<7>(C, x, gy, dw, db, want, reverse != 0);
    default: return -1;
    }
}

}  // extern "C"
