/* optim.c (stub): the schedule of the fused optimizer steps, updating parameter and state
 * buffers in place: one loop, split across threads (each with its own copy of the scalars, so
 * the compiler keeps them in registers). The per-element updates are
 * native/common/formulas/optim.h, shared with CUDA, so every mode gives CUDA's bits.
 */
#include "stub.h"
#include "formulas/optim.h"
#include "generated/optim_kernels.h"

int tlk_sgd_step(const char *op, tl_buf p, tl_buf g, tl_buf buf, int64_t n, double lr, double momentum,
                double dampening, double weight_decay, int64_t nesterov, int64_t first) {
    float *P = p->data, *B = buf->data; const float *G = g->data;
    const tlf_sgd s = tlf_sgd_params(lr, momentum, dampening, weight_decay, nesterov, first);
    #pragma omp parallel for if(n > TL_PAR_MIN) schedule(static) firstprivate(s)
    for (int64_t i = 0; i < n; i++) tlf_sgd_update(&s, &P[i], G[i], &B[i]);
    return TL_OK;
}

int tlk_adam_step(const char *op, tl_buf p, tl_buf g, tl_buf m, tl_buf v, int64_t n, double lr, double beta1,
                 double beta2, double eps, double weight_decay, int64_t decoupled, int64_t step) {
    float *P = p->data, *M = m->data, *V = v->data; const float *G = g->data;
    const tlf_adam a = tlf_adam_params(lr, beta1, beta2, eps, weight_decay, decoupled, step);
    #pragma omp parallel for if(n > TL_PAR_MIN) schedule(static) firstprivate(a)
    for (int64_t i = 0; i < n; i++) tlf_adam_update(&a, &P[i], G[i], &M[i], &V[i]);
    return TL_OK;
}
