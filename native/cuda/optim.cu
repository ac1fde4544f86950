// optim.cu (CUDA): fused optimizer steps in place, mirroring native/stub/optim.c (same float32
// formulas per element, bias corrections computed once in double on the host).
#include "common.cuh"
#include "entry/optim_kernels.h"
#include <math.h>

namespace {

__global__ void k_sgd(float *p, const float *g, float *buf, int64_t n, float lr, float mu, float damp,
                      float wd, int use_mom, int nesterov, int first) {
    TL_GRID_STRIDE(i, n) {
        float pv = p[i];
        float d = g[i] + wd * pv;
        if (use_mom) {
            float b = first ? d : mu * buf[i] + damp * d;
            buf[i] = b;
            d = nesterov ? d + mu * b : b;
        }
        p[i] = pv - lr * d;
    }
}

__global__ void k_adam(float *p, const float *g, float *m, float *v, int64_t n, float lr, float b1,
                       float b2, float eps, float wd, float decay, int decoupled, float c1, float c2) {
    TL_GRID_STRIDE(i, n) {
        float pv = p[i], gv = g[i];
        if (decoupled) pv *= decay; else gv += wd * pv;
        float mv = b1 * m[i] + (1.0f - b1) * gv;
        float vv = b2 * v[i] + (1.0f - b2) * gv * gv;
        m[i] = mv; v[i] = vv;
        p[i] = pv - lr * (mv * c1) / (sqrtf(vv * c2) + eps);
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
    float c1 = (float)(1.0 / (1.0 - pow(beta1, (double)step)));
    float c2 = (float)(1.0 / (1.0 - pow(beta2, (double)step)));
    k_adam<<<tl_blocks(n), TL_THREADS, 0, tl_stream()>>>(
        p->data, g->data, m->data, v->data, n, (float)lr, (float)beta1, (float)beta2, (float)eps,
        (float)weight_decay, (float)(1.0 - lr * weight_decay), (int)(decoupled != 0), c1, c2);
    TL_LAUNCHED(op);
    return TL_OK;
}

}  // extern "C"
