/* dgemm.c (stub): float64 row-major GEMM on host arrays, C = A (m, k) @ B (k, n).
 *
 * Cache-blocked loops; every C[i, j] sums its k products in increasing k order (blocks of k in
 * order, then k within a block), so the result is the naive order on any thread count.
 */
#include <string.h>
#include "stub.h"

#define BI 32
#define BK 128
#define BJ 256

int tl_dgemm(const double *a_data, int64_t a_data_len, const double *b_data, int64_t b_data_len,
             double *c, int64_t c_len, int64_t m, int64_t k, int64_t n) {
    if (m < 0 || k < 0 || n < 0)
        return tl_fail(TL_E_ARG, "dgemm: expected non-negative m, k, n, got %lld, %lld, %lld",
                       (long long)m, (long long)k, (long long)n);
    if (a_data_len != m * k || b_data_len != k * n || c_len != m * n)
        return tl_fail(TL_E_SHAPE, "dgemm: expected a of %lld, b of %lld and c of %lld elements for "
                       "(%lld x %lld) @ (%lld x %lld), got %lld, %lld, %lld", (long long)(m * k),
                       (long long)(k * n), (long long)(m * n), (long long)m, (long long)k, (long long)k,
                       (long long)n, (long long)a_data_len, (long long)b_data_len, (long long)c_len);
    if (c_len == 0) return TL_OK;
    if ((a_data_len && !a_data) || (b_data_len && !b_data) || !c)
        return tl_fail(TL_E_ARG, "dgemm: a host array pointer is NULL");
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
                        for (int64_t j = j0; j < j1; j++) ci[j] += av * bp[j];
                    }
                }
            }
        }
    }
    return TL_OK;
}
