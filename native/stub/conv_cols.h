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

TL_HIDDEN void tl_im2col(const tl_geom *G, int64_t C, const float *img, int64_t o0, int64_t o1,
                         float *col, int64_t ld, int par);
TL_HIDDEN void tl_col2im(const tl_geom *G, int64_t C, const float *col, float *img, int par);

#endif
