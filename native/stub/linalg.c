/* linalg.c (stub): GEMM and the ops built on it (matmul, bmm, linear, their VJPs), MSE loss.
 *
 * One GEMM routine serves everything: C = op(A) op(B) (+ C when accumulating). Transposed
 * operands are first copied to row-major form; then 8 x 16 register tiles of C (OpenMP over row
 * tiles) stream through k blocks, with a plain i-k-j loop for edges. Every C element accumulates its products in increasing k order whatever
 * the blocking or thread count, so results are bit-identical across machines of any size. */
#include <stdlib.h>
#include <string.h>
#include "stub.h"

#define KB 512  /* k block: the B rows one register tile streams through per pass */

static float *transposed(const float *src, int64_t r, int64_t c) {
    /* src (r, c) row-major -> (c, r) row-major */
    float *t = (float *)malloc((size_t)(r * c > 0 ? r * c : 1) * sizeof(float));
    if (!t) return NULL;
    for (int64_t i = 0; i < r; i++)
        for (int64_t j = 0; j < c; j++) t[j * r + i] = src[i * c + j];
    return t;
}

/* Register tile: MR rows x NR columns of C live in local accumulators across a k block. */
#define MR 8
#define NR 16

static inline void tile(const float *A, const float *B, float *C, int64_t n, int64_t p,
                        int64_t i0, int64_t j0, int64_t k0, int64_t k1) {
    float acc[MR][NR];
    for (int r = 0; r < MR; r++)
        for (int j = 0; j < NR; j++) acc[r][j] = C[(i0 + r) * p + j0 + j];
    for (int64_t k = k0; k < k1; k++) {
        const float *b = B + k * p + j0;
        for (int r = 0; r < MR; r++) {
            float av = A[(i0 + r) * n + k];
#pragma omp simd
            for (int j = 0; j < NR; j++) acc[r][j] = acc[r][j] + av * b[j];
        }
    }
    for (int r = 0; r < MR; r++)
        for (int j = 0; j < NR; j++) C[(i0 + r) * p + j0 + j] = acc[r][j];
}

/* C (m, p) = A (m, n) @ B (n, p), all row-major; C is overwritten unless accumulate.
 * Full MR x NR tiles use the register tile; edges use the plain i-k-j loop. Both add the
 * products of one C element in increasing k order, so the split does not change any bit. */
static void gemm_nn(const float *A, const float *B, float *C, int64_t m, int64_t n, int64_t p,
                    int accumulate) {
    if (!accumulate) memset(C, 0, (size_t)(m * p) * sizeof(float));
    int64_t mt = m / MR * MR, pt = p / NR * NR;
    for (int64_t k0 = 0; k0 < n; k0 += KB) {
        int64_t k1 = k0 + KB < n ? k0 + KB : n;
#pragma omp parallel for schedule(static) if (m * (k1 - k0) * p > TL_PAR_MIN)
        for (int64_t i = 0; i < m; i += MR) {
            if (i < mt)
                for (int64_t j = 0; j < pt; j += NR) tile(A, B, C, n, p, i, j, k0, k1);
            int64_t ie = i + MR < m ? i + MR : m;
            for (int64_t ii = i; ii < ie; ii++) {
                float *c = C + ii * p;
                const float *a = A + ii * n;
                int64_t js = ii < mt ? pt : 0;
                for (int64_t k = k0; k < k1; k++) {
                    float av = a[k];
                    const float *b = B + k * p;
                    for (int64_t j = js; j < p; j++) c[j] = c[j] + av * b[j];
                }
            }
        }
    }
}

/* batched C = op(A) op(B) with the stored layouts described in ops.yaml (matmul_t) */
static int gemm(const char *op, const float *A, const float *B, float *C, int64_t batch, int64_t m,
                int64_t n, int64_t p, int ta, int tb, int accumulate) {
    for (int64_t s = 0; s < batch; s++) {
        const float *a = A + s * m * n, *b = B + s * n * p;
        float *ta_buf = NULL, *tb_buf = NULL;
        if (ta) { ta_buf = transposed(a, n, m); a = ta_buf; }
        if (tb) { tb_buf = transposed(b, p, n); b = tb_buf; }
        if ((ta && !ta_buf) || (tb && !tb_buf)) {
            free(ta_buf); free(tb_buf);
            return tl_fail(TL_E_OOM, "%s: out of host memory for a transposed operand", op);
        }
        gemm_nn(a, b, C + s * m * p, m, n, p, accumulate);
        free(ta_buf); free(tb_buf);
    }
    return TL_OK;
}

int tl_matmul_t(tl_buf a, tl_buf b, tl_buf y, int64_t batch, int64_t m, int64_t n, int64_t p,
                int64_t ta, int64_t tb) {
    if ((ta != 0 && ta != 1) || (tb != 0 && tb != 1))
        return tl_fail(TL_E_ARG, "matmul_t: trans flags must be 0 or 1, got %lld and %lld",
                       (long long)ta, (long long)tb);
    TL_CHECK("matmul_t", a, batch * m * n); TL_CHECK("matmul_t", b, batch * n * p);
    TL_CHECK("matmul_t", y, batch * m * p);
    return gemm("matmul_t", a->data, b->data, y->data, batch, m, n, p, (int)ta, (int)tb, 0);
}

int tl_matmul(tl_buf a, tl_buf b, tl_buf y, int64_t m, int64_t n, int64_t p) {
    TL_CHECK("matmul", a, m * n); TL_CHECK("matmul", b, n * p); TL_CHECK("matmul", y, m * p);
    return gemm("matmul", a->data, b->data, y->data, 1, m, n, p, 0, 0, 0);
}

int tl_bmm(tl_buf a, tl_buf b, tl_buf y, int64_t batch, int64_t m, int64_t n, int64_t p) {
    TL_CHECK("bmm", a, batch * m * n); TL_CHECK("bmm", b, batch * n * p);
    TL_CHECK("bmm", y, batch * m * p);
    return gemm("bmm", a->data, b->data, y->data, batch, m, n, p, 0, 0, 0);
}

int tl_linear(tl_buf w, tl_buf b, tl_buf x, tl_buf y, int64_t rows, int64_t out_dim, int64_t in_dim) {
    TL_CHECK("linear", w, out_dim * in_dim); TL_CHECK("linear", b, out_dim);
    TL_CHECK("linear", x, rows * in_dim); TL_CHECK("linear", y, rows * out_dim);
    /* y = b (broadcast over rows), then y += x @ W^T */
    for (int64_t r = 0; r < rows; r++) memcpy(y->data + r * out_dim, b->data, (size_t)out_dim * sizeof(float));
    return gemm("linear", x->data, w->data, y->data, 1, rows, in_dim, out_dim, 0, 1, 1);
}

int tl_linear_backward_w(tl_buf g, tl_buf x, tl_buf dw, int64_t rows, int64_t out_dim, int64_t in_dim) {
    const char *op = "linear_backward_w";
    TL_CHECK(op, g, rows * out_dim); TL_CHECK(op, x, rows * in_dim); TL_CHECK(op, dw, out_dim * in_dim);
    /* dW (out, in) = g^T (out, rows) @ x (rows, in) */
    return gemm(op, g->data, x->data, dw->data, 1, out_dim, rows, in_dim, 1, 0, 0);
}

int tl_linear_backward_b(tl_buf g, tl_buf db, int64_t rows, int64_t out_dim) {
    TL_CHECK("linear_backward_b", g, rows * out_dim); TL_CHECK("linear_backward_b", db, out_dim);
    /* column sums of g, rows in increasing order */
    for (int64_t o = 0; o < out_dim; o++) db->data[o] = 0.0f;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t o = 0; o < out_dim; o++) db->data[o] += g->data[r * out_dim + o];
    return TL_OK;
}

int tl_linear_backward_x(tl_buf g, tl_buf w, tl_buf x, tl_buf dx, int64_t rows, int64_t out_dim, int64_t in_dim) {
    const char *op = "linear_backward_x";
    TL_CHECK(op, g, rows * out_dim); TL_CHECK(op, w, out_dim * in_dim); TL_CHECK(op, x, rows * in_dim);
    TL_CHECK(op, dx, rows * in_dim);
    /* dx (rows, in) = g (rows, out) @ W (out, in) */
    return gemm(op, g->data, w->data, dx->data, 1, rows, out_dim, in_dim, 0, 0, 0);
}

int tl_mse_loss(tl_buf yhat, tl_buf target, tl_buf y, int64_t n) {
    TL_CHECK("mse_loss", yhat, n); TL_CHECK("mse_loss", target, n); TL_CHECK("mse_loss", y, 1);
    if (n == 0) return tl_fail(TL_E_SHAPE, "mse_loss: expected at least one element, got 0");
    const float *a = yhat->data, *t = target->data;
    double s = 0.0;
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int64_t i = 0; i < n; i++) { float d = a[i] - t[i]; acc[i & 7] += d * d; }
    s = (double)(((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7])));
    y->data[0] = (float)s * (1.0f / (float)n);
    return TL_OK;
}

int tl_mse_loss_backward(tl_buf yhat, tl_buf target, tl_buf g, tl_buf dyhat, int64_t n) {
    const char *op = "mse_loss_backward";
    TL_CHECK(op, yhat, n); TL_CHECK(op, target, n); TL_CHECK(op, g, 1); TL_CHECK(op, dyhat, n);
    float scale = n ? g->data[0] * (2.0f / (float)n) : 0.0f;
    for (int64_t i = 0; i < n; i++) dyhat->data[i] = (yhat->data[i] - target->data[i]) * scale;
    return TL_OK;
}
