/* pointwise_extra.c (stub): the schedule of pow, erf, exact GELU and PyTorch's softplus with
 * their VJPs. Every op is a formula map (native/common/formulas/pointwise_extra.h, shared with
 * CUDA); codegen emits the bodies into the loop defined here: scalar code (tlm_pow does not
 * vectorise), split across threads from TL_PAR_MIN / 8 elements since each costs more than a
 * basic pointwise op. erf, the exact GELU and its VJP run over blocks instead (own_schedule):
 * erf by fit (below), GELU's own stages in loops that vectorise.
 */
#include "stub.h"
#include "generated/pointwise_extra_kernels.h"

#define TL_MAP_LOOP(n) _Pragma("omp parallel for if(n > TL_PAR_MIN / 8) schedule(static)") \
    for (int64_t i = 0; i < n; i++)
#define TL_MAP_ATTR
#include "generated/pointwise_extra_maps_stub.inc"

/* erf by fit. tlm_erf selects among its fits, so a vectorised loop over it evaluates all three
 * for every element; here a block is first split into three lists by tlm_erf_arg (below 1/2,
 * below 7/4, the rest; NaN in the first), each list runs through its one fit in a loop that
 * vectorises, and the results go back in place: per element the same operations as tlm_erf, so
 * the same bits. A list runs in whole vectors (padded with an argument of its own fit), since
 * the scalar tail of such a loop costs as much as several vectors. */
#define ERF_BLOCK 512
#define ERF_VEC 16

#define ERF_LIST(NAME, R)                                                                      \
    static TL_VEC512 __attribute__((noinline)) void NAME(const float *X, float *Y, int len) { \
        for (int k = 0; k < len; k++) {                                                        \
            float a = tlm_erf_arg(X[k]);                                                       \
            Y[k] = tlm_erf_round(X[k], a, (R));                                                \
        }                                                                                      \
    }
ERF_LIST(erf_small_list, tlm_erf_small(a))
ERF_LIST(erf_near_list, tlm_erf_big(a, 0))
ERF_LIST(erf_far_list, tlm_erf_big(a, 1))

/* Sort X[0..len) into the three lists by fit: xs[r] gets the values, ix[r] their positions,
 * n[r] their count. Fit 0: |x| below 1/2 (NaN too: tlm_erf_arg gives 0); 2: |x| from 7/4 (the
 * clamp to 4 moves no element across either threshold); 1: the rest. */
#if defined(__AVX2__) && defined(__BMI2__)
#include <immintrin.h>
/* the lanes of mask's set bits, in order, as a permutation for vpermps (left-packing) */
static inline __m256i pack_lanes(unsigned mask) {
    uint64_t bytes = _pdep_u64(mask, 0x0101010101010101ull) * 0xff;
    return _mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)_pext_u64(0x0706050403020100ull, bytes)));
}
#endif
static void erf_sort(const float *X, int len, float xs[3][ERF_BLOCK + ERF_VEC],
                     int32_t ix[3][ERF_BLOCK], int n[3]) {
    int n0 = 0, n1 = 0, n2 = 0, i = 0;
#if defined(__AVX2__) && defined(__BMI2__)
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    const __m256 half = _mm256_set1_ps(0.5f), far = _mm256_set1_ps(1.75f);
    __m256i pos = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    for (; i + 8 <= len; i += 8, pos = _mm256_add_epi32(pos, _mm256_set1_epi32(8))) {
        __m256 x = _mm256_loadu_ps(X + i), a = _mm256_and_ps(x, absmask);
        unsigned m0 = (unsigned)_mm256_movemask_ps(_mm256_cmp_ps(a, half, _CMP_NGE_UQ));
        unsigned m2 = (unsigned)_mm256_movemask_ps(_mm256_cmp_ps(a, far, _CMP_GE_OQ));
        unsigned m1 = ~(m0 | m2) & 0xffu;
        __m256i p0 = pack_lanes(m0), p1 = pack_lanes(m1), p2 = pack_lanes(m2);
        _mm256_storeu_ps(xs[0] + n0, _mm256_permutevar8x32_ps(x, p0));
        _mm256_storeu_si256((__m256i *)(ix[0] + n0), _mm256_permutevar8x32_epi32(pos, p0));
        _mm256_storeu_ps(xs[1] + n1, _mm256_permutevar8x32_ps(x, p1));
        _mm256_storeu_si256((__m256i *)(ix[1] + n1), _mm256_permutevar8x32_epi32(pos, p1));
        _mm256_storeu_ps(xs[2] + n2, _mm256_permutevar8x32_ps(x, p2));
        _mm256_storeu_si256((__m256i *)(ix[2] + n2), _mm256_permutevar8x32_epi32(pos, p2));
        n0 += __builtin_popcount(m0); n1 += __builtin_popcount(m1); n2 += __builtin_popcount(m2);
    }
#endif
    for (; i < len; i++) {   /* branch-free: every list takes x, one keeps it */
        float x = X[i], a = tlm_erf_arg(x);
        int32_t f = (a >= 0.5f) + (a >= 1.75f);
        xs[0][n0] = x; ix[0][n0] = i; n0 += f == 0;
        xs[1][n1] = x; ix[1][n1] = i; n1 += f == 1;
        xs[2][n2] = x; ix[2][n2] = i; n2 += f == 2;
    }
    n[0] = n0; n[1] = n1; n[2] = n2;
}

/* Y[0..len) = erf(X[0..len)), len <= ERF_BLOCK */
static void erf_block(const float *X, float *Y, int len) {
    float xs[3][ERF_BLOCK + ERF_VEC], ys[ERF_BLOCK + ERF_VEC];
    int32_t ix[3][ERF_BLOCK];
    int n[3];
    erf_sort(X, len, xs, ix, n);
    static const float pad[3] = {0.0f, 1.0f, 2.0f};
    void (*const list[3])(const float *, float *, int) = {erf_small_list, erf_near_list, erf_far_list};
    for (int r = 0; r < 3; r++) {
        const int m = n[r], whole = (m + ERF_VEC - 1) / ERF_VEC * ERF_VEC;
        if (!m) continue;
        for (int k = m; k < whole; k++) xs[r][k] = pad[r];
        list[r](xs[r], ys, whole);
        const int32_t *I = ix[r];
        for (int k = 0; k < m; k++) Y[I[k]] = ys[k];
    }
}

/* the exact GELU's forward and VJP over a block: t = erf(x / sqrt(2)) by erf_block, then the
 * formula given t (loops that vectorise) */
static TL_VEC512 __attribute__((noinline)) void gelu_erf_arg_block(const float *X, float *U, int len) {
    for (int i = 0; i < len; i++) U[i] = tlf_gelu_erf_arg(X[i]);
}
static TL_VEC512 __attribute__((noinline)) void gelu_erf_of_block(const float *X, const float *T,
                                                                  float *Y, int len) {
    for (int i = 0; i < len; i++) Y[i] = tlf_gelu_erf_of(X[i], T[i]);
}
static TL_VEC512 __attribute__((noinline)) void gelu_erf_backward_of_block(
    const float *X, const float *G, const float *T, float *Y, int len) {
    for (int i = 0; i < len; i++) Y[i] = tlf_gelu_erf_backward_of(X[i], G[i], T[i]);
}

#define BLOCKS(n) for (int64_t b = 0; b < ((n) + ERF_BLOCK - 1) / ERF_BLOCK; b++)
#define BLOCK_LEN(n) (int)((n) - b * ERF_BLOCK < ERF_BLOCK ? (n) - b * ERF_BLOCK : ERF_BLOCK)

int tlk_erf(const char *op, tl_buf x, tl_buf y, int64_t n) {
    const float *X = x->data; float *Y = y->data;
#pragma omp parallel for if (n > TL_PAR_MIN / 8) schedule(static)
    BLOCKS(n) erf_block(X + b * ERF_BLOCK, Y + b * ERF_BLOCK, BLOCK_LEN(n));
    return TL_OK;
}

/* t = erf(x / sqrt 2) for a block of GELU inputs: the term both exact-GELU kernels share */
static void gelu_erf_terms(const float *X, float *t, int len) {
    float u[ERF_BLOCK];
    gelu_erf_arg_block(X, u, len);
    erf_block(u, t, len);
}

int tlk_gelu_erf(const char *op, tl_buf x, tl_buf y, int64_t n) {
    const float *X = x->data; float *Y = y->data;
#pragma omp parallel for if (n > TL_PAR_MIN / 8) schedule(static)
    BLOCKS(n) {
        const int64_t i0 = b * ERF_BLOCK;
        float t[ERF_BLOCK];
        gelu_erf_terms(X + i0, t, BLOCK_LEN(n));
        gelu_erf_of_block(X + i0, t, Y + i0, BLOCK_LEN(n));
    }
    return TL_OK;
}

int tlk_gelu_erf_backward(const char *op, tl_buf x, tl_buf g, tl_buf dx, int64_t n) {
    const float *X = x->data, *G = g->data; float *Y = dx->data;
#pragma omp parallel for if (n > TL_PAR_MIN / 8) schedule(static)
    BLOCKS(n) {
        const int64_t i0 = b * ERF_BLOCK;
        float t[ERF_BLOCK];
        gelu_erf_terms(X + i0, t, BLOCK_LEN(n));
        gelu_erf_backward_of_block(X + i0, G + i0, t, Y + i0, BLOCK_LEN(n));
    }
    return TL_OK;
}
