/* fused.c (stub): fused kernels for transformer training.
 *
 * cross_entropy_rows: one row of logits at a time, over formulas/normalize.h (both modes; the
 * stub has one schedule): the row max in index order (tlm_max_first), s = rule-4 sum of
 * tlm_exp(x - max), ls = tlm_log(s), loss = (max - x[t]) + ls. Only max and ls are kept; the
 * backward rebuilds p = tlm_exp((x - max) - ls) (log_softmax's value, exponentiated) and writes
 * g * (p - [j == t]) in the same pass. A label outside [0, V) marks the row ignored: loss 0,
 * gradient 0. NaN propagates: a NaN (or +inf, as inf - inf) in a row makes its sum, max, loss and
 * gradient NaN.
 *
 * linear_gelu: linear's kernel into pre, then gelu's into y, so the bits are those of linear
 * followed by gelu in every mode; the backward is gelu_backward into a scratch, then linear's
 * three backward kernels on it. */
#include <math.h>
#include "stub.h"
#include "formulas/normalize.h"
#include <stdlib.h>
#include "generated/fused_kernels.h"
#include "generated/elementwise_kernels.h"
#include "generated/linalg_kernels.h"

static inline int ce_label(const int64_t *lab, int64_t r, int64_t cols) {
    return lab[r] >= 0 && lab[r] < cols;
}

/* one row's statistics; e is a scratch of cols floats for the exps (summed by rule 4 after a
 * loop the compiler vectorises, the same bits as adding them one by one) */
static void ce_row(const float *xr, int64_t cols, const int64_t *lab, int64_t r, float *e,
                   float *loss, float *rowmax, float *logsum) {
    float m = xr[0];
    for (int64_t j = 1; j < cols; j++) m = tlm_max_first(m, xr[j]);
    for (int64_t j = 0; j < cols; j++) e[j] = tlf_softmax_exp(xr[j], m);
    float sum = tl_rule4_sum(e, cols), ls = tlm_log(sum);
    *rowmax = sum != sum ? sum : m; /* a NaN row stores NaN, whichever max the order found */
    *logsum = ls;
    *loss = ce_label(lab, r, cols) ? tlf_ce_loss(m, xr[lab[r]], ls) : 0.0f;
}

int tlk_cross_entropy_rows(const char *op, tl_buf x, tl_buf loss, tl_buf rowmax, tl_buf logsum,
                           int64_t rows, int64_t cols, const int64_t *lab, int64_t lab_len) {
    (void)lab_len;
    const float *X = x->data;
    float *L = loss->data, *M = rowmax->data, *LS = logsum->data;
    int failed = 0;
#pragma omp parallel if (rows * cols > TL_PAR_MIN)
    {
        float *e = (float *)malloc((size_t)cols * sizeof(float));
        if (!e) {
#pragma omp atomic write
            failed = 1;
        }
#pragma omp for schedule(static)
        for (int64_t r = 0; r < rows; r++)
            if (e) ce_row(X + r * cols, cols, lab, r, e, L + r, M + r, LS + r);
        free(e);
    }
    if (failed) return tl_fail(TL_E_OOM, "%s: out of host memory for a row of %lld floats", op, (long long)cols);
    return TL_OK;
}

int tlk_cross_entropy_rows_backward(const char *op, tl_buf g, tl_buf x, tl_buf rowmax, tl_buf logsum,
                                    tl_buf dx, int64_t rows, int64_t cols, const int64_t *lab,
                                    int64_t lab_len) {
    (void)op; (void)lab_len;
    const float *G = g->data, *X = x->data, *M = rowmax->data, *LS = logsum->data;
    float *D = dx->data;
#pragma omp parallel for schedule(static) if (rows * cols > TL_PAR_MIN)
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = X + r * cols;
        float *dr = D + r * cols;
        if (!ce_label(lab, r, cols)) {
            for (int64_t j = 0; j < cols; j++) dr[j] = 0.0f;
            continue;
        }
        const float m = M[r], ls = LS[r], gr = G[r];
        const int64_t t = lab[r];
        for (int64_t j = 0; j < cols; j++) dr[j] = tlf_ce_grad(xr[j], m, ls, gr, 0);
        dr[t] = tlf_ce_grad(xr[t], m, ls, gr, 1);
    }
    return TL_OK;
}

int tlk_linear_gelu(const char *op, tl_buf w, tl_buf b, tl_buf x, tl_buf y, tl_buf pre,
                    int64_t rows, int64_t out_dim, int64_t in_dim) {
    TL_TRY(tlk_linear(op, w, b, x, pre, rows, out_dim, in_dim));
    return tlk_gelu(op, pre, y, rows * out_dim);
}

int tlk_linear_gelu_backward(const char *op, tl_buf g, tl_buf w, tl_buf x, tl_buf pre, tl_buf dw,
                             tl_buf db, tl_buf dx, int64_t rows, int64_t out_dim, int64_t in_dim) {
    const int64_t n = rows * out_dim;
    float *scratch = n ? (float *)malloc((size_t)n * sizeof(float)) : NULL;
    if (n && !scratch) return tl_fail(TL_E_OOM, "%s: out of host memory for %lld floats", op, (long long)n);
    struct tl_buffer dpre = {scratch, n, 1, 0};
    int rc = n ? tlk_gelu_backward(op, pre, g, &dpre, n) : TL_OK;
    if (rc == TL_OK) rc = tlk_linear_backward_w(op, &dpre, x, dw, rows, out_dim, in_dim);
    if (rc == TL_OK) rc = tlk_linear_backward_b(op, &dpre, db, rows, out_dim);
    if (rc == TL_OK) rc = tlk_linear_backward_x(op, &dpre, w, x, dx, rows, out_dim, in_dim);
    free(scratch);
    return rc;
}

int tlk_linear_residual(const char *op, tl_buf w, tl_buf b, tl_buf x, tl_buf r, tl_buf y,
                        int64_t rows, int64_t out_dim, int64_t in_dim) {
    TL_TRY(tlk_linear(op, w, b, x, y, rows, out_dim, in_dim));
    return tlk_add(op, y, r, y, rows * out_dim);
}
