/* pointwise_extra.c (stub): the schedule of pow, erf, exact GELU and PyTorch's softplus with
 * their VJPs. Every op is a formula map (native/common/formulas/pointwise_extra.h, shared with
 * CUDA); codegen emits the bodies into the loop defined here: scalar code (tlm_pow does not
 * vectorise), split across threads from TL_PAR_MIN / 8 elements since each costs more than a
 * basic pointwise op; erf runs over blocks instead (own_schedule), which vectorise.
 */
#include "stub.h"
#include "generated/pointwise_extra_kernels.h"

#define TL_MAP_LOOP(n) _Pragma("omp parallel for if(n > TL_PAR_MIN / 8) schedule(static)") \
    for (int64_t i = 0; i < n; i++)
#define TL_MAP_ATTR
#include "generated/pointwise_extra_maps_stub.inc"

/* erf over blocks of a plain loop, which GCC vectorises; the
 * same loop inside the OpenMP-outlined body is left scalar */
static TL_VEC512 __attribute__((noinline)) void erf_block(const float *X, float *Y, int64_t len) {
    for (int64_t i = 0; i < len; i++) Y[i] = tlf_erf(X[i]);
}

int tlk_erf(const char *op, tl_buf x, tl_buf y, int64_t n) {
    const float *X = x->data; float *Y = y->data;
    const int64_t B = 1024, nb = (n + B - 1) / B;
#pragma omp parallel for if (n > TL_PAR_MIN / 8) schedule(static)
    for (int64_t b = 0; b < nb; b++) erf_block(X + b * B, Y + b * B, n - b * B < B ? n - b * B : B);
    return TL_OK;
}
