/* formulas/scan.h: the selective scan's per-step arithmetic, written once for the stub
 * (native/stub/scan.c) and CUDA (native/cuda/scan.cu), which run it sequentially in time:
 * h_t = a_t h_{t-1} + b_t x_t and the backward carry g_t = dY_t + a_{t+1} g_{t+1}, each with two
 * rounded products (or one) and one rounded sum (no FMA), so both libraries give the same bits
 * in every mode. */
#ifndef TL_FORMULAS_SCAN_H
#define TL_FORMULAS_SCAN_H

#include "tl_math.h"

TLM_HD float tlf_scan_step(float a, float h_prev, float b, float x) { return tlm_add(tlm_mul(a, h_prev), tlm_mul(b, x)); }
TLM_HD float tlf_scan_carry(float dy, float a_next, float g_next) { return tlm_add(dy, tlm_mul(a_next, g_next)); }

/* a coefficient's layout by its mode: (D,) 0, (T, D) 1, (B, T, D) 2: its length, and the offset
 * of (sample bi, step t, channel 0) in it */
TLM_HD int64_t tlf_scan_coef_len(int64_t mode, int64_t batch, int64_t steps, int64_t width) {
    return mode == 0 ? width : mode == 1 ? steps * width : batch * steps * width;
}
TLM_HD int64_t tlf_scan_coef_row(int64_t mode, int64_t bi, int64_t t, int64_t steps, int64_t width) {
    return mode == 0 ? 0 : mode == 1 ? t * width : (bi * steps + t) * width;
}

#endif /* TL_FORMULAS_SCAN_H */
