/* formulas/audit.h: the digest of a buffer's float32 bits (ops.yaml `digest`), written once for
 * the stub (native/stub/audit.c) and CUDA (native/cuda/audit.cu).
 *
 D = sm64(S + sm64(n)), S = sum over i of t((i << 32) | bits(x[i])) mod 2^64, where
 * t(k) = z ^ (z >> 29) with z = k * 0x9E3779B97F4A7C15 mod 2^64 (one multiply and one
 * xorshift: a pass costs about what a ReLU does) and sm64 the SplitMix64 step of tl_internal.h.
 * Each term is a bijection of element i's bits (an OR with a fixed high half, an odd multiply,
 * an xorshift), so one changed element always changes S; the sum of unsigned integers is
 * associative, so any split over threads or blocks gives the same D. The index fits the high
 * half: a buffer holds at most 2^32 - 1 elements.
 */
#ifndef TL_FORMULAS_AUDIT_H
#define TL_FORMULAS_AUDIT_H

#include "tl_internal.h"
#include "tl_math.h"

TLM_HD uint64_t tlf_digest_term(int64_t i, uint32_t bits) {
    uint64_t z = (((uint64_t)i << 32) | (uint64_t)bits) * 0x9E3779B97F4A7C15ULL;
    return z ^ (z >> 29);
}

TLM_HD uint64_t tlf_digest_final(uint64_t sum, int64_t n) {
    return tl_sm64(sum + tl_sm64((uint64_t)n));
}

/* row[k] = bits 16k..16k+15 of d: integers below 2^16, exact in float32 */
TLM_HD void tlf_digest_store(float *row, uint64_t d) {
    for (int k = 0; k < 4; k++) row[k] = (float)(uint32_t)((d >> (16 * k)) & 0xFFFFu);
}

#endif
