/* scan.c (stub): the diagonal selective scan h_t = a_t * h_{t-1} + b_t * x_t and its backward.
 *
 * Layouts: x, h, g are (batch, steps, width); h0 and dh0 are (batch, width). A coefficient
 * (a or b) has a mode: 0 = (width,) fixed, 1 = (steps, width) shared by the batch, 2 =
 * (batch, steps, width). The recurrence runs sequentially in time in float32 with two rounded
 * products and one rounded sum, h_t = tlm_add(tlm_mul(a_t, h_{t-1}), tlm_mul(b_t, x_t)) (no
 * FMA), and the backward carry likewise g_t = tlm_add(dY_t, tlm_mul(a_{t+1}, g_{t+1})).
 * Coefficient gradients take exact float64 products g_t h_{t-1} and g_t x_t and sum them in
 * float64 in one stated order: per sample over time in decreasing order from 0 (for (D,)
 * coefficients), then over samples in increasing order from 0, rounded to float32 once. CUDA
 * (cuda/scan.cu) runs the same operations in the same order, so the two give the same bits in
 * every mode, independent of the thread count. The forward also keeps the state entering each
 * chunk of TL_SCAN_CHUNK steps (hc); the backward recomputes the states chunk by chunk from it
 * with the same operations (so the same bits) instead of reading a saved copy of every state,
 * and writes dx over its cotangent g.
 */
#include <stdlib.h>
#include <string.h>
#include "stub.h"
#include "formulas/scan.h"
#include "generated/scan_kernels.h"

int tlk_selective_scan(const char *op, tl_buf a, tl_buf b, tl_buf x, tl_buf h0, tl_buf y, tl_buf hc, int64_t batch,
                      int64_t steps, int64_t width, int64_t a_mode, int64_t b_mode, int64_t chunks) {
    TL_TRY(tl_scan_check_chunks(op, steps, chunks));
    const float *A = a->data, *B = b->data, *X = x->data, *H0 = h0->data;
    float *Y = y->data, *HC = hc->data;
#pragma omp parallel for schedule(static) if (batch > 1 && batch * steps * width > TL_PAR_MIN)
    for (int64_t bi = 0; bi < batch; bi++)
        for (int64_t t = 0; t < steps; t++) {
            const float *at = A + tlf_scan_coef_row(a_mode, bi, t, steps, width);
            const float *bt = B + tlf_scan_coef_row(b_mode, bi, t, steps, width);
            const float *xt = X + (bi * steps + t) * width;
            const float *hp = t ? Y + (bi * steps + t - 1) * width : H0 + bi * width;
            float *ht = Y + (bi * steps + t) * width;
            if (t % TL_SCAN_CHUNK == 0) /* the state entering this chunk */
                memcpy(HC + (bi * chunks + t / TL_SCAN_CHUNK) * width, hp, sizeof(float) * (size_t)width);
            for (int64_t j = 0; j < width; j++) ht[j] = tlf_scan_step(at[j], hp[j], bt[j], xt[j]);
        }
    return TL_OK;
}

/* Channels are independent: each OpenMP chunk of channels runs samples in increasing order and
 * time in decreasing order, carrying g_{t+1} in `gnext`. Time runs chunk by chunk: the chunk's
 * states are first recomputed from hc (the forward's very operations, so the same bits), then
 * walked backwards. dx_t is written over g_t once g_t is read. A (D,) coefficient's gradient is
 * first summed per sample (sa, sb), then added to the total in sample order; a (T, D) one is
 * summed over samples in float64 (accA, accB); a per-sample (B, T, D) one is its own product
 * rounded once (see the file comment). */
int tlk_selective_scan_backward(const char *op, tl_buf a, tl_buf b, tl_buf x, tl_buf h0, tl_buf hc, tl_buf g,
                               tl_buf da, tl_buf db, tl_buf dh0, int64_t batch, int64_t steps, int64_t width,
                               int64_t a_mode, int64_t b_mode, int64_t chunks) {
    int64_t na = tlf_scan_coef_len(a_mode, batch, steps, width);
    int64_t nb = tlf_scan_coef_len(b_mode, batch, steps, width);
    int64_t nx = batch * steps * width;
    if (batch == 0 || width == 0 || steps == 0) {
        /* nothing flows: coefficient and state gradients are zero */
        if (na) memset(da->data, 0, sizeof(float) * (size_t)na);
        if (nb) memset(db->data, 0, sizeof(float) * (size_t)nb);
        if (batch > 0 && width > 0) memset(dh0->data, 0, sizeof(float) * (size_t)(batch * width));
        return TL_OK;
    }
    TL_TRY(tl_scan_check_chunks(op, steps, chunks));
    /* float64 sums across samples for (D,) and (T, D) coefficients */
    int64_t nacc_a = a_mode == 2 ? 0 : na, nacc_b = b_mode == 2 ? 0 : nb;
    double *acc = calloc((size_t)(nacc_a + nacc_b + 1), sizeof(double));
    if (!acc) return tl_fail(TL_E_OOM, "%s: cannot allocate %lld accumulators", op, (long long)(nacc_a + nacc_b));
    double *accA = acc, *accB = acc + nacc_a;
    float *gnext = malloc(sizeof(float) * (size_t)width);
    if (!gnext) {
        free(acc);
        return tl_fail(TL_E_OOM, "%s: cannot allocate a state row of %lld", op, (long long)width);
    }
    const float *A = a->data, *B = b->data, *X = x->data, *HC = hc->data;
    float *G = g->data, *DA = da->data, *DB = db->data, *DH0 = dh0->data;
    enum { CH = 64 }; /* channels per chunk (the size of sa, sb and a state row of hs) */
    int64_t nchunks = (width + CH - 1) / CH;
#pragma omp parallel for schedule(static) if (nchunks > 1 && nx > TL_PAR_MIN)
    for (int64_t c0 = 0; c0 < width; c0 += CH) {
        int64_t c1 = c0 + CH < width ? c0 + CH : width;
        double sa[CH], sb[CH];          /* per-sample sums over time for (D,) coefficients */
        float hs[TL_SCAN_CHUNK + 1][CH]; /* the states entering and leaving each step of a chunk */
        for (int64_t bi = 0; bi < batch; bi++) {
            for (int64_t j = 0; j < c1 - c0; j++) { sa[j] = 0.0; sb[j] = 0.0; }
            for (int64_t q = chunks - 1; q >= 0; q--) {
                int64_t t0 = q * TL_SCAN_CHUNK;
                int64_t t1 = t0 + TL_SCAN_CHUNK < steps ? t0 + TL_SCAN_CHUNK : steps;
                const float *hq = HC + (bi * chunks + q) * width;
                for (int64_t j = c0; j < c1; j++) hs[0][j - c0] = hq[j];
                for (int64_t t = t0; t < t1; t++) {
                    const float *at = A + tlf_scan_coef_row(a_mode, bi, t, steps, width);
                    const float *bt = B + tlf_scan_coef_row(b_mode, bi, t, steps, width);
                    const float *xt = X + (bi * steps + t) * width;
                    const float *hp = hs[t - t0];
                    float *ht = hs[t - t0 + 1];
                    for (int64_t j = c0; j < c1; j++)
                        ht[j - c0] = tlf_scan_step(at[j], hp[j - c0], bt[j], xt[j]);
                }
                for (int64_t t = t1 - 1; t >= t0; t--) {
                    const float *bt = B + tlf_scan_coef_row(b_mode, bi, t, steps, width);
                    const float *an = t + 1 < steps ? A + tlf_scan_coef_row(a_mode, bi, t + 1, steps, width) : NULL;
                    int64_t row = (bi * steps + t) * width;
                    const float *hp = hs[t - t0];
                    double *ca = accA + tlf_scan_coef_row(a_mode, bi, t, steps, width);
                    double *cb = accB + tlf_scan_coef_row(b_mode, bi, t, steps, width);
                    for (int64_t j = c0; j < c1; j++) {
                        float gt = G[row + j];
                        if (an) gt = tlf_scan_carry(gt, an[j], gnext[j]);
                        gnext[j] = gt;
                        double pa = (double)gt * (double)hp[j - c0], pb = (double)gt * (double)X[row + j];
                        if (a_mode == 0) sa[j - c0] += pa;
                        else if (a_mode == 1) ca[j] += pa;
                        else DA[row + j] = (float)(0.0 + pa);
                        if (b_mode == 0) sb[j - c0] += pb;
                        else if (b_mode == 1) cb[j] += pb;
                        else DB[row + j] = (float)(0.0 + pb);
                        G[row + j] = tlm_mul(gt, bt[j]); /* dx_t */
                    }
                }
            }
            for (int64_t j = c0; j < c1; j++) {
                if (a_mode == 0) accA[j] += sa[j - c0];
                if (b_mode == 0) accB[j] += sb[j - c0];
            }
            for (int64_t j = c0; j < c1; j++)
                DH0[bi * width + j] = tlm_mul(A[tlf_scan_coef_row(a_mode, bi, 0, steps, width) + j], gnext[j]);
        }
    }
    for (int64_t i = 0; i < nacc_a; i++) DA[i] = (float)accA[i];
    for (int64_t i = 0; i < nacc_b; i++) DB[i] = (float)accB[i];
    free(gnext);
    free(acc);
    return TL_OK;
}
