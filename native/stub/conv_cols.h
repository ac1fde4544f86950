/* conv_cols.h (stub): im2col and col2im over a convolution's geometry (conv_cols.c).
 *
 * col has rows (c, kernel offset) and columns (output position): col[(c*K + k) * P + o]
 * holds image[c, o*s + k - p] (0 outside), with K = G->k_n kernel offsets and P = G->out_n
 * positions; an image channel has G->in_n cells. tl_im2col fills the columns of positions
 * [o0, o1) only, row ck at col + ck * ld (so a block of positions can stay in cache). col2im adds the rows back onto the image,
 * channel by channel, kernel offsets in order (a cell's taps arrive in that order: one kernel
 * offset touches a cell at most once), each add one rounding (tlm_add). par = 0 runs on the
 * calling thread only. */
#ifndef TL_STUB_CONV_COLS_H
#define TL_STUB_CONV_COLS_H

#include <stdint.h>
#include "tl_internal.h"
#include "contract.h"

/* a convolution's image-side geometry with what each kernel offset's runs share */
typedef struct tl_col_tap {
    int64_t ko[TL_MAX_RANK];   /* the kernel offset per axis */
    int64_t lo, hi, d;         /* outputs [lo, hi) of the last axis read image column o*s + d */
} tl_col_tap;

typedef struct tl_cols {
    const tl_geom *G;
    int64_t L, OL, IL, runs;   /* the last axis; its output and image lengths; runs per row */
    tl_col_tap *taps;          /* one per kernel offset */
    int64_t *rows;             /* rows[k * runs + q]: image offset of run q's row, -1 in padding */
} tl_cols;

/* 0 when out of memory; G must outlive R */
TL_HIDDEN int tl_cols_init(tl_cols *R, const tl_geom *G);
TL_HIDDEN void tl_cols_free(tl_cols *R);
TL_HIDDEN void tl_im2col(const tl_cols *R, int64_t C, const float *img, int64_t o0, int64_t o1,
                         float *col, int64_t ld, int par);
TL_HIDDEN void tl_col2im(const tl_cols *R, int64_t C, const float *col, float *img, int par);

#endif
