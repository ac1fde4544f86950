/* softmax.c (stub): softmax, log_softmax, masked softmax over the last axis and their
 * backward kernels. Leading axes are folded into rows; rows run in parallel (independent
 * outputs), and each row is computed in a fixed order, so results do not depend on threads.
 * Stable forms: exp(x - rowmax); log_softmax directly as (x - max) - log(sum exp(x - max)). */
#include <math.h>
#include "stub.h"
#include "entry/softmax_kernels.h"

static inline float row_max(const float *x, int64_t c) {
    float m = x[0];
    for (int64_t j = 1; j < c; j++) m = x[j] > m ? x[j] : m;
    return m;
}

/* sum of a row in the fixed 8-lane order of tl_sum_f32_block, in float */
static inline float row_sum(const float *x, int64_t c) { return (float)tl_sum_f32_block(x, c); }

int tlk_softmax(const char *op, tl_buf x, tl_buf y, int64_t rows, int64_t cols) {
    const int64_t n = rows * cols;
    const float *X = x->data; float *Y = y->data;
#pragma omp parallel for schedule(static) if (n > TL_PAR_MIN)
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = X + r * cols; float *yr = Y + r * cols;
        float m = row_max(xr, cols);
        for (int64_t j = 0; j < cols; j++) yr[j] = tl_expf(xr[j] - m);
        float inv = 1.0f / row_sum(yr, cols);
        for (int64_t j = 0; j < cols; j++) yr[j] *= inv;
    }
    return TL_OK;
}

int tlk_log_softmax(const char *op, tl_buf x, tl_buf y, int64_t rows, int64_t cols) {
    const int64_t n = rows * cols;
    const float *X = x->data; float *Y = y->data;
#pragma omp parallel for schedule(static) if (n > TL_PAR_MIN)
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = X + r * cols; float *yr = Y + r * cols;
        float m = row_max(xr, cols);
        for (int64_t j = 0; j < cols; j++) yr[j] = tl_expf(xr[j] - m); /* scratch: the exps */
        float ls = logf(row_sum(yr, cols));
        for (int64_t j = 0; j < cols; j++) yr[j] = (xr[j] - m) - ls;
    }
    return TL_OK;
}

int tlk_softmax_backward(const char *op, tl_buf y, tl_buf g, tl_buf dx, int64_t rows, int64_t cols) {
    const int64_t n = rows * cols;
    const float *Yv = y->data, *G = g->data; float *D = dx->data;
#pragma omp parallel for schedule(static) if (n > TL_PAR_MIN)
    for (int64_t r = 0; r < rows; r++) {
        const float *yr = Yv + r * cols, *gr = G + r * cols; float *dr = D + r * cols;
        for (int64_t j = 0; j < cols; j++) dr[j] = gr[j] * yr[j];
        float s = row_sum(dr, cols);
        for (int64_t j = 0; j < cols; j++) dr[j] = yr[j] * (gr[j] - s);
    }
    return TL_OK;
}

int tlk_log_softmax_backward(const char *op, tl_buf y, tl_buf g, tl_buf dx, int64_t rows, int64_t cols) {
    const int64_t n = rows * cols;
    const float *Yv = y->data, *G = g->data; float *D = dx->data;
#pragma omp parallel for schedule(static) if (n > TL_PAR_MIN)
    for (int64_t r = 0; r < rows; r++) {
        const float *yr = Yv + r * cols, *gr = G + r * cols; float *dr = D + r * cols;
        float s = row_sum(gr, cols);
        for (int64_t j = 0; j < cols; j++) dr[j] = gr[j] - tl_expf(yr[j]) * s;
    }
    return TL_OK;
}

/* mask: 0/1 floats of mask_rows x cols (row r of x reads mask row r % mask_rows), or NULL with
 * mask_rows == 0 for no mask. Blocked entries are exactly 0; a row with nothing allowed is 0; a
 * row with an allowed NaN or +inf is all NaN. */
int tlk_masked_softmax(const char *op, tl_buf x, tl_buf mask, tl_buf y, int64_t rows, int64_t cols, int64_t mask_rows) {
    const int64_t n = rows * cols;
    const float *X = x->data, *M = mask_rows ? mask->data : NULL; float *Y = y->data;
#pragma omp parallel for schedule(static) if (n > TL_PAR_MIN)
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = X + r * cols; float *yr = Y + r * cols;
        const float *mr = M ? M + (r % mask_rows) * cols : NULL;
        /* max over the allowed entries; an allowed NaN poisons it (and so the whole row) */
        float m = -INFINITY;
        for (int64_t j = 0; j < cols; j++)
            if (!mr || mr[j] != 0.0f) m = (xr[j] > m || xr[j] != xr[j]) ? xr[j] : m;
        /* nothing allowed (or only -inf allowed): the row is 0. NaN and +inf go on and give a
         * NaN row (inf - inf), as PyTorch's softmax does; blocked entries too (0 * NaN) */
        if (m == -INFINITY) { for (int64_t j = 0; j < cols; j++) yr[j] = 0.0f; continue; }
        for (int64_t j = 0; j < cols; j++)
            yr[j] = (!mr || mr[j] != 0.0f) ? tl_expf(xr[j] - m) : 0.0f;
        float s = row_sum(yr, cols);
        float inv = 1.0f / s;
        for (int64_t j = 0; j < cols; j++) yr[j] *= inv;
    }
    return TL_OK;
}
