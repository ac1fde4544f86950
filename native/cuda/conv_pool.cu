// conv_pool.cu (CUDA): N-D convolution, transposed convolution and pooling, with an optional
// batch axis. Mirrors native/stub/conv_pool.c; the 2-D entry points are the N-D kernels with
// two spatial axes.
//
// Geometry arrives as one flat array (torchlean/shapes.py conv_geom / pool_geom):
//   [r, N, C_in, C_out, in_1..in_r, k_1..k_r, out_1..out_r, s_1..s_r, p_1..p_r]
//
// Convolutions and transposed convolutions run as implicit GEMMs: conv_igemm.cu outside exact
// mode (one or two spatial axes), conv_exact.cuh in exact mode (one to three axes; the stub's
// bits, no column buffer); the rest (more axes, more than 63 kernel taps outside exact mode,
// TORCHLEAN_CONV_IGEMM=0) is im2col + cuBLAS SGEMM, or the exact GEMM in exact mode. The column matrix of a chunk
// of nb samples is laid out col[(c, k)][b * P + o] (rows: channel and kernel offset; columns:
// sample-major output positions), so that
//   forward            y_b      = W @ col_b               (one strided-batched GEMM, W shared)
//   kernel gradient    dW      += G' @ col^T              (one GEMM over all nb * P columns)
//   column gradient    dcol     = W^T @ G'                (one GEMM), then col2im
// where G' is the upstream gradient regrouped channel-major. col2im is a gather: every image
// cell sums the columns that read it in a fixed kernel-offset order, so nothing here uses
// atomics and every result is deterministic (cuBLAS runs with atomics disallowed). Chunks over
// the batch bound the column buffer; kernel gradients accumulate chunk after chunk in order.
//
// Pooling forward is one thread per output cell. Its backward scatters with atomicAdd by
// default; with tl_deterministic() and overlapping windows one thread per input cell gathers
// from the windows covering it in row-major window order instead (the registry's
// deterministic_path), the order in which the stub scatters. Non-overlapping windows (stride
// >= window, the common 2x2/2) scatter in every mode: one share per cell, nothing to order.
//
// Exact mode (tl_exact()) computes the stub's bits (stub/conv_pool.c, rules of
// native/common/tl_math.h): every GEMM is the exact GEMM (rule 3; the forward accumulates from
// the bias; a kernel gradient is one chain per sample over its positions, one GEMM batched
// over the samples, then rule 4 over the samples, linalg.cuh Rule4Stream), the bias gradient
// is rule 4 (linalg.cuh). In every mode col2im adds a cell's taps in kernel-offset order onto its start
// value, and pooling uses rule-4 window sums and tlm_exp / tlm_log.
#include <float.h>
#include "common.cuh"
#include "linalg.cuh"
#include "conv_igemm.cuh"
#include "conv_exact.cuh"
#include "entry/conv_pool_kernels.h"

namespace {

// the geometry the generated entry parsed (native/common/contract.h)
typedef tl_geom Geom;

// The geometry seen from the other side: image = the conv output, columns = the conv input.
// A transposed convolution is the adjoint of this swapped convolution.
Geom swapped(const Geom &G) {
    Geom T = G;
    for (int a = 0; a < G.r; a++) { T.in[a] = G.out[a]; T.out[a] = G.in[a]; }
    T.in_n = G.out_n; T.out_n = G.in_n;
    return T;
}

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

// ------------------------------------------------------------------ im2col / col2im

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

// The 1-D/2-D fast path: the same column layout with 32-bit index arithmetic, one thread per
// (channel, sample, output position) walking its kernel window (im2col) and one thread per image
// cell walking the offsets that read it (col2im). Most convolutions take it; 64-bit divisions
// in the N-D kernels above cost more than the memory traffic.
struct Geom2 {
    int C, H, W, OH, OW, KH, KW, SH, SW, PH, PW;
};

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
        for (int ky = 0; ky < g.KH; ky++) {
            int ty = iy + g.PH - ky;
            if (ty < 0) break;
            if (ty % g.SH) continue;
            int oy = ty / g.SH;
            if (oy >= g.OH) continue;
            for (int kx = 0; kx < g.KW; kx++) {
                int tx = ix + g.PW - kx;
                if (tx < 0) break;
                if (tx % g.SW) continue;
                int ox = tx / g.SW;
                if (ox >= g.OW) continue;
                s = tlm_add(s, src[(size_t)(ky * g.KW + kx) * nbP + oy * g.OW + ox]);
            }
        }
        img[i] = s;
    }
}

// dst[c][b * P + o] = src[b][c][o]: a chunk regrouped channel-major, so one GEMM's K runs over
// every (sample, position) pair
__global__ void k_channel_major(const float *src, float *dst, int64_t nb, int64_t C, int64_t P) {
    const int64_t total = nb * C * P;
    TL_GRID_STRIDE(i, total) {
        int64_t o = i % P, rest = i / P;
        int64_t b = rest % nb, c = rest / nb;
        dst[i] = src[(b * C + c) * P + o];
    }
}

// acc[i] += sum over b = 0..nb-1 of parts[b * n + i], in that order (per-sample kernel
// gradients summed deterministically)
__global__ void k_sum_parts(const float *parts, int64_t nb, int64_t n, float *acc) {
    TL_GRID_STRIDE(i, n) {
        float s = acc[i];
        for (int64_t b = 0; b < nb; b++) s += parts[b * n + i];
        acc[i] = s;
    }
}

// y[b][c][o] = bias[c] (the forward GEMM then accumulates into it)
__global__ void k_fill_bias(const float *bias, float *y, int64_t nbc, int64_t C, int64_t P) {
    TL_GRID_STRIDE(i, nbc * P) y[i] = bias[(i / P) % C];
}

// db[c] = sum over samples and positions of g[b][c][o]: the positions of every (b, c) first, then
// the samples of every channel, both as whole-GPU axis sums (fixed order in deterministic mode)
int bias_grad(const char *op, const float *g, float *db, int64_t N, int64_t C, int64_t P) {
    if (P == 1) return tl_cuda_axis_sum(op, g, db, 1, N, C, 0);
    float *per_sample;
    TL_TRY(tl_scratch(op, (size_t)(N * C) * sizeof(float), (void **)&per_sample));
    int st = tl_cuda_axis_sum(op, g, per_sample, N * C, P, 1, 0);
    if (!st) st = tl_cuda_axis_sum(op, per_sample, db, 1, N, C, 0);
    tl_scratch_free(per_sample);
    return st;
}

// value j = b * P + o of channel c: g[b][c][o] (rule 4 in exact mode)
struct ChannelOf {
    const float *g;
    int64_t C, P;
    __device__ float at(int64_t c, int64_t j) const { return g[((j / P) * C + c) * P + j % P]; }
};

// ------------------------------------------------------------------ GEMM (row-major)

// C_b (M x Nc, ldc) = op(A_b) op(B_b) + beta C_b for b < batch; A_b is M x K (K x M when ta)
// with leading dimension lda, B_b is K x Nc (Nc x K when tb): the library's GEMM entry (exact
// mode: one rule-3 chain over all of K, as the stub's tl_sgemm, accumulating (beta 1) continues
// C's chain; else cuBLAS).
int gemm(const char *op, int ta, int tb, int64_t M, int64_t Nc, int64_t K, const float *A,
         int64_t lda, int64_t sA, const float *B, int64_t ldb, int64_t sB, float beta, float *C,
         int64_t ldc, int64_t sC, int64_t batch) {
    if (tl_exact())
        return tl_gemm_exact_chain_f32(op, ta, tb, batch, M, Nc, K, A, lda, sA, B, ldb, sB, C, ldc,
                                       sC, beta != 0.0f);
    return tl_gemm_f32(op, ta, tb, batch, M, Nc, K, A, lda, sA, B, ldb, sB, beta, C, ldc, sC, 0);
}

// zero n floats on the stream
int zero(const char *op, float *p, int64_t n) {
    if (n <= 0) return TL_OK;
    TL_CUDA_TRY(op, cudaMemsetAsync(p, 0, (size_t)n * sizeof(float), tl_stream()));
    return TL_OK;
}

bool fits_2d(const Geom &G, int64_t C, int64_t nb) {
    if (G.r > 2) return false;
    const int64_t lim = INT32_MAX / 2;  // int loop indices plus one grid stride never overflow
    return C * nb * G.in_n < lim && C * G.k_n * nb * G.out_n < lim && C * nb * G.out_n < lim;
}

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

// acc += the nb partial kernel gradients in parts, in sample order
int sum_parts(const char *op, const float *parts, int64_t nb, int64_t n, float *acc) {
    if (n == 0) return TL_OK;
    k_sum_parts<<<tl_blocks(n), TL_THREADS, 0, tl_stream()>>>(parts, nb, n, acc);
    return tl_cuda_launched(op);
}

// Kernel gradient of one chunk of m samples: dW (Ca x CK) += sum_b A_b (Ca x P) @ col_b^T, where
// A_b = A + b * a_stride. Two deterministic forms, picked by shape: with few positions per
// sample (P <= CK) A is regrouped channel-major and one GEMM runs over all m * P columns
// (scratch Ca * m * P); otherwise a strided-batched GEMM writes one partial per sample and
// they are summed in sample order (scratch m * Ca * CK). Either keeps the scratch small.
// Exact mode always takes the second, as the stub: each partial is the rule-3 chain over the
// sample's positions from 0 (one exact GEMM batched over the samples, so a long K = N * P never
// serialises the GEMM), and the partials enter the rule-4 sum over all samples (Rule4Stream,
// which writes dW after the last chunk: `last`).
bool kgrad_channel_major(int64_t P, int64_t CK) { return P <= CK && !tl_exact(); }

int64_t kgrad_scratch(int64_t Ca, int64_t P, int64_t CK) {
    return kgrad_channel_major(P, CK) ? Ca * P : Ca * CK;  // floats per sample
}

int kernel_grad(const char *op, const float *A, int64_t a_stride, int64_t Ca, const float *col,
                int64_t m, int64_t P, int64_t CK, float *tmp, float *DK, Rule4Stream &acc,
                float *acc_state, bool last) {
    const int64_t nk = Ca * CK;
    if (kgrad_channel_major(P, CK)) {
        k_channel_major<<<tl_blocks(m * Ca * P), TL_THREADS, 0, tl_stream()>>>(A, tmp, m, Ca, P);
        TL_TRY(tl_cuda_launched(op));
        return gemm(op, 0, 1, Ca, CK, m * P, tmp, m * P, 0, col, m * P, 0, 1.0f, DK, CK, 0, 1);
    }
    TL_TRY(gemm(op, 0, 1, Ca, CK, P, A, P, a_stride, col, m * P, P, 0.0f, tmp, CK, nk, m));
    if (tl_exact()) return rule4_stream_push(op, acc, acc_state, tmp, m, last ? DK : nullptr);
    return sum_parts(op, tmp, m, nk, DK);
}

// Samples per chunk: keep the column buffers near kColBytes (at least one sample), and nb * P
// within cuBLAS's int dimensions.
const int64_t kColBytes = (int64_t)256 << 20;
int64_t chunk_samples(int64_t per_sample_floats, int64_t P, int64_t N) {
    int64_t per = per_sample_floats * (int64_t)sizeof(float);
    int64_t nb = per > 0 ? kColBytes / per : N;
    if (P > 0 && nb > INT32_MAX / P) nb = INT32_MAX / P;
    if (nb > N) nb = N;
    if (nb < 1) nb = 1;
    return nb;
}

struct Scratch {  // stream-ordered temporaries, freed when the entry point returns
    void *p[3] = {nullptr, nullptr, nullptr};
    ~Scratch() { tl_scratch_free(p[0]); tl_scratch_free(p[1]); tl_scratch_free(p[2]); }
};

// exact mode's kernel-gradient sum over the samples: its state in sc.p[2]
int kgrad_stream(const char *op, Rule4Stream &acc, int64_t nk, int64_t n, Scratch &sc) {
    if (!tl_exact()) return TL_OK;
    const int64_t floats = rule4_stream_floats(acc, nk, n);
    return tl_scratch(op, (size_t)(floats > 0 ? floats : 1) * sizeof(float), &sc.p[2]);
}

// ------------------------------------------------------------------ exact implicit GEMMs

// Exact mode's convolutions with one to three spatial axes run conv_exact.cuh's kernels (no
// column buffer): 32-bit index arithmetic enough, row tiles within gridDim.y, cx_scatter's
// residue classes within gridDim.z, kernel extents within cx_wgrad's 10-bit tap fields, image
// extents plus paddings within cx_scatter's 16-bit cell fields. More
// axes stay on the im2col + exact GEMM path below (the same bits).
bool exact_implicit(const Geom &G) {
    if (!tl_exact() || G.r > 3) return false;
    const int64_t lim = INT32_MAX / 2, rows = (int64_t)65535 * 64;
    int64_t classes = 1;
    for (int a = 0; a < G.r; a++) {
        if (G.k[a] >= 1024 || G.s[a] >= (1 << 16) || G.in[a] + G.p[a] >= (1 << 15) ||
            G.out[a] + G.p[a] >= (1 << 15))
            return false;
        classes *= G.s[a];
    }
    return G.n * G.cin * G.in_n < lim && G.n * G.cout * G.out_n < lim &&
           G.cout * G.cin * G.k_n < lim && G.cin < rows && G.cout < rows && classes <= 65535;
}

// the geometry's axes right-aligned in depth, height, width (missing leading axes of size 1)
ConvDims dims_of(const Geom &G) {
    int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1}, k[3] = {1, 1, 1}, st[3] = {1, 1, 1},
            pd[3] = {0, 0, 0};
    for (int a = 0; a < G.r; a++) {
        const int t = 3 - G.r + a;
        in[t] = G.in[a]; out[t] = G.out[a]; k[t] = G.k[a]; st[t] = G.s[a]; pd[t] = G.p[a];
    }
    ConvDims d;
    d.N = (int)G.n; d.Cin = (int)G.cin; d.Cout = (int)G.cout;
    d.D = (int)in[0]; d.H = (int)in[1]; d.W = (int)in[2];
    d.OD = (int)out[0]; d.OH = (int)out[1]; d.OW = (int)out[2];
    d.KD = (int)k[0]; d.KH = (int)k[1]; d.KW = (int)k[2];
    d.SD = (int)st[0]; d.SH = (int)st[1]; d.SW = (int)st[2];
    d.PD = (int)pd[0]; d.PH = (int)pd[1]; d.PW = (int)pd[2];
    return d;
}

unsigned tiles_of(int64_t n, int t) { return (unsigned)((n + t - 1) / t); }

// conv_exact.cuh's launches on the library's stream
struct ExactLaunch {
    const char *op;
    template <class T>
    int gather(T, int M, int ncols, const float *A, const float *bias, const float *img, float *out,
               ConvShape s) {
        const dim3 grid(tiles_of(ncols, T::BN), tiles_of(M, T::BM));
        switch (cx_ks(s)) {
        case 1: cx_gather<T::RM, T::RN, 1><<<grid, CX_THREADS, T::SMEM, tl_stream()>>>(M, ncols, A, bias, img, out, s); break;
        case 3: cx_gather<T::RM, T::RN, 3><<<grid, CX_THREADS, T::SMEM, tl_stream()>>>(M, ncols, A, bias, img, out, s); break;
        default: cx_gather<T::RM, T::RN, 0><<<grid, CX_THREADS, T::SMEM, tl_stream()>>>(M, ncols, A, bias, img, out, s);
        }
        return tl_cuda_launched(op);
    }
    template <class T>
    int scatter(T, int D, int N, const float *Wt, const float *bias, const float *src,
                float *out, ConvShape s) {
        const dim3 grid(tiles_of(cx_class_cols(N, s), T::BN), tiles_of(s.C, T::BM),
                        (unsigned)(s.SD * s.SH * s.SW));
        if (cx_3d(s))
            cx_scatter<T::RM, T::RN, true><<<grid, CX_THREADS, T::SMEM, tl_stream()>>>(
                D, N, Wt, bias, src, out, s);
        else
            cx_scatter<T::RM, T::RN, false><<<grid, CX_THREADS, T::SMEM, tl_stream()>>>(
                D, N, Wt, bias, src, out, s);
        return tl_cuda_launched(op);
    }
    template <class T>
    int wgrad(T, int M, int m, const float *A, const float *img, float *part, ConvShape s) {
        const int nk = s.C * s.KD * s.KH * s.KW;
        cx_wgrad<T::RM, T::RN><<<dim3(tiles_of(nk, T::BN), tiles_of(M, T::BM), (unsigned)m),
                                 CX_THREADS, T::SMEM, tl_stream()>>>(M, A, img, part, s);
        return tl_cuda_launched(op);
    }
};

// dX, then dW: per chunk of samples their partials (one chain over each sample's positions),
// pushed into the rule-4 sum over the samples (Rule4Stream; dW written after the last chunk)
int exact_backward(const char *op, const Geom &G, int transpose, const float *W, const float *X,
                   const float *Gd, float *DK, float *DX) {
    const ConvDims d = dims_of(G);
    ExactLaunch l{op};
    TL_TRY(cx_input_grad(l, d, transpose != 0, W, Gd, DX));
    const int64_t nk = G.cout * G.cin * G.k_n;
    if (nk == 0) return TL_OK;
    Scratch sc;
    Rule4Stream acc;
    TL_TRY(kgrad_stream(op, acc, nk, G.n, sc));
    int64_t nb = chunk_samples(nk, 0, G.n);
    if (nb > 65535) nb = 65535;  // samples on gridDim.z
    TL_TRY(tl_scratch(op, (size_t)(nb * nk) * sizeof(float), &sc.p[1]));
    float *part = (float *)sc.p[1];
    for (int64_t n0 = 0; n0 < G.n; n0 += nb) {
        const int64_t m = G.n - n0 < nb ? G.n - n0 : nb;
        TL_TRY(cx_kernel_grad(l, d, transpose != 0, X, Gd, (int)n0, (int)m, part));
        TL_TRY(rule4_stream_push(op, acc, (float *)sc.p[2], part, m, n0 + m == G.n ? DK : nullptr));
    }
    return TL_OK;
}

// ------------------------------------------------------------------ convolution

int conv_fwd(const char *op, tl_buf kernel, tl_buf bias, tl_buf input, tl_buf y,
             const Geom &G, int transpose) {
    const int64_t K = G.k_n, xin = G.cin * G.in_n, yout = G.cout * G.out_n;
    if (G.n * yout == 0) return TL_OK;
    cudaStream_t st = tl_stream();
    if (!st) return TL_E_DEVICE;
    const float *W = kernel->data, *X = input->data;
    float *Y = y->data;
    if (tl_conv_igemm_takes(G, transpose))
        return tl_conv_igemm_forward(op, G, transpose, W, bias->data, X, Y);
    if (exact_implicit(G)) {
        ExactLaunch l{op};
        return cx_forward(l, dims_of(G), transpose != 0, W, bias->data, X, Y);
    }
    Scratch sc;
    if (!transpose) {
        const int64_t P = G.out_n, CK = G.cin * K;
        k_fill_bias<<<tl_blocks(G.n * yout), TL_THREADS, 0, st>>>(bias->data, Y, G.n * G.cout,
                                                                   G.cout, P);
        TL_LAUNCHED(op);
        if (CK == 0) return TL_OK;
        const int64_t nb = chunk_samples(CK * P, P, G.n);
        TL_TRY(tl_scratch(op, (size_t)(CK * nb * P) * sizeof(float), &sc.p[0]));
        float *col = (float *)sc.p[0];
        for (int64_t n0 = 0; n0 < G.n; n0 += nb) {
            const int64_t m = G.n - n0 < nb ? G.n - n0 : nb;
            TL_TRY(im2col(op, G, G.cin, m, X + n0 * xin, col));
            // y_b (C_out x P) += W (C_out x CK) @ col[:, b*P : (b+1)*P]
            TL_TRY(gemm(op, 0, 0, G.cout, P, CK, W, CK, 0, col, m * P, P, 1.0f, Y + n0 * yout, P,
                        yout, m));
        }
        return TL_OK;
    }
    // transposed: col[(co, k)][b * in_n + p] = sum_ci W[ci][(co, k)] x_b[ci][p], then col2im
    // onto the output image with the swapped geometry, bias added by the gather
    const Geom T = swapped(G);
    const int64_t P = T.out_n, CK = G.cout * K;
    const int64_t nb = chunk_samples(CK * P, P, G.n);
    TL_TRY(tl_scratch(op, (size_t)(CK * nb * P > 0 ? CK * nb * P : 1) * sizeof(float), &sc.p[0]));
    float *col = (float *)sc.p[0];
    for (int64_t n0 = 0; n0 < G.n; n0 += nb) {
        const int64_t m = G.n - n0 < nb ? G.n - n0 : nb;
        if (CK * P > 0)
            TL_TRY(gemm(op, 1, 0, CK, P, G.cin, W, CK, 0, X + n0 * xin, P, xin, 0.0f, col, m * P,
                        P, m));
        TL_TRY(col2im(op, T, G.cout, m, col, bias->data, Y + n0 * yout));
    }
    return TL_OK;
}

// dW and dx through column matrices, chunk by chunk over the samples. Both backward passes
// share one shape: the columns are the im2col of the conv input under G, or of the transposed
// conv's upstream gradient under the swapped geometry; per sample b
//   dW_b     = A_b (C_a x P) @ col_b^T           (A = g for conv, x for the transposed conv)
//   d(other) = W-product with col or the gather of dcol
// The per-sample kernel gradients land in a scratch array and are summed in sample order.
int column_backward(const char *op, const Geom &G, int transpose, const float *W, const float *X,
                    const float *Gd, float *DK, float *DX) {
    const int64_t K = G.k_n, xin = G.cin * G.in_n, yout = G.cout * G.out_n;
    const int64_t nk = G.cout * G.cin * K;
    const Geom C = transpose ? swapped(G) : G;              // the geometry of the columns
    const int64_t col_ch = transpose ? G.cout : G.cin;      // channels of the column side
    const float *col_src = transpose ? Gd : X;
    const int64_t col_stride = transpose ? yout : xin;
    const int64_t rows = transpose ? G.cin : G.cout;        // channels of the other side
    const float *other = transpose ? X : Gd;
    const int64_t other_stride = transpose ? xin : yout;
    const int64_t P = C.out_n, CK = col_ch * K;
    const int64_t per = kgrad_scratch(rows, P, CK);
    const int64_t nb = chunk_samples(CK * P + per, P, G.n);
    Scratch sc;
    TL_TRY(tl_scratch(op, (size_t)(CK * nb * P > 0 ? CK * nb * P : 1) * sizeof(float), &sc.p[0]));
    TL_TRY(tl_scratch(op, (size_t)(nb * per > 0 ? nb * per : 1) * sizeof(float), &sc.p[1]));
    float *col = (float *)sc.p[0], *tmp = (float *)sc.p[1];
    Rule4Stream acc;
    TL_TRY(kgrad_stream(op, acc, nk, G.n, sc));
    for (int64_t n0 = 0; n0 < G.n; n0 += nb) {
        const int64_t m = G.n - n0 < nb ? G.n - n0 : nb;
        const float *ob = other + n0 * other_stride;
        TL_TRY(im2col(op, C, col_ch, m, col_src + n0 * col_stride, col));
        TL_TRY(kernel_grad(op, ob, other_stride, rows, col, m, P, CK, tmp, DK, acc,
                           (float *)sc.p[2], n0 + m == G.n));
        if (!transpose) {
            // dcol_b (CK x P) = W^T @ g_b (overwrites col), then gathered into dx
            TL_TRY(gemm(op, 1, 0, CK, P, G.cout, W, CK, 0, ob, P, yout, 0.0f, col, m * P, P, m));
            TL_TRY(col2im(op, G, G.cin, m, col, nullptr, DX + n0 * xin));
        } else {
            // dx_b (C_in x P) = W (C_in x CK) @ col_b
            TL_TRY(gemm(op, 0, 0, G.cin, P, CK, W, CK, 0, col, m * P, P, 0.0f, DX + n0 * xin,
                        P, xin, m));
        }
    }
    return TL_OK;
}

// the bias gradient, then dW and dx by the first path that applies: implicit GEMM, exact
// implicit GEMM, or column matrices
int conv_bwd(const char *op, tl_buf kernel, tl_buf input, tl_buf g, tl_buf dk, tl_buf db,
             tl_buf dx, const Geom &G, int transpose) {
    const int64_t K = G.k_n, xin = G.cin * G.in_n, yout = G.cout * G.out_n;
    const int64_t nk = G.cout * G.cin * K;
    cudaStream_t st = tl_stream();
    if (!st) return TL_E_DEVICE;
    // the implicit GEMMs write every element of dk and dx, and of db for a convolution (its
    // kernel-gradient pass sums g as well)
    const bool implicit = tl_conv_igemm_takes(G, transpose);
    // exact mode's implicit GEMMs write every element of dk and dx as well
    const bool exact = exact_implicit(G) && G.n * yout > 0 && G.n * xin > 0;
    if (implicit && !transpose)
        return tl_conv_igemm_backward(op, G, 0, kernel->data, input->data, g->data, dk->data,
                                      db->data, dx->data);
    if (!implicit && !exact) {
        TL_TRY(zero(op, dk->data, nk));
        TL_TRY(zero(op, dx->data, G.n * xin));
    }
    TL_TRY(zero(op, db->data, G.cout));
    if (tl_exact()) {
        TL_TRY(rule4_rows(op, ChannelOf{g->data, G.cout, G.out_n}, G.cout, G.n * G.out_n,
                          db->data, 0.0f));
    } else if (G.cout > 0 && G.n * G.out_n > 0) {
        TL_TRY(bias_grad(op, g->data, db->data, G.n, G.cout, G.out_n));
    }
    if (implicit)
        return tl_conv_igemm_backward(op, G, 1, kernel->data, input->data, g->data, dk->data,
                                      nullptr, dx->data);
    if (exact)
        return exact_backward(op, G, transpose, kernel->data, input->data, g->data, dk->data,
                              dx->data);
    if (G.n * yout == 0 || G.n * xin == 0) return TL_OK;
    return column_backward(op, G, transpose, kernel->data, input->data, g->data, dk->data,
                           dx->data);
}

// ------------------------------------------------------------------ pooling

enum { POOL_MAX, POOL_AVG, POOL_SMOOTH };

// Statistics of window o of one plane, exactly as the stub computes them: for max the first
// row-major strict maximum, a NaN winning for good (padding is -inf and never wins; -FLT_MAX
// when nothing does); for avg the rule-4 sum of the window (padding counts as 0); for smooth
// max the pivot (first value, then max/min by the sign of beta; padding counts as 0) and the
// rule-4 sum of exp(beta (v - pivot)).
struct Window {
    float best;     // max: the maximum; smooth: the pivot
    int64_t arg;    // max: winning kernel offset or -1
    float sum;      // smooth: sum of exp(beta (v - pivot)); avg: sum of values
};

__device__ __forceinline__ float smooth_term(float beta, float v, float pivot) {
    return tlm_exp(tlm_mul(beta, tlm_sub(v, pivot)));
}

__device__ Window window_stats(const Geom &G, int kind, const float *plane, int64_t o, float beta) {
    int64_t oo[8], ko[8];
    unravel(o, G.out, G.r, oo);
    Window w{-FLT_MAX, -1, 0.0f};
    const int64_t KN = G.k_n;
    if (kind == POOL_MAX) {
        for (int64_t j = 0; j < KN; j++) {
            unravel(j, G.k, G.r, ko);
            int64_t t = tap(G, ko, oo);
            float v = t < 0 ? -INFINITY : plane[t];
            if (v > w.best || (v != v && w.best == w.best)) { w.best = v; w.arg = j; }  // NaN wins
        }
        return w;
    }
    tlm_sumacc acc;
    tlm_sumacc_init(&acc);
    if (kind == POOL_AVG) {
        for (int64_t j = 0; j < KN; j++) {
            unravel(j, G.k, G.r, ko);
            int64_t t = tap(G, ko, oo);
            tlm_sumacc_push(&acc, t < 0 ? 0.0f : plane[t]);
        }
    } else {
        for (int64_t j = 0; j < KN; j++) {
            unravel(j, G.k, G.r, ko);
            int64_t t = tap(G, ko, oo);
            float v = t < 0 ? 0.0f : plane[t];
            if (j == 0) w.best = v;
            else w.best = beta > 0 ? (v > w.best ? v : w.best) : (v < w.best ? v : w.best);
        }
        for (int64_t j = 0; j < KN; j++) {
            unravel(j, G.k, G.r, ko);
            int64_t t = tap(G, ko, oo);
            tlm_sumacc_push(&acc, smooth_term(beta, t < 0 ? 0.0f : plane[t], w.best));
        }
    }
    w.sum = tlm_sumacc_finish(&acc);
    return w;
}

__global__ void k_pool_fwd(Geom G, int kind, const float *x, float *y, float beta, int64_t planes) {
    const int64_t total = planes * G.out_n;
    TL_GRID_STRIDE(i, total) {
        const int64_t pl = i / G.out_n, o = i % G.out_n;
        Window w = window_stats(G, kind, x + pl * G.in_n, o, beta);
        if (kind == POOL_MAX) y[i] = w.best;
        else if (kind == POOL_AVG) y[i] = tlm_div(w.sum, (float)G.k_n);
        else y[i] = tlm_add(w.best, tlm_div(tlm_log(w.sum), beta));
    }
}

// share of window o's gradient that goes to kernel offset j of that window (cell value v)
__device__ __forceinline__ float pool_share(const Geom &G, int kind, const Window &w, int64_t j,
                                            float v, float go, float beta) {
    if (kind == POOL_MAX) return w.arg == j ? go : 0.0f;
    if (kind == POOL_AVG) return tlm_div(go, (float)G.k_n);
    return tlm_mul(go, tlm_div(smooth_term(beta, v, w.best), w.sum));
}

// default path: one thread per window scatters its shares with atomicAdd
__global__ void k_pool_bwd_scatter(Geom G, int kind, const float *x, const float *g, float *dx,
                                   float beta, int64_t planes) {
    const int64_t total = planes * G.out_n;
    TL_GRID_STRIDE(i, total) {
        const int64_t pl = i / G.out_n, o = i % G.out_n;
        const float *plane = x + pl * G.in_n;
        float *dplane = dx + pl * G.in_n;
        Window w = window_stats(G, kind, plane, o, beta);
        int64_t oo[8], ko[8];
        unravel(o, G.out, G.r, oo);
        if (kind == POOL_MAX) {
            if (w.arg >= 0) {
                unravel(w.arg, G.k, G.r, ko);
                int64_t t = tap(G, ko, oo);
                if (t >= 0) atomicAdd(dplane + t, g[i]);
            }
            continue;
        }
        for (int64_t j = 0; j < G.k_n; j++) {
            unravel(j, G.k, G.r, ko);
            int64_t t = tap(G, ko, oo);
            if (t >= 0) atomicAdd(dplane + t, pool_share(G, kind, w, j, plane[t], g[i], beta));
        }
    }
}

// deterministic path: one thread per input cell gathers from the windows covering it in
// row-major window order (kernel offsets descending), from 0: the stub's scatter order
__global__ void k_pool_bwd_gather(Geom G, int kind, const float *x, const float *g, float *dx,
                                  float beta, int64_t planes) {
    const int64_t total = planes * G.in_n;
    TL_GRID_STRIDE(i, total) {
        const int64_t pl = i / G.in_n, cell = i % G.in_n;
        const float *plane = x + pl * G.in_n;
        int64_t ii[8], ko[8];
        unravel(cell, G.in, G.r, ii);
        float s = 0.0f;
        for (int64_t j = G.k_n - 1; j >= 0; j--) {
            unravel(j, G.k, G.r, ko);
            int64_t o;
            if (!reader(G, ii, ko, &o)) continue;
            Window w = window_stats(G, kind, plane, o, beta);
            s = tlm_add(s, pool_share(G, kind, w, j, plane[cell], g[pl * G.out_n + o], beta));
        }
        dx[i] = s;
    }
}

// The 1-D/2-D fast path of k_pool_bwd_gather for max and avg pooling: 32-bit indices, the
// same windows in the same order (kernel offsets descending), the same shares (zero shares of
// max included), so the same bits.
__global__ void k_pool_bwd_gather_2d(Geom2 q, int kind, const float *x, const float *g, float *dx,
                                     int planes) {
    const int HW = q.H * q.W, P = q.OH * q.OW, KN = q.KH * q.KW, total = planes * HW;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
        const int pl = i / HW, cell = i % HW, iy = cell / q.W, ix = cell % q.W;
        const float *plane = x + (size_t)pl * HW, *gp = g + (size_t)pl * P;
        float s = 0.0f;
        for (int ky = q.KH - 1; ky >= 0; ky--) {
            const int ty = iy + q.PH - ky;
            if (ty < 0 || ty % q.SH) continue;
            const int oy = ty / q.SH;
            if (oy >= q.OH) break;  // ty grows as ky falls
            for (int kx = q.KW - 1; kx >= 0; kx--) {
                const int tx = ix + q.PW - kx;
                if (tx < 0 || tx % q.SW) continue;
                const int ox = tx / q.SW;
                if (ox >= q.OW) break;
                const float go = gp[oy * q.OW + ox];
                if (kind == POOL_AVG) { s = tlm_add(s, tlm_div(go, (float)KN)); continue; }
                float best = -FLT_MAX;  // window_stats' max: the first strict maximum, NaN wins
                int arg = -1;
                for (int wy = 0; wy < q.KH; wy++) {
                    const int y = oy * q.SH + wy - q.PH;
                    for (int wx = 0; wx < q.KW; wx++) {
                        const int xx = ox * q.SW + wx - q.PW;
                        float v = (y >= 0 && y < q.H && xx >= 0 && xx < q.W) ? plane[y * q.W + xx]
                                                                              : -INFINITY;
                        if (v > best || (v != v && best == best)) { best = v; arg = wy * q.KW + wx; }
                    }
                }
                s = tlm_add(s, arg == ky * q.KW + kx ? go : 0.0f);
            }
        }
        dx[i] = s;
    }
}

// Windows overlap when some stride is below its window extent. Otherwise every input cell gets
// at most one share, which the scatter adds onto 0 exactly as the gather would (0 + share): the
// scatter is then deterministic, bit for bit the gather's result, and serves every mode.
bool windows_overlap(const Geom &G) {
    for (int a = 0; a < G.r; a++)
        if (G.s[a] < G.k[a]) return true;
    return false;
}

int pool(const char *op, int kind, tl_buf input, tl_buf g, tl_buf out, const Geom &G,
         double beta_d, int backward) {
    const int64_t planes = G.n * G.cin;
    const float beta = (float)beta_d;
    cudaStream_t st = tl_stream();
    if (!st) return TL_E_DEVICE;
    if (!backward) {
        if (planes * G.out_n == 0) return TL_OK;
        k_pool_fwd<<<tl_blocks(planes * G.out_n), TL_THREADS, 0, st>>>(G, kind, input->data,
                                                                       out->data, beta, planes);
        TL_LAUNCHED(op);
        return TL_OK;
    }
    if (tl_deterministic() && windows_overlap(G)) {
        if (planes * G.in_n == 0) return TL_OK;
        const int64_t lim = INT32_MAX / 2;
        if (kind != POOL_SMOOTH && G.r <= 2 && planes * G.in_n < lim && planes * G.out_n < lim) {
            k_pool_bwd_gather_2d<<<tl_blocks(planes * G.in_n), TL_THREADS, 0, st>>>(
                to_2d(G, 1), kind, input->data, g->data, out->data, (int)planes);
            TL_LAUNCHED(op);
            return TL_OK;
        }
        k_pool_bwd_gather<<<tl_blocks(planes * G.in_n), TL_THREADS, 0, st>>>(
            G, kind, input->data, g->data, out->data, beta, planes);
        TL_LAUNCHED(op);
        return TL_OK;
    }
    TL_TRY(zero(op, out->data, planes * G.in_n));
    if (planes * G.out_n == 0) return TL_OK;
    k_pool_bwd_scatter<<<tl_blocks(planes * G.out_n), TL_THREADS, 0, st>>>(
        G, kind, input->data, g->data, out->data, beta, planes);
    TL_LAUNCHED(op);
    return TL_OK;
}

}  // namespace

extern "C" {

// conv (transpose = 0) and conv_transpose (transpose = 1), N-D and 2-D alike
int tlk_conv_forward(const char *op, tl_buf kernel, tl_buf bias, tl_buf input, tl_buf y,
                     const tl_geom *geom, int64_t transpose) {
    return conv_fwd(op, kernel, bias, input, y, *geom, (int)transpose);
}

// the backward of conv (transpose = 0) and conv_transpose (transpose = 1)
int tlk_conv_backward(const char *op, tl_buf kernel, tl_buf input, tl_buf grad_out, tl_buf dkernel,
                      tl_buf dbias, tl_buf dinput, const tl_geom *geom, int64_t transpose) {
    return conv_bwd(op, kernel, input, grad_out, dkernel, dbias, dinput, *geom, (int)transpose);
}

// max (kind 0), average (1) and smooth-max (2, with b = beta) pooling, N-D and 2-D alike
int tlk_pool_forward(const char *op, tl_buf input, tl_buf y, const tl_geom *geom, double b,
                     int64_t kind) {
    return pool(op, (int)kind, input, nullptr, y, *geom, b, 0);
}

int tlk_pool_backward(const char *op, tl_buf input, tl_buf grad_out, tl_buf dinput,
                      const tl_geom *geom, double b, int64_t kind) {
    return pool(op, (int)kind, input, grad_out, dinput, *geom, b, 1);
}

}  // extern "C"
