/* formulas/elementwise.h: the per-element arithmetic of every elementwise op and its backward,
 * written once for the stub (host C) and CUDA (device code), on tl_math.h's canonical operations.
 *
 * A formula is a pure function of one element's values (and the op's float32 scalars): the
 * backends only choose a schedule (the stub's vector loops, CUDA's float4 grid-stride maps),
 * so both give the same bits. ops.yaml names each one (`formula: "tlf_relu(x)"`) and codegen
 * emits both backends' loops over it (native/generated/<family>_maps_{stub,cuda}.inc).
 * Conventions: relu'/clamp' only strictly inside, abs' uses sign(0) = 0, sqrt' = 0 for x <= 0,
 * max/min ties split 0.5/0.5, NaN propagates through max/min/relu.
 */
#ifndef TL_FORMULAS_ELEMENTWISE_H
#define TL_FORMULAS_ELEMENTWISE_H

#include "tl_math.h"
#include "formulas/normalize.h"  /* tlf_affine: affine_rows is layer_norm's map */
#if !defined(__CUDACC__)
#include <math.h>
#endif

/* ---- binary ---- */
TLM_HD float tlf_add(float a, float b) { return tlm_add(a, b); }
TLM_HD float tlf_sub(float a, float b) { return tlm_sub(a, b); }
TLM_HD float tlf_mul(float a, float b) { return tlm_mul(a, b); }
TLM_HD float tlf_div(float a, float b) { return tlm_div(a, b); }
/* NaN-propagating max/min: fmaxf would drop a NaN operand */
TLM_HD float tlf_maximum(float a, float b) { return (a != a || a >= b) ? a : b; }
TLM_HD float tlf_minimum(float a, float b) { return (a != a || a <= b) ? a : b; }
/* da: g where a wins, 0.5 g at a tie, else 0; the VJP forms db = g - da */
TLM_HD float tlf_maximum_backward(float a, float b, float g) {
    return tlm_mul(a > b ? 1.0f : (a == b ? 0.5f : 0.0f), g);
}
TLM_HD float tlf_minimum_backward(float a, float b, float g) {
    return tlm_mul(a < b ? 1.0f : (a == b ? 0.5f : 0.0f), g);
}
TLM_HD float tlf_axpy(float a, float b, float c) { return tlm_add(a, tlm_mul(c, b)); }

/* ---- unary ---- */
TLM_HD float tlf_relu(float x) { return (x > 0.0f || x != x) ? x : 0.0f; } /* NaN passes */
TLM_HD float tlf_abs(float x) { return tlm_abs(x); }
TLM_HD float tlf_sqrt(float x) { return tlm_sqrt(x); }
TLM_HD float tlf_reciprocal(float x) { return tlm_div(1.0f, x); }
TLM_HD float tlf_exp(float x) { return tlm_exp(x); }
TLM_HD float tlf_log(float x) { return tlm_log(x); }
TLM_HD float tlf_gelu(float x) { return tlm_gelu(x); }
TLM_HD float tlf_sigmoid(float x) { return tlm_sigmoid(x); }
TLM_HD float tlf_tanh(float x) { return tlm_tanh(x); }
TLM_HD float tlf_softplus(float x) { return tlm_softplus(x); }
TLM_HD float tlf_scale(float x, float c) { return tlm_mul(c, x); }
TLM_HD float tlf_clamp(float x, float lo, float hi) { return x < lo ? lo : (x > hi ? hi : x); }
/* log(softplus(x) + eps) */
TLM_HD float tlf_safe_log(float x, float eps) { return tlm_log(tlm_add(tlm_softplus(x), eps)); }

/* ---- backward: dx from the forward's input x (or output y) and the cotangent g ---- */
TLM_HD float tlf_relu_backward(float x, float g) { return x > 0.0f ? g : 0.0f; }
TLM_HD float tlf_abs_backward(float x, float g) { return x > 0.0f ? g : (x < 0.0f ? -g : 0.0f); }
TLM_HD float tlf_sqrt_backward(float x, float g) {
    return x > 0.0f ? tlm_div(tlm_mul(g, 0.5f), tlm_sqrt(x)) : 0.0f;
}
TLM_HD float tlf_gelu_backward(float x, float g) { return tlm_mul(g, tlm_gelu_grad(x)); }
/* from the output y: g y (1 - y) and g (1 - y^2) */
TLM_HD float tlf_sigmoid_backward(float y, float g) { return tlm_mul(tlm_mul(g, y), tlm_sub(1.0f, y)); }
TLM_HD float tlf_tanh_backward(float y, float g) { return tlm_mul(g, tlm_sub(1.0f, tlm_mul(y, y))); }
TLM_HD float tlf_softplus_backward(float x, float g) { return tlm_mul(g, tlm_sigmoid(x)); }
/* (g sigmoid(x)) / (softplus(x) + eps) */
TLM_HD float tlf_safe_log_backward(float x, float g, float eps) {
    return tlm_div(tlm_mul(g, tlm_sigmoid(x)), tlm_add(tlm_softplus(x), eps));
}
TLM_HD float tlf_clamp_backward(float x, float g, float lo, float hi) { return (x > lo && x < hi) ? g : 0.0f; }

/* ---- silu's sigmoid, in every mode: float arithmetic that vectorises on the CPU (within 2 ulp
 * of tlf_sigmoid, named IEEE operations, so both backends give its bits). Overflow-safe: exp
 * of a non-positive argument only, 1 / (1 + e) for x >= 0 and e / (1 + e) below; branch-free
 * (NaN gives NaN through e) ---- */
TLM_HD float tlf_sigmoid_fast(float x) {
    float e = tlm_exp(-fabsf(x));
    return tlm_div(x >= 0.0f ? 1.0f : e, tlm_add(1.0f, e));
}

/* silu = x sigmoid(x) (tlf_sigmoid_fast: vectorises on the CPU); -0 once the sigmoid
 * underflows for finite x, as torch's x * 0; -inf gives -inf * 0 = NaN, as torch */
TLM_HD float tlf_silu(float x) {
    float s = tlf_sigmoid_fast(x);
    return (s == 0.0f && x > -INFINITY) ? -0.0f : tlm_mul(x, s);
}
/* g s (1 + x (1 - s)), the terms that would be inf * 0 at +-inf taken as their limits */
TLM_HD float tlf_silu_backward(float x, float g) {
    float s = tlf_sigmoid_fast(x), c = tlm_sub(1.0f, s);
    float t = c == 0.0f ? 0.0f : tlm_mul(x, c);
    return tlm_mul(g, s == 0.0f ? 0.0f : tlm_mul(s, tlm_add(1.0f, t)));
}

#endif /* TL_FORMULAS_ELEMENTWISE_H */
