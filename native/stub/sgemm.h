/* sgemm.h (stub): the default mode's float32 GEMM (linalg.c), for kernels built on products.
 *
 * C (m, p) = op(A) (m, n) @ op(B) (n, p), op(A)[i][k] at A[i*ars + k*acs], op(B)[k][j] at
 * B[k*brs + j*bcs], C row-major with row stride ldc, overwritten (accumulate = 0) or added to.
 * Every C element is one fused multiply-add chain in increasing k (c = fma(a, b, c)) whatever
 * the blocking or thread count, so splitting k into consecutive calls with accumulate gives the
 * same bits as one call. may_thread = 0 runs on the calling thread
 * alone (safe inside a parallel loop). Returns nonzero when packing memory ran out. */
#ifndef TL_STUB_SGEMM_H
#define TL_STUB_SGEMM_H

#include <stdint.h>
#include "tl_internal.h"

TL_HIDDEN int tl_sgemm(const float *A, int64_t ars, int64_t acs, const float *B, int64_t brs,
                       int64_t bcs, float *C, int64_t ldc, int64_t m, int64_t n, int64_t p,
                       int accumulate, int may_thread);

/* The same product with op(A) packed beforehand (tl_sgemm_pack_a, NULL when out of memory;
 * free() it), for many products with one A (a convolution's kernel, sample after sample):
 * the same bits as tl_sgemm. The product uses rows [row0, row0 + m) of the packed (m_all, n)
 * matrix; row0 a multiple of TL_SGEMM_MR. */
/* micro-tile rows: 8 x 48 with AVX-512 (24 of 32 registers), 6 x 16 with 16 registers (AVX2:
 * 12 accumulators beside B's two vectors and the broadcast) */
#if defined(__AVX512F__)
#define TL_SGEMM_MR 8
#else
#define TL_SGEMM_MR 6
#endif
TL_HIDDEN float *tl_sgemm_pack_a(const float *A, int64_t ars, int64_t acs, int64_t m, int64_t n);
TL_HIDDEN int tl_sgemm_prepacked(const float *Ap, int64_t m_all, int64_t row0, const float *B,
                                 int64_t brs, int64_t bcs, float *C, int64_t ldc, int64_t m,
                                 int64_t n, int64_t p, int accumulate, int may_thread);

#endif
