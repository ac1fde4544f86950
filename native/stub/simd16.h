/* simd16.h (stub): 16-float vectors, the build's native vector (vn) and the one fused
 * multiply-add the packed micro-kernels (linalg.c's GEMM, conv_direct.c's convolutions) are
 * built from. */
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

/* vn: the build's native float vector, VN lanes (16 with AVX-512, 8 with AVX2 + FMA, 4
 * elsewhere), for register tiles: a kernel's accumulators stay in registers only as vectors
 * the ISA holds in one register. GCC keeps a v16 in memory where registers are narrower, so
 * an AVX2 build of a tile of v16 accumulators moved every lane through the stack (a 512^3
 * product at 3.5 GFLOP/s on a Zen 3 core pair). Lanes are independent and VNFMA is the same
 * fused multiply-add as VFMA, so the width never changes a result. VPV: vn's per v16. */
#if defined(__AVX512F__)
#define VN 16
typedef v16 vn;
#define VNFMA(a, b, c) VFMA(a, b, c)
#elif defined(__AVX2__) && defined(__FMA__)
#define VN 8
typedef float vn __attribute__((vector_size(32)));
#define VNFMA(a, b, c) ((vn)_mm256_fmadd_ps(_mm256_set1_ps(a), (__m256)(b), (__m256)(c)))
#else
#define VN 4
typedef float vn __attribute__((vector_size(16)));
#define VNFMA(a, b, c) __extension__({                                                         \
    vn b_ = (b), c_ = (c), r_;                                                                  \
    float a_ = (a);                                                                             \
    for (int l_ = 0; l_ < VN; l_++) r_[l_] = __builtin_fmaf(a_, b_[l_], c_[l_]);                \
    r_; })
#endif
typedef float vnu __attribute__((vector_size(4 * VN), aligned(4), may_alias));
#define vnload(p) ((vn)*(const vnu *)(p))
#define vnstore(p, v) (*(vnu *)(p) = (v))
#define VPV (16 / VN)
/* every lane a (its bits as they are: -0.0 stays -0.0) */
#define vnset1(a) __extension__({                                                              \
    vn r_;                                                                                      \
    const float a_ = (a);                                                                       \
    for (int l_ = 0; l_ < VN; l_++) r_[l_] = a_;                                                \
    r_; })

#endif
