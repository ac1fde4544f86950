// optim.cu (CUDA): fused optimizer steps in place, mirroring native/stub/optim.c: the same
// canonical float32 operations (tl_math.h) in the same order per element, bias corrections
// computed once in double on the host with tlm_powi_d, so every mode gives the stub's bits.
#include "common.cuh"
#include "tl_math.h"
#include "entry/optim_kernels.h"

namespace {

__global__ void k_sgd(float *p, const float *g, float *buf, int64_t n, float lr, float mu, float damp,
                      float wd, int use_mom, int nesterov, int first) {
    TL_GRID_STRIDE(i, n) {
        float pv = p[i];
        float d = tlm_add(g[i], tlm_mul(wd, pv));
        if (use_mom) {
            float b = first ? d : tlm_add(tlm_mul(mu, buf[i]), tlm_mul(damp, d));
            buf[i] = b;
            d = nesterov ? tlm_add(d, tlm_mul(mu, b)) : b;
        }
        p[i] = tlm_sub(pv, tlm_mul(lr, d));
    }
}

__global__ void k_adam(float *p, const float *g, float *m, float *v, int64_t n, float lr, float b1,
                       float b2, float eps, float wd, float decay, int decoupled, float c1, float c2) {
    TL_GRID_STRIDE(i, n) {
        float pv = p[i], gv = g[i];
        if (decoupled) pv = tlm_mul(pv, decay); else gv = tlm_add(gv, tlm_mul(wd, pv));
        float mv = tlm_add(tlm_mul(b1, m[i]), tlm_mul(tlm_sub(1.0f, b1), gv));
        float vv = tlm_add(tlm_mul(b2, v[i]), tlm_mul(tlm_mul(tlm_sub(1.0f, b2), gv), gv));
        m[i] = mv; v[i] = vv;
        p[i] = tlm_sub(pv, tlm_div(tlm_mul(lr, tlm_mul(mv, c1)), tlm_add(tlm_sqrt(tlm_mul(vv, c2)), eps)));
    }
}

}  // namespace

extern "C" {

int tlk_sgd_step(const char *op, tl_buf p, tl_buf g, tl_buf buf, int64_t n, double lr, double momentum,
                double dampening, double weight_decay, int64_t nesterov, int64_t first) {
    if (n == 0) return TL_OK;
    k_sgd<<<tl_blocks(n), TL_THREADS, 0, tl_stream()>>>(
        p->data, g->data, buf->data, n, (float)lr, (float)momentum, 1.0f - (float)dampening,
        (float)weight_decay, momentum != 0.0, (int)(nesterov != 0), (int)(first != 0));
    TL_LAUNCHED(op);
    return TL_OK;
}

int tlk_adam_step(const char *op, tl_buf p, tl_buf g, tl_buf m, tl_buf v, int64_t n, double lr, double beta1,
                 double beta2, double eps, double weight_decay, int64_t decoupled, int64_t step) {
    if (n == 0) return TL_OK;
    float c1 = (float)(1.0 / (1.0 - tlm_powi_d(beta1, step)));
    float c2 = (float)(1.0 / (1.0 - tlm_powi_d(beta2, step)));
    k_adam<<<tl_blocks(n), TL_THREADS, 0, tl_stream()>>>(
        p->data, g->data, m->data, v->data, n, (float)lr, (float)beta1, (float)beta2, (float)eps,
        (float)weight_decay, (float)(1.0 - lr * weight_decay), (int)(decoupled != 0), c1, c2);
    TL_LAUNCHED(op);
    return TL_OK;
}

}  // extern "C"
