/* norm.c (stub): layer_norm and batchnorm_channel_first, forward and fused backward.
 *
 * Conventions (inventory section 10): biased variance, eps inside the sqrt, mean and variance
 * by multiplication with float32(1/N), xhat = (x - mean) / std (a division), y = xhat*gamma+beta.
 * Sums run in double in a fixed order, so results do not depend on the thread count.
 */
#include "stub.h"
#include "entry/norm_kernels.h"

int tlk_layer_norm(const char *op, tl_buf x, tl_buf gamma, tl_buf beta, tl_buf y, tl_buf xhat, tl_buf inv_std,
                  int64_t rows, int64_t cols, double eps) {
    const int64_t n = rows * cols;
    const float *X = x->data, *G = gamma->data, *B = beta->data;
    float *Y = y->data, *XH = xhat->data, *IS = inv_std->data;
    const float inv_cols = (float)(1.0 / (double)cols), e = (float)eps;
#pragma omp parallel for schedule(static) if (n > TL_PAR_MIN)
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = X + r * cols;
        double s = 0.0;
        for (int64_t j = 0; j < cols; j++) s += xr[j];
        float mean = (float)s * inv_cols;
        double v = 0.0;
        for (int64_t j = 0; j < cols; j++) { double d = (double)(xr[j] - mean); v += d * d; }
        float var = (float)v * inv_cols;
        float sd = sqrtf(var + e);
        IS[r] = 1.0f / sd;
        for (int64_t j = 0; j < cols; j++) {
            float xh = (xr[j] - mean) / sd;
            XH[r * cols + j] = xh;
            Y[r * cols + j] = xh * G[j] + B[j];
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
#pragma omp parallel for schedule(static) if (n > TL_PAR_MIN)
    for (int64_t r = 0; r < rows; r++) {
        const float *gr = GO + r * cols, *xr = XH + r * cols;
        double s1 = 0.0, s2 = 0.0;
        for (int64_t j = 0; j < cols; j++) {
            float dxh = gr[j] * GA[j];
            s1 += dxh; s2 += (double)dxh * xr[j];
        }
        float S1 = (float)s1, S2 = (float)s2, is = IS[r];
        for (int64_t j = 0; j < cols; j++) {
            float dxh = gr[j] * GA[j];
            DX[r * cols + j] = (((dxh * fc - S1) - xr[j] * S2) * is) * inv_cols;
        }
    }
    /* column sums: rows in index order for every column (fixed order) */
#pragma omp parallel for schedule(static) if (n > TL_PAR_MIN)
    for (int64_t j = 0; j < cols; j++) {
        double sg = 0.0, sb = 0.0;
        for (int64_t r = 0; r < rows; r++) {
            float gv = GO[r * cols + j];
            sg += (double)gv * XH[r * cols + j];
            sb += gv;
        }
        DG[j] = (float)sg; DB[j] = (float)sb;
    }
    return TL_OK;
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
        double sum = 0.0;
        for (int64_t b = 0; b < n; b++) {
            const float *xr = X + (b * c + ch) * s;
            for (int64_t i = 0; i < s; i++) sum += xr[i];
        }
        float mu = (float)sum * inv_cnt;
        double sq = 0.0;
        for (int64_t b = 0; b < n; b++) {
            const float *xr = X + (b * c + ch) * s;
            for (int64_t i = 0; i < s; i++) { double d = (double)(xr[i] - mu); sq += d * d; }
        }
        float vr = (float)sq * inv_cnt;
        float sd = sqrtf(vr + e);
        M[ch] = mu; V[ch] = vr; IS[ch] = 1.0f / sd;
        for (int64_t b = 0; b < n; b++) {
            int64_t off = (b * c + ch) * s;
            for (int64_t i = 0; i < s; i++) {
                float xh = (X[off + i] - mu) / sd;
                XH[off + i] = xh;
                Y[off + i] = xh * G[ch] + B[ch];
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
        double sb = 0.0, sg = 0.0;
        for (int64_t b = 0; b < n; b++) {
            int64_t off = (b * c + ch) * s;
            for (int64_t i = 0; i < s; i++) { sb += GO[off + i]; sg += (double)GO[off + i] * XH[off + i]; }
        }
        DB[ch] = (float)sb; DG[ch] = (float)sg;
        /* sum(dxhat) = gamma * sum(g), sum(dxhat * xhat) = gamma * sum(g * xhat) */
        float S1 = (float)sb * GA[ch], S2 = (float)sg * GA[ch], is = IS[ch];
        for (int64_t b = 0; b < n; b++) {
            int64_t off = (b * c + ch) * s;
            for (int64_t i = 0; i < s; i++) {
                float dxh = GO[off + i] * GA[ch];
                DX[off + i] = (((dxh * fc - S1) - XH[off + i] * S2) * is) * inv_cnt;
            }
        }
    }
    return TL_OK;
}
