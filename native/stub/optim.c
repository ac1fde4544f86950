/* optim.c (stub): fused optimizer steps, updating parameter and state buffers in place.
 *
 * Formulas follow torch.optim.SGD / Adam / AdamW (single-tensor path) in float32; Adam's bias
 * corrections are computed once in double.
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
        float d = G[i] + wd * pv;
        if (use_mom) {
            float b = first ? d : mu * B[i] + damp * d;
            B[i] = b;
            d = nesterov ? d + mu * b : b;
        }
        P[i] = pv - lr_ * d;
    }
    return TL_OK;
}

int tlk_adam_step(const char *op, tl_buf p, tl_buf g, tl_buf m, tl_buf v, int64_t n, double lr, double beta1,
                 double beta2, double eps, double weight_decay, int64_t decoupled, int64_t step) {
    float *P = p->data, *M = m->data, *V = v->data; const float *G = g->data;
    const float c1 = (float)(1.0 / (1.0 - pow(beta1, (double)step)));
    const float c2 = (float)(1.0 / (1.0 - pow(beta2, (double)step)));
    const float lr_ = (float)lr, b1 = (float)beta1, b2 = (float)beta2, e = (float)eps;
    const float wd = (float)weight_decay, decay = (float)(1.0 - lr * weight_decay);
    #pragma omp parallel for if(n > TL_PAR_MIN) schedule(static)
    for (int64_t i = 0; i < n; i++) {
        float pv = P[i], gv = G[i];
        if (decoupled) pv *= decay; else gv += wd * pv;
        float mv = b1 * M[i] + (1.0f - b1) * gv;
        float vv = b2 * V[i] + (1.0f - b2) * gv * gv;
        M[i] = mv; V[i] = vv;
        P[i] = pv - lr_ * (mv * c1) / (sqrtf(vv * c2) + e);
    }
    return TL_OK;
}
