/* formulas/rng.h: the per-element transforms of the counter-based random kernels, written once
 * for the stub (native/stub/rng.c) and CUDA (native/cuda/rng.cu).
 *
 * Element i is a pure function of (key, i) (splitmix64 of key + i, tl_internal.h), so results
 * are identical on every backend, thread count and grid shape, in every mode; torchlean/random.py
 * is the reference of the draws. rand_normal is the canonical float32 Box-Muller of tl_math.h
 * (correctly rounded log and cos 2 pi u), so its bits need no platform's libm.
 */
#ifndef TL_FORMULAS_RNG_H
#define TL_FORMULAS_RNG_H

#include "tl_internal.h"
#include "tl_math.h"

TLM_HD float tlf_uniform(uint64_t key, int64_t i) { return tl_uniform_at(key, (uint64_t)i); }

TLM_HD float tlf_bernoulli(uint64_t key, int64_t i, float p) { return tl_uniform_at(key, (uint64_t)i) < p ? 1.0f : 0.0f; }

/* z = sqrt(-2 log u1) cos(2 pi u2) from draws 2i and 2i+1 in canonical float32 operations, in
 * this order (u1 in (0, 1] keeps the log finite; u1 and u2 are exact in float32), then
 * mean + std z */
TLM_HD float tlf_normal(uint64_t key, int64_t i, float mean, float std) {
    uint32_t d1 = (uint32_t)tl_sm64(key + 2 * (uint64_t)i);
    uint32_t d2 = (uint32_t)tl_sm64(key + 2 * (uint64_t)i + 1);
    float u1 = tlm_mul((float)((d1 >> 8) + 1u), 5.9604644775390625e-8f);   /* 2^-24 */
    float u2 = tlm_mul((float)(d2 >> 8), 5.9604644775390625e-8f);
    float z = tlm_mul(tlm_sqrt(tlm_mul(-2.0f, tlm_log(u1))), tlm_cos_2pi(u2));
    return tlm_add(mean, tlm_mul(std, z));
}

#endif /* TL_FORMULAS_RNG_H */
