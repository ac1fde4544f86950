// conv_igemm.cu (CUDA): convolution with one or two spatial axes, and its transpose, as implicit
// GEMMs: the forward pass, the input gradient and the kernel gradient, with no column buffer.
//
// Layouts (row-major, as everywhere): input X[b][ci][h][w], kernel W[co][ci][kh][kw], output
// Y[b][co][oh][ow], P = OH*OW output positions, KK = KH*KW taps; a 1-D convolution is the 2-D one
// of height 1. Each pass is one GEMM whose image-side operand is gathered from the image inside
// the kernel, a tile at a time, instead of being written out by im2col first:
//   forward          Y  (C_out x N*P)     = W (C_out x C_in*KK) . cols(X) + bias
//   input gradient   dX (C_in  x N*H*W)   = W' (C_in x C_out*KK) . cols(g)
//   kernel gradient  dW (C_out x C_in*KK) = g (C_out x N*P) . cols(X)^T, bias gradient = g . 1
// A transposed convolution is the adjoint of the convolution T that maps its output back to its
// input (kernel (C_in, C_out, k...) read as T's (C_out', C_in', k...)): its forward is T's input
// gradient (plus the bias), its input gradient is T's forward, its kernel gradient is T's kernel
// gradient with the roles of the two images swapped.
//
// One kernel family, kept whole (over 500 lines): the three passes are one implicit GEMM with
// the same tiles, the same gathered-operand tables and the same host-side tile choice (waves of
// resident blocks); the kernel gradient differs only in splitting K. Split by pass, each file
// would restate or reach across for that shared machinery.
//
// Gathered GEMMs (forward, input gradient). The A operand is the kernel, copied k-major and
// zero-padded to a multiple of 4 rows by a small prep kernel (A stages are aligned float4 loads).
// The k rows form classes (below); each class reads its columns through taps (t, u) < (TH, TW):
// k = (c, t, u) reads image cell (c, jh + AH + t, jw + AW + u) of column (jh, jw). A per-k table
// holds the cell's offset and the tap; each thread builds, once, the bit mask of the taps that
// fall inside the image for its column, so a gathered load costs a table load, a mask test and
// the copy (no bounds arithmetic in the loop). Classes are padded to whole BK-deep stages with
// zero rows whose tap is never inside, so the loop has no k bound either. At most 63 taps per
// class (7x7 kernels): masks are 32 or 64 bits (k_gather_gemm's WIDE).
// For a stride s > 1 the input gradient splits the image cells into the s_h*s_w residue classes
// of (i + p) mod s: the cells of one class are read by the same taps (those with k = (i + p) mod
// s), so each class is its own GEMM (blockIdx.z) over just those taps, instead of one GEMM over
// all taps of which 1 in s^2 contributes. A class's taps run in reverse kernel order, so that
// every class reads its cells forwards like a forward pass. Every cell belongs to exactly one
// class and is written once (zero, or the bias, when no tap reads it).
//
// Tiling, after the exact GEMM of gemm.cu: a block computes a BM x BN output tile, each thread an
// RM x RN register tile (rows and columns in groups of 4, the groups 4*TY and 4*TX apart, read as
// float4 from shared memory without bank conflicts), K staged BK = 16 deep through
// double-buffered shared memory (one barrier per stage, the next stage's global loads in flight
// during the current stage's FMAs). A tile (128x128 with 256 threads, 64x128 and 32x128 with
// 128) is picked per shape by its estimated time: waves of resident blocks, where a wave that
// leaves an SM with fewer than the blocks that saturate it still costs their time. With at most 8
// rows (the input gradient of a first layer, C_in <= 8, or C_out <= 8) one thread keeps every row
// in registers: k_gather_rows computes 4 vertically adjacent cells of a column and loads each
// gathered value once for all the taps that read it (taps within 7x7, classes of at least 4 cell
// rows); k_gather_direct (one cell per thread) takes the rest.
//
// The kernel gradient (k_wgrad, a tile from 128x128 down to 64x32 by padded work) has few output
// tiles and a long K = N*P, so K is split into S chunks of whole stages, S chosen from the shape
// and the SM count so the launch fills the GPU (about one or two waves) and bounded so the
// partials stay under 16 MiB. Each block writes its chunk's partial tile to a workspace;
// k_sum_chunks then adds the S partials of every element in a fixed order. The blocks of the
// first column tile also add up their chunk's g rows, which is the bias gradient (one pass over g
// for both). No atomics anywhere: every result is the same run to run on one GPU model, so the
// default and the deterministic mode share these kernels. Exact mode takes conv_exact.cuh's
// kernels; three or more spatial axes and kernels of more than 63 taps stay on conv_pool.cu's
// im2col path.
//
// TORCHLEAN_CONV_IGEMM=0 (read once) sends every convolution, transposed or not, down
// conv_pool.cu's im2col + cuBLAS path instead, to compare the two.
#include <stdlib.h>
#include <string.h>
#include "common.cuh"
#include "conv_igemm.cuh"

namespace {

// ---- kernels (device code; everything up to the host section)

constexpr int BK = 16;     // k-steps per shared-memory stage
constexpr int MAX_TAPS = 63;  // taps of one class: bits 0..62 of a tap mask (63: no tap)

__host__ __device__ inline int round_bk(int k) { return (k + BK - 1) / BK * BK; }

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
};

// k rows of input-gradient class z (of s_h x s_w, row-major): cg (C_out) channels of its taps
__host__ __device__ inline int class_rows(int cg, const Axis &ah, const Axis &aw, int z) {
    return cg * ah.taps(z / aw.S) * aw.taps(z % aw.S);
}
// where class z's rows start: the classes before it, each padded to whole stages
__host__ __device__ inline int class_start(int cg, const Axis &ah, const Axis &aw, int z) {
    int s = 0;
    for (int y = 0; y < z; y++) s += round_bk(class_rows(cg, ah, aw, y));
    return s;
}

// One GEMM of the gathered kernels: its columns are (b, jh, jw), b < batch, jh < CH, jw < CW;
// column (jh, jw) gathers around image position (jh MH + AH, jw MW + AW) through taps (t, u) <
// (TH, TW) and writes output position (OH0 + jh OSH, OW0 + jw OSW); its k rows are [off, off + K)
// of A and the table, zero rows up to off + round_bk(K).
struct Cls {
    int CH, CW, MH, AH, MW, AW, OH0, OSH, OW0, OSW, TH, TW, K, off;
};

// out[b][m][pos(n)] = (bias[m]) + sum_k A[k][m] src[gather(n, k)] over the classes of blockIdx.z
struct Gather {
    int M, M4, batch;          // rows, A's padded row length, samples
    const float *A;            // [k][M4], zero past M
    const int4 *tab;           // [k]: {image offset, tap bit (taps < 32, else 0), offset, tap}
    const float *src;          // gathered image [batch][C][LH][LW]
    int LH, LW, src_bstride;
    float *out;                // [batch][M][..][OLW]
    int out_bstride, out_cstride, OLW;
    const float *bias;         // or null
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
    c.TH = p.ah.taps(ch); c.TW = p.aw.taps(cw);
    c.CH = p.ah.count(ch); c.CW = p.aw.count(cw);
    // taps in reverse kernel order: tap t reads output jh + q - (TH - 1) + t
    c.MH = 1; c.AH = p.ah.q(ch) - (c.TH - 1); c.MW = 1; c.AW = p.aw.q(cw) - (c.TW - 1);
    c.OH0 = p.ah.first(ch); c.OSH = p.ah.S; c.OW0 = p.aw.first(cw); c.OSW = p.aw.S;
    c.K = class_rows(p.cg, p.ah, p.aw, z);
    c.off = class_start(p.cg, p.ah, p.aw, z);
    return c;
}

// bits [lo, hi) of a 64-bit word (0 <= lo, hi <= 63)
__host__ __device__ inline uint64_t bit_span(int lo, int hi) {
    if (lo >= hi) return 0;
    const uint64_t below_hi = hi >= 64 ? ~0ull : (1ull << hi) - 1;
    return below_hi & ~((1ull << lo) - 1);
}

// the taps (bit t TW + u) of class c whose cell lies inside the LH x LW image for a column
// gathering around (gh, gw)
__device__ __forceinline__ uint64_t tap_mask(const Cls &c, int gh, int gw, int LH, int LW) {
    const uint64_t cols = bit_span(max(0, -gw), min(c.TW, LW - gw));
    uint64_t m = 0;
    for (int t = max(0, -gh), hi = min(c.TH, LH - gh); t < hi; t++) m |= cols << (t * c.TW);
    return m;
}

// tap (< 64) of the 64-bit mask mhi:mlo
__device__ __forceinline__ bool tap_in(unsigned mlo, unsigned mhi, int tap) {
    return ((((uint64_t)mhi << 32 | mlo) >> tap) & 1u) != 0;
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

// WIDE: some class has more than 32 taps (64-bit masks)
template <class T, bool WIDE>
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

    // the column this thread gathers for B stages: its window's image offset and tap mask
    // (no taps past the last column)
    const int bn = tid % BN, bk = tid / BN;
    int gb = 0;
    unsigned mlo = 0, mhi = 0;
    {
        const int n = col0 + bn;
        if (n < ncols) {
            const int b = n / per, r = n - b * per, jh = r / c.CW, jw = r - jh * c.CW;
            const int gh = jh * c.MH + c.AH, gw = jw * c.MW + c.AW;
            gb = b * p.src_bstride + gh * p.LW + gw;
            const uint64_t m = tap_mask(c, gh, gw, p.LH, p.LW);
            mlo = (unsigned)m;
            mhi = (unsigned)(m >> 32);
        }
    }

    // stage s <- k rows [k0, k0 + BK): A as 16-byte copies, B gathered 4 bytes at a time
    auto issue = [&](int k0, int s) {
#pragma unroll
        for (int q = 0; q < NA; q++) {
            const int e = tid + NT * q, kk = e / (BM / 4), m = (e % (BM / 4)) * 4;
            if (A4 % NT == 0 || e < A4) {
                const bool v = row0 + m < p.M4;
                cp_async16(&As[s][kk][m], v ? A + (int64_t)(k0 + kk) * p.M4 + row0 + m : p.A, v);
            }
        }
        // this thread's table rows k0 + bk + BROWS j: {offset, tap bit} or, WIDE, {offset, tap}
        const int2 *te = reinterpret_cast<const int2 *>(tab + k0 + bk) + (WIDE ? 1 : 0);
#pragma unroll
        for (int j = 0; j < NB; j++) {
            const int2 t = __ldg(te + 2 * BROWS * j);
            const bool v = WIDE ? tap_in(mlo, mhi, t.y) : (mlo & (unsigned)t.y) != 0;
            cp_async4(&Bs[s][bk + BROWS * j][bn], p.src + (v ? gb + t.x : 0), v);
        }
    };

    float acc[T::RM][T::RN];
#pragma unroll
    for (int i = 0; i < T::RM; i++)
#pragma unroll
        for (int j = 0; j < T::RN; j++) acc[i][j] = 0.0f;
    const int kp = round_bk(c.K);
    if (kp > 0) issue(0, 0);
    cp_async_wait_all();
    __syncthreads();
    // one barrier per stage: stage cur+1 is copied while stage cur is multiplied; the barrier
    // ending a stage also ends every read of the buffer the next stage's copies overwrite
    for (int k0 = 0, cur = 0; k0 < kp; k0 += BK, cur ^= 1) {
        if (k0 + BK < kp) issue(k0 + BK, cur ^ 1);
        stage_fma<T, BM, BN>(&As[cur][0][0], &Bs[cur][0][0], ty, tx, acc);
        cp_async_wait_all();
        __syncthreads();
    }

    // epilogue, a group of 4 consecutive columns at a time: their output offsets (-1 past the
    // last column; the first one divided out, the next ones stepped), then every row; with vec
    // the 4 columns are 4 consecutive, aligned outputs
    const bool vec = p.vec_out && c.CW % 4 == 0 && c.OSW == 1 && c.OW0 % 4 == 0;
#pragma unroll
    for (int h = 0; h < T::RN / 4; h++) {
        int co[4];
        const int n0 = col0 + tile_col<T>(tx, 4 * h);
        int b = n0 / per, jh = (n0 - b * per) / c.CW, jw = n0 - b * per - jh * c.CW;
#pragma unroll
        for (int e = 0; e < 4; e++) {
            co[e] = n0 + e < ncols
                        ? b * p.out_bstride + (c.OH0 + jh * c.OSH) * p.OLW + c.OW0 + jw * c.OSW
                        : -1;
            if (++jw == c.CW) {
                jw = 0;
                if (++jh == c.CH) { jh = 0; b++; }
            }
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
    const uint64_t mask = tap_mask(c, gh, gw, p.LH, p.LW);
    const unsigned mlo = (unsigned)mask, mhi = (unsigned)(mask >> 32);
    const float *A = p.A + (int64_t)c.off * MR;
    const int4 *tab = p.tab + c.off;
    float acc[MR];
#pragma unroll
    for (int m = 0; m < MR; m++) acc[m] = 0.0f;
#pragma unroll 4
    for (int k = 0; k < c.K; k++) {
        const int2 t = __ldg(reinterpret_cast<const int2 *>(tab + k) + 1);  // {offset, tap}
        const float v = tap_in(mlo, mhi, t.y) ? __ldg(p.src + gb + t.x) : 0.0f;
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

// At most MR (4 or 8, == M4) rows and columns one cell apart (MH = MW = 1: a stride-1 forward or
// any input-gradient class) whose taps fit in TX x TX: a thread computes RH = 4 vertically
// adjacent columns (jh0 .. jh0 + 3, jw) for every row. For each channel c it loads the window of
// cells (c, jh0 + AH + i, jw + AW + u), i < RH + TH - 1, u < TW, once, and multiplies each into
// every (column, tap) pair that reads it, instead of one load per tap as a gathered GEMM does.
// Consecutive threads take consecutive jw, so every load of a warp is one coalesced row; two
// channels are in flight at a time where registers allow (the next one's loads overlap this
// one's FMAs).
template <int MR, int TX>
__global__ void __launch_bounds__(256) k_gather_rows(Gather p) {
    constexpr int RH = 4, NV = RH + TX - 1;
    const Cls c = class_of(p, blockIdx.z);
    const int RG = (c.CH + RH - 1) / RH;
    const int n = blockIdx.x * blockDim.x + threadIdx.x;
    if (n >= p.batch * RG * c.CW) return;
    const int jw = n % c.CW, rest = n / c.CW, jh0 = (rest % RG) * RH, b = rest / RG;
    const int R0 = jh0 + c.AH, C0 = jw + c.AW;
    // cell (R0 + i, C0 + u) exists and is read: bit i of rows_in and bit u of cols_in
    unsigned rows_in = 0, cols_in = 0;
#pragma unroll
    for (int i = 0; i < NV; i++)
        if (i < RH + c.TH - 1 && (unsigned)(R0 + i) < (unsigned)p.LH) rows_in |= 1u << i;
#pragma unroll
    for (int u = 0; u < TX; u++)
        if (u < c.TW && (unsigned)(C0 + u) < (unsigned)p.LW) cols_in |= 1u << u;
    const int taps = c.TH * c.TW, channels = taps > 0 ? c.K / taps : 0;
    const int plane = p.LH * p.LW;
    const float *A = p.A + (int64_t)c.off * MR;
    float acc[RH][MR];
#pragma unroll
    for (int r = 0; r < RH; r++)
#pragma unroll
        for (int m = 0; m < MR; m++) acc[r][m] = 0.0f;
    int base = b * p.src_bstride + R0 * p.LW + C0;  // cell (channel 0, row R0, column C0)
#pragma unroll(MR == 4 && TX <= 3 ? 2 : 1)
    for (int ch = 0; ch < channels; ch++, base += plane) {
        float v[NV][TX];
#pragma unroll
        for (int i = 0; i < NV; i++)
#pragma unroll
            for (int u = 0; u < TX; u++)
                v[i][u] = (rows_in >> i) & (cols_in >> u) & 1u ? __ldg(p.src + base + i * p.LW + u)
                                                                : 0.0f;
        const float *arow = A + (int64_t)ch * taps * MR;  // row (ch, t, u) is t TW + u on
#pragma unroll
        for (int t = 0; t < TX; t++) {
            if (t >= c.TH) break;
#pragma unroll
            for (int u = 0; u < TX; u++) {
                if (u >= c.TW) break;
                const float4 *w4 = reinterpret_cast<const float4 *>(arow + (int64_t)(t * c.TW + u) * MR);
#pragma unroll
                for (int q = 0; q < MR / 4; q++) {
                    const float4 w = __ldg(w4 + q);
#pragma unroll
                    for (int r = 0; r < RH; r++) {
                        const float x = v[r + t][u];
                        acc[r][4 * q] = __fmaf_rn(w.x, x, acc[r][4 * q]);
                        acc[r][4 * q + 1] = __fmaf_rn(w.y, x, acc[r][4 * q + 1]);
                        acc[r][4 * q + 2] = __fmaf_rn(w.z, x, acc[r][4 * q + 2]);
                        acc[r][4 * q + 3] = __fmaf_rn(w.w, x, acc[r][4 * q + 3]);
                    }
                }
            }
        }
    }
#pragma unroll
    for (int r = 0; r < RH; r++) {
        const int jh = jh0 + r;
        if (jh >= c.CH) break;
        float *out = p.out + b * p.out_bstride + (c.OH0 + jh * c.OSH) * p.OLW + c.OW0 + jw * c.OSW;
#pragma unroll
        for (int m = 0; m < MR; m++)
            if (m < p.M) out[(int64_t)m * p.out_cstride] = acc[r][m] + (p.bias ? __ldg(p.bias + m) : 0.0f);
    }
}

// a table row: {offset, tap bit (taps < 32), offset, tap}; a padding row's tap 63 is never inside
__device__ __forceinline__ int4 tab_entry(int offset, int tap) {
    return make_int4(offset, tap < 32 ? (int)(1u << tap) : 0, offset, tap);
}
__device__ __forceinline__ int4 tab_padding() { return make_int4(0, 0, 0, MAX_TAPS); }

// The forward's A and table over rows k < KP (round_bk(K)): A[k][m] = W[m][k] (0 for m >= M or
// k >= K), tab[k] = the image offset and tap of k = (ci, kh, kw) (bit 0 past K)
__global__ void k_prep_forward(const float *W, int M, int M4, int K, int KP, int KK, int KW,
                               int H, int Wd, float *A, int4 *tab) {
    TL_GRID_STRIDE(i, (int64_t)KP * M4) {
        const int k = (int)(i / M4), m = (int)(i % M4);
        A[i] = m < M && k < K ? W[(int64_t)m * K + k] : 0.0f;
        if (m == 0) {
            const int ci = k / KK, r = k % KK, kh = r / KW, kw = r % KW;
            tab[k] = k < K ? tab_entry(ci * H * Wd + kh * Wd + kw, r) : tab_padding();
        }
    }
}

// The input gradient's A and table over the rows of all classes (class_start): inside class
// (ch, cw) row (co, t, u) is tap (kh, kw) = (ch + S_h (TH - 1 - t), cw + S_w (TW - 1 - u)),
// A[row][m] = W[co][m][kh][kw] (0 for m >= C_in and on padding rows), tab[row] = the offset of
// g[co][t][u] and tap bit t TW + u (bit 0 on padding rows)
__global__ void k_prep_dgrad(const float *W, int Cout, int Cin, int M4, int KH, int KW, Axis ah,
                             Axis aw, int OH, int OW, int rows, float *A, int4 *tab) {
    TL_GRID_STRIDE(i, (int64_t)rows * M4) {
        const int m = (int)(i % M4), d = (int)(i / M4);
        int z = 0, start = 0;
        while (d >= start + round_bk(class_rows(Cout, ah, aw, z))) {
            start += round_bk(class_rows(Cout, ah, aw, z));
            z++;
        }
        const int ch = z / aw.S, cw = z % aw.S, TH = ah.taps(ch), TW = aw.taps(cw);
        const int j = d - start;
        float a = 0.0f;
        int4 e = tab_padding();
        if (j < Cout * TH * TW) {
            const int co = j / (TH * TW), tap = j % (TH * TW), t = tap / TW, u = tap % TW;
            const int kh = ch + ah.S * (TH - 1 - t), kw = cw + aw.S * (TW - 1 - u);
            if (m < Cin) a = W[(((int64_t)co * Cin + m) * KH + kh) * KW + kw];
            e = tab_entry(co * OH * OW + t * OW + u, tap);
        }
        A[i] = a;
        if (m == 0) tab[d] = e;
    }
}

// dW partials: out[z][m][n] = sum over k in chunk z of g[b][m][o] X[b][ci][tap], k = (b, o),
// n = (ci, kh, kw); with db, db[z][m] = the sum of the same g[b][m][o] (the bias gradient)
struct Wgrad {
    int M, N, KK, KW;          // C_out, C_in*KK, taps, kernel width
    int ktot, chunk;           // N*P and the k-steps of a chunk (a multiple of BK)
    const float *g;            // [batch][M][P]
    int P, OH, OW, g_bstride;
    int step_b, step_o, step_h, step_w;  // BK = step_b P + step_o, step_o = step_h OW + step_w
    const float *x;            // [batch][C_in][H][W]
    int H, W, x_bstride, SH, SW, PH, PW;
    float *out;                // chunk z's [M][N] at out + z * zstride
    float *db;                 // or null: chunk z's [M] at db + z * zstride
    int64_t zstride;
    int vec_out;               // out and zstride 16-byte aligned and N % 4 == 0
};

template <class T>
__global__ void __launch_bounds__(T::NT, T::MIN_BLOCKS) k_wgrad(Wgrad p) {
    constexpr int BM = T::BM, BN = T::BN, NT = T::NT;
    // +4: the stores below go down a column (k varies across the warp): 2-way conflicts, not 16
    constexpr int LDA = BM + 4, LDB = BN + 4;
    constexpr int KR = NT / BK;          // rows (of A) / columns (of B) one pass loads
    constexpr int NA = BM / KR, NB = BN / KR;
    static_assert(NT % BK == 0 && BM % KR == 0 && BN % KR == 0 && NT >= BM, "whole passes");
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

    // the blocks of the first column tile also sum their rows of g: thread tid < BM, row tid
    const bool bias_row = p.db && blockIdx.x == 0 && tid < BM;
    float dsum = 0.0f;
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
        if (bias_row)
#pragma unroll
            for (int q = 0; q < BK; q++) dsum += As[cur][q][tid];
        cp_async_wait_all();
        __syncthreads();
    }

    float *out = p.out + blockIdx.z * p.zstride;
    if (bias_row && row0 + tid < p.M) p.db[blockIdx.z * p.zstride + row0 + tid] = dsum;
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

// element i < n: the sum over z < S of ws[z * zstride + i] in a fixed order, written to a[i] for
// i < split and to b[i - split] after: lane l (threadIdx.y < L) of element i adds z = l, l + L,
// ..., then the L lane sums are added in lane order. A block is 256 / L elements (threadIdx.x) by
// L lanes; many lanes keep the GPU busy when there are few elements and many chunks (a first
// layer's 64 x 27 kernel gradient).
template <int L>
__global__ void __launch_bounds__(256) k_sum_chunks(const float *ws, int S, int64_t zstride,
                                                    int64_t n, int64_t split, float *a, float *b) {
    constexpr int E = 256 / L;
    __shared__ float part[L][E + 1];
    const int64_t i = (int64_t)blockIdx.x * E + threadIdx.x;
    const int l = threadIdx.y;
    float s = 0.0f;
    if (i < n)
        for (int z = l; z < S; z += L) s += ws[(int64_t)z * zstride + i];
    part[l][threadIdx.x] = s;
    __syncthreads();
    if (l == 0 && i < n) {
        float t = part[0][threadIdx.x];
        for (int q = 1; q < L; q++) t += part[q][threadIdx.x];
        if (i < split) a[i] = t;
        else b[i - split] = t;
    }
}

// ---- host

// the tiles the shapes choose from
typedef Tile<16, 16, 8, 8> T128x128;  // 256 threads
typedef Tile<8, 16, 8, 8> T64x128;    // 128 threads
typedef Tile<8, 16, 4, 8> T32x128;    // 128 threads, 4 x 8 per thread
typedef Tile<16, 8, 8, 8> T128x64;    // 128 threads
typedef Tile<8, 8, 8, 8> T64x64;      // 64 threads
typedef Tile<8, 8, 8, 4> T64x32;      // 64 threads, 8 x 4 per thread

// TORCHLEAN_CONV_IGEMM=0 selects conv_pool.cu's im2col path (read once)
bool igemm_enabled() {
    static int on = -1;
    if (on < 0) {
        const char *v = getenv("TORCHLEAN_CONV_IGEMM");
        on = (v && strcmp(v, "0") == 0) ? 0 : 1;
    }
    return on != 0;
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

template <class T> int gather_occupancy() {
    static int occ = 0;
    return blocks_per_sm(k_gather_gemm<T, false>, T::NT, &occ);
}
template <class T> int wgrad_slots() {
    static int occ = 0;
    return tl_sm_count() * blocks_per_sm(k_wgrad<T>, T::NT, &occ);
}

int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
int round4(int v) { return (v + 3) / 4 * 4; }
bool aligned16(const void *p) { return (uintptr_t)p % 16 == 0; }

// the convolution with both spatial axes spelled out (rank 1: height 1)
struct Conv2 {
    int N, Cin, Cout, H, W, OH, OW, KH, KW, SH, SW, PH, PW;
};

// The convolution of G (transpose 0), or the one whose adjoint the transposed convolution of G
// is (transpose 1): it maps the transposed convolution's output (C_out channels, G.out) to its
// input (C_in channels, G.in), and G's kernel (C_in, C_out, k...) is its (C_out', C_in', k...).
Conv2 conv2_of(const tl_geom &G, int transpose) {
    const int a = G.r == 2 ? 1 : 0;
    const int64_t *in = transpose ? G.out : G.in, *out = transpose ? G.in : G.out;
    Conv2 c;
    c.N = (int)G.n;
    c.Cin = (int)(transpose ? G.cout : G.cin);
    c.Cout = (int)(transpose ? G.cin : G.cout);
    c.H = a ? (int)in[0] : 1;   c.W = (int)in[a];
    c.OH = a ? (int)out[0] : 1; c.OW = (int)out[a];
    c.KH = a ? (int)G.k[0] : 1; c.KW = (int)G.k[a];
    c.SH = a ? (int)G.s[0] : 1; c.SW = (int)G.s[a];
    c.PH = a ? (int)G.p[0] : 0; c.PW = (int)G.p[a];
    return c;
}

struct Scratch {  // stream-ordered temporaries, freed when the call returns
    void *p[2] = {nullptr, nullptr};
    ~Scratch() { tl_scratch_free(p[0]); tl_scratch_free(p[1]); }
};

template <class T, bool WIDE>
int launch_gather_tile(const char *op, const Gather &p, int64_t ncols, int classes) {
    dim3 grid((unsigned)cdiv(ncols, T::BN), (unsigned)cdiv(p.M, T::BM), (unsigned)classes);
    k_gather_gemm<T, WIDE><<<grid, T::NT, 0, tl_stream()>>>(p);
    return tl_cuda_launched(op);
}
template <class T>
int launch_gather_tile(const char *op, const Gather &p, int64_t ncols, int classes, bool wide) {
    return wide ? launch_gather_tile<T, true>(op, p, ncols, classes)
                : launch_gather_tile<T, false>(op, p, ncols, classes);
}

// k_gather_rows for taps within tx x tx (tx <= 7)
template <int MR>
int launch_gather_rows(const char *op, const Gather &p, int64_t threads, int classes, int tx) {
    dim3 grid((unsigned)cdiv(threads, 256), 1, (unsigned)classes);
    if (tx <= 1) k_gather_rows<MR, 1><<<grid, 256, 0, tl_stream()>>>(p);
    else if (tx <= 3) k_gather_rows<MR, 3><<<grid, 256, 0, tl_stream()>>>(p);
    else if (tx <= 5) k_gather_rows<MR, 5><<<grid, 256, 0, tl_stream()>>>(p);
    else k_gather_rows<MR, 7><<<grid, 256, 0, tl_stream()>>>(p);
    return tl_cuda_launched(op);
}

// Estimated time of `blocks` blocks of bm x bn outputs (each eff times as fast as a 128 x 128
// block per output) with occ resident per SM, up to a common factor: whole waves of occ blocks
// per SM, then the last wave's busiest SM; an SM holding fewer than `sat` blocks (the warps that
// keep it busy) still takes sat blocks' time.
double tile_time(int64_t blocks, int occ, int sat, int bm, int bn, double eff) {
    const int64_t sms = tl_sm_count(), wave = sms * occ;
    int64_t t = blocks / wave * (occ > sat ? occ : sat);
    const int64_t last = cdiv(blocks % wave, sms);
    if (last > 0) t += last > sat ? last : sat;
    return (double)t * bm * bn / eff;
}

// The shape of a gathered GEMM as the launcher sees it: at most ncols columns in each of
// `classes` classes, at most th_max x tw_max taps, every class's cell rows at least ch_min
struct GatherShape {
    int64_t ncols, rows_threads;  // columns; threads of k_gather_rows (4 cell rows each)
    int classes, th_max, tw_max, ch_min, unit_step;  // unit_step: MH = MW = 1
};

// out = the gathered GEMM of p
int launch_gather(const char *op, const Gather &p, const GatherShape &s) {
    if (p.M4 <= 8) {
        const int tx = s.th_max > s.tw_max ? s.th_max : s.tw_max;
        if (s.unit_step && tx <= 7 && s.ch_min >= 4)
            return p.M4 == 4 ? launch_gather_rows<4>(op, p, s.rows_threads, s.classes, tx)
                             : launch_gather_rows<8>(op, p, s.rows_threads, s.classes, tx);
        dim3 grid((unsigned)cdiv(s.ncols, 256), 1, (unsigned)s.classes);
        if (p.M4 == 4) k_gather_direct<4><<<grid, 256, 0, tl_stream()>>>(p);
        else k_gather_direct<8><<<grid, 256, 0, tl_stream()>>>(p);
        return tl_cuda_launched(op);
    }
    const bool wide = s.th_max * s.tw_max > 32;
    struct Choice { double cost; int which; } best{0.0, -1};
    auto consider = [&](int which, int bm, int bn, int occ, int sat, double eff) {
        const int64_t blocks = cdiv(p.M, bm) * cdiv(s.ncols, bn) * s.classes;
        const double cost = tile_time(blocks, occ, sat, bm, bn, eff);
        if (best.which < 0 || cost < best.cost) best = {cost, which};
    };
    // saturation: about 8 warps per SM; a 64-row tile gathers twice the B values per FMA
    consider(0, T128x128::BM, T128x128::BN, gather_occupancy<T128x128>(), 1, 1.0);
    consider(1, T64x128::BM, T64x128::BN, gather_occupancy<T64x128>(), 2, 0.93);
    consider(2, T32x128::BM, T32x128::BN, gather_occupancy<T32x128>(), 2, 0.8);
    if (best.which == 0) return launch_gather_tile<T128x128>(op, p, s.ncols, s.classes, wide);
    if (best.which == 1) return launch_gather_tile<T64x128>(op, p, s.ncols, s.classes, wide);
    return launch_gather_tile<T32x128>(op, p, s.ncols, s.classes, wide);
}

const int64_t kWorkspaceFloats = (int64_t)4 << 20;  // 16 MiB of kernel-gradient partials
const int64_t kMinChunkStages = 8;                  // each chunk at least 8 stages of BK

template <class T>
int launch_wgrad_tile(const char *op, Wgrad p, float *dW, float *db, Scratch &sc) {
    const int64_t mt = cdiv(p.M, T::BM), nt = cdiv(p.N, T::BN), tiles = mt * nt;
    const int slots = wgrad_slots<T>();
    const int64_t stages = cdiv(p.ktot, BK);
    // a chunk's partials: [M][N], then [M] of the bias gradient, rounded to 16 bytes
    const int64_t mn = (int64_t)p.M * p.N, zstride = round4((int)(mn + (db ? p.M : 0)));
    int64_t smax = kWorkspaceFloats / zstride;
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
    if (S > 1) {
        TL_TRY(tl_scratch(op, (size_t)(S * zstride) * sizeof(float), &sc.p[1]));
        p.out = (float *)sc.p[1];
        p.db = db ? p.out + mn : nullptr;
        p.zstride = zstride;
    } else {
        p.out = dW;
        p.db = db;
        p.zstride = 0;
    }
    p.vec_out = aligned16(p.out) && p.N % 4 == 0;
    dim3 grid((unsigned)nt, (unsigned)mt, (unsigned)S);
    k_wgrad<T><<<grid, T::NT, 0, tl_stream()>>>(p);
    TL_LAUNCHED(op);
    if (S > 1) {
        const int64_t n = mn + (db ? p.M : 0);
        // 8 lanes per element, or 32 when 32 elements a block would not give every SM two blocks
        if (cdiv(n, 32) >= 2 * tl_sm_count())
            k_sum_chunks<8><<<(unsigned)cdiv(n, 32), dim3(32, 8), 0, tl_stream()>>>(
                p.out, (int)S, zstride, n, mn, dW, db);
        else
            k_sum_chunks<32><<<(unsigned)cdiv(n, 8), dim3(8, 32), 0, tl_stream()>>>(
                p.out, (int)S, zstride, n, mn, dW, db);
        TL_LAUNCHED(op);
    }
    return TL_OK;
}

int launch_wgrad(const char *op, const Wgrad &p, float *dW, float *db, Scratch &sc) {
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
    consider(4, T64x32::BM, T64x32::BN, 0.7);
    if (best.which == 0) return launch_wgrad_tile<T128x128>(op, p, dW, db, sc);
    if (best.which == 1) return launch_wgrad_tile<T64x128>(op, p, dW, db, sc);
    if (best.which == 2) return launch_wgrad_tile<T128x64>(op, p, dW, db, sc);
    if (best.which == 3) return launch_wgrad_tile<T64x64>(op, p, dW, db, sc);
    return launch_wgrad_tile<T64x32>(op, p, dW, db, sc);
}

// Y = conv_c(X) (+ bias): every element of Y written
int gather_forward(const char *op, const Conv2 &c, const float *W, const float *bias,
                   const float *X, float *Y) {
    const int KK = c.KH * c.KW, K = c.Cin * KK, KP = round_bk(K), M4 = round4(c.Cout);
    Scratch sc;
    const size_t abytes = (size_t)KP * M4 * sizeof(float);  // a multiple of 16
    TL_TRY(tl_scratch(op, abytes + (size_t)KP * sizeof(int4), &sc.p[0]));
    float *A = (float *)sc.p[0];
    int4 *tab = (int4 *)((char *)sc.p[0] + abytes);
    k_prep_forward<<<tl_blocks((int64_t)KP * M4), TL_THREADS, 0, tl_stream()>>>(
        W, c.Cout, M4, K, KP, KK, c.KW, c.H, c.W, A, tab);
    TL_LAUNCHED(op);
    Gather p = {};
    p.M = c.Cout; p.M4 = M4; p.batch = c.N; p.A = A; p.tab = tab;
    p.src = X; p.LH = c.H; p.LW = c.W; p.src_bstride = c.Cin * c.H * c.W;
    p.out = Y; p.out_cstride = c.OH * c.OW; p.out_bstride = c.Cout * p.out_cstride; p.OLW = c.OW;
    p.bias = bias;
    p.vec_out = aligned16(Y) && p.out_cstride % 4 == 0 && c.OW % 4 == 0;
    p.dgrad = 0;
    p.fwd = Cls{c.OH, c.OW, c.SH, -c.PH, c.SW, -c.PW, 0, 1, 0, 1, c.KH, c.KW, K, 0};
    GatherShape s;
    s.ncols = (int64_t)c.N * c.OH * c.OW;
    s.rows_threads = (int64_t)c.N * cdiv(c.OH, 4) * c.OW;
    s.classes = 1; s.th_max = c.KH; s.tw_max = c.KW; s.ch_min = c.OH;
    s.unit_step = c.SH == 1 && c.SW == 1;
    return launch_gather(op, p, s);
}

// dX = the input gradient of conv_c from g (+ bias): every element of dX written
int gather_dgrad(const char *op, const Conv2 &c, const float *W, const float *bias,
                 const float *g, float *dX) {
    const Axis ah{c.SH, c.PH, c.KH, c.H}, aw{c.SW, c.PW, c.KW, c.W};
    const int classes = c.SH * c.SW, M4 = round4(c.Cin);
    const int rows = class_start(c.Cout, ah, aw, classes);
    Scratch sc;
    const size_t abytes = (size_t)rows * M4 * sizeof(float);
    TL_TRY(tl_scratch(op, abytes + (size_t)(rows > 0 ? rows : 1) * sizeof(int4), &sc.p[0]));
    float *A = (float *)sc.p[0];
    int4 *tab = (int4 *)((char *)sc.p[0] + abytes);
    if (rows > 0) {
        k_prep_dgrad<<<tl_blocks((int64_t)rows * M4), TL_THREADS, 0, tl_stream()>>>(
            W, c.Cout, c.Cin, M4, c.KH, c.KW, ah, aw, c.OH, c.OW, rows, A, tab);
        TL_LAUNCHED(op);
    }
    Gather p = {};
    p.M = c.Cin; p.M4 = M4; p.batch = c.N; p.A = A; p.tab = tab;
    p.src = g; p.LH = c.OH; p.LW = c.OW; p.src_bstride = c.Cout * c.OH * c.OW;
    p.out = dX; p.out_cstride = c.H * c.W; p.out_bstride = c.Cin * p.out_cstride; p.OLW = c.W;
    p.bias = bias;
    p.vec_out = aligned16(dX) && p.out_cstride % 4 == 0 && c.W % 4 == 0;
    p.dgrad = 1; p.ah = ah; p.aw = aw; p.cg = c.Cout;
    GatherShape s;
    s.ncols = (int64_t)c.N * cdiv(c.H, c.SH) * cdiv(c.W, c.SW);
    s.rows_threads = (int64_t)c.N * cdiv(cdiv(c.H, c.SH), 4) * cdiv(c.W, c.SW);
    s.classes = classes; s.th_max = ah.taps(0); s.tw_max = aw.taps(0);
    s.ch_min = c.H / c.SH;  // every class has at least floor(H / S_h) cell rows
    s.unit_step = 1;
    return launch_gather(op, p, s);
}

// dW (and db, when set) of conv_c from its upstream gradient g and its input X: every element
// written
int kernel_grad(const char *op, const Conv2 &c, const float *g, const float *X, float *dW,
                float *db) {
    const int KK = c.KH * c.KW, P = c.OH * c.OW;
    Scratch sc;
    Wgrad w = {};
    w.M = c.Cout; w.N = c.Cin * KK; w.KK = KK; w.KW = c.KW;
    w.ktot = c.N * P;
    w.g = g; w.P = P; w.OH = c.OH; w.OW = c.OW; w.g_bstride = c.Cout * P;
    w.step_b = BK / P; w.step_o = BK % P; w.step_h = w.step_o / c.OW; w.step_w = w.step_o % c.OW;
    w.x = X; w.H = c.H; w.W = c.W; w.x_bstride = c.Cin * c.H * c.W;
    w.SH = c.SH; w.SW = c.SW; w.PH = c.PH; w.PW = c.PW;
    return launch_wgrad(op, w, dW, db, sc);
}

}  // namespace

bool tl_conv_igemm_takes(const tl_geom &G, int transpose) {
    if (tl_exact() || (G.r != 1 && G.r != 2) || !igemm_enabled()) return false;
    if (G.n < 1 || G.cin < 1 || G.cout < 1 || G.in_n < 1 || G.k_n < 1 || G.out_n < 1) return false;
    if (G.k_n > MAX_TAPS) return false;  // a tap mask is 64 bits, one of them "no tap"
    // every index inside the kernels is a sum of two terms below 2^30 (int32 arithmetic); the
    // products are taken in double, so that no size can wrap around the check. The conv checked
    // is the one the kernels run (for a transposed convolution, its adjoint).
    const Conv2 c = conv2_of(G, transpose);
    const double lim = (double)(1 << 30);
    const double H = c.H, W = c.W, OH = c.OH, OW = c.OW, KH = c.KH, KW = c.KW;
    const double SH = c.SH, SW = c.SW, PH = c.PH, PW = c.PW;
    const double n = (double)G.n, cmax = (double)(G.cin > G.cout ? G.cin : G.cout);
    const double kn = (double)G.k_n;
    if (n * cmax * H * W >= lim || n * cmax * OH * OW >= lim) return false;
    // A's rows (each class padded by less than BK) times its padded row length
    if ((cmax + 4) * (cmax * kn + BK * SH * SW) >= lim) return false;
    if ((H + 2 * PH + KH + SH + 2) * (W + 2 * PW + KW + SW + 2) * cmax >= lim) return false;
    if ((OH + KH + PH + 2) * (OW + KW + PW + 2) * cmax >= lim) return false;
    if (SH * SW > 65535 || cmax > 65535.0 * 32) return false;  // grid z (classes), y (row tiles)
    return true;
}

int tl_conv_igemm_forward(const char *op, const tl_geom &G, int transpose, const float *W,
                          const float *bias, const float *X, float *Y) {
    const Conv2 c = conv2_of(G, transpose);
    if (transpose) return gather_dgrad(op, c, W, bias, X, Y);
    return gather_forward(op, c, W, bias, X, Y);
}

int tl_conv_igemm_backward(const char *op, const tl_geom &G, int transpose, const float *W,
                           const float *X, const float *g, float *dW, float *db, float *dX) {
    const Conv2 c = conv2_of(G, transpose);
    if (transpose) {
        // the adjoint conv's upstream gradient is X, its input g
        TL_TRY(kernel_grad(op, c, X, g, dW, nullptr));
        return gather_forward(op, c, W, nullptr, g, dX);
    }
    TL_TRY(kernel_grad(op, c, g, X, dW, db));
    return gather_dgrad(op, c, W, nullptr, g, dX);
}
