/* tl_math_ieee.h: rule 1 of tl_math.h (whose comment states the five rules): the IEEE-rounded
 * float32 and double elementary operations and the exact sign-bit operations, as host C and as
 * CUDA device code that names every rounding. Include tl_math.h, not this header. */
#ifndef TL_MATH_IEEE_H
#define TL_MATH_IEEE_H

#include <stdint.h>
#if !defined(__CUDA_ARCH__)
#include <string.h>
#endif

#if defined(__CUDACC__)
#define TLM_HD __host__ __device__ __forceinline__ static
#define TLM_HD_INLINE TLM_HD
#else
#define TLM_HD static inline
/* the transcendental functions: always inlined, so the loops that call them vectorise */
#define TLM_HD_INLINE static inline __attribute__((always_inline))
#endif

/* ---- rule 1: IEEE-rounded elementary operations ---- */
#if defined(__CUDA_ARCH__)
TLM_HD float tlm_add(float a, float b) { return __fadd_rn(a, b); }
TLM_HD float tlm_sub(float a, float b) { return __fsub_rn(a, b); }
TLM_HD float tlm_mul(float a, float b) { return __fmul_rn(a, b); }
TLM_HD float tlm_div(float a, float b) { return __fdiv_rn(a, b); }
TLM_HD float tlm_sqrt(float a) { return __fsqrt_rn(a); }
TLM_HD float tlm_fma(float a, float b, float c) { return __fmaf_rn(a, b, c); }
TLM_HD float tlm_from_bits(int32_t b) { return __int_as_float(b); }
TLM_HD int32_t tlm_to_bits(float f) { return __float_as_int(f); }
TLM_HD double tlm_dadd(double a, double b) { return __dadd_rn(a, b); }
TLM_HD double tlm_ddiv(double a, double b) { return __ddiv_rn(a, b); }
TLM_HD float tlm_d2f(double a) { return __double2float_rn(a); }
TLM_HD double tlm_pow2d(int32_t k) { return __longlong_as_double((long long)(1023 + k) << 52); }
#else
TLM_HD float tlm_add(float a, float b) { return a + b; }
TLM_HD float tlm_sub(float a, float b) { return a - b; }
TLM_HD float tlm_mul(float a, float b) { return a * b; }
TLM_HD float tlm_div(float a, float b) { return a / b; }
TLM_HD float tlm_sqrt(float a) { return __builtin_sqrtf(a); }   /* IEEE sqrt instruction */
TLM_HD float tlm_fma(float a, float b, float c) { return __builtin_fmaf(a, b, c); }
TLM_HD float tlm_from_bits(int32_t b) { float f; memcpy(&f, &b, sizeof f); return f; }
TLM_HD int32_t tlm_to_bits(float f) { int32_t b; memcpy(&b, &f, sizeof b); return b; }
TLM_HD double tlm_dadd(double a, double b) { return a + b; }
TLM_HD double tlm_ddiv(double a, double b) { return a / b; }
TLM_HD float tlm_d2f(double a) { return (float)a; }
TLM_HD double tlm_pow2d(int32_t k) { int64_t b = (int64_t)(1023 + k) << 52; double d; memcpy(&d, &b, sizeof d); return d; }
#endif

/* sign-bit operations: exact, never rounded */
TLM_HD float tlm_abs(float x) { return tlm_from_bits(tlm_to_bits(x) & 0x7fffffff); }
TLM_HD float tlm_copysign(float mag, float sgn) {
    return tlm_from_bits((tlm_to_bits(mag) & 0x7fffffff) | (tlm_to_bits(sgn) & (int32_t)0x80000000));
}
TLM_HD float tlm_rsqrt(float x) { return tlm_div(1.0f, tlm_sqrt(x)); }

#endif /* TL_MATH_IEEE_H */
