// conv_pool.cu (CUDA): N-D convolution and transposed convolution, with an optional batch
// axis. Mirrors native/stub/conv_pool.c; the 2-D entry points are the N-D kernels with two
// spatial axes. The family's pooling kernels are pooling.cu.
//
// Geometry arrives as one flat array (torchlean/shapes.py conv_geom / pool_geom):
//   [r, N, C_in, C_out, in_1..in_r, k_1..k_r, out_1..out_r, s_1..s_r, p_1..p_r]
//
// Convolutions and transposed convolutions run as implicit GEMMs: conv_igemm.cu outside exact
// mode (one or two spatial axes), conv_exact.cuh in exact mode (one to three axes; the stub's
// bits, no column buffer); the rest (more axes, more than 63 kernel taps outside exact mode,
// TORCHLEAN_CONV_IGEMM=0) is im2col + cuBLAS SGEMM, or the exact GEMM in exact mode. With the
// column matrix of a chunk of nb samples (conv_cols.cuh: col[(c, k)][b * P + o])
//   forward            y_b      = W @ col_b               (one strided-batched GEMM, W shared)
//   kernel gradient    dW      += G' @ col^T              (one GEMM over all nb * P columns)
//   column gradient    dcol     = W^T @ G'                (one GEMM), then col2im
// where G' is the upstream gradient regrouped channel-major. col2im is a gather in a fixed
// kernel-offset order, so nothing here uses atomics and every result is deterministic (cuBLAS
// runs with atomics disallowed). Chunks over the batch bound the column buffer; kernel
// gradients accumulate chunk after chunk in order.
//
// Exact mode (tl_exact()) computes the stub's bits (stub/conv_pool.c, rules of
// native/common/tl_math.h): every GEMM is the exact GEMM (rule 3; the forward accumulates from
// the bias; a kernel gradient is one chain per sample over its positions, one GEMM batched
// over the samples, then rule 4 over the samples, linalg.cuh Rule4Stream), the bias gradient
// is rule 4 (linalg.cuh). In every mode col2im adds a cell's taps in kernel-offset order onto
// its start value.
#include "common.cuh"
#include "linalg.cuh"
#include "conv_igemm.cuh"
#include "conv_exact.cuh"
#include "conv_geom.cuh"
#include "conv_cols.cuh"
#include "generated/conv_pool_kernels.h"

namespace {

// The geometry seen from the other side: image = the conv output, columns = the conv input.
// A transposed convolution is the adjoint of this swapped convolution.
Geom swapped(const Geom &G) {
    Geom T = G;
    for (int a = 0; a < G.r; a++) { T.in[a] = G.out[a]; T.out[a] = G.in[a]; }
    T.in_n = G.out_n; T.out_n = G.in_n;
    return T;
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

}  // extern "C"
