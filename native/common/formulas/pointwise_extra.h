/* formulas/pointwise_extra.h: the per-element formulas of the pointwise_extra family, written
 * once for the stub and CUDA: ops.yaml names them (`formula:`) and codegen emits both backends'
 * loops (native/generated/pointwise_extra_maps_{stub,cuda}.inc). Each is a fixed sequence of
 * tl_math.h operations, so both libraries give the same bits in every mode.
 */
#ifndef TL_FORMULAS_POINTWISE_EXTRA_H
#define TL_FORMULAS_POINTWISE_EXTRA_H

#include "tl_math_extra.h"

#define TLX_SQRT1_2 0.70710678118654752f   /* 1 / sqrt(2) */
#define TLX_2_SQRTPI 1.12837916709551257f  /* 2 / sqrt(pi) */
#define TLX_INV_SQRT2PI 0.39894228040143268f /* 1 / sqrt(2 pi) */

TLM_HD float tlf_pow(float a, float b) { return tlm_pow(a, b); }
TLM_HD float tlf_erf(float x) { return tlm_erf(x); }

/* g * b * a^(b - 1); 0 where b == 0 (PyTorch: the exponent-0 power is constant) */
TLM_HD float tlf_pow_backward_base(float a, float b, float g) {
    float d = tlm_mul(tlm_mul(g, b), tlm_pow(a, tlm_sub(b, 1.0f)));
    return b == 0.0f ? 0.0f : d;
}

/* g * y * log(a); 0 where a == 0 and b >= 0 (PyTorch's mask; log(0) would give NaN there) */
TLM_HD float tlf_pow_backward_exponent(float a, float b, float y, float g) {
    float d = tlm_mul(tlm_mul(g, y), tlm_log(a));
    return (a == 0.0f && b >= 0.0f) ? 0.0f : d;
}

/* x^p for a float scalar p, and its gradient g p x^(p - 1) */
TLM_HD float tlf_pow_scalar(float x, float p) { return tlm_pow(x, p); }
TLM_HD float tlf_pow_scalar_backward(float x, float g, float p) { return tlf_pow_backward_base(x, p, g); }

/* g * (2 / sqrt(pi)) e^(-x^2) */
TLM_HD float tlf_erf_backward(float x, float g) {
    return tlm_mul(tlm_mul(g, TLX_2_SQRTPI), tlm_exp(-tlm_mul(x, x)));
}

/* the exact GELU and its VJP given t = erf(x / sqrt(2)), which the stub evaluates over a block
 * first (its erf splits the block by fit) */
TLM_HD float tlf_gelu_erf_arg(float x) { return tlm_mul(x, TLX_SQRT1_2); }
TLM_HD float tlf_gelu_erf_of(float x, float t) { return tlm_mul(tlm_mul(x, 0.5f), tlm_add(1.0f, t)); }
TLM_HD float tlf_gelu_erf_backward_of(float x, float g, float t) {
    float cdf = tlm_mul(0.5f, tlm_add(1.0f, t));
    float pdf = tlm_mul(tlm_exp(tlm_mul(-0.5f, tlm_mul(x, x))), TLX_INV_SQRT2PI);
    return tlm_mul(g, tlm_add(cdf, tlm_mul(x, pdf)));
}

/* (x / 2) (1 + erf(x / sqrt(2))), PyTorch's stage order */
TLM_HD float tlf_gelu_erf(float x) { return tlf_gelu_erf_of(x, tlm_erf(tlf_gelu_erf_arg(x))); }

/* g (cdf + x pdf): cdf = (1 + erf(x / sqrt(2))) / 2, pdf = e^(-x^2 / 2) / sqrt(2 pi) */
TLM_HD float tlf_gelu_erf_backward(float x, float g) {
    return tlf_gelu_erf_backward_of(x, g, tlm_erf(tlf_gelu_erf_arg(x)));
}

/* log(1 + e^(beta x)) / beta, or x where beta x > threshold (NaN stays NaN) */
TLM_HD float tlf_softplus_beta(float x, float beta, float threshold) {
    float bx = tlm_mul(beta, x);
    return bx > threshold ? x : tlm_div(tlm_softplus(bx), beta);
}

/* g sigmoid(beta x), or g where beta x > threshold */
TLM_HD float tlf_softplus_beta_backward(float x, float g, float beta, float threshold) {
    float bx = tlm_mul(beta, x);
    return bx > threshold ? g : tlm_mul(g, tlm_sigmoid(bx));
}

#endif /* TL_FORMULAS_POINTWISE_EXTRA_H */
