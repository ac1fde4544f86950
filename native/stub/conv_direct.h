/* conv_direct.h (stub): 2-D convolution products read straight from a zero-padded copy of the
 * image, with no im2col buffer (conv_direct.c).
 *
 * Both products are rule-3 chains of the same terms, in the same order, as im2col + the packed
 * GEMM (conv_pool.c): the padded image's border holds the 0.0f im2col writes for padding, so
 * every output gets the same bits. */
#ifndef TL_STUB_CONV_DIRECT_H
#define TL_STUB_CONV_DIRECT_H

#include <stdint.h>
#include "tl_internal.h"
#include "contract.h"

typedef struct tl_direct {
    const tl_geom *G;
    int64_t Hp, Wp, plane;  /* the padded image: rows, columns, cells per channel */
    int64_t CK, P, panels;  /* c_in x kernel offsets; output positions; c_out in panels of 32 */
    int64_t *kaddr;         /* kaddr[(ci, ky, kx)]: ci plane + ky Wp + kx */
    int64_t *paddr;         /* paddr[(oy, ox)]: oy s_0 Wp + ox s_1, position (oy, ox)'s corner */
    int64_t *gaddr;         /* gaddr[oc]: oc P, output channel oc's plane of a sample's g */
} tl_direct;

/* 1 when the geometry takes this path: 2-D, not transposed */
TL_HIDDEN int tl_direct_applies(const tl_geom *G, int64_t transpose);
/* 1 when the forward takes this path too: tl_direct_applies and chains of 64 k steps or more */
TL_HIDDEN int tl_direct_forward_applies(const tl_geom *G, int64_t transpose);
/* 0 when out of memory (nothing left to free); G must outlive D */
TL_HIDDEN int tl_direct_init(tl_direct *D, const tl_geom *G);
TL_HIDDEN void tl_direct_free(tl_direct *D);

/* Y = bias + conv(X, W) for every sample: y[oc, o] is the fma chain over (c_in, kernel
 * offset) in order, from bias[oc]. TL_OK or TL_E_OOM. */
TL_HIDDEN int tl_direct_forward(const tl_direct *D, const float *W, const float *bias,
                                const float *X, float *Y);

/* 1 when the forward takes tl_direct_forward_pl instead: tl_direct_applies, stride 1, output
 * rows a multiple of 16 wide and a multiple of 32 positions */
TL_HIDDEN int tl_direct_forward_pl_applies(const tl_geom *G, int64_t transpose);
/* tl_direct_forward's results (the same chains) with the output positions as the lanes */
TL_HIDDEN int tl_direct_forward_pl(const tl_direct *D, const float *W, const float *bias,
                                   const float *X, float *Y);

/* The bias gradient, rule 4 over (sample, position), from the panels of g_b^T the kernel
 * gradient makes anyway: when P is a multiple of TLM_CHUNK every chunk lies in one sample, so
 * each sample's chunk sums are independent (tl_direct_prep's bpart) and go onto rule 4's tree
 * in (sample, chunk) order afterwards. Floats of chunk sums per sample; 0 when P is not a
 * multiple of TLM_CHUNK (a chunk's sum would run across samples). */
TL_HIDDEN int64_t tl_direct_bias_floats(const tl_direct *D);
/* db[oc] = rule 4's tree over the n samples' chunk sums bpart (tl_direct_bias_floats each) */
TL_HIDDEN void tl_direct_bias_finish(const tl_direct *D, const float *bpart, float *db);

/* The kernel gradient dk (c_out, c_in K): per sample b, each weight's fma chain over the
 * positions in order, from 0, of g_b[oc, o] times the image cell tap (ci, k) reads at o; the
 * samples' chains summed by rule 4 in a sample_sum whose outputs are in tile layout
 * (tl_direct_kacc_floats of them), the chains added onto its open chunk as they finish. */
TL_HIDDEN int64_t tl_direct_kacc_floats(const tl_direct *D);
/* 1 when a group's samples go onto the sums in the tiles (tl_direct_kgrad_group with nb > 1),
 * 0 when each sample's chains are stored (nb = 1, first, into the sample's own tile-layout
 * vector) and the samples summed afterwards */
TL_HIDDEN int tl_direct_kgrad_fuses(const tl_direct *D);
/* floats of one sample's slot: its padded image, then g_b^T's panels */
TL_HIDDEN int64_t tl_direct_sample_floats(const tl_direct *D);
/* fill a slot (its padded-image border zero from an earlier call, or calloc) for sample b:
 * *img the padded image (or xb itself without padding), *gt g_b^T's panels; bpart: NULL, or
 * the sample's tl_direct_bias_floats chunk sums */
TL_HIDDEN void tl_direct_prep(const tl_direct *D, const float *xb, const float *gb, float *slot,
                              float *bpart, const float **img, const float **gt);
/* nb consecutive samples (img[j], gt[j], in order, all in one rule-4 chunk) onto acc, the open
 * chunk's sums in tile layout; first: the chunk's first sample is j = 0 (acc is set, not added
 * to). par = 0 runs on the calling thread only. */
TL_HIDDEN void tl_direct_kgrad_group(const tl_direct *D, const float *const *img,
                                     const float *const *gt, int64_t nb, int first, float *acc,
                                     int par);
/* dk[oc, i] from the tile layout */
TL_HIDDEN void tl_direct_kgrad_store(const tl_direct *D, const float *acc, float *dk);

/* 1 when the input gradient takes this path too: tl_direct_applies, c_in >= 16 and kernel
 * offsets k_n >= 2 s_0 s_1 */
TL_HIDDEN int tl_direct_dgrad_applies(const tl_geom *G, int64_t transpose);
/* the kernel packed for tl_direct_dgrad (free() it); NULL when out of memory */
TL_HIDDEN float *tl_direct_pack_dgrad(const tl_direct *D, const float *W);
/* One sample's input gradient dxb (c_in, in_n), zero beforehand: col2im's sums, in its order (kernel
 * offsets in order onto 0), of the chains over c_out (from 0) of W[oc, ci, k] g_b[oc, o], the
 * bits of the GEMM + col2im. Wk: tl_direct_pack_dgrad's panels. */
TL_HIDDEN void tl_direct_dgrad(const tl_direct *D, const float *Wk, const float *gb, float *dxb,
                               int par);
#endif
