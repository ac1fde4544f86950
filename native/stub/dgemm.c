/* dgemm.c (stub): float64 row-major GEMM on host arrays, C = A (m, k) @ B (k, n).
 *
 * Cache-blocked loops; every C[i, j] is one fused multiply-add chain in increasing k order,
 * c = fma(a[i, k], b[k, j], c) from 0 (blocks of k in order, then k within a block; vectorised
 * across j only), on any thread count. CUDA's exact mode runs the same chain (cuda/dgemm.cu), so
 * in exact mode both give the same bits.
 */
#include <string.h>
#include "stub.h"
#include "generated/dgemm_kernels.h"

#define BI 32
#define BK 128
#define BJ 256

int tlk_dgemm(const char *op, const double *a_data, int64_t a_data_len, const double *b_data, int64_t b_data_len,
             double *c, int64_t c_len, int64_t m, int64_t k, int64_t n) {
    memset(c, 0, sizeof(double) * (size_t)c_len);
    if (k == 0) return TL_OK;
#pragma omp parallel for schedule(dynamic) if (m * n * k > TL_PAR_MIN && m > BI)
    for (int64_t i0 = 0; i0 < m; i0 += BI) {
        int64_t i1 = i0 + BI < m ? i0 + BI : m;
        for (int64_t p0 = 0; p0 < k; p0 += BK) {
            int64_t p1 = p0 + BK < k ? p0 + BK : k;
            for (int64_t j0 = 0; j0 < n; j0 += BJ) {
                int64_t j1 = j0 + BJ < n ? j0 + BJ : n;
                for (int64_t i = i0; i < i1; i++) {
                    double *ci = c + i * n;
                    for (int64_t p = p0; p < p1; p++) {
                        double av = a_data[i * k + p];
                        const double *bp = b_data + p * n;
                        for (int64_t j = j0; j < j1; j++) ci[j] = __builtin_fma(av, bp[j], ci[j]);
                    }
                }
            }
        }
    }
    return TL_OK;
}
