/* formulas/sort.h: the sort family's rules, written once for the stub (native/stub/sort.c) and
 * CUDA (native/cuda/sort.cu): the sort key of a float, the running-extreme rule, the chunked
 * order of running sums and products, and the cumprod backward step. Sorting and selecting do
 * no arithmetic; the running sums and products round every step in one stated order, so both
 * libraries give the same bits in every mode. */
#ifndef TL_FORMULAS_SORT_H
#define TL_FORMULAS_SORT_H

#include <stdint.h>
#include <math.h>
#include <string.h>
#include "tl_math.h"

/* running sums and products: sequential within chunks of this many entries; chunk c > 0 then
 * steps from its carry, the running value of the chunk totals before it. A row of at most
 * TL_CUM_CHUNK chunks sums its totals in order (one chain); a longer row takes the carries from
 * the running values of its totals in this same order, one level up (exact_version 6), so no
 * chain is longer than TL_CUM_CHUNK steps a level (README, cumsum) */
#define TL_CUM_CHUNK 256

/* An unsigned key whose order is PyTorch's sort order of floats: -inf < ... < -0 = +0 < ... <
 * inf < NaN (every NaN one key). `descending` flips it, so a stable ascending sort of the keys
 * is PyTorch's stable descending sort (NaN first, equal values in input order). */
TLM_HD uint32_t tlf_sort_key(float v, int64_t descending) {
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    if (v != v) u = 0x7fc00000u;          /* one NaN, above +inf */
    else if (v == 0.0f) u = 0u;           /* -0 sorts with +0 */
    u = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
    return descending ? ~u : u;
}

/* Does entry v take over the running maximum (kind 0) or minimum (kind 1) `best`? PyTorch's
 * cummax/cummin: a NaN always does; a number does when the extreme is not NaN and v >= best
 * (v <= best), so the last of equal values wins. */
TLM_HD int tlf_cumarg_takes(float v, float best, int64_t kind) {
    if (v != v) return 1;
    if (best != best) return 0;
    return kind == 0 ? v >= best : v <= best;
}

/* log(exp(a) + exp(b)): the larger plus log1p(exp(smaller - larger)), each step correctly
 * rounded; a NaN gives NaN, -inf is the identity, +inf absorbs */
TLM_HD float tlf_logaddexp(float a, float b) {
    if (a != a || b != b) return tlm_add(a, b);
    float hi = a > b ? a : b, lo = a > b ? b : a;
    if (lo == -INFINITY || hi == INFINITY) return hi;
    return tlm_add(hi, tlm_log1p(tlm_exp(tlm_sub(lo, hi))));
}

/* one step of a running sum (kind 0), product (kind 1) or log-sum-exp (kind 2) */
TLM_HD float tlf_cum_step(float acc, float v, int64_t kind) {
    return kind == 0 ? tlm_add(acc, v) : kind == 1 ? tlm_mul(acc, v) : tlf_logaddexp(acc, v);
}

/* cumprod backward carry S_j = g_j + x_{j+1} S_{j+1} */
TLM_HD float tlf_cumprod_carry(float g, float x_next, float s_next) {
    return tlm_add(g, tlm_mul(x_next, s_next));
}

/* a whole-number index in [0, n), or -1 (outside, or NaN) */
TLM_HD int64_t tlf_row_index(float v, int64_t n) {
    return (v >= 0.0f && v < (float)n) ? (int64_t)v : -1;
}

/* does torch's tril (upper 0) / triu (upper 1) keep entry (i, j) of a matrix? */
TLM_HD int tl_triangle_keeps(int64_t i, int64_t j, int64_t diagonal, int64_t upper) {
    return upper ? j - i >= diagonal : j - i <= diagonal;
}

#endif /* TL_FORMULAS_SORT_H */
