/* rng.c (stub): counter-based random kernels.
 *
 * Element i is a pure function of (key, i) (splitmix64 of key + i), so results are identical on
 * every backend, thread count and grid shape; torchlean/random.py is the bit-exact reference.
 * rand_normal computes in double with libm by default (as random.py); in exact mode it runs the
 * canonical float32 Box-Muller of tl_math.h instead (tl_normal_exact_at), which CUDA repeats.
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

/* exact mode: z = sqrt(-2 log u1) cos(2 pi u2) in canonical float32 operations, in this order;
 * u1 and u2 are exact in float32 */
static inline float tl_normal_exact_at(uint64_t key, int64_t i, float mean, float std) {
    uint32_t d1 = (uint32_t)tl_sm64(key + 2 * (uint64_t)i);
    uint32_t d2 = (uint32_t)tl_sm64(key + 2 * (uint64_t)i + 1);
    float u1 = tlm_mul((float)((d1 >> 8) + 1u), 5.9604644775390625e-8f);   /* 2^-24 */
    float u2 = tlm_mul((float)(d2 >> 8), 5.9604644775390625e-8f);
    float z = tlm_mul(tlm_sqrt(tlm_mul(-2.0f, tlm_log(u1))), tlm_cos_2pi(u2));
    return tlm_add(mean, tlm_mul(std, z));
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
    if (tl_exact()) {
        const float mf = (float)mean, sf = (float)std;
        #pragma omp parallel for simd if(n > TL_PAR_MIN) schedule(static)
        for (int64_t i = 0; i < n; i++) Y[i] = tl_normal_exact_at(key, i, mf, sf);
        return TL_OK;
    }
    #pragma omp parallel for if(n > TL_PAR_MIN / 8) schedule(static)
    for (int64_t i = 0; i < n; i++) Y[i] = tl_normal_at(key, i, mean, std);
    return TL_OK;
}
