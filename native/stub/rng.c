/* rng.c (stub): counter-based random kernels.
 *
 * Element i is a pure function of (key, i) (splitmix64 of key + i), so results are identical on
 * every backend, thread count and grid shape; torchlean/random.py is the bit-exact reference.
 */
#include "stub.h"
#include "entry/rng_kernels.h"

#define TL_TWO_PI 6.283185307179586

/* z from draws 2i and 2i+1: u1 in (0, 1] keeps the log finite; computed in double */
static inline float tl_normal_at(uint64_t key, int64_t i, double mean, double std) {
    uint32_t d1 = (uint32_t)tl_sm64(key + 2 * (uint64_t)i);
    uint32_t d2 = (uint32_t)tl_sm64(key + 2 * (uint64_t)i + 1);
    double u1 = ((double)(d1 >> 8) + 1.0) * (1.0 / 16777216.0);
    double u2 = (double)(d2 >> 8) * (1.0 / 16777216.0);
    double z = sqrt(-2.0 * log(u1)) * cos(TL_TWO_PI * u2);
    return (float)(mean + std * z);
}

int tlk_rand_uniform(const char *op, tl_buf y, int64_t n, uint64_t key) {
    float *Y = y->data;
    #pragma omp parallel for if(n > TL_PAR_MIN) schedule(static)
    for (int64_t i = 0; i < n; i++) Y[i] = tl_uniform_at(key, (uint64_t)i);
    return TL_OK;
}

int tlk_bernoulli_mask(const char *op, tl_buf y, int64_t n, uint64_t key, double p) {
    float *Y = y->data; const float pf = (float)p;
    #pragma omp parallel for if(n > TL_PAR_MIN) schedule(static)
    for (int64_t i = 0; i < n; i++) Y[i] = tl_uniform_at(key, (uint64_t)i) < pf ? 1.0f : 0.0f;
    return TL_OK;
}

int tlk_rand_normal(const char *op, tl_buf y, int64_t n, uint64_t key, double mean, double std) {
    float *Y = y->data;
    #pragma omp parallel for if(n > TL_PAR_MIN / 8) schedule(static)
    for (int64_t i = 0; i < n; i++) Y[i] = tl_normal_at(key, i, mean, std);
    return TL_OK;
}
