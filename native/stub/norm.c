/* norm.c (stub): layer_norm and batchnorm_channel_first, forward and fused backward.
 *
 * The arithmetic around the sums is native/common/formulas/normalize.h (shared with CUDA):
 * biased variance, eps inside the sqrt, mean and variance by multiplication with float32(1/N),
 * xhat = (x - mean) / std (a division), y = xhat*gamma+beta.
 *
 * Every sum follows rule 4 of tl_math.h in every mode (the sums were sequential chains before,
 * so the canonical order costs nothing): the mean's sum of x, then the variance's sum of the
 * rounded squares (x - mean)^2, in index order; layer_norm over a row, batchnorm over a
 * channel's elements sample by sample (n outer, positions inner). The backward sums the
 * rounded products the same way: S1 = sum dxhat, S2 = sum dxhat * xhat per row (channel), and
 * dgamma = sum g * xhat, dbeta = sum g per column over rows in row order (layer_norm).
 * CUDA's exact mode computes the same sums in the same order (native/cuda/norm.cu).
 */
#include <stdlib.h>
#include "stub.h"
#include "formulas/normalize.h"
#include "generated/norm_kernels.h"

int tlk_layer_norm(const char *op, tl_buf x, tl_buf gamma, tl_buf beta, tl_buf y, tl_buf xhat, tl_buf inv_std,
                  int64_t rows, int64_t cols, double eps) {
    const int64_t n = rows * cols;
    const float *X = x->data, *G = gamma->data, *B = beta->data;
    float *Y = y->data, *XH = xhat->data, *IS = inv_std->data;
    const float inv_cols = (float)(1.0 / (double)cols), e = (float)eps;
#pragma omp parallel for schedule(static) if (n > TL_PAR_MIN)
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = X + r * cols;
        float *yr = Y + r * cols, *hr = XH + r * cols;
        float mean = tlf_mean(tl_rule4_sum(xr, cols), inv_cols);
        for (int64_t j = 0; j < cols; j++) yr[j] = tlf_sqdev(xr[j], mean);
        float var = tlf_mean(tl_rule4_sum(yr, cols), inv_cols);   /* y holds the squares for now */
        float sd = tlf_norm_std(var, e);
        IS[r] = tlf_norm_inv(sd);
        for (int64_t j = 0; j < cols; j++) {
            float xh = tlf_norm_xhat(xr[j], mean, sd);
            hr[j] = xh;
            yr[j] = tlf_affine(xh, G[j], B[j]);
        }
    }
    return TL_OK;
}

int tlk_layer_norm_backward(const char *op, tl_buf g, tl_buf xhat, tl_buf inv_std, tl_buf gamma, tl_buf dx,
                           tl_buf dgamma, tl_buf dbeta, int64_t rows, int64_t cols) {
    const int64_t n = rows * cols;
    const float *GO = g->data, *XH = xhat->data, *IS = inv_std->data, *GA = gamma->data;
    float *DX = dx->data, *DG = dgamma->data, *DB = dbeta->data;
    const float fc = (float)cols, inv_cols = cols ? (float)(1.0 / (double)cols) : 0.0f;
    /* column sums first, with dx as the scratch for the products g * xhat */
#pragma omp parallel for schedule(static) if (n > TL_PAR_MIN)
    for (int64_t i = 0; i < n; i++) DX[i] = tlm_mul(GO[i], XH[i]);
    TL_TRY(tl_stub_axis_sum(op, DX, DG, 1, rows, cols));
    TL_TRY(tl_stub_axis_sum(op, GO, DB, 1, rows, cols));
#pragma omp parallel for schedule(static) if (n > TL_PAR_MIN)
    for (int64_t r = 0; r < rows; r++) {
        const float *gr = GO + r * cols, *xr = XH + r * cols;
        float *dr = DX + r * cols;
        for (int64_t j = 0; j < cols; j++) dr[j] = tlm_mul(gr[j], GA[j]);
        float S1 = tl_rule4_sum(dr, cols);
        for (int64_t j = 0; j < cols; j++) dr[j] = tlm_mul(dr[j], xr[j]);
        float S2 = tl_rule4_sum(dr, cols), is = IS[r];
        for (int64_t j = 0; j < cols; j++) dr[j] = tlf_norm_dx(tlm_mul(gr[j], GA[j]), xr[j], S1, S2, fc, is, inv_cols);
    }
    return TL_OK;
}

/* kinds of per-channel sums over the (sample, position) walk */
enum { BN_X, BN_SQDEV, BN_PROD };

/* Rule 4 over channel ch's n*s elements, sample by sample: a[off] (BN_X), (a[off] - mu)^2
 * (BN_SQDEV) or a[off] * b[off] (BN_PROD), every step rounded. The chunks' sequential sums are
 * independent, so BN_LANES of them run side by side: a block of BN_LANES chunks is copied
 * (values computed on the way) into buf, lane-interleaved (buf[i * BN_LANES + l] = value i of
 * chunk l), and summed as vectors of one value per chunk; the chunk partials then go onto the
 * tree in chunk order (tlm_sum4_push), exactly as tlm_sum4_add would have pushed them. */
#define BN_LANES 16

static float bn_channel_sum(int kind, const float *a, const float *b, float mu, int64_t n,
                            int64_t c, int64_t s, int64_t ch) {
    float buf[BN_LANES * TLM_CHUNK];
    tlm_sum4 acc;
    tlm_sum4_init(&acc);
    const int64_t total = n * s;
    for (int64_t p0 = 0; p0 < total; p0 += BN_LANES * TLM_CHUNK) {
        int64_t lanes = 0, last = TLM_CHUNK;   /* chunks in this block; the last one's length */
        for (int64_t l = 0; l < BN_LANES && p0 + l * TLM_CHUNK < total; l++, lanes++) {
            int64_t p = p0 + l * TLM_CHUNK, len = total - p < TLM_CHUNK ? total - p : TLM_CHUNK;
            int64_t bi = s ? p / s : 0, off = s ? p % s : 0;
            last = len;
            for (int64_t i = 0; i < len;) {
                int64_t seg = s - off < len - i ? s - off : len - i, base = (bi * c + ch) * s + off;
                float *dst = buf + i * BN_LANES + l;
                if (kind == BN_X)
                    for (int64_t t = 0; t < seg; t++) dst[t * BN_LANES] = a[base + t];
                else if (kind == BN_SQDEV)
                    for (int64_t t = 0; t < seg; t++) dst[t * BN_LANES] = tlf_sqdev(a[base + t], mu);
                else
                    for (int64_t t = 0; t < seg; t++) dst[t * BN_LANES] = tlm_mul(a[base + t], b[base + t]);
                i += seg; bi++; off = 0;
            }
        }
        float part[BN_LANES];
        if (lanes == BN_LANES && last == TLM_CHUNK) {
            for (int l = 0; l < BN_LANES; l++) part[l] = buf[l];
            for (int64_t i = 1; i < TLM_CHUNK; i++)
#pragma omp simd
                for (int l = 0; l < BN_LANES; l++) part[l] = tlm_add(part[l], buf[i * BN_LANES + l]);
        } else {
            for (int64_t l = 0; l < lanes; l++) {
                int64_t len = l == lanes - 1 ? last : TLM_CHUNK;
                float v = buf[l];
                for (int64_t i = 1; i < len; i++) v = tlm_add(v, buf[i * BN_LANES + l]);
                part[l] = v;
            }
        }
        for (int64_t l = 0; l < lanes; l++) tlm_sum4_push(&acc, part[l]);
    }
    return tlm_sum4_result(&acc);
}

float tl_stub_channel_sum(const float *a, int64_t n, int64_t c, int64_t s, int64_t ch) {
    return bn_channel_sum(BN_X, a, NULL, 0.0f, n, c, s, ch);
}

int tlk_batchnorm_channel_first(const char *op, tl_buf x, tl_buf gamma, tl_buf beta, tl_buf y, tl_buf xhat,
                               tl_buf mean, tl_buf var, tl_buf inv_std, int64_t n, int64_t c,
                               int64_t s, double eps) {
    const int64_t total = n * c * s;
    const float *X = x->data, *G = gamma->data, *B = beta->data;
    float *Y = y->data, *XH = xhat->data, *M = mean->data, *V = var->data, *IS = inv_std->data;
    const float inv_cnt = (float)(1.0 / (double)(n * s)), e = (float)eps;
#pragma omp parallel for schedule(static) if (total > TL_PAR_MIN)
    for (int64_t ch = 0; ch < c; ch++) {
        float mu = tlf_mean(bn_channel_sum(BN_X, X, NULL, 0.0f, n, c, s, ch), inv_cnt);
        float vr = tlf_mean(bn_channel_sum(BN_SQDEV, X, NULL, mu, n, c, s, ch), inv_cnt);
        float sd = tlf_norm_std(vr, e);
        M[ch] = mu; V[ch] = vr; IS[ch] = tlf_norm_inv(sd);
        for (int64_t b = 0; b < n; b++) {
            int64_t off = (b * c + ch) * s;
            for (int64_t i = 0; i < s; i++) {
                float xh = tlf_norm_xhat(X[off + i], mu, sd);
                XH[off + i] = xh;
                Y[off + i] = tlf_affine(xh, G[ch], B[ch]);
            }
        }
    }
    return TL_OK;
}

int tlk_batchnorm_channel_first_backward(const char *op, tl_buf g, tl_buf xhat, tl_buf inv_std, tl_buf gamma,
                                        tl_buf dx, tl_buf dgamma, tl_buf dbeta, int64_t n,
                                        int64_t c, int64_t s) {
    const int64_t total = n * c * s;
    const float *GO = g->data, *XH = xhat->data, *IS = inv_std->data, *GA = gamma->data;
    float *DX = dx->data, *DG = dgamma->data, *DB = dbeta->data;
    const int64_t cnt = n * s;
    const float fc = (float)cnt, inv_cnt = cnt ? (float)(1.0 / (double)cnt) : 0.0f;
#pragma omp parallel for schedule(static) if (total > TL_PAR_MIN)
    for (int64_t ch = 0; ch < c; ch++) {
        float sb = bn_channel_sum(BN_X, GO, NULL, 0.0f, n, c, s, ch);
        float sg = bn_channel_sum(BN_PROD, GO, XH, 0.0f, n, c, s, ch);
        DB[ch] = sb; DG[ch] = sg;
        /* sum(dxhat) = gamma * sum(g), sum(dxhat * xhat) = gamma * sum(g * xhat) */
        float S1 = tlm_mul(sb, GA[ch]), S2 = tlm_mul(sg, GA[ch]), is = IS[ch];
        for (int64_t b = 0; b < n; b++) {
            int64_t off = (b * c + ch) * s;
            for (int64_t i = 0; i < s; i++)
                DX[off + i] = tlf_norm_dx(tlm_mul(GO[off + i], GA[ch]), XH[off + i], S1, S2, fc, is, inv_cnt);
        }
    }
    return TL_OK;
}
