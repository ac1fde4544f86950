/* pointwise_extra.c (stub): the schedule of pow, erf, exact GELU and PyTorch's softplus with
 * their VJPs. Every op is a formula map (native/common/formulas/pointwise_extra.h, shared with
 * CUDA); codegen emits the bodies into the loop defined here: scalar code (tlm_pow and tlm_erf
 * do not vectorise), split across threads from TL_PAR_MIN / 8 elements since each costs more
 * than a basic pointwise op.
 */
#include "stub.h"
#include "entry/pointwise_extra_kernels.h"

#define TL_MAP_LOOP(n) _Pragma("omp parallel for if(n > TL_PAR_MIN / 8) schedule(static)") \
    for (int64_t i = 0; i < n; i++)
#define TL_MAP_ATTR
#include "entry/pointwise_extra_maps_stub.inc"
