/* softmax.c (stub): softmax, log_softmax, masked softmax over the last axis and their
 * backward kernels. Leading axes are folded into rows; rows run in parallel (independent
 * outputs), and each row is computed in a fixed order, so results do not depend on threads.
 * Stable forms: exp(x - rowmax); log_softmax directly as (x - max) - log(sum exp(x - max)).
 *
 * The per-element arithmetic is native/common/formulas/normalize.h (shared with CUDA), on
 * tl_math.h in every mode: the row max in index order (tlm_max_first), tlm_exp, the row sum
 * and a division (tlm_log for log_softmax). Only the sum's order depends on the mode: rule 4
 * in exact mode, else 8 interleaved lanes (tl_sum_f32_block), which is cheaper. NaN
 * propagates: a NaN in a row (or a +inf, whose exp(inf - inf) is NaN) makes the row's sum
 * NaN, so its outputs. */
#include <math.h>
#include "stub.h"
#include "formulas/normalize.h"
#include "generated/softmax_kernels.h"

static inline float row_max(const float *x, int64_t c) {
    float m = x[0];
    for (int64_t j = 1; j < c; j++) m = tlm_max_first(m, x[j]);
    return m;
}

/* the row sum: rule 4 in exact mode, else the fixed 8-lane order of tl_sum_f32_block */
static inline float row_sum(const float *x, int64_t c, int exact) {
    return exact ? tl_rule4_sum(x, c) : (float)tl_sum_f32_block(x, c);
}

/* a row's exps: yr[j] = exp(xr[j] - max) into yr; returns their row sum (the row max in *m) */
static inline float row_exps(const float *xr, float *yr, int64_t c, int exact, float *m) {
    *m = row_max(xr, c);
    for (int64_t j = 0; j < c; j++) yr[j] = tlf_softmax_exp(xr[j], *m);
    return row_sum(yr, c, exact);
}

/* Both forwards, row by row: softmax y = exps / sum; log_softmax y = (x - max) - log(sum) */
static int forward_rows(tl_buf x, tl_buf y, int64_t rows, int64_t cols, int log_form) {
    const int64_t n = rows * cols;
    const float *X = x->data; float *Y = y->data;
    const int exact = tl_exact();
#pragma omp parallel for schedule(static) if (n > TL_PAR_MIN)
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = X + r * cols; float *yr = Y + r * cols;
        float m, s = row_exps(xr, yr, cols, exact, &m);   /* log_softmax: yr is scratch */
        if (log_form) {
            float ls = tlm_log(s);
            for (int64_t j = 0; j < cols; j++) yr[j] = tlf_log_softmax(xr[j], m, ls);
        } else {
            for (int64_t j = 0; j < cols; j++) yr[j] = tlf_softmax_div(yr[j], s);
        }
    }
    return TL_OK;
}

int tlk_softmax(const char *op, tl_buf x, tl_buf y, int64_t rows, int64_t cols) {
    return forward_rows(x, y, rows, cols, 0);
}

int tlk_log_softmax(const char *op, tl_buf x, tl_buf y, int64_t rows, int64_t cols) {
    return forward_rows(x, y, rows, cols, 1);
}

/* Both backwards, row by row. softmax: dx = y (g - s), s = rowsum(g y) over the rounded
 * products; log_softmax: dx = g - exp(y) s, s = rowsum(g). */
static int backward_rows(tl_buf y, tl_buf g, tl_buf dx, int64_t rows, int64_t cols, int log_form) {
    const int64_t n = rows * cols;
    const float *Yv = y->data, *G = g->data; float *D = dx->data;
    const int exact = tl_exact();
#pragma omp parallel for schedule(static) if (n > TL_PAR_MIN)
    for (int64_t r = 0; r < rows; r++) {
        const float *yr = Yv + r * cols, *gr = G + r * cols; float *dr = D + r * cols;
        if (log_form) {
            float s = row_sum(gr, cols, exact);
            for (int64_t j = 0; j < cols; j++) dr[j] = tlf_log_softmax_backward(yr[j], gr[j], s);
        } else {
            for (int64_t j = 0; j < cols; j++) dr[j] = tlm_mul(gr[j], yr[j]);
            float s = row_sum(dr, cols, exact);
            for (int64_t j = 0; j < cols; j++) dr[j] = tlf_softmax_backward(yr[j], gr[j], s);
        }
    }
    return TL_OK;
}

int tlk_softmax_backward(const char *op, tl_buf y, tl_buf g, tl_buf dx, int64_t rows, int64_t cols) {
    return backward_rows(y, g, dx, rows, cols, 0);
}

int tlk_log_softmax_backward(const char *op, tl_buf y, tl_buf g, tl_buf dx, int64_t rows, int64_t cols) {
    return backward_rows(y, g, dx, rows, cols, 1);
}

/* mask: 0/1 floats of mask_rows x cols (row r of x reads mask row r % mask_rows), or NULL with
 * mask_rows == 0 for no mask. Blocked entries are exactly 0. A row with nothing allowed, or
 * whose allowed entries are all -inf, is 0; otherwise NaN propagates to the allowed entries. */
int tlk_masked_softmax(const char *op, tl_buf x, tl_buf mask, tl_buf y, int64_t rows, int64_t cols, int64_t mask_rows) {
    const int64_t n = rows * cols;
    const float *X = x->data, *M = mask_rows ? mask->data : NULL; float *Y = y->data;
    const int exact = tl_exact();
    const float ninf = -INFINITY;
#pragma omp parallel for schedule(static) if (n > TL_PAR_MIN)
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = X + r * cols; float *yr = Y + r * cols;
        const float *mr = M ? M + (r % mask_rows) * cols : NULL;
        float m = ninf; int any = 0;
        for (int64_t j = 0; j < cols; j++)
            if (!mr || mr[j] != 0.0f) { m = any ? tlm_max_first(m, xr[j]) : xr[j]; any = 1; }
        if (!any || m == ninf) { /* 0, unless a NaN hides behind -inf entries */
            int nan = 0;
            for (int64_t j = 0; j < cols; j++) nan |= (!mr || mr[j] != 0.0f) && xr[j] != xr[j];
            for (int64_t j = 0; j < cols; j++) yr[j] = nan && (!mr || mr[j] != 0.0f) ? NAN : 0.0f;
            continue;
        }
        for (int64_t j = 0; j < cols; j++)
            yr[j] = (!mr || mr[j] != 0.0f) ? tlf_softmax_exp(xr[j], m) : 0.0f;
        float s = row_sum(yr, cols, exact);
        for (int64_t j = 0; j < cols; j++) /* blocked entries stay exactly 0, even for a NaN s */
            if (!mr || mr[j] != 0.0f) yr[j] = tlf_softmax_div(yr[j], s);
    }
    return TL_OK;
}
