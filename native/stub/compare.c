/* compare.c (stub): comparisons as 0/1 masks, where and its VJP, over equal-length buffers.
 *
 * Broadcasting is done before the call. No arithmetic happens, so every mode gives the same
 * bits on both libraries. Comparisons follow IEEE: NaN compares false except for !=; where
 * takes a where cond != 0, so a NaN condition selects a (NumPy's bool(nan) is True).
 */
#include "stub.h"
#include "generated/compare_kernels.h"

#define LOOP(n) _Pragma("omp parallel for simd if(n > TL_PAR_MIN) schedule(static)") \
    for (int64_t i = 0; i < n; i++)

#define COMPARE_LOOP(OPER) LOOP(n) { Y[i] = (A[i] OPER B[i]) ? 1.0f : 0.0f; } break

int tlk_compare(const char *op, tl_buf a, tl_buf b, tl_buf y, int64_t n, int64_t kind) {
    (void)op;
    const float *A = a->data, *B = b->data;
    float *Y = y->data;
    switch (kind) {   /* the registry's kind constants: lt le gt ge eq ne */
    case 0: COMPARE_LOOP(<);
    case 1: COMPARE_LOOP(<=);
    case 2: COMPARE_LOOP(>);
    case 3: COMPARE_LOOP(>=);
    case 4: COMPARE_LOOP(==);
    default: COMPARE_LOOP(!=);
    }
    return TL_OK;
}

int tlk_where(const char *op, tl_buf cond, tl_buf a, tl_buf b, tl_buf y, int64_t n) {
    (void)op;
    const float *C = cond->data, *A = a->data, *B = b->data;
    float *Y = y->data;
    LOOP(n) { Y[i] = C[i] != 0.0f ? A[i] : B[i]; }
    return TL_OK;
}

int tlk_where_backward(const char *op, tl_buf cond, tl_buf g, tl_buf dx, int64_t n, int64_t take_a) {
    (void)op;
    const float *C = cond->data, *G = g->data;
    float *D = dx->data;
    const int want = take_a != 0;
    LOOP(n) { D[i] = ((C[i] != 0.0f) == want) ? G[i] : 0.0f; }
    return TL_OK;
}
