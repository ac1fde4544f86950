/* attention_blocked.h (stub): the default mode's attention core (attention_blocked.c) on
 * (B*n, H*hd) row-major Q, K, V, O and their gradients, lse (B, H, n); M is the (n, n) mask
 * (nonzero = may attend) or NULL. Each returns nonzero when scratch memory ran out. */
#ifndef TL_STUB_ATTENTION_BLOCKED_H
#define TL_STUB_ATTENTION_BLOCKED_H

#include <stdint.h>
#include "tl_internal.h"

TL_HIDDEN int tl_attn_blocked_forward(const float *Q, const float *K, const float *V,
                                      const float *M, int causal, float *O, float *L, int64_t b,
                                      int64_t n, int64_t h, int64_t hd);
TL_HIDDEN int tl_attn_blocked_backward(const float *Q, const float *K, const float *V,
                                       const float *O, const float *L, const float *dO,
                                       const float *M, int causal, float *dQ, float *dK,
                                       float *dV, int64_t b, int64_t n, int64_t h, int64_t hd);

#endif
