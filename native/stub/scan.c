/* scan.c (stub): the diagonal selective scan h_t = a_t * h_{t-1} + b_t * x_t and its backward.
 *
 * Layouts: x, h, g are (batch, steps, width); h0 and dh0 are (batch, width). A coefficient
 * (a or b) has a mode: 0 = (width,) fixed, 1 = (steps, width) shared by the batch, 2 =
 * (batch, steps, width). The recurrence runs in float32 (no FMA contraction), matching the
 * CUDA kernel bit for bit; coefficient gradients accumulate in double, samples in increasing
 * order and time in decreasing order, independent of the thread count.
 */
#include <stdlib.h>
#include <string.h>
#include "stub.h"
#include "entry/scan_kernels.h"

static inline int64_t coef_len(int64_t mode, int64_t batch, int64_t steps, int64_t width) {
    return mode == 0 ? width : mode == 1 ? steps * width : batch * steps * width;
}

/* offset of (sample bi, step t, channel 0) in a coefficient of the given mode */
static inline int64_t coef_row(int64_t mode, int64_t bi, int64_t t, int64_t steps, int64_t width) {
    return mode == 0 ? 0 : mode == 1 ? t * width : (bi * steps + t) * width;
}

int tlk_selective_scan(const char *op, tl_buf a, tl_buf b, tl_buf x, tl_buf h0, tl_buf y, int64_t batch, int64_t steps,
                      int64_t width, int64_t a_mode, int64_t b_mode) {
    const float *A = a->data, *B = b->data, *X = x->data, *H0 = h0->data;
    float *Y = y->data;
#pragma omp parallel for schedule(static) if (batch > 1 && batch * steps * width > TL_PAR_MIN)
    for (int64_t bi = 0; bi < batch; bi++)
        for (int64_t t = 0; t < steps; t++) {
            const float *at = A + coef_row(a_mode, bi, t, steps, width);
            const float *bt = B + coef_row(b_mode, bi, t, steps, width);
            const float *xt = X + (bi * steps + t) * width;
            const float *hp = t ? Y + (bi * steps + t - 1) * width : H0 + bi * width;
            float *ht = Y + (bi * steps + t) * width;
            for (int64_t j = 0; j < width; j++) {
                float ah = at[j] * hp[j];
                float bx = bt[j] * xt[j];
                ht[j] = ah + bx;
            }
        }
    return TL_OK;
}

/* Channels are independent: each OpenMP chunk of channels runs samples in increasing order and
 * time in decreasing order, carrying g_{t+1} in `gnext`. */
int tlk_selective_scan_backward(const char *op, tl_buf a, tl_buf b, tl_buf x, tl_buf h0, tl_buf h, tl_buf g, tl_buf da,
                               tl_buf db, tl_buf dx, tl_buf dh0, int64_t batch, int64_t steps,
                               int64_t width, int64_t a_mode, int64_t b_mode) {
    int64_t na = coef_len(a_mode, batch, steps, width), nb = coef_len(b_mode, batch, steps, width);
    int64_t nx = batch * steps * width;
    if (batch == 0 || width == 0 || steps == 0) {
        /* nothing flows: coefficient and state gradients are zero */
        if (na) memset(da->data, 0, sizeof(float) * (size_t)na);
        if (nb) memset(db->data, 0, sizeof(float) * (size_t)nb);
        if (batch > 0 && width > 0) memset(dh0->data, 0, sizeof(float) * (size_t)(batch * width));
        return TL_OK;
    }
    double *acc = calloc((size_t)(na + nb + width), sizeof(double));
    if (!acc) return tl_fail(TL_E_OOM, "%s: cannot allocate %lld accumulators", op, (long long)(na + nb));
    double *accA = acc, *accB = acc + na;
    float *gnext = malloc(sizeof(float) * (size_t)width);
    if (!gnext) {
        free(acc);
        return tl_fail(TL_E_OOM, "%s: cannot allocate a state row of %lld", op, (long long)width);
    }
    const float *A = a->data, *B = b->data, *X = x->data, *H0 = h0->data, *H = h->data, *G = g->data;
    float *DX = dx->data, *DH0 = dh0->data;
    const int64_t CH = 64; /* channels per chunk */
    int64_t nchunks = (width + CH - 1) / CH;
#pragma omp parallel for schedule(static) if (nchunks > 1 && nx > TL_PAR_MIN)
    for (int64_t c0 = 0; c0 < width; c0 += CH) {
        int64_t c1 = c0 + CH < width ? c0 + CH : width;
        for (int64_t bi = 0; bi < batch; bi++) {
            for (int64_t t = steps - 1; t >= 0; t--) {
                const float *bt = B + coef_row(b_mode, bi, t, steps, width);
                const float *an = t + 1 < steps ? A + coef_row(a_mode, bi, t + 1, steps, width) : NULL;
                int64_t row = (bi * steps + t) * width;
                const float *hp = t ? H + row - width : H0 + bi * width;
                double *ca = accA + coef_row(a_mode, bi, t, steps, width);
                double *cb = accB + coef_row(b_mode, bi, t, steps, width);
                for (int64_t j = c0; j < c1; j++) {
                    float gt = G[row + j];
                    if (an) {
                        float carry = an[j] * gnext[j];
                        gt = gt + carry;
                    }
                    gnext[j] = gt;
                    ca[j] += (double)gt * (double)hp[j];
                    cb[j] += (double)gt * (double)X[row + j];
                    DX[row + j] = gt * bt[j];
                }
            }
            for (int64_t j = c0; j < c1; j++) DH0[bi * width + j] = A[coef_row(a_mode, bi, 0, steps, width) + j] * gnext[j];
        }
    }
    for (int64_t i = 0; i < na; i++) da->data[i] = (float)accA[i];
    for (int64_t i = 0; i < nb; i++) db->data[i] = (float)accB[i];
    free(gnext);
    free(acc);
    return TL_OK;
}
