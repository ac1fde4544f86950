/* check_math_same_eval.c: one header version's functions over a run of bit patterns, for
 * check_math_same.c. Compiled twice: -DTLM_HEADER='"tl_math_cr_ref.h"' -DEVAL=ref_eval (the
 * proven double-double version) and with native/common/tl_math.h -DEVAL=cur_eval. */
#include <stdint.h>
#include TLM_HEADER

#define LOOP(F)                                                                          \
    for (uint32_t i = 0; i < n; i++) out[i] = (uint32_t)tlm_to_bits(F(tlm_from_bits((int32_t)(base + i)))); \
    break;

/* out[i] = bits of function fn at bit pattern base + i, i < n (fn: check_math_same.c's NAMES) */
__attribute__((target("prefer-vector-width=512")))
void EVAL(int fn, uint32_t base, uint32_t n, uint32_t *out) {
    switch (fn) {
    case 0: LOOP(tlm_exp)
    case 1: LOOP(tlm_expm1)
    case 2: LOOP(tlm_log)
    case 3: LOOP(tlm_log1p)
    case 4: LOOP(tlm_tanh)
    case 5: LOOP(tlm_sigmoid)
    case 6: LOOP(tlm_softplus)
    case 7: LOOP(tlm_erf)
    case 8: LOOP(tlm_sin_2pi)
    case 9: LOOP(tlm_cos_2pi)
    case 10: LOOP(tlm_gelu)
    default: LOOP(tlm_gelu_grad)
    }
}
