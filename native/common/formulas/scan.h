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

#endif /* TL_FORMULAS_SCAN_H */
