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
#include "tl_math.h"

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

/* Branch-free float32 e^x and tanh that loops vectorise (scalar libm calls do not): the
 * canonical, correctly rounded versions of native/common/tl_math.h, the same code exact mode
 * runs on CUDA (tests/test_stub_exp.py, tests/test_exact_math.py). */
static inline float tl_expf(float x) { return tlm_exp(x); }
static inline float tl_tanhf(float x) { return tlm_tanh(x); }

/* Rule 4 of tl_math.h over x[0..n), the same bits as tlm_sum: up to 8 whole chunks are summed
 * side by side (independent chains, so the adds overlap instead of waiting on each other; the
 * order within each chunk is unchanged), then pushed into the tree in chunk order. */
static inline float tl_rule4_sum(const float *x, int64_t n) {
    tlm_sum4 acc;
    tlm_sum4_init(&acc);
    int64_t c = 0;
    while (n - c >= TLM_CHUNK) {
        int64_t whole = (n - c) / TLM_CHUNK;
        int m = whole < 8 ? (int)whole : 8;
        float s[8];
        for (int k = 0; k < m; k++) s[k] = x[c + k * TLM_CHUNK];
        for (int64_t i = 1; i < TLM_CHUNK; i++)
            for (int k = 0; k < m; k++) s[k] = tlm_add(s[k], x[c + k * TLM_CHUNK + i]);
        for (int k = 0; k < m; k++) tlm_sum4_push(&acc, s[k]);
        c += (int64_t)m * TLM_CHUNK;
    }
    if (c < n) tlm_sum4_push(&acc, tlm_chunk_sum(x + c, 1, n - c));
    return tlm_sum4_result(&acc);
}

/* y[o, i] = sum over k of x[o, k, i] by rule 4 for each output, every mode (reduce.c): the
 * stub's one column sum (sum_to, linear's bias gradient, the norms' parameter gradients) */
/* rule 4 over channel ch's values of a (n, c, s) array in (sample, position) order: batchnorm's
 * statistics and the convolution's bias gradient (norm.c, chunks summed side by side) */
TL_HIDDEN float tl_stub_channel_sum(const float *a, int64_t n, int64_t c, int64_t s, int64_t ch);
TL_HIDDEN int tl_stub_axis_sum(const char *op, const float *X, float *Y, int64_t outer,
                               int64_t len, int64_t inner);

#endif
