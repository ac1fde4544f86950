// optim.cu (CUDA): the schedule of the fused optimizer steps, in place: one grid-stride kernel
// per step over the per-element updates of native/common/formulas/optim.h, shared with the
// stub (scalars rounded once on the host), so every mode gives the stub's bits.
#include "common.cuh"
#include "formulas/optim.h"
#include "generated/optim_kernels.h"

namespace {

__global__ void k_sgd(float *p, const float *g, float *buf, int64_t n, tlf_sgd s) {
    TL_GRID_STRIDE(i, n) tlf_sgd_update(&s, &p[i], g[i], &buf[i]);
}

__global__ void k_adam(float *p, const float *g, float *m, float *v, int64_t n, tlf_adam a) {
    TL_GRID_STRIDE(i, n) tlf_adam_update(&a, &p[i], g[i], &m[i], &v[i]);
}

// inside a captured step: the step is step0 + the graph's replay index, read on the device, and
// the bias corrections are tlf_adam_params' expressions (double, tlm_powi_d): the host's bits
__global__ void k_adam_graph(float *p, const float *g, float *m, float *v, int64_t n, tlf_adam a,
                             double beta1, double beta2, int64_t step0, const int64_t *replay) {
    const int64_t step = step0 + *replay;
    a.c1 = (float)(1.0 / (1.0 - tlm_powi_d(beta1, step)));
    a.c2 = (float)(1.0 / (1.0 - tlm_powi_d(beta2, step)));
    TL_GRID_STRIDE(i, n) tlf_adam_update(&a, &p[i], g[i], &m[i], &v[i]);
}

}  // namespace

extern "C" {

int tlk_sgd_step(const char *op, tl_buf p, tl_buf g, tl_buf buf, int64_t n, double lr, double momentum,
                double dampening, double weight_decay, int64_t nesterov, int64_t first) {
    if (n == 0) return TL_OK;
    if (first && momentum != 0.0 && tl_graph_replay())
        return tl_fail(TL_E_UNSUPPORTED, "%s: the momentum buffer's first step inside a captured "
                       "step would be replayed as a first step every time; run one step eagerly "
                       "first (graph_step does)", op);
    k_sgd<<<tl_blocks(n), TL_THREADS, 0, tl_stream()>>>(
        p->data, g->data, buf->data, n, tlf_sgd_params(lr, momentum, dampening, weight_decay, nesterov, first));
    TL_LAUNCHED(op);
    return TL_OK;
}

int tlk_adam_step(const char *op, tl_buf p, tl_buf g, tl_buf m, tl_buf v, int64_t n, double lr, double beta1,
                 double beta2, double eps, double weight_decay, int64_t decoupled, int64_t step) {
    if (n == 0) return TL_OK;
    if (const int64_t *replay = tl_graph_replay()) {
        k_adam_graph<<<tl_blocks(n), TL_THREADS, 0, tl_stream()>>>(
            p->data, g->data, m->data, v->data, n,
            tlf_adam_params(lr, beta1, beta2, eps, weight_decay, decoupled, step), beta1, beta2,
            step, replay);
        TL_LAUNCHED(op);
        return TL_OK;
    }
    k_adam<<<tl_blocks(n), TL_THREADS, 0, tl_stream()>>>(
        p->data, g->data, m->data, v->data, n,
        tlf_adam_params(lr, beta1, beta2, eps, weight_decay, decoupled, step));
    TL_LAUNCHED(op);
    return TL_OK;
}

}  // extern "C"
