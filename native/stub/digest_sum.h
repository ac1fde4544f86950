/* digest_sum.h (stub): the sum mod 2^64 of the digest's terms (formulas/audit.h) of X[lo..hi),
 * indices within the buffer, with 32-bit vector multiplies where the build targets AVX-512 or
 * AVX2 (the Makefile's -march=native), the formula's loop elsewhere: the same sum on every
 * machine, only the speed differs (tests/test_audit_sum.py builds all three and compares).
 *
 * With C = 0x9E3779B97F4A7C15 = Chi * 2^32 + Clo, the term's product is, mod 2^64,
 *   ((i << 32) | b) * C = b * Clo + (((i * Clo + b * Chi) mod 2^32) << 32)
 * (i * Chi * 2^64 vanishes): one 32x32->64 multiply (vpmuludq) and one 32-bit multiply
 * (vpmulld) per element, instead of a 64-bit one. The vectors hold elements in 32-bit lanes;
 * vpmuludq multiplies the even lanes, so the odd ones are shifted down for a second one, and
 * each lane's high half (i * Clo + b * Chi, in its own 32-bit lane) lands above its low product
 * by a shift (even lanes) or a mask (odd lanes, already in the high half). The sum adds the
 * terms in another order than the loop: addition mod 2^64 gives the same sum in any order.
 * Included by the stub's digest kernels only.
 */
#ifndef TL_STUB_DIGEST_SUM_H
#define TL_STUB_DIGEST_SUM_H

#include <stdint.h>
#include <string.h>
#include "formulas/audit.h"

#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif

#define TL_DIGEST_CLO 0x7F4A7C15u   /* the low and high halves of the term's multiplier */
#define TL_DIGEST_CHI 0x9E3779B9u

/* the terms' sum for indices lo..hi-1, element by element */
static inline uint64_t digest_sum_scalar(const float *X, int64_t lo, int64_t hi) {
    uint64_t s = 0;
    for (int64_t i = lo; i < hi; i++) {
        uint32_t w;
        memcpy(&w, X + i, sizeof w);
        s += tlf_digest_term(i, w);
    }
    return s;
}

#if defined(__AVX512F__)
/* 16 elements a vector, two vectors a round (four sums: no chain through one register) */
#define TL_DS_TERMS(b, h, a_even, a_odd) do {                                                  \
    __m512i ze_ = _mm512_add_epi64(_mm512_mul_epu32(b, clo), _mm512_slli_epi64(h, 32));       \
    __m512i zo_ = _mm512_add_epi64(_mm512_mul_epu32(_mm512_srli_epi64(b, 32), clo),           \
                                   _mm512_and_si512(h, mhi));                                  \
    a_even = _mm512_add_epi64(a_even, _mm512_xor_si512(ze_, _mm512_srli_epi64(ze_, 29)));     \
    a_odd = _mm512_add_epi64(a_odd, _mm512_xor_si512(zo_, _mm512_srli_epi64(zo_, 29)));       \
} while (0)

static inline uint64_t digest_sum(const float *X, int64_t lo, int64_t hi) {
    int64_t i = lo;
    uint64_t s = 0;
    if (hi - lo >= 32) {
        const __m512i clo = _mm512_set1_epi32((int)TL_DIGEST_CLO);
        const __m512i chi = _mm512_set1_epi32((int)TL_DIGEST_CHI);
        const __m512i mhi = _mm512_set1_epi64((long long)0xFFFFFFFF00000000ULL);
        const __m512i step = _mm512_set1_epi32((int)(32u * TL_DIGEST_CLO));
        /* lane k: (i + k) * Clo mod 2^32 */
        __m512i ic0 = _mm512_mullo_epi32(
            _mm512_add_epi32(_mm512_set1_epi32((int)(uint32_t)i),
                             _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0)),
            clo);
        __m512i ic1 = _mm512_add_epi32(ic0, _mm512_set1_epi32((int)(16u * TL_DIGEST_CLO)));
        __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
        for (; i + 32 <= hi; i += 32) {
            __m512i b0 = _mm512_loadu_si512((const void *)(X + i));
            __m512i b1 = _mm512_loadu_si512((const void *)(X + i + 16));
            __m512i h0 = _mm512_add_epi32(ic0, _mm512_mullo_epi32(b0, chi));
            __m512i h1 = _mm512_add_epi32(ic1, _mm512_mullo_epi32(b1, chi));
            TL_DS_TERMS(b0, h0, a0, a1);
            TL_DS_TERMS(b1, h1, a2, a3);
            ic0 = _mm512_add_epi32(ic0, step);
            ic1 = _mm512_add_epi32(ic1, step);
        }
        /* the lanes summed as unsigned (mod 2^64): _mm512_reduce_add_epi64 adds signed
         * 64-bit integers, whose overflow is undefined behaviour */
        uint64_t w[8];
        _mm512_storeu_si512((void *)w, _mm512_add_epi64(_mm512_add_epi64(a0, a1),
                                                        _mm512_add_epi64(a2, a3)));
        for (int k = 0; k < 8; k++) s += w[k];
    }
    return s + digest_sum_scalar(X, i, hi);
}
#undef TL_DS_TERMS

#elif defined(__AVX2__)
/* 8 elements a vector, two vectors a round */
#define TL_DS_TERMS(b, h, a_even, a_odd) do {                                                  \
    __m256i ze_ = _mm256_add_epi64(_mm256_mul_epu32(b, clo), _mm256_slli_epi64(h, 32));       \
    __m256i zo_ = _mm256_add_epi64(_mm256_mul_epu32(_mm256_srli_epi64(b, 32), clo),           \
                                   _mm256_and_si256(h, mhi));                                  \
    a_even = _mm256_add_epi64(a_even, _mm256_xor_si256(ze_, _mm256_srli_epi64(ze_, 29)));     \
    a_odd = _mm256_add_epi64(a_odd, _mm256_xor_si256(zo_, _mm256_srli_epi64(zo_, 29)));       \
} while (0)

static inline uint64_t digest_sum(const float *X, int64_t lo, int64_t hi) {
    int64_t i = lo;
    uint64_t s = 0;
    if (hi - lo >= 16) {
        const __m256i clo = _mm256_set1_epi32((int)TL_DIGEST_CLO);
        const __m256i chi = _mm256_set1_epi32((int)TL_DIGEST_CHI);
        const __m256i mhi = _mm256_set1_epi64x((long long)0xFFFFFFFF00000000ULL);
        const __m256i step = _mm256_set1_epi32((int)(16u * TL_DIGEST_CLO));
        __m256i ic0 = _mm256_mullo_epi32(
            _mm256_add_epi32(_mm256_set1_epi32((int)(uint32_t)i),
                             _mm256_set_epi32(7, 6, 5, 4, 3, 2, 1, 0)),
            clo);
        __m256i ic1 = _mm256_add_epi32(ic0, _mm256_set1_epi32((int)(8u * TL_DIGEST_CLO)));
        __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
        for (; i + 16 <= hi; i += 16) {
            __m256i b0 = _mm256_loadu_si256((const __m256i *)(X + i));
            __m256i b1 = _mm256_loadu_si256((const __m256i *)(X + i + 8));
            __m256i h0 = _mm256_add_epi32(ic0, _mm256_mullo_epi32(b0, chi));
            __m256i h1 = _mm256_add_epi32(ic1, _mm256_mullo_epi32(b1, chi));
            TL_DS_TERMS(b0, h0, a0, a1);
            TL_DS_TERMS(b1, h1, a2, a3);
            ic0 = _mm256_add_epi32(ic0, step);
            ic1 = _mm256_add_epi32(ic1, step);
        }
        __m256i a = _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3));
        uint64_t w[4];
        _mm256_storeu_si256((__m256i *)w, a);
        s = w[0] + w[1] + w[2] + w[3];
    }
    return s + digest_sum_scalar(X, i, hi);
}
#undef TL_DS_TERMS

#else
static inline uint64_t digest_sum(const float *X, int64_t lo, int64_t hi) {
    return digest_sum_scalar(X, lo, hi);
}
#endif

#endif
