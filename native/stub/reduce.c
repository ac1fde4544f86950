/* reduce.c (stub): reductions. Sums use fixed-size blocks combined in index order, so the
 * result does not depend on the thread count (deterministic mode needs nothing extra here). */
#include <stdlib.h>
#include "stub.h"

#define SUM_BLOCK 16384

/* fixed-order sum of n floats: blocks of SUM_BLOCK in parallel, then the partials in order */
static int sum_fixed(const char *op, const float *x, int64_t n, double *out) {
    int64_t nb = (n + SUM_BLOCK - 1) / SUM_BLOCK;
    if (nb <= 1) { *out = n ? tl_sum_f32_block(x, n) : 0.0; return TL_OK; }
    double *part = (double *)malloc((size_t)nb * sizeof(double));
    if (!part) return tl_fail(TL_E_OOM, "%s: out of host memory for %lld partial sums", op, (long long)nb);
#pragma omp parallel for schedule(static) if (nb > 2)
    for (int64_t b = 0; b < nb; b++) {
        int64_t lo = b * SUM_BLOCK, len = n - lo < SUM_BLOCK ? n - lo : SUM_BLOCK;
        part[b] = tl_sum_f32_block(x + lo, len);
    }
    double s = 0.0;
    for (int64_t b = 0; b < nb; b++) s += part[b];
    free(part);
    *out = s;
    return TL_OK;
}

int tl_sum(tl_buf x, tl_buf y, int64_t n) {
    TL_CHECK("sum", x, n); TL_CHECK("sum", y, 1);
    double s = 0.0;
    TL_TRY(sum_fixed("sum", x->data, n, &s));
    y->data[0] = (float)s;
    return TL_OK;
}
