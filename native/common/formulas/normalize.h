/* formulas/normalize.h: the per-row "normalize" family, written once for the stub and CUDA:
 * statistics of a row (or channel), then a per-element map over them. The sums between the two
 * are the backends' schedules (rule 4 of tl_math.h on the stub and in CUDA's exact kernels,
 * CUDA's block trees otherwise); everything here is the arithmetic around them.
 *
 * layer_norm, batchnorm (and rms_norm): mean = sum(x) / n by multiplication with float32(1/n),
 * biased variance from the rounded squares (x - mean)^2, eps inside the sqrt,
 * xhat = (x - mean) / std (a division), y = xhat * gamma + beta (the product rounded, then the
 * sum). Their backward: dxhat = g * gamma, S1 = sum dxhat, S2 = sum dxhat * xhat, and
 * dx = ((dxhat n - S1) - xhat S2) inv_std / n.
 * softmax: exp(x - max), then a division by the row sum; log_softmax: (x - max) - log(sum);
 * backward y (g - sum g y) and g - exp(y) sum g; cross_entropy_rows from the same statistics.
 */
#ifndef TL_FORMULAS_NORMALIZE_H
#define TL_FORMULAS_NORMALIZE_H

#include "tl_math.h"

/* ---- statistics ---- */
TLM_HD float tlf_mean(float sum, float inv_n) { return tlm_mul(sum, inv_n); }
TLM_HD float tlf_sqdev(float x, float mean) { float d = tlm_sub(x, mean); return tlm_mul(d, d); }
TLM_HD float tlf_norm_std(float var, float eps) { return tlm_sqrt(tlm_add(var, eps)); }
TLM_HD float tlf_norm_inv(float sd) { return tlm_div(1.0f, sd); }

/* ---- the forward map ---- */
TLM_HD float tlf_norm_xhat(float x, float mean, float sd) { return tlm_div(tlm_sub(x, mean), sd); }
TLM_HD float tlf_affine(float xh, float gamma, float beta) { return tlm_add(tlm_mul(xh, gamma), beta); }

/* ---- the backward map: dx of one element from its dxhat = g * gamma and xhat; S2's terms ---- */
TLM_HD float tlf_dxhat_xhat(float g, float gamma, float xh) { return tlm_mul(tlm_mul(g, gamma), xh); }
TLM_HD float tlf_norm_dx(float dxh, float xh, float S1, float S2, float fn, float inv_std, float inv_n) {
    float t = tlm_sub(tlm_sub(tlm_mul(dxh, fn), S1), tlm_mul(xh, S2));
    return tlm_mul(tlm_mul(t, inv_std), inv_n);
}

/* ---- rms_norm: inv_rms = 1 / sqrt(mean(x^2) + eps) (tlf_mean, tlf_norm_std, tlf_norm_inv over
 * the squares), xhat = x inv_rms, y = xhat weight; backward as above without S1 ---- */
TLM_HD float tlf_square(float x) { return tlm_mul(x, x); }
TLM_HD float tlf_rms_inv(float ss, float inv_n, float eps) { return tlf_norm_inv(tlf_norm_std(tlf_mean(ss, inv_n), eps)); }
TLM_HD float tlf_rms_xhat(float x, float inv_rms) { return tlm_mul(x, inv_rms); }
TLM_HD float tlf_rms_y(float x, float inv_rms, float w) { return tlm_mul(tlf_rms_xhat(x, inv_rms), w); }
TLM_HD float tlf_rms_dx(float dxh, float xh, float S2, float fn, float inv_rms, float inv_n) {
    return tlm_mul(tlm_mul(tlm_sub(tlm_mul(dxh, fn), tlm_mul(xh, S2)), inv_rms), inv_n);
}

/* ---- mse_loss: mean of the rounded squares tlf_sqdev(yhat, target) (the sum by rule 4, then a
 * division by n); backward (yhat - target) * (g (2 / n)), each step rounded ---- */
TLM_HD float tlf_mse_scale(float g, float n) { return tlm_mul(g, tlm_div(2.0f, n)); }
TLM_HD float tlf_mse_backward(float yhat, float target, float scale) { return tlm_mul(tlm_sub(yhat, target), scale); }

/* ---- softmax and log_softmax ---- */
TLM_HD float tlf_softmax_exp(float x, float max) { return tlm_exp(tlm_sub(x, max)); }
TLM_HD float tlf_softmax_div(float e, float sum) { return tlm_div(e, sum); }
TLM_HD float tlf_log_softmax(float x, float max, float log_sum) { return tlm_sub(tlm_sub(x, max), log_sum); }
/* dx = y (g - s), s = sum of the rounded products g y */
TLM_HD float tlf_softmax_backward(float y, float g, float s) { return tlm_mul(y, tlm_sub(g, s)); }
/* dx = g - exp(y) s, s = sum g */
TLM_HD float tlf_log_softmax_backward(float y, float g, float s) { return tlm_sub(g, tlm_mul(tlm_exp(y), s)); }

/* ---- cross_entropy_rows: the row's exps tlf_softmax_exp summed, ls = log(sum); loss
 * (max - x[t]) + ls; backward g (p - [j == t]) with p = exp((x - max) - ls) ---- */
TLM_HD float tlf_ce_loss(float max, float xt, float log_sum) { return tlm_add(tlm_sub(max, xt), log_sum); }
TLM_HD float tlf_ce_grad(float x, float max, float log_sum, float g, int hit) {
    float p = tlm_exp(tlm_sub(tlm_sub(x, max), log_sum));
    return tlm_mul(g, hit ? tlm_sub(p, 1.0f) : p);
}

#endif /* TL_FORMULAS_NORMALIZE_H */
