/* contract.h: what the generated entry layer (native/generated/) checks a call with, and the
 * parsed convolution/pooling geometry both backends' kernel bodies read.
 *
 * Lengths are computed in a tl_lens context: the first negative size or product over the uint32
 * element limit records a message naming the op, the buffer and the sizes; later steps return 0,
 * so one check of L.status after all lengths suffices.
 */
#ifndef TL_CONTRACT_H
#define TL_CONTRACT_H

#include "tl_internal.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    const char *op;
    const char *what; /* what is being computed, e.g. "length of y" */
    int status;
} tl_lens;

TL_HIDDEN int64_t tl_lname(tl_lens *L, const char *name, int64_t v);   /* v, refusing v < 0 */
TL_HIDDEN int64_t tl_lmul(tl_lens *L, int64_t a, int64_t b);
TL_HIDDEN int64_t tl_ladd(tl_lens *L, int64_t a, int64_t b);
TL_HIDDEN int64_t tl_lprod(tl_lens *L, const char *name, const int64_t *v, int64_t n);

TL_HIDDEN int tl_check_len(const char *op, const char *what, tl_buf b, int64_t n);
TL_HIDDEN int tl_check_array(const char *op, const char *what, const void *p, int64_t n);
/* 1 when dims `in` (rank ir) broadcast to `out` (rank orank) under NumPy rules */
TL_HIDDEN int tl_broadcastable(const int64_t *in, int64_t ir, const int64_t *out, int64_t orank);
TL_HIDDEN int tl_check_array_len(const char *op, const char *what, int64_t got, int64_t want);

/* Convolution / pooling geometry, parsed from the flat array torchlean/shapes.py builds:
 *   [r, N, C_in, C_out, in_1..in_r, k_1..k_r, out_1..out_r, s_1..s_r, p_1..p_r]
 * Axes past r hold 1 (sizes, strides) and 0 (padding). Every product below is checked
 * against the uint32 element limit, so kernels may allocate from them directly. */
typedef struct {
    int r;
    int64_t n, cin, cout;
    int64_t in[TL_MAX_RANK], k[TL_MAX_RANK], out[TL_MAX_RANK], s[TL_MAX_RANK], p[TL_MAX_RANK];
    int64_t in_n, k_n, out_n;  /* products over the spatial axes */
    int64_t col_n;             /* max(C_in K out_n, C_out K in_n): an im2col/col2im buffer */
} tl_geom;

TL_HIDDEN int tl_geom_parse(const char *op, const char *what, const int64_t *g, int64_t len,
                            tl_geom *G);

#ifdef __cplusplus
}
#endif

#endif
