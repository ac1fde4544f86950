/* rng.c (stub): the schedule of the counter-based random kernels (one loop, split across
 * threads); the transforms are native/common/formulas/rng.h, shared with CUDA, the same in
 * every mode.
 */
#include "stub.h"
#include "formulas/rng.h"
#include "generated/rng_kernels.h"

int tlk_rand_uniform(const char *op, tl_buf y, int64_t n, uint64_t key) {
    float *Y = y->data;
    #pragma omp parallel for if(n > TL_PAR_MIN) schedule(static)
    for (int64_t i = 0; i < n; i++) Y[i] = tlf_uniform(key, i);
    return TL_OK;
}

int tlk_bernoulli_mask(const char *op, tl_buf y, int64_t n, uint64_t key, double p) {
    float *Y = y->data; const float pf = (float)p;
    #pragma omp parallel for if(n > TL_PAR_MIN) schedule(static)
    for (int64_t i = 0; i < n; i++) Y[i] = tlf_bernoulli(key, i, pf);
    return TL_OK;
}

int tlk_rand_normal(const char *op, tl_buf y, int64_t n, uint64_t key, double mean, double std) {
    float *Y = y->data; const float mf = (float)mean, sf = (float)std;
    #pragma omp parallel for simd if(n > TL_PAR_MIN) schedule(static)
    for (int64_t i = 0; i < n; i++) Y[i] = tlf_normal(key, i, mf, sf);
    return TL_OK;
}
