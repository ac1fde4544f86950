/* formulas/optim.h: the per-element updates of the fused optimizer steps, written once for the
 * stub (native/stub/optim.c) and CUDA (native/cuda/optim.cu).
 *
 * torch.optim.SGD / Adam / AdamW (single-tensor path) in float32, in the canonical operations of
 * tl_math.h in a fixed order (p - (lr (m c1)) / (sqrt(v c2) + eps)), so every mode gives the
 * same bits on both libraries. The scalars are rounded to float32 once, on the host
 * (tlf_sgd_params, tlf_adam_params); Adam's bias corrections 1 / (1 - beta^step) are computed in
 * double with tlm_powi_d (libm's pow may round differently on another machine).
 */
#ifndef TL_FORMULAS_OPTIM_H
#define TL_FORMULAS_OPTIM_H

#include "tl_math.h"

typedef struct {
    float lr, mu, damp, wd;
    int use_mom, nesterov, first;
} tlf_sgd;

typedef struct {
    float lr, b1, b2, eps, wd, decay, c1, c2;
    int decoupled;
} tlf_adam;

static inline tlf_sgd tlf_sgd_params(double lr, double momentum, double dampening, double weight_decay,
                                     int64_t nesterov, int64_t first) {
    tlf_sgd s = {(float)lr, (float)momentum, 1.0f - (float)dampening, (float)weight_decay,
                 momentum != 0.0, nesterov != 0, first != 0};
    return s;
}

static inline tlf_adam tlf_adam_params(double lr, double beta1, double beta2, double eps, double weight_decay,
                                       int64_t decoupled, int64_t step) {
    tlf_adam a = {(float)lr, (float)beta1, (float)beta2, (float)eps, (float)weight_decay,
                  (float)(1.0 - lr * weight_decay), (float)(1.0 / (1.0 - tlm_powi_d(beta1, step))),
                  (float)(1.0 / (1.0 - tlm_powi_d(beta2, step))), decoupled != 0};
    return a;
}

/* one SGD element: p and the momentum buffer b updated in place from the gradient g */
TLM_HD void tlf_sgd_update(const tlf_sgd *s, float *p, float g, float *b) {
    float pv = *p;
    float d = tlm_add(g, tlm_mul(s->wd, pv));
    if (s->use_mom) {
        float bv = s->first ? d : tlm_add(tlm_mul(s->mu, *b), tlm_mul(s->damp, d));
        *b = bv;
        d = s->nesterov ? tlm_add(d, tlm_mul(s->mu, bv)) : bv;
    }
    *p = tlm_sub(pv, tlm_mul(s->lr, d));
}

/* one Adam(W) element: p and the moments m, v updated in place from the gradient g */
TLM_HD void tlf_adam_update(const tlf_adam *a, float *p, float g, float *m, float *v) {
    float pv = *p, gv = g;
    if (a->decoupled) pv = tlm_mul(pv, a->decay); else gv = tlm_add(gv, tlm_mul(a->wd, pv));
    float mv = tlm_add(tlm_mul(a->b1, *m), tlm_mul(tlm_sub(1.0f, a->b1), gv));
    float vv = tlm_add(tlm_mul(a->b2, *v), tlm_mul(tlm_mul(tlm_sub(1.0f, a->b2), gv), gv));
    *m = mv;
    *v = vv;
    *p = tlm_sub(pv, tlm_div(tlm_mul(a->lr, tlm_mul(mv, a->c1)), tlm_add(tlm_sqrt(tlm_mul(vv, a->c2)), a->eps)));
}

#endif /* TL_FORMULAS_OPTIM_H */
