/* simd16.h (stub): 16-float vectors and the one fused multiply-add the packed micro-kernels
 * (linalg.c's GEMM, conv_direct.c's convolutions) are built from. */
#ifndef TL_STUB_SIMD16_H
#define TL_STUB_SIMD16_H

/* 16 floats; without AVX-512 the compiler splits it into narrower vectors, same results.
 * v16u: the same through any float pointer (unaligned, may alias floats); macros rather than
 * functions so no vector crosses a call (GCC -Wpsabi warns about that without AVX-512). */
typedef float v16 __attribute__((vector_size(64)));
typedef float v16u __attribute__((vector_size(64), aligned(4), may_alias));
#define vload(p) ((v16)*(const v16u *)(p))
#define vstore(p, v) (*(v16u *)(p) = (v))

/* VFMA(a, b, c): c + a * b per lane with one rounding (fused multiply-add), a a float and b, c
 * v16. One instruction per 16 (AVX-512) or 8 (AVX2 + FMA) lanes where the build targets them
 * (the Makefile's -march=native), a correctly rounded fmaf per lane elsewhere: the same bits on
 * every machine, only the speed differs. */
#if defined(__AVX512F__)
#include <immintrin.h>
#define VFMA(a, b, c) ((v16)_mm512_fmadd_ps(_mm512_set1_ps(a), (__m512)(b), (__m512)(c)))
#elif defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
typedef float v8h __attribute__((vector_size(32)));
#define VFMA(a, b, c) __extension__({                                                          \
    v16 b_ = (b), c_ = (c), r_;                                                                 \
    __m256 a_ = _mm256_set1_ps(a);                                                              \
    v8h lo_ = (v8h)_mm256_fmadd_ps(a_, (__m256)__builtin_shufflevector(b_, b_, 0, 1, 2, 3, 4, 5, 6, 7), \
                                   (__m256)__builtin_shufflevector(c_, c_, 0, 1, 2, 3, 4, 5, 6, 7)); \
    v8h hi_ = (v8h)_mm256_fmadd_ps(a_, (__m256)__builtin_shufflevector(b_, b_, 8, 9, 10, 11, 12, 13, 14, 15), \
                                   (__m256)__builtin_shufflevector(c_, c_, 8, 9, 10, 11, 12, 13, 14, 15)); \
    r_ = __builtin_shufflevector(lo_, hi_, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15); \
    r_; })
#else
#define VFMA(a, b, c) __extension__({                                                          \
    v16 b_ = (b), c_ = (c), r_;                                                                 \
    float a_ = (a);                                                                             \
    for (int l_ = 0; l_ < 16; l_++) r_[l_] = __builtin_fmaf(a_, b_[l_], c_[l_]);                \
    r_; })
#endif

#endif
