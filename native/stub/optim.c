/* optim.c (stub): fused optimizer steps, updating parameter and state buffers in place.
 *
 * Formulas follow torch.optim.SGD / Adam / AdamW (single-tensor path) in float32, written in the
 * canonical operations of tl_math.h in a fixed order (the order C's left-to-right evaluation gave
 * before: p - (lr (m c1)) / (sqrt(v c2) + eps)), which CUDA repeats, so every mode is exact.
 * Adam's bias corrections 1 / (1 - beta^step) are computed once in double, the power by
 * tlm_powi_d (libm's pow may round differently on another machine).
 */
#include "stub.h"
#include "entry/optim_kernels.h"

int tlk_sgd_step(const char *op, tl_buf p, tl_buf g, tl_buf buf, int64_t n, double lr, double momentum,
                double dampening, double weight_decay, int64_t nesterov, int64_t first) {
    float *P = p->data, *B = buf->data; const float *G = g->data;
    const float lr_ = (float)lr, mu = (float)momentum, damp = 1.0f - (float)dampening;
    const float wd = (float)weight_decay;
    const int use_mom = momentum != 0.0;
    #pragma omp parallel for if(n > TL_PAR_MIN) schedule(static)
    for (int64_t i = 0; i < n; i++) {
        float pv = P[i];
        float d = tlm_add(G[i], tlm_mul(wd, pv));
        if (use_mom) {
            float b = first ? d : tlm_add(tlm_mul(mu, B[i]), tlm_mul(damp, d));
            B[i] = b;
            d = nesterov ? tlm_add(d, tlm_mul(mu, b)) : b;
        }
        P[i] = tlm_sub(pv, tlm_mul(lr_, d));
    }
    return TL_OK;
}

int tlk_adam_step(const char *op, tl_buf p, tl_buf g, tl_buf m, tl_buf v, int64_t n, double lr, double beta1,
                 double beta2, double eps, double weight_decay, int64_t decoupled, int64_t step) {
    float *P = p->data, *M = m->data, *V = v->data; const float *G = g->data;
    const float c1 = (float)(1.0 / (1.0 - tlm_powi_d(beta1, step)));
    const float c2 = (float)(1.0 / (1.0 - tlm_powi_d(beta2, step)));
    const float lr_ = (float)lr, b1 = (float)beta1, b2 = (float)beta2, e = (float)eps;
    const float wd = (float)weight_decay, decay = (float)(1.0 - lr * weight_decay);
    #pragma omp parallel for if(n > TL_PAR_MIN) schedule(static)
    for (int64_t i = 0; i < n; i++) {
        float pv = P[i], gv = G[i];
        if (decoupled) pv = tlm_mul(pv, decay); else gv = tlm_add(gv, tlm_mul(wd, pv));
        float mv = tlm_add(tlm_mul(b1, M[i]), tlm_mul(tlm_sub(1.0f, b1), gv));
        float vv = tlm_add(tlm_mul(b2, V[i]), tlm_mul(tlm_mul(tlm_sub(1.0f, b2), gv), gv));
        M[i] = mv; V[i] = vv;
        P[i] = tlm_sub(pv, tlm_div(tlm_mul(lr_, tlm_mul(mv, c1)), tlm_add(tlm_sqrt(tlm_mul(vv, c2)), e)));
    }
    return TL_OK;
}
