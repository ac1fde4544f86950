/* gemm.c (stub): the exact-mode GEMM, rule 3 of native/common/tl_math.h (exact_version 7).
 *
 * Each output is the rule's chunked float64 chain: k in chunks of TL_EXACT_KCHUNK, one
 * sequential double fused multiply-add chain per chunk over the float32 operands converted to
 * double (the first from the initial value, the others from 0), the chunk partials added left
 * to right in double, the total rounded to float32 once, exactly as on CUDA (cuda/gemm.cu), so
 * both give the same bits. A float32 product is exact in double, so fma((double)a, (double)b,
 * p) is p + (double)a (double)b with one rounding either way.
 * Speed comes from working on a block of GX_ROWS x GX_COLS outputs at once: for each kk, one A
 * value per row times a contiguous row segment of B, so the compiler vectorises across output
 * columns j, never across k. op(B) is packed first (as double) into contiguous k-major panels
 * of GX_COLS columns (whatever its layout), which keeps the inner loop's loads sequential.
 * OpenMP splits the output blocks.
 * tl_gemm_exact_f32 is what other kernels call; tlk_gemm_exact is the registry entry's body
 * (ops.yaml gemm_exact), whose arguments the generated contract has checked. */
#include <stdlib.h>
#include "stub.h"
#include "tl_math.h"
#include "generated/gemm_kernels.h"

/* the block: 8 x 24 doubles = 24 of AVX-512's 32 registers; 6 x 8 = 12 of AVX2's 16 (a block
 * wider than the registers lives on the stack: 13.6 -> 20.3 GFLOP/s at 512^3 on a Zen 3 core;
 * 4 x 12 gave 17) */
#if defined(__AVX512F__)
#define GX_ROWS 8
#define GX_COLS 24
#else
#define GX_ROWS 6
#define GX_COLS 8
#endif

/* acc[r][j] = fma((double)op(A)[i0 + r][kk], P[kk][j], acc[r][j]) in double for kk = k0..k1-1
 * in order, rows r < ri (ri == GX_ROWS: constant trip counts, accumulators in registers) */
static void chain(int ta, const float *A, int64_t lda, const double *P, int64_t i0, int64_t ri,
                  int64_t k0, int64_t k1, double acc[GX_ROWS][GX_COLS]) {
    if (ri == GX_ROWS) {
        for (int64_t kk = k0; kk < k1; kk++) {
            const double *b = P + kk * GX_COLS;
#pragma GCC unroll 8
            for (int r = 0; r < GX_ROWS; r++) {
                double a = ta ? A[kk * lda + i0 + r] : A[(i0 + r) * lda + kk];
                for (int j = 0; j < GX_COLS; j++) acc[r][j] = __builtin_fma(a, b[j], acc[r][j]);
            }
        }
    } else {
        for (int64_t kk = k0; kk < k1; kk++) {
            const double *b = P + kk * GX_COLS;
            for (int64_t r = 0; r < ri; r++) {
                double a = ta ? A[kk * lda + i0 + r] : A[(i0 + r) * lda + kk];
                for (int j = 0; j < GX_COLS; j++) acc[r][j] = __builtin_fma(a, b[j], acc[r][j]);
            }
        }
    }
}

/* one block: rows [i0, i0 + ri), columns [j0, j0 + jn) of C; P is the block's packed panel of
 * op(B) in double: P[kk * GX_COLS + j] = op(B)[kk][j0 + j], zero past column n (computed, never
 * stored). k runs chunk by chunk (rule 3): acc holds the chunk's partial, tot the left fold so
 * far, both double; the store rounds to float32 once. */
static void block(int ta, const float *A, int64_t lda, const double *P, float *C, int64_t ldc,
                  int64_t k, int64_t i0, int64_t ri, int64_t j0, int64_t jn, int accumulate) {
    double acc[GX_ROWS][GX_COLS], tot[GX_ROWS][GX_COLS];
    for (int64_t r = 0; r < GX_ROWS; r++)
        for (int64_t j = 0; j < GX_COLS; j++)
            acc[r][j] = (accumulate && r < ri && j < jn) ? (double)C[(i0 + r) * ldc + j0 + j] : 0.0;
    for (int64_t k0 = 0;; k0 += TL_EXACT_KCHUNK) {
        const int64_t k1 = k - k0 < TL_EXACT_KCHUNK ? k : k0 + TL_EXACT_KCHUNK;
        chain(ta, A, lda, P, i0, ri, k0, k1, acc);
        for (int r = 0; r < GX_ROWS; r++)
            for (int j = 0; j < GX_COLS; j++) {
                tot[r][j] = k0 == 0 ? acc[r][j] : tot[r][j] + acc[r][j];
                acc[r][j] = 0.0;
            }
        if (k1 >= k) break;
    }
    for (int64_t r = 0; r < ri; r++)
        for (int64_t j = 0; j < jn; j++) C[(i0 + r) * ldc + j0 + j] = (float)tot[r][j];
}

int tl_gemm_exact_f32(const char *op, int ta, int tb, int64_t batch, int64_t m, int64_t n,
                      int64_t k, const float *A, int64_t lda, int64_t sa, const float *B,
                      int64_t ldb, int64_t sb, float *C, int64_t ldc, int64_t sc, int accumulate) {
    if (batch == 0 || m == 0 || n == 0) return TL_OK;
    int64_t rblocks = (m + GX_ROWS - 1) / GX_ROWS, cblocks = (n + GX_COLS - 1) / GX_COLS;
    double *packed = malloc((size_t)(cblocks * (k > 0 ? k : 1) * GX_COLS) * sizeof(double));
    if (!packed) return tl_fail(TL_E_OOM, "%s: out of memory packing B (%lld x %lld)", op,
                                (long long)k, (long long)n);
    int par = (double)m * (double)n * (double)(k + 1) > 65536.0;
    for (int64_t bi = 0; bi < batch; bi++) {
        const float *Ab = A + bi * sa, *Bb = B + bi * sb;
        /* op(B) into double panels of GX_COLS columns, each k-major and contiguous */
#pragma omp parallel for schedule(static) if (par)
        for (int64_t pk = 0; pk < cblocks * k; pk++) {
            int64_t jb = pk / k, kk = pk % k, j0 = jb * GX_COLS;
            double *dst = packed + pk * GX_COLS;
            for (int64_t j = 0; j < GX_COLS; j++)
                dst[j] = j0 + j >= n ? 0.0 : (double)(tb ? Bb[(j0 + j) * ldb + kk] : Bb[kk * ldb + j0 + j]);
        }
        float *Cb = C + bi * sc;
#pragma omp parallel for schedule(static) if (par)
        for (int64_t t = 0; t < rblocks * cblocks; t++) {
            /* row blocks vary fastest: consecutive blocks reuse one panel of B */
            int64_t i0 = (t % rblocks) * GX_ROWS, jb = t / rblocks, j0 = jb * GX_COLS;
            int64_t ri = m - i0 < GX_ROWS ? m - i0 : GX_ROWS, jn = n - j0 < GX_COLS ? n - j0 : GX_COLS;
            block(ta, Ab, lda, packed + jb * k * GX_COLS, Cb, ldc, k, i0, ri, j0, jn, accumulate);
        }
    }
    free(packed);
    return TL_OK;
}

/* row-major (batch, ., .) buffers: op(a) (m, k) stored (m, k) or (k, m), op(b) (k, n) stored
 * (k, n) or (n, k) */
int tlk_gemm_exact(const char *op, tl_buf a, tl_buf b, tl_buf c, int64_t batch, int64_t m, int64_t k,
                   int64_t n, int64_t ta, int64_t tb, int64_t accumulate) {
    return tl_gemm_exact_f32(op, (int)ta, (int)tb, batch, m, n, k, a->data, ta ? m : k, m * k,
                             b->data, tb ? k : n, k * n, c->data, n, m * n, (int)accumulate);
}
