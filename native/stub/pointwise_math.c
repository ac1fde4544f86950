/* pointwise_math.c (stub): the schedule of PyTorch's pointwise math catalog (log1p ... atan2,
 * hypot, fmod, remainder, rounding, logit, xlogy, logaddexp) and their VJPs. Every op is a
 * formula map (native/common/formulas/pointwise_math.h, shared with CUDA); codegen emits the
 * bodies into the loop defined here, split across threads from TL_PAR_MIN / 8 elements since
 * each costs more than a basic pointwise op.
 */
#include "stub.h"
#include "generated/pointwise_math_kernels.h"

#define TL_MAP_LOOP(n) _Pragma("omp parallel for if(n > TL_PAR_MIN / 8) schedule(static)") \
    for (int64_t i = 0; i < n; i++)
#define TL_MAP_ATTR
#include "generated/pointwise_math_maps_stub.inc"
