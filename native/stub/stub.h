/* stub.h: helpers shared by the portable C kernels (the reference backend).
 *
 * Kernels are plain loops. OpenMP splits only independent work, and every reduction sums in a
 * fixed, thread-count-independent order, so the stub gives the same bits on any machine size.
 */
#ifndef TL_STUB_H
#define TL_STUB_H

#include <math.h>
#include <stdint.h>
#include <string.h>
#include "tl_internal.h"

/* parallelise loops above this many elements */
#define TL_PAR_MIN 32768


/* sum of x[0..n) in a fixed order: 8 interleaved partials, then pairwise combination */
static inline double tl_sum_f32_block(const float *x, int64_t n) {
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++) acc[k] += x[i + k];
    for (; i < n; i++) acc[i & 7] += x[i];
    return (double)(((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7])));
}

/* Compute-bound vector loops (exp and friends) run twice as fast in 512-bit vectors, which GCC
 * avoids by default on AVX-512 x86 (-march=native tunes for 256); this asks for them per
 * function. Lanes are independent, so the width never changes a result. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__AVX512F__)
#define TL_VEC512 __attribute__((target("prefer-vector-width=512")))
#else
#define TL_VEC512
#endif

/* Branch-free float32 e^x that loops vectorise (scalar expf is a libm call, so it does not).
 * Max error 1 ulp against the correctly rounded result over all floats (tests/test_stub_exp.py).
 *   k = round(x / ln2), r = x - k ln2 (Cody-Waite: ln2 = C1 + C2 with C1 of 9 bits, so k C1 and
 *   x - k C1 are exact), e^r = 1 + r + r^2 P(r) on |r| <= ln2 / 2 (Cephes expf minimax
 *   polynomial), then e^x = e^r 2^k1 2^k2 with k = k1 + k2 built from exponent bits; the two
 *   steps keep each factor normal, so subnormal results round once and overflow gives +inf.
 * x is clamped to [-104, 89] first (e^-104 rounds to 0, e^89 overflows); NaN returns NaN.
 * No FMA (the stub rounds every product), so the bits are the same on any x86 or ARM build. */
static inline float tl_bits_to_f32(int32_t b) { float f; memcpy(&f, &b, sizeof f); return f; }

static inline float tl_expf(float x) {
    const float log2e = 1.44269504088896341f, c1 = 0.693359375f, c2 = -2.12194440e-4f;
    const float shifter = 12582912.0f; /* 1.5 * 2^23: adding it rounds to an integer */
    float xc = x < 89.0f ? x : 89.0f;           /* min/max instructions; NaN -> 89, fixed below */
    xc = xc > -104.0f ? xc : -104.0f;
    float kf = (xc * log2e + shifter) - shifter; /* round(x / ln2), |kf| <= 151 */
    float r = xc - kf * c1;
    r = r - kf * c2;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    float y = 1.0f + (r + (r * r) * p);
    int32_t k = (int32_t)kf, k1 = k >> 1, k2 = k - k1; /* each in [-75, 64]: normal scales */
    y = y * tl_bits_to_f32((k1 + 127) << 23);
    y = y * tl_bits_to_f32((k2 + 127) << 23);
    return x != x ? x + x : y;
}

/* Branch-free float32 tanh on tl_expf (libm tanhf is a call, so loops using it stay scalar).
 * On a = |x|: a < 0.625 uses a + a z P(z), z = a^2 (Cephes tanhf minimax odd polynomial);
 * above, 1 - 2 / (e^(2a) + 1), which saturates to exactly 1 once e^(2a) is large (or +inf).
 * The sign is copied from x (tanh(-0) = -0); NaN returns NaN. Max error 1.4 ulp
 * (tests/test_stub_exp.py). */
static inline float tl_tanhf(float x) {
    float a = fabsf(x), z = a * a;
    float p = -5.70498872745e-3f;
    p = p * z + 2.06390887954e-2f;
    p = p * z - 5.37397155531e-2f;
    p = p * z + 1.33314422036e-1f;
    p = p * z - 3.33332819422e-1f;
    float small = a + (a * z) * p;
    float big = 1.0f - 2.0f / (tl_expf(a + a) + 1.0f);
    return copysignf(a < 0.625f ? small : big, x);
}

#endif
