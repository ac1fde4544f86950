// conv_igemm.cu (CUDA): convolution with one or two spatial axes as implicit GEMMs: the forward
// pass, the input gradient and the kernel gradient, with no column buffer.
//
// Layouts (row-major, as everywhere): input X[b][ci][h][w], kernel W[co][ci][kh][kw], output
// Y[b][co][oh][ow], P = OH*OW output positions, KK = KH*KW taps; a 1-D convolution is the 2-D one
// of height 1. Each pass is one GEMM whose image-side operand is gathered from the image inside
// the kernel, a tile at a time, instead of being written out by im2col first:
//   forward          Y  (C_out x N*P)     = W (C_out x C_in*KK) . cols(X) + bias
//   input gradient   dX (C_in  x N*H*W)   = W' (C_in x C_out*KK) . cols(g)
//   kernel gradient  dW (C_out x C_in*KK) = g (C_out x N*P) . cols(X)^T
// The forward and input-gradient GEMMs share one kernel (k_gather_gemm): its A operand is the
// kernel, copied k-major and zero-padded to a multiple of 4 rows by a small prep kernel (so A
// stages are aligned float4 loads); its B operand is gathered through a per-k table
// {offset, dh, dw} of the k's image offset and tap, so the inner loop adds, compares and loads
// with no division. For a stride s > 1 the input gradient splits the image cells into the s_h*s_w
// residue classes of (i + p) mod s: the cells of one class are read by the same taps (those with
// k = (i + p) mod s), so each class is its own GEMM (blockIdx.z) over just those taps, instead of
// one GEMM over all taps of which 1 in s^2 contributes. Every cell belongs to exactly one class
// and is written once (zero when no tap reads it).
//
// Tiling, after the exact GEMM of gemm.cu: a block computes a BM x BN output tile, each thread an
// RM x RN register tile (rows and columns in groups of 4, the groups 4*TY and 4*TX apart, read as
// float4 from shared memory without bank conflicts), K staged BK = 16 deep through
// double-buffered shared memory (one barrier per stage, the next stage's global loads in flight
// during the current stage's FMAs). Shapes pick a tile (128x128 with 256 threads, 64x128 and
// 32x128 with 128) by padded work, so C_out = 64 does not waste half of a 128-row tile; with at
// most 8 rows (C_in <= 8 for the input gradient of a first layer, C_out <= 8) a thread per column
// keeps all rows in registers instead (k_gather_direct).
//
// The kernel gradient (k_wgrad) has few output tiles and a long K = N*P, so K is split into S
// chunks of whole stages, S chosen from the shape and the SM count so the launch fills the GPU
// (about one or two waves) and bounded so the partials stay under 16 MiB. Each block writes its
// chunk's partial tile to a workspace; k_sum_chunks then adds the S partials of every element in
// a fixed order. No atomics anywhere: every result is the same run to run on one GPU model, so the
// default and the deterministic mode share these kernels. Exact mode, the transposed convolution
// and three or more spatial axes stay on conv_pool.cu's im2col path.
//
// TORCHLEAN_CONV_IGEMM=0 (read once) sends every convolution down conv_pool.cu's im2col + cuBLAS
// path instead, to compare the two.
#include <stdlib.h>
#include <string.h>
#include "common.cuh"
#include "conv_igemm.cuh"

namespace {

// ---- kernels (device code; everything up to the host section)

constexpr int BK = 16;  // k-steps per shared-memory stage

// ---- async copies (cp.async, sm_80 on): global -> shared memory without a register stage;
// a copy that is not valid writes zeros (source size 0) and reads nothing
__device__ __forceinline__ void cp_async4(void *dst, const void *src, bool valid) {
    const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(d), "l"(src), "r"(valid ? 4 : 0));
}
__device__ __forceinline__ void cp_async16(void *dst, const void *src, bool valid) {
    const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(valid ? 16 : 0));
}
// this thread's copies have landed (the barrier after it makes them everyone's)
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }
// ---- end async copies

// A block of TY x TX threads, each owning RM x RN outputs (RM, RN: 4 or 8)
template <int TY_, int TX_, int RM_, int RN_>
struct Tile {
    static constexpr int TY = TY_, TX = TX_, RM = RM_, RN = RN_;
    static constexpr int NT = TY * TX, BM = RM * TY, BN = RN * TX;
    static constexpr int MIN_BLOCKS = 512 / NT;  // so that a thread keeps <= 128 registers
};

// One axis of the input gradient's residue classes: stride S, padding P, kernel length K, image
// length L. Class c holds the image indices i with (i + P) mod S == c; the taps that read them
// are k = c, c + S, ...; index first(c) + S j reads output j + q(c) - t through tap c + S t.
struct Axis {
    int S, P, K, L;
    __host__ __device__ int first(int c) const { int f = (c - P) % S; return f < 0 ? f + S : f; }
    __host__ __device__ int count(int c) const {
        const int f = first(c);
        return f < L ? (L - f + S - 1) / S : 0;
    }
    __host__ __device__ int q(int c) const { return (first(c) + P - c) / S; }
    __host__ __device__ int taps(int c) const { return c < K ? (K - c + S - 1) / S : 0; }
    // taps of the classes before c
    __host__ __device__ int taps_before(int c) const { return (K / S) * c + (c < K % S ? c : K % S); }
};

// where class (ch, cw)'s k rows start: classes in row-major order, cg (C_out) rows per tap pair
__host__ __device__ inline int class_offset(int cg, const Axis &ah, const Axis &aw, int ch, int cw) {
    return cg * (ah.taps_before(ch) * aw.K + ah.taps(ch) * aw.taps_before(cw));
}

// One GEMM of k_gather_gemm: its columns are (b, jh, jw), b < batch, jh < CH, jw < CW; column
// (jh, jw) gathers around image position (jh MH + AH, jw MW + AW) and writes output position
// (OH0 + jh OSH, OW0 + jw OSW); its k rows are [off, off + K) of A and the table.
struct Cls {
    int CH, CW, MH, AH, MW, AW, OH0, OSH, OW0, OSW, K, off;
};

// out[b][m][pos(n)] = (bias[m]) + sum_k A[k][m] src[gather(n, k)] over the classes of blockIdx.z
struct Gather {
    int M, M4, batch;          // rows, A's padded row length, samples
    const float *A;            // [k][M4], zero past M
    const int4 *tab;           // [k]: {image offset, dh, dw, 0}
    const float *src;          // gathered image [batch][C][LH][LW]
    int LH, LW, src_bstride;
    float *out;                // [batch][M][..][OLW]
    int out_bstride, out_cstride, OLW;
    const float *bias;         // forward only
    int vec_out;               // out, its strides and OLW multiples of 16 bytes
    int dgrad;                 // 0: one class, fwd; 1: the s_h x s_w classes of ah, aw
    Axis ah, aw;
    int cg;                    // input gradient: C_out
    Cls fwd;
};

__host__ __device__ inline Cls class_of(const Gather &p, int z) {
    if (!p.dgrad) return p.fwd;
    const int ch = z / p.aw.S, cw = z % p.aw.S;
    Cls c;
    c.CH = p.ah.count(ch); c.CW = p.aw.count(cw);
    c.MH = 1; c.AH = p.ah.q(ch); c.MW = 1; c.AW = p.aw.q(cw);
    c.OH0 = p.ah.first(ch); c.OSH = p.ah.S; c.OW0 = p.aw.first(cw); c.OSW = p.aw.S;
    c.K = p.cg * p.ah.taps(ch) * p.aw.taps(cw);
    c.off = class_offset(p.cg, p.ah, p.aw, ch, cw);
    return c;
}

// offset in out of column n of class c (row 0)
__device__ __forceinline__ int out_offset(const Gather &p, const Cls &c, int n) {
    const int per = c.CH * c.CW, b = n / per, r = n - b * per, jh = r / c.CW, jw = r - jh * c.CW;
    return b * p.out_bstride + (c.OH0 + jh * c.OSH) * p.OLW + c.OW0 + jw * c.OSW;
}

// acc += As[kk][rows] x Bs[kk][cols] for kk < BK (row lengths LDA, LDB)
template <class T, int LDA, int LDB>
__device__ __forceinline__ void stage_fma(const float *As, const float *Bs, int ty, int tx,
                                          float (&acc)[T::RM][T::RN]) {
#pragma unroll
    for (int kk = 0; kk < BK; kk++) {
        float a[T::RM], b[T::RN];
#pragma unroll
        for (int h = 0; h < T::RM / 4; h++) {
            const float4 v = *reinterpret_cast<const float4 *>(As + kk * LDA + h * 4 * T::TY + ty * 4);
            a[4 * h] = v.x; a[4 * h + 1] = v.y; a[4 * h + 2] = v.z; a[4 * h + 3] = v.w;
        }
#pragma unroll
        for (int h = 0; h < T::RN / 4; h++) {
            const float4 v = *reinterpret_cast<const float4 *>(Bs + kk * LDB + h * 4 * T::TX + tx * 4);
            b[4 * h] = v.x; b[4 * h + 1] = v.y; b[4 * h + 2] = v.z; b[4 * h + 3] = v.w;
        }
#pragma unroll
        for (int i = 0; i < T::RM; i++)
#pragma unroll
            for (int j = 0; j < T::RN; j++) acc[i][j] = __fmaf_rn(a[i], b[j], acc[i][j]);
    }
}

// row / column of a thread's register-tile entry i / j inside the block tile
template <class T> __device__ __forceinline__ int tile_row(int ty, int i) {
    return (i / 4) * 4 * T::TY + ty * 4 + i % 4;
}
template <class T> __device__ __forceinline__ int tile_col(int tx, int j) {
    return (j / 4) * 4 * T::TX + tx * 4 + j % 4;
}

template <class T>
__global__ void __launch_bounds__(T::NT, T::MIN_BLOCKS) k_gather_gemm(Gather p) {
    constexpr int BM = T::BM, BN = T::BN, NT = T::NT;
    constexpr int BROWS = NT / BN;       // k rows of a B stage one pass of the block loads
    constexpr int NB = BK / BROWS;       // gathered values per thread per stage
    constexpr int A4 = BK * BM / 4;      // float4s of an A stage
    constexpr int NA = (A4 + NT - 1) / NT;
    static_assert(NT % BN == 0 && BK % BROWS == 0, "a B stage is whole passes of the block");
    __shared__ __align__(16) float As[2][BK][BM];
    __shared__ __align__(16) float Bs[2][BK][BN];

    const Cls c = class_of(p, blockIdx.z);
    const int per = c.CH * c.CW, ncols = p.batch * per;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    if (col0 >= ncols) return;  // the whole block: this class has fewer columns
    const float *A = p.A + (int64_t)c.off * p.M4;
    const int4 *tab = p.tab + c.off;
    const int tid = threadIdx.x, ty = tid / T::TX, tx = tid % T::TX;

    // the column this thread gathers for B stages: image offset and position of its window
    const int bn = tid % BN, bk = tid / BN;
    int gb = 0, gh = 0, gw = 0;
    bool gok = false;
    {
        const int n = col0 + bn;
        if (n < ncols) {
            const int b = n / per, r = n - b * per, jh = r / c.CW, jw = r - jh * c.CW;
            gh = jh * c.MH + c.AH;
            gw = jw * c.MW + c.AW;
            gb = b * p.src_bstride + gh * p.LW + gw;
            gok = true;
        }
    }

    // stage s <- k rows [k0, k0 + BK): A as 16-byte copies, B gathered 4 bytes at a time
    auto issue = [&](int k0, int s) {
#pragma unroll
        for (int q = 0; q < NA; q++) {
            const int e = tid + NT * q, kk = e / (BM / 4), m = (e % (BM / 4)) * 4;
            if (A4 % NT == 0 || e < A4) {
                const bool v = k0 + kk < c.K && row0 + m < p.M4;
                cp_async16(&As[s][kk][m], v ? A + (int64_t)(k0 + kk) * p.M4 + row0 + m : p.A, v);
            }
        }
#pragma unroll 8
        for (int j = 0; j < NB; j++) {
            const int k = k0 + bk + BROWS * j;
            bool v = false;
            int off = 0;
            if (gok && k < c.K) {
                const int4 t = __ldg(tab + k);
                v = (unsigned)(gh + t.y) < (unsigned)p.LH && (unsigned)(gw + t.z) < (unsigned)p.LW;
                off = v ? gb + t.x : 0;
            }
            cp_async4(&Bs[s][bk + BROWS * j][bn], p.src + off, v);
        }
    };

    float acc[T::RM][T::RN];
#pragma unroll
    for (int i = 0; i < T::RM; i++)
#pragma unroll
        for (int j = 0; j < T::RN; j++) acc[i][j] = 0.0f;
    if (c.K > 0) issue(0, 0);
    cp_async_wait_all();
    __syncthreads();
    // one barrier per stage: stage cur+1 is copied while stage cur is multiplied; the barrier
    // ending a stage also ends every read of the buffer the next stage's copies overwrite
    for (int k0 = 0, cur = 0; k0 < c.K; k0 += BK, cur ^= 1) {
        if (k0 + BK < c.K) issue(k0 + BK, cur ^ 1);
        stage_fma<T, BM, BN>(&As[cur][0][0], &Bs[cur][0][0], ty, tx, acc);
        cp_async_wait_all();
        __syncthreads();
    }

    // epilogue, a group of 4 columns at a time: their output offsets (-1 past the last column),
    // then every row; with vec the 4 columns are 4 consecutive, aligned outputs
    const bool vec = p.vec_out && c.CW % 4 == 0 && c.OSW == 1 && c.OW0 % 4 == 0;
#pragma unroll
    for (int h = 0; h < T::RN / 4; h++) {
        int co[4];
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int n = col0 + tile_col<T>(tx, 4 * h + e);
            co[e] = n < ncols ? out_offset(p, c, n) : -1;
        }
#pragma unroll
        for (int i = 0; i < T::RM; i++) {
            const int r = row0 + tile_row<T>(ty, i);
            if (r >= p.M) continue;
            const float bv = p.bias ? __ldg(p.bias + r) : 0.0f;
            float *orow = p.out + (int64_t)r * p.out_cstride;
            if (vec) {
                if (co[0] >= 0)
                    *reinterpret_cast<float4 *>(orow + co[0]) =
                        make_float4(acc[i][4 * h] + bv, acc[i][4 * h + 1] + bv,
                                    acc[i][4 * h + 2] + bv, acc[i][4 * h + 3] + bv);
            } else {
#pragma unroll
                for (int e = 0; e < 4; e++)
                    if (co[e] >= 0) orow[co[e]] = acc[i][4 * h + e] + bv;
            }
        }
    }
}

// At most MR (4 or 8, == M4) rows: one thread per column keeps every row in registers and walks
// the class's k rows; the table entry and the A row are the same for the whole warp (broadcast).
template <int MR>
__global__ void __launch_bounds__(256) k_gather_direct(Gather p) {
    const Cls c = class_of(p, blockIdx.z);
    const int per = c.CH * c.CW, ncols = p.batch * per;
    const int n = blockIdx.x * blockDim.x + threadIdx.x;
    if (n >= ncols) return;
    const int b = n / per, r = n - b * per, jh = r / c.CW, jw = r - jh * c.CW;
    const int gh = jh * c.MH + c.AH, gw = jw * c.MW + c.AW;
    const int gb = b * p.src_bstride + gh * p.LW + gw;  // + a tap's offset: inside the image
    const float *A = p.A + (int64_t)c.off * MR;
    const int4 *tab = p.tab + c.off;
    float acc[MR];
#pragma unroll
    for (int m = 0; m < MR; m++) acc[m] = 0.0f;
#pragma unroll 4
    for (int k = 0; k < c.K; k++) {
        const int4 t = __ldg(tab + k);
        const float v = ((unsigned)(gh + t.y) < (unsigned)p.LH && (unsigned)(gw + t.z) < (unsigned)p.LW)
                            ? __ldg(p.src + gb + t.x) : 0.0f;
        const float4 *a = reinterpret_cast<const float4 *>(A + (int64_t)k * MR);
#pragma unroll
        for (int q = 0; q < MR / 4; q++) {
            const float4 w = __ldg(a + q);
            acc[4 * q] = __fmaf_rn(w.x, v, acc[4 * q]);
            acc[4 * q + 1] = __fmaf_rn(w.y, v, acc[4 * q + 1]);
            acc[4 * q + 2] = __fmaf_rn(w.z, v, acc[4 * q + 2]);
            acc[4 * q + 3] = __fmaf_rn(w.w, v, acc[4 * q + 3]);
        }
    }
    float *out = p.out + out_offset(p, c, n);
#pragma unroll
    for (int m = 0; m < MR; m++)
        if (m < p.M) out[(int64_t)m * p.out_cstride] = acc[m] + (p.bias ? __ldg(p.bias + m) : 0.0f);
}

// The forward's A and table: A[k][m] = W[m][k] (0 for m >= M), tab[k] = the image offset and
// tap of k = (ci, kh, kw)
__global__ void k_prep_forward(const float *W, int M, int M4, int K, int KK, int KW, int H, int Wd,
                               float *A, int4 *tab) {
    TL_GRID_STRIDE(i, (int64_t)K * M4) {
        const int k = (int)(i / M4), m = (int)(i % M4);
        A[i] = m < M ? W[(int64_t)m * K + k] : 0.0f;
        if (m == 0) {
            const int ci = k / KK, r = k % KK, kh = r / KW, kw = r % KW;
            tab[k] = make_int4(ci * H * Wd + kh * Wd + kw, kh, kw, 0);
        }
    }
}

// The input gradient's A and table, classes in row-major order, inside a class k = (co, th, tw)
// for tap (c_h + S_h th, c_w + S_w tw): A[k][m] = W[co][m][kh][kw] (0 for m >= C_in), tab[k] =
// the offset of g[co][-th][-tw] and the output step back (-th, -tw)
__global__ void k_prep_dgrad(const float *W, int Cout, int Cin, int M4, int KK, int KW, Axis ah,
                             Axis aw, int OH, int OW, float *A, int4 *tab) {
    TL_GRID_STRIDE(i, (int64_t)Cout * KK * M4) {
        const int m = (int)(i % M4), t = (int)(i / M4);
        const int co = t / KK, r = t % KK, kh = r / KW, kw = r % KW;
        const int ch = kh % ah.S, th = kh / ah.S, cw = kw % aw.S, tw = kw / aw.S;
        const int dest = class_offset(Cout, ah, aw, ch, cw) + (co * ah.taps(ch) + th) * aw.taps(cw) + tw;
        A[(int64_t)dest * M4 + m] = m < Cin ? W[((int64_t)co * Cin + m) * KK + r] : 0.0f;
        if (m == 0) tab[dest] = make_int4(co * OH * OW - th * OW - tw, -th, -tw, 0);
    }
}

// dW partials: out[z][m][n] = sum over k in chunk z of g[b][m][o] X[b][ci][tap], k = (b, o),
// n = (ci, kh, kw)
struct Wgrad {
    int M, N, KK, KW;          // C_out, C_in*KK, taps, kernel width
    int ktot, chunk;           // N*P and the k-steps of a chunk (a multiple of BK)
    const float *g;            // [batch][M][P]
    int P, OH, OW, g_bstride;
    int step_b, step_o, step_h, step_w;  // BK = step_b P + step_o, step_o = step_h OW + step_w
    const float *x;            // [batch][C_in][H][W]
    int H, W, x_bstride, SH, SW, PH, PW;
    float *out;                // [S][M][N]
    int vec_out;               // out 16-byte aligned and N % 4 == 0
};

template <class T>
__global__ void __launch_bounds__(T::NT, T::MIN_BLOCKS) k_wgrad(Wgrad p) {
    constexpr int BM = T::BM, BN = T::BN, NT = T::NT;
    // +4: the stores below go down a column (k varies across the warp): 2-way conflicts, not 16
    constexpr int LDA = BM + 4, LDB = BN + 4;
    constexpr int KR = NT / BK;          // rows (of A) / columns (of B) one pass loads
    constexpr int NA = BM / KR, NB = BN / KR;
    static_assert(NT % BK == 0 && BM % KR == 0 && BN % KR == 0, "whole passes");
    __shared__ __align__(16) float As[2][BK][LDA];
    __shared__ __align__(16) float Bs[2][BK][LDB];
    __shared__ int4 ntab[BN];            // per column: {offset in a sample, kh, kw, valid}

    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const int klo = blockIdx.z * p.chunk;
    const int khi = p.ktot - klo < p.chunk ? p.ktot : klo + p.chunk;
    const int tid = threadIdx.x, ty = tid / T::TX, tx = tid % T::TX;
    for (int i = tid; i < BN; i += NT) {
        const int n = col0 + i;
        int4 e = make_int4(0, 0, 0, 0);
        if (n < p.N) {
            const int ci = n / p.KK, r = n % p.KK, kh = r / p.KW, kw = r % p.KW;
            e = make_int4(ci * p.H * p.W + kh * p.W + kw, kh, kw, 1);
        }
        ntab[i] = e;
    }
    __syncthreads();

    // each thread loads one k (kk) of a stage, for rows / columns rr + KR j
    const int kk = tid % BK, rr = tid / BK;
    // stage s <- k-steps [k0, k0 + BK) of this chunk, 4-byte copies (0 outside)
    // this thread's k = (kb, ko), ko = (koh, kow): divided once here, then carried forward by
    // BK after each stage's copies (issue runs for k0 = klo, klo + BK, ... in turn)
    int kb = (klo + kk) / p.P, ko = klo + kk - kb * p.P, koh = ko / p.OW, kow = ko - koh * p.OW;
    auto issue = [&](int k0, int s) {
        const bool ok = k0 + kk < khi;
        const int hb = koh * p.SH - p.PH, wb = kow * p.SW - p.PW;
        const int ab = kb * p.g_bstride + ko, xb = kb * p.x_bstride + hb * p.W + wb;
#pragma unroll
        for (int i = 0; i < NA; i++) {
            const int m = row0 + rr + KR * i;
            const bool v = ok && m < p.M;
            cp_async4(&As[s][kk][rr + KR * i], p.g + (v ? ab + m * p.P : 0), v);
        }
#pragma unroll
        for (int j = 0; j < NB; j++) {
            const int4 e = ntab[rr + KR * j];
            const bool v = ok && e.w && (unsigned)(hb + e.y) < (unsigned)p.H &&
                           (unsigned)(wb + e.z) < (unsigned)p.W;
            cp_async4(&Bs[s][kk][rr + KR * j], p.x + (v ? xb + e.x : 0), v);
        }
        kb += p.step_b;
        ko += p.step_o;
        koh += p.step_h;
        kow += p.step_w;
        if (kow >= p.OW) { kow -= p.OW; koh++; }
        if (ko >= p.P) { ko -= p.P; kb++; koh -= p.OH; }
    };

    float acc[T::RM][T::RN];
#pragma unroll
    for (int i = 0; i < T::RM; i++)
#pragma unroll
        for (int j = 0; j < T::RN; j++) acc[i][j] = 0.0f;
    if (klo < khi) issue(klo, 0);
    cp_async_wait_all();
    __syncthreads();
    for (int k0 = klo, cur = 0; k0 < khi; k0 += BK, cur ^= 1) {
        if (k0 + BK < khi) issue(k0 + BK, cur ^ 1);
        stage_fma<T, LDA, LDB>(&As[cur][0][0], &Bs[cur][0][0], ty, tx, acc);
        cp_async_wait_all();
        __syncthreads();
    }

    float *out = p.out + (int64_t)blockIdx.z * p.M * p.N;
#pragma unroll
    for (int i = 0; i < T::RM; i++) {
        const int r = row0 + tile_row<T>(ty, i);
        if (r >= p.M) continue;
        float *orow = out + (int64_t)r * p.N;
#pragma unroll
        for (int h = 0; h < T::RN / 4; h++) {
            const int c0 = col0 + tile_col<T>(tx, 4 * h);
            if (p.vec_out) {
                if (c0 < p.N)
                    *reinterpret_cast<float4 *>(orow + c0) =
                        make_float4(acc[i][4 * h], acc[i][4 * h + 1], acc[i][4 * h + 2], acc[i][4 * h + 3]);
            } else {
#pragma unroll
                for (int e = 0; e < 4; e++)
                    if (c0 + e < p.N) orow[c0 + e] = acc[i][4 * h + e];
            }
        }
    }
}

// out[i] = the sum over z < S of ws[z][i] in a fixed order: lane l (threadIdx.y < L) of element
// i adds z = l, l + L, ..., then the L lane sums are added in lane order. A block is 256 / L
// elements (threadIdx.x) by L lanes; many lanes keep the GPU busy when there are few elements and
// many chunks (a first layer's 64 x 27 kernel gradient).
template <int L>
__global__ void __launch_bounds__(256) k_sum_chunks(const float *ws, int S, int64_t mn, float *out) {
    constexpr int E = 256 / L;
    __shared__ float part[L][E + 1];
    const int64_t i = (int64_t)blockIdx.x * E + threadIdx.x;
    const int l = threadIdx.y;
    float s = 0.0f;
    if (i < mn)
        for (int z = l; z < S; z += L) s += ws[(int64_t)z * mn + i];
    part[l][threadIdx.x] = s;
    __syncthreads();
    if (l == 0 && i < mn) {
        float t = part[0][threadIdx.x];
        for (int q = 1; q < L; q++) t += part[q][threadIdx.x];
        out[i] = t;
    }
}

// ---- host

// the tiles the shapes choose from; eff: throughput relative to 8x8 per thread (a guess that
// only breaks ties between shapes of similar padded work)
typedef Tile<16, 16, 8, 8> T128x128;  // 256 threads
typedef Tile<8, 16, 8, 8> T64x128;    // 128 threads
typedef Tile<8, 16, 4, 8> T32x128;    // 128 threads, 4 x 8 per thread
typedef Tile<16, 8, 8, 8> T128x64;    // 128 threads
typedef Tile<8, 8, 8, 8> T64x64;      // 64 threads

// TORCHLEAN_CONV_IGEMM=0 selects conv_pool.cu's im2col path (read once)
bool igemm_enabled() {
    static int on = -1;
    if (on < 0) {
        const char *v = getenv("TORCHLEAN_CONV_IGEMM");
        on = (v && strcmp(v, "0") == 0) ? 0 : 1;
    }
    return on != 0;
}

int sm_count() {
    static int sms = 0;
    if (!sms) {
        int dev = 0, v = 0;
        if (cudaGetDevice(&dev) == cudaSuccess &&
            cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, dev) == cudaSuccess && v > 0)
            sms = v;
        else
            sms = 132;
    }
    return sms;
}

// resident blocks of a kernel per SM (once per kernel; 1 if the query fails)
template <class F> int blocks_per_sm(F kernel, int threads, int *cache) {
    if (!*cache) {
        int n = 0;
        if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, threads, 0) != cudaSuccess || n < 1)
            n = 1;
        *cache = n;
    }
    return *cache;
}

template <class T> int gather_slots() {
    static int occ = 0;
    return sm_count() * blocks_per_sm(k_gather_gemm<T>, T::NT, &occ);
}
template <class T> int wgrad_slots() {
    static int occ = 0;
    return sm_count() * blocks_per_sm(k_wgrad<T>, T::NT, &occ);
}

int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
int round4(int v) { return (v + 3) / 4 * 4; }
bool aligned16(const void *p) { return (uintptr_t)p % 16 == 0; }

// the convolution with both spatial axes spelled out (rank 1: height 1)
struct Conv2 {
    int N, Cin, Cout, H, W, OH, OW, KH, KW, SH, SW, PH, PW;
};

Conv2 conv2_of(const tl_geom &G) {
    const int a = G.r == 2 ? 1 : 0;
    Conv2 c;
    c.N = (int)G.n; c.Cin = (int)G.cin; c.Cout = (int)G.cout;
    c.H = a ? (int)G.in[0] : 1;   c.W = (int)G.in[a];
    c.OH = a ? (int)G.out[0] : 1; c.OW = (int)G.out[a];
    c.KH = a ? (int)G.k[0] : 1;   c.KW = (int)G.k[a];
    c.SH = a ? (int)G.s[0] : 1;   c.SW = (int)G.s[a];
    c.PH = a ? (int)G.p[0] : 0;   c.PW = (int)G.p[a];
    return c;
}

struct Scratch {  // stream-ordered temporaries, freed when the call returns
    void *p[2] = {nullptr, nullptr};
    ~Scratch() { tl_scratch_free(p[0]); tl_scratch_free(p[1]); }
};

// time of a launch of `blocks` blocks of BM x BN outputs, up to a common factor
double tile_cost(int64_t blocks, int slots, int bm, int bn, int occ, double eff) {
    return (double)cdiv(blocks, slots) * bm * bn * occ / eff;
}

template <class T>
int launch_gather_tile(const char *op, const Gather &p, int64_t ncols, int classes) {
    dim3 grid((unsigned)cdiv(ncols, T::BN), (unsigned)cdiv(p.M, T::BM), (unsigned)classes);
    k_gather_gemm<T><<<grid, T::NT, 0, tl_stream()>>>(p);
    return tl_cuda_launched(op);
}

// out = the gathered GEMM of p over `classes` classes of at most ncols columns
int launch_gather(const char *op, const Gather &p, int64_t ncols, int classes) {
    if (p.M4 <= 8) {
        dim3 grid((unsigned)cdiv(ncols, 256), 1, (unsigned)classes);
        if (p.M4 == 4) k_gather_direct<4><<<grid, 256, 0, tl_stream()>>>(p);
        else k_gather_direct<8><<<grid, 256, 0, tl_stream()>>>(p);
        return tl_cuda_launched(op);
    }
    struct Choice { double cost; int which; } best{0.0, -1};
    auto consider = [&](int which, int bm, int bn, int slots, double eff) {
        const int64_t blocks = cdiv(p.M, bm) * cdiv(ncols, bn) * classes;
        const int occ = slots / sm_count();
        const double cost = tile_cost(blocks, slots, bm, bn, occ > 0 ? occ : 1, eff);
        if (best.which < 0 || cost < best.cost) best = {cost, which};
    };
    consider(0, T128x128::BM, T128x128::BN, gather_slots<T128x128>(), 1.0);
    consider(1, T64x128::BM, T64x128::BN, gather_slots<T64x128>(), 1.0);
    consider(2, T32x128::BM, T32x128::BN, gather_slots<T32x128>(), 0.8);
    if (best.which == 0) return launch_gather_tile<T128x128>(op, p, ncols, classes);
    if (best.which == 1) return launch_gather_tile<T64x128>(op, p, ncols, classes);
    return launch_gather_tile<T32x128>(op, p, ncols, classes);
}

const int64_t kWorkspaceFloats = (int64_t)4 << 20;  // 16 MiB of kernel-gradient partials
const int64_t kMinChunkStages = 8;                  // each chunk at least 8 stages of BK

template <class T>
int launch_wgrad_tile(const char *op, Wgrad p, float *dW, Scratch &sc) {
    const int64_t mt = cdiv(p.M, T::BM), nt = cdiv(p.N, T::BN), tiles = mt * nt;
    const int slots = wgrad_slots<T>();
    const int64_t stages = cdiv(p.ktot, BK);
    int64_t smax = kWorkspaceFloats / ((int64_t)p.M * p.N);
    if (smax > stages / kMinChunkStages) smax = stages / kMinChunkStages;
    if (smax > 65535) smax = 65535;
    int64_t S = 1;
    if (tiles < slots && smax > 1) {
        // fill one wave, or two when the workspace allows
        int64_t waves = tiles * smax / slots;
        waves = waves < 1 ? 1 : (waves > 2 ? 2 : waves);
        S = waves * slots / tiles;
        if (S > smax) S = smax;
        if (S < 1) S = 1;
    }
    const int64_t chunk = cdiv(cdiv(p.ktot, S), BK) * BK;
    S = cdiv(p.ktot, chunk);
    p.chunk = (int)chunk;
    float *out = dW;
    if (S > 1) {
        TL_TRY(tl_scratch(op, (size_t)(S * p.M * p.N) * sizeof(float), &sc.p[1]));
        out = (float *)sc.p[1];
    }
    p.out = out;
    p.vec_out = aligned16(out) && p.N % 4 == 0;
    dim3 grid((unsigned)nt, (unsigned)mt, (unsigned)S);
    k_wgrad<T><<<grid, T::NT, 0, tl_stream()>>>(p);
    TL_LAUNCHED(op);
    if (S > 1) {
        const int64_t mn = (int64_t)p.M * p.N;
        // 8 lanes per element, or 32 when 32 elements a block would not give every SM two blocks
        if (cdiv(mn, 32) >= 2 * sm_count())
            k_sum_chunks<8><<<(unsigned)cdiv(mn, 32), dim3(32, 8), 0, tl_stream()>>>(out, (int)S, mn, dW);
        else
            k_sum_chunks<32><<<(unsigned)cdiv(mn, 8), dim3(8, 32), 0, tl_stream()>>>(out, (int)S, mn, dW);
        TL_LAUNCHED(op);
    }
    return TL_OK;
}

int launch_wgrad(const char *op, const Wgrad &p, float *dW, Scratch &sc) {
    // the tile with the least padded work (the split over K fills the GPU whatever the tile)
    struct Choice { double cost; int which; } best{0.0, -1};
    auto consider = [&](int which, int bm, int bn, double eff) {
        const double cost = (double)(cdiv(p.M, bm) * bm) * (double)(cdiv(p.N, bn) * bn) / eff;
        if (best.which < 0 || cost < best.cost) best = {cost, which};
    };
    consider(0, T128x128::BM, T128x128::BN, 1.0);
    consider(1, T64x128::BM, T64x128::BN, 0.95);
    consider(2, T128x64::BM, T128x64::BN, 0.95);
    consider(3, T64x64::BM, T64x64::BN, 0.85);
    if (best.which == 0) return launch_wgrad_tile<T128x128>(op, p, dW, sc);
    if (best.which == 1) return launch_wgrad_tile<T64x128>(op, p, dW, sc);
    if (best.which == 2) return launch_wgrad_tile<T128x64>(op, p, dW, sc);
    return launch_wgrad_tile<T64x64>(op, p, dW, sc);
}

}  // namespace

bool tl_conv_igemm_takes(const tl_geom &G, int transpose) {
    if (transpose || tl_exact() || (G.r != 1 && G.r != 2) || !igemm_enabled()) return false;
    if (G.n < 1 || G.cin < 1 || G.cout < 1 || G.in_n < 1 || G.k_n < 1 || G.out_n < 1) return false;
    // every index inside the kernels is a sum of two terms below 2^30 (int32 arithmetic); the
    // products are taken in double, so that no size can wrap around the check
    const double lim = (double)(1 << 30);
    const int a = G.r == 2 ? 1 : 0;
    const double H = a ? G.in[0] : 1, W = (double)G.in[a], OH = a ? G.out[0] : 1;
    const double OW = (double)G.out[a], KH = a ? G.k[0] : 1, KW = (double)G.k[a];
    const double SH = a ? G.s[0] : 1, SW = (double)G.s[a], PH = a ? G.p[0] : 0, PW = (double)G.p[a];
    const double n = (double)G.n, cmax = (double)(G.cin > G.cout ? G.cin : G.cout);
    const double kn = (double)G.k_n;
    if (n * cmax * G.in_n >= lim || n * cmax * G.out_n >= lim) return false;
    if ((cmax + 4) * G.cin * kn >= lim || (cmax + 4) * G.cout * kn >= lim) return false;
    if ((H + 2 * PH + KH + SH + 2) * (W + 2 * PW + KW + SW + 2) * cmax >= lim) return false;
    if ((OH + KH + PH + 2) * (OW + KW + PW + 2) * cmax >= lim) return false;
    if (SH * SW > 65535 || cmax > 65535.0 * 32) return false;  // grid z (classes), y (row tiles)
    return true;
}

int tl_conv_igemm_forward(const char *op, const tl_geom &G, const float *W, const float *bias,
                          const float *X, float *Y) {
    const Conv2 c = conv2_of(G);
    const int KK = c.KH * c.KW, K = c.Cin * KK, M4 = round4(c.Cout);
    Scratch sc;
    const size_t abytes = (size_t)K * M4 * sizeof(float);  // a multiple of 16
    TL_TRY(tl_scratch(op, abytes + (size_t)K * sizeof(int4), &sc.p[0]));
    float *A = (float *)sc.p[0];
    int4 *tab = (int4 *)((char *)sc.p[0] + abytes);
    k_prep_forward<<<tl_blocks((int64_t)K * M4), TL_THREADS, 0, tl_stream()>>>(
        W, c.Cout, M4, K, KK, c.KW, c.H, c.W, A, tab);
    TL_LAUNCHED(op);
    Gather p = {};
    p.M = c.Cout; p.M4 = M4; p.batch = c.N; p.A = A; p.tab = tab;
    p.src = X; p.LH = c.H; p.LW = c.W; p.src_bstride = c.Cin * c.H * c.W;
    p.out = Y; p.out_cstride = c.OH * c.OW; p.out_bstride = c.Cout * p.out_cstride; p.OLW = c.OW;
    p.bias = bias;
    p.vec_out = aligned16(Y) && p.out_cstride % 4 == 0 && c.OW % 4 == 0;
    p.dgrad = 0;
    p.fwd = Cls{c.OH, c.OW, c.SH, -c.PH, c.SW, -c.PW, 0, 1, 0, 1, K, 0};
    return launch_gather(op, p, (int64_t)c.N * c.OH * c.OW, 1);
}

int tl_conv_igemm_backward(const char *op, const tl_geom &G, const float *W, const float *X,
                           const float *g, float *dW, float *dX) {
    const Conv2 c = conv2_of(G);
    const int KK = c.KH * c.KW, P = c.OH * c.OW;
    Scratch sc;
    // kernel gradient
    Wgrad w = {};
    w.M = c.Cout; w.N = c.Cin * KK; w.KK = KK; w.KW = c.KW;
    w.ktot = c.N * P;
    w.g = g; w.P = P; w.OH = c.OH; w.OW = c.OW; w.g_bstride = c.Cout * P;
    w.step_b = BK / P; w.step_o = BK % P; w.step_h = w.step_o / c.OW; w.step_w = w.step_o % c.OW;
    w.x = X; w.H = c.H; w.W = c.W; w.x_bstride = c.Cin * c.H * c.W;
    w.SH = c.SH; w.SW = c.SW; w.PH = c.PH; w.PW = c.PW;
    TL_TRY(launch_wgrad(op, w, dW, sc));
    // input gradient: C_in rows, the classes of both axes
    const int M4 = round4(c.Cin), KT = c.Cout * KK;
    const size_t abytes = (size_t)KT * M4 * sizeof(float);
    TL_TRY(tl_scratch(op, abytes + (size_t)KT * sizeof(int4), &sc.p[0]));
    float *A = (float *)sc.p[0];
    int4 *tab = (int4 *)((char *)sc.p[0] + abytes);
    const Axis ah{c.SH, c.PH, c.KH, c.H}, aw{c.SW, c.PW, c.KW, c.W};
    k_prep_dgrad<<<tl_blocks((int64_t)KT * M4), TL_THREADS, 0, tl_stream()>>>(
        W, c.Cout, c.Cin, M4, KK, c.KW, ah, aw, c.OH, c.OW, A, tab);
    TL_LAUNCHED(op);
    Gather p = {};
    p.M = c.Cin; p.M4 = M4; p.batch = c.N; p.A = A; p.tab = tab;
    p.src = g; p.LH = c.OH; p.LW = c.OW; p.src_bstride = c.Cout * P;
    p.out = dX; p.out_cstride = c.H * c.W; p.out_bstride = c.Cin * p.out_cstride; p.OLW = c.W;
    p.bias = nullptr;
    p.vec_out = aligned16(dX) && p.out_cstride % 4 == 0 && c.W % 4 == 0;
    p.dgrad = 1; p.ah = ah; p.aw = aw; p.cg = c.Cout;
    const int64_t ncols = (int64_t)c.N * cdiv(c.H, c.SH) * cdiv(c.W, c.SW);
    return launch_gather(op, p, ncols, c.SH * c.SW);
}
