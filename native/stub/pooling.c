/* pooling.c (stub): max, average and smooth-max pooling over any number of spatial axes, with
 * an optional batch axis; the 2-D entry points are the N-D kernels with two spatial axes.
 * Geometry as for convolution (conv_pool.c). Window values in row-major kernel order; avg and
 * smooth-max window sums are rule 4 (native/common/tl_math.h), smooth-max uses tlm_exp /
 * tlm_log; backward adds each window's shares into its cells window by window in row-major
 * output order. Nothing depends on the thread count. CUDA: native/cuda/pooling.cu.
 */
#include <float.h>
#include <stdlib.h>
#include <string.h>
#include "stub.h"
#include "simd16.h"
#include "generated/conv_pool_kernels.h"

/* the geometry the generated entry parsed (native/common/contract.h) */
typedef tl_geom geom_t;

/* ------------------------------------------------------------------ pooling windows
 * Which image cell a (kernel offset, output position) pair reads is the same for every
 * channel and sample, so pooling computes it once per call: tab[o * K + k] is its offset in a
 * channel's image, or -1 in the padding. (Convolutions walk rows instead: conv_cols.c.) */
static void unravel(int64_t i, const int64_t *dims, int64_t r, int64_t *idx) {
    for (int64_t a = r - 1; a >= 0; a--) { idx[a] = dims[a] ? i % dims[a] : 0; if (dims[a]) i /= dims[a]; }
}

/* image offset of kernel offset kk at output position o, or -1 when it falls in padding */
static inline int64_t tap(const geom_t *G, const int64_t *ko, const int64_t *oo) {
    int64_t off = 0;
    for (int64_t a = 0; a < G->r; a++) {
        int64_t i = oo[a] * G->s[a] + ko[a] - G->p[a];
        if (i < 0 || i >= G->in[a]) return -1;
        off = off * G->in[a] + i;
    }
    return off;
}

/* the offsets of every (output position, kernel offset) pair of G (tap), output-major; NULL
 * when out of memory */
static int64_t *tap_table(const geom_t *G) {
    int64_t K = G->k_n, P = G->out_n;
    int64_t *tab = (int64_t *)malloc((size_t)(K * P > 0 ? K * P : 1) * sizeof(int64_t));
    if (!tab) return NULL;
#pragma omp parallel for schedule(static) if (K * P * G->r > TL_PAR_MIN)
    for (int64_t o = 0; o < P; o++) {
        int64_t io[TL_MAX_RANK], ik[TL_MAX_RANK];
        unravel(o, G->out, G->r, io);
        for (int64_t k = 0; k < K; k++) {
            unravel(k, G->k, G->r, ik);
            tab[o * K + k] = tap(G, ik, io);
        }
    }
    return tab;
}

enum { POOL_MAX, POOL_AVG, POOL_SMOOTH };

/* Gather the window of output o of one plane: vals[j] (padding: pad_value), offs[j] (-1 for
 * padding), in kernel row-major order. tab is the call's tap table read output-major:
 * tab[o * KN + j], the same for every plane. */
static inline void window(const int64_t *tab, int64_t KN, const float *plane, int64_t o,
                          float pad_value, float *vals, int64_t *offs) {
    const int64_t *t = tab + o * KN;
    for (int64_t j = 0; j < KN; j++) {
        offs[j] = t[j];
        vals[j] = t[j] < 0 ? pad_value : plane[t[j]];
    }
}

#define SMOOTH_BLOCK 64 /* smooth-max windows handled together, so exp and log run as vectors */
#define SMOOTH_WORK 16384 /* ... but at most about this many window values at once */

/* Smooth-max pooling of one plane, SMOOTH_BLOCK windows at a time. Per window: pivot (first
 * value, then max/min by the sign of beta), e_j = exp(beta (v_j - pivot)), s = rule-4 sum of
 * the e_j; forward y = pivot + log(s) / beta, backward adds g e_j / s to each in-image cell,
 * windows in order. Work buffers: v and pv of blk * KN floats, offs of as many offsets. */
static int64_t smooth_block(int64_t KN) {
    int64_t blk = KN > 0 ? SMOOTH_WORK / KN : SMOOTH_BLOCK;
    return blk < 1 ? 1 : (blk > SMOOTH_BLOCK ? SMOOTH_BLOCK : blk);
}

static void smooth_plane(const geom_t *G, const int64_t *tab, const float *x, const float *gp, float *y, float beta,
                         int backward, float *v, float *pv, int64_t *offs) {
    const int64_t KN = G->k_n, blk = smooth_block(KN);
    float piv[SMOOTH_BLOCK], s[SMOOTH_BLOCK];
    for (int64_t o0 = 0; o0 < G->out_n; o0 += blk) {
        int64_t nb = G->out_n - o0 < blk ? G->out_n - o0 : blk;
        for (int64_t q = 0; q < nb; q++) {
            float *vq = v + q * KN;
            window(tab, KN, x, o0 + q, 0.0f, vq, offs + q * KN);
            float p = vq[0];
            for (int64_t j = 1; j < KN; j++)
                p = beta > 0 ? (vq[j] > p ? vq[j] : p) : (vq[j] < p ? vq[j] : p);
            piv[q] = p;
            for (int64_t j = 0; j < KN; j++) pv[q * KN + j] = p;
        }
#pragma omp simd
        for (int64_t e = 0; e < nb * KN; e++) v[e] = tlm_exp(tlm_mul(beta, tlm_sub(v[e], pv[e])));
        for (int64_t q = 0; q < nb; q++) s[q] = tlm_sum(v + q * KN, 1, KN);
        if (!backward) {
#pragma omp simd
            for (int64_t q = 0; q < nb; q++) y[o0 + q] = tlm_add(piv[q], tlm_div(tlm_log(s[q]), beta));
            continue;
        }
        for (int64_t q = 0; q < nb; q++)
            for (int64_t j = 0; j < KN; j++) {
                int64_t t = offs[q * KN + j];
                if (t >= 0) y[t] = tlm_add(y[t], tlm_mul(gp[o0 + q], tlm_div(v[q * KN + j], s[q])));
            }
    }
}

static int pool(const char *op, int kind, tl_buf input, tl_buf g, tl_buf out, const geom_t *geom,
                double beta_d, int backward) {
    const geom_t G = *geom;
    int64_t planes = G.n * G.cin;
    float beta = (float)beta_d;
    if (backward)
        for (int64_t i = 0; i < planes * G.in_n; i++) out->data[i] = 0.0f;
    if (planes * G.out_n == 0) return TL_OK;
    int64_t KN = G.k_n;
    float denom = (float)KN;
    int err = 0;
    int64_t *tab = tap_table(&G);
    if (!tab) return tl_fail(TL_E_OOM, "%s: out of host memory for the pooling window table", op);
    /* one plane per iteration: each backward plane scatters in a fixed (o, j) order */
#pragma omp parallel if (planes * G.out_n * KN > TL_PAR_MIN)
    {
        /* one window's values and offsets; smooth-max keeps a block of windows (and pivots) */
        int64_t wn = kind == POOL_SMOOTH ? smooth_block(KN) * KN : KN;
        float *vals = (float *)malloc((size_t)wn * (kind == POOL_SMOOTH ? 2 : 1) * sizeof(float));
        int64_t *offs = (int64_t *)malloc((size_t)wn * sizeof(int64_t));
        if (!vals || !offs) {
#pragma omp atomic write
            err = 1;
        }
#pragma omp for schedule(dynamic, 8) nowait
        for (int64_t pl = 0; pl < planes; pl++) {
            if (!vals || !offs) continue;
            const float *x = input->data + pl * G.in_n;
            const float *gp = backward ? g->data + pl * G.out_n : NULL;
            float *y = backward ? out->data + pl * G.in_n : out->data + pl * G.out_n;
            if (kind == POOL_SMOOTH) {
                smooth_plane(&G, tab, x, gp, y, beta, backward, vals, vals + wn, offs);
                continue;
            }
            for (int64_t o = 0; o < G.out_n; o++) {
                if (kind == POOL_MAX) {
                    const int64_t *t = tab + o * KN;
                    float best = -FLT_MAX;
                    int64_t arg = -1;
                    for (int64_t j = 0; j < KN; j++) { /* the first NaN wins for good (PyTorch) */
                        float v = t[j] < 0 ? -INFINITY : x[t[j]];
                        if (v > best || (v != v && best == best)) { best = v; arg = j; }
                    }
                    if (!backward) y[o] = best;
                    else if (arg >= 0 && t[arg] >= 0) y[t[arg]] = tlm_add(y[t[arg]], gp[o]);
                } else if (kind == POOL_AVG) {
                    window(tab, KN, x, o, 0.0f, vals, offs);
                    if (!backward) {
                        y[o] = tlm_div(tlm_sum(vals, 1, KN), denom);
                    } else {
                        float d = tlm_div(gp[o], denom);
                        for (int64_t j = 0; j < KN; j++)
                            if (offs[j] >= 0) y[offs[j]] = tlm_add(y[offs[j]], d);
                    }
                }
            }
        }
        free(vals);
        free(offs);
    }
    free(tab);
    if (err) return tl_fail(TL_E_OOM, "%s: out of host memory for a pooling window", op);
    return TL_OK;
}

/* ------------------------------------------------------------------ max-pool backward
 * Each plane's input gradient in one pass over the plane: its cells zeroed (they stay in
 * cache), then per row of outputs the window maxima of the whole row, tap by tap in row-major
 * kernel order (so each window still sees its taps in pool()'s order, and keeps pool()'s rule:
 * running best from -FLT_MAX, the first strictly greater value or the first NaN wins; padding
 * cells are -inf and never win, so taps in the padding are skipped), branch-free and across
 * the row's windows at once; then the row's outputs, in order, add their gradient onto their
 * max's cell (tlm_add). The same adds in the same order as pool()'s scatter, so the same bits;
 * no tap table. Up to 3 spatial axes (rank 1 and 2 padded with leading axes of size 1) and
 * planes under 2^31 cells; others go through pool(). */
typedef struct {
    int64_t in[3], k[3], out[3], s[3], p[3];
} mp_geom;

/* the outputs o of axis a whose tap k lies in the image: [*lo, *hi) */
static void mp_span(const mp_geom *M, int a, int64_t k, int64_t *lo, int64_t *hi) {
    int64_t s = M->s[a], off = k - M->p[a];              /* cell = o * s + off */
    int64_t l = off >= 0 ? 0 : (-off + s - 1) / s;
    int64_t h = M->in[a] - off <= 0 ? 0 : (M->in[a] - off + s - 1) / s;
    *lo = l;
    *hi = h < M->out[a] ? h : M->out[a];
}

/* one row of windows (outputs (od, oh, 0..out_w)) of one plane x: best / arg per window */
static void mp_row(const mp_geom *M, const float *x, int64_t od, int64_t oh, float *best,
                   int32_t *arg) {
    const int64_t W = M->in[2], HW = M->in[1] * W, OW = M->out[2], sw = M->s[2];
    for (int64_t o = 0; o < OW; o++) { best[o] = -FLT_MAX; arg[o] = -1; }
    for (int64_t kd = 0; kd < M->k[0]; kd++) {
        int64_t d = od * M->s[0] + kd - M->p[0];
        if (d < 0 || d >= M->in[0]) continue;
        for (int64_t kh = 0; kh < M->k[1]; kh++) {
            int64_t h = oh * M->s[1] + kh - M->p[1];
            if (h < 0 || h >= M->in[1]) continue;
            for (int64_t kw = 0; kw < M->k[2]; kw++) {
                int64_t lo, hi, off = kw - M->p[2];
                mp_span(M, 2, kw, &lo, &hi);
                const float *row = x + d * HW + h * W + off;
                const int32_t base = (int32_t)(d * HW + h * W + off);
                for (int64_t o = lo; o < hi; o++) {
                    float v = row[o * sw], b = best[o];
                    int take = (v > b) | ((v != v) & (b == b));
                    best[o] = take ? v : b;
                    arg[o] = take ? base + (int32_t)(o * sw) : arg[o];
                }
            }
        }
    }
}

/* dx (one plane, in_n cells) from x (the plane's input) and g (its output gradient); best and
 * arg hold out_w entries */
static void max_pool_backward_plane(const mp_geom *M, const float *x, const float *g, float *dx,
                                    float *best, int32_t *arg) {
    const int64_t OW = M->out[2];
    memset(dx, 0, (size_t)(M->in[0] * M->in[1] * M->in[2]) * sizeof(float));
    for (int64_t od = 0; od < M->out[0]; od++)
        for (int64_t oh = 0; oh < M->out[1]; oh++) {
            mp_row(M, x, od, oh, best, arg);
            const float *gr = g + (od * M->out[1] + oh) * OW;
            for (int64_t o = 0; o < OW; o++)
                if (arg[o] >= 0) dx[arg[o]] = tlm_add(dx[arg[o]], gr[o]);
        }
}

static int max_pool_backward(const char *op, tl_buf input, tl_buf g, tl_buf dinput,
                             const geom_t *G) {
    mp_geom M;
    int lead = 3 - G->r;
    for (int a = 0; a < 3; a++) {
        int b = a - lead;
        M.in[a] = b < 0 ? 1 : G->in[b];
        M.k[a] = b < 0 ? 1 : G->k[b];
        M.out[a] = b < 0 ? 1 : G->out[b];
        M.s[a] = b < 0 ? 1 : G->s[b];
        M.p[a] = b < 0 ? 0 : G->p[b];
    }
    int64_t planes = G->n * G->cin;
    int err = 0;
#pragma omp parallel if (planes * (G->in_n + G->out_n * G->k_n) > TL_PAR_MIN)
    {
        size_t ow = (size_t)(M.out[2] > 0 ? M.out[2] : 1);
        float *best = (float *)malloc(ow * sizeof(float));
        int32_t *arg = (int32_t *)malloc(ow * sizeof(int32_t));
        if (!best || !arg) {
#pragma omp atomic write
            err = 1;
        }
#pragma omp for schedule(static)
        for (int64_t pl = 0; pl < planes; pl++)
            if (best && arg)
                max_pool_backward_plane(&M, input->data + pl * G->in_n, g->data + pl * G->out_n,
                                        dinput->data + pl * G->in_n, best, arg);
        free(best);
        free(arg);
    }
    if (err) return tl_fail(TL_E_OOM, "%s: out of host memory for a row of pooling windows", op);
    return TL_OK;
}

/* ------------------------------------------------------------------ 2 x 2 max pooling
 * The common case (2-D, 2 x 2 windows, stride 2, no padding: every window wholly inside its
 * plane, no two windows sharing a cell) without tap tables or spans: each output reads its
 * window's taps in row-major order under pool()'s rule (running best from -FLT_MAX, the first
 * strictly greater value or the first NaN wins), and the backward adds each output's gradient
 * onto its winner's zeroed cell with tlm_add, as the general paths do: the same bits. A tiny
 * plane (8 x 8 -> 4 x 4 in a digits CNN) cost the general paths a span or a window gather per
 * tap; here a plane is a few dozen compares. */
static int is_pool2x2(const geom_t *G) {
    return G->r == 2 && G->k[0] == 2 && G->k[1] == 2 && G->s[0] == 2 && G->s[1] == 2 &&
           G->p[0] == 0 && G->p[1] == 0 && 2 * G->out[0] <= G->in[0] && 2 * G->out[1] <= G->in[1];
}

/* ... on planes of at most 8 x 8 with every cell in a window (pool2x2_small) */
static int is_small2x2(const geom_t *G) {
    const int64_t ow = G->out[1];
    return 2 * G->out[0] == G->in[0] && 2 * ow == G->in[1] && (ow == 1 || ow == 2 || ow == 4);
}

/* pool2x2_small's windows [w0, nw) past its last whole chunk, one at a time, by the same rule
 * (forward: y; backward: their dx cells) */
static void small_tail(int64_t OW, int64_t w0, int64_t nw, const float *x, float *y, const float *g,
                       float *dx) {
    for (int64_t w = w0; w < nw; w++) {
        const float *r0 = x + (w / OW) * 4 * OW + 2 * (w % OW), *r1 = r0 + 2 * OW;
        const float v[4] = {r0[0], r0[1], r1[0], r1[1]};
        float best = -FLT_MAX;
        int arg = -1;
        for (int j = 0; j < 4; j++)
            if (v[j] > best || (v[j] != v[j] && best == best)) { best = v[j]; arg = j; }
        if (!g) {
            y[w] = best;
            continue;
        }
        float *c0 = dx + (r0 - x);
        c0[0] = c0[1] = c0[2 * OW] = c0[2 * OW + 1] = 0.0f;
        if (arg >= 0) c0[(arg >> 1) * 2 * OW + (arg & 1)] = tlm_add(0.0f, g[w]);
    }
}

/* The winners of VN windows by the rule (taps[j]: tap j, row-major, of window i): value and
 * tap (0..3, -1 for none) per lane. Lane masks and selects, not jumps: which tap wins is data,
 * and a mispredicted branch costs more than the compares. */
typedef int32_t p2_vni __attribute__((vector_size(4 * VN)));
static inline __attribute__((always_inline)) void win2x2_n(const vn taps[4], vn *best_out,
                                                            p2_vni *arg_out) {
    vn best = (vn){0} - FLT_MAX;
    p2_vni arg = (p2_vni){0} - 1;
    for (int j = 0; j < 4; j++) {
        const vn v = taps[j];
        const p2_vni take = (v > best) | ((v != v) & (best == best));
        best = (vn)(((p2_vni)v & take) | ((p2_vni)best & ~take));
        arg = (arg & ~take) | (((p2_vni){0} + j) & take);
    }
    *best_out = best;
    *arg_out = arg;
}

#if VN == 16
typedef p2_vni p2_v16i;

/* Small planes wholly covered by their windows (H = 2 OH, W = 2 OW, OW 1, 2 or 4: 2 x 2 to
 * 8 x 8 planes): the whole tensor is a run of row pairs of 4 OW floats, OW windows each, so
 * windows 16 c .. 16 c + 15 (in row-major order across planes) read exactly floats 64 c .. 64 c
 * + 63, tap j of window i at idx[j][i]; their dx cells are those 64 floats. */
static void pool2x2_small(const geom_t *G, const float *x, float *y, const float *g, float *dx) {
    const int64_t OW = G->out[1], nw = G->n * G->cin * G->out[0] * OW, chunks = nw / 16;
    int idx[4][16];
    for (int j = 0; j < 4; j++)
        for (int i = 0; i < 16; i++)
            idx[j][i] = (int)((i / OW) * 4 * OW + 2 * (i % OW) + (j & 1) + (j >> 1) * 2 * OW);
#pragma omp parallel for schedule(static) if (nw * 4 > TL_PAR_MIN)
    for (int64_t c = 0; c < chunks; c++) {
        const float *blk = x + 64 * c;
        float t[4][16];
        v16 taps[4], best;
        p2_v16i arg;
        for (int j = 0; j < 4; j++) {
            for (int i = 0; i < 16; i++) t[j][i] = blk[idx[j][i]];
            taps[j] = vload(t[j]);
        }
        win2x2_n(taps, &best, &arg);
        if (!g) {
            vstore(y + 16 * c, best);
            continue;
        }
        const v16 share = (v16){0} + vload(g + 16 * c);   /* tlm_add(+0, g), as in pool2x2_max */
        float out[64];
        for (int j = 0; j < 4; j++) {
            vstore(t[j], (v16)((p2_v16i)share & (arg == ((p2_v16i){0} + j))));
            for (int i = 0; i < 16; i++) out[idx[j][i]] = t[j][i];
        }
        memcpy(dx + 64 * c, out, sizeof out);
    }
    small_tail(OW, chunks * 16, nw, x, y, g, dx);
}

/* forward (g NULL: y = the window maxima) or backward (dx from the output gradient g). The
 * windows of a plane in row-major order, 16 at a time: from two 16-float loads of each row of
 * the pair (taps de-interleaved) where 16 windows lie in one output row, else gathered a value
 * at a time (planes narrower than 32, tails) */
static void pool2x2_max(const geom_t *G, const float *x, float *y, const float *g, float *dx) {
    const int64_t planes = G->n * G->cin, H = G->in[0], W = G->in[1], OH = G->out[0], OW = G->out[1];
    const int64_t nw = OH * OW;
#pragma omp parallel for schedule(static) if (planes * H * W > TL_PAR_MIN)
    for (int64_t pl = 0; pl < planes; pl++) {
        const float *xp = x + pl * H * W;
        float *d = g ? dx + pl * H * W : NULL;
        if (g && (2 * OH != H || 2 * OW != W))   /* cells in no window (odd sizes) stay +0 */
            memset(d, 0, (size_t)(H * W) * sizeof(float));
        for (int64_t w0 = 0; w0 < nw; w0 += 16) {
            const int n = nw - w0 < 16 ? (int)(nw - w0) : 16;
            const int64_t oh0 = w0 / OW, o0 = w0 % OW;
            v16 taps[4];
            /* (2 OW <= W: the loads stay in the rows) */
            const int row16 = n == 16 && o0 + 16 <= OW;            /* 16 windows of one row */
            const int rows8 = n == 16 && OW == 8;                  /* 8 of each of two rows */
            if (row16 || rows8) {
                const float *r0 = xp + 2 * oh0 * W + 2 * o0, *r1 = r0 + W;
                /* row16: a = the first row's 32 values, b = the second's; rows8: a = the
                 * first rows of the two windows' rows, b = their second rows */
                const v16 a0 = vload(r0), b0 = vload(r1);
                const v16 a1 = row16 ? vload(r0 + 16) : vload(r0 + 2 * W);
                const v16 b1 = row16 ? vload(r1 + 16) : vload(r1 + 2 * W);
                taps[0] = __builtin_shufflevector(a0, a1, 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
                taps[1] = __builtin_shufflevector(a0, a1, 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
                taps[2] = __builtin_shufflevector(b0, b1, 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
                taps[3] = __builtin_shufflevector(b0, b1, 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
            } else {
                float t[4][16] = {{0}};
                for (int i = 0; i < n; i++) {
                    const int64_t w = w0 + i, c = 2 * (w / OW) * W + 2 * (w % OW);
                    t[0][i] = xp[c]; t[1][i] = xp[c + 1]; t[2][i] = xp[c + W]; t[3][i] = xp[c + W + 1];
                }
                for (int j = 0; j < 4; j++) taps[j] = vload(t[j]);
            }
            v16 best;
            p2_v16i arg;
            win2x2_n(taps, &best, &arg);
            if (!g) {
                float b[16];
                vstore(b, best);
                memcpy(y + pl * nw + w0, b, (size_t)n * sizeof(float));
                continue;
            }
            /* each window's cells: its winner gets tlm_add(+0, g) (what the add onto the zeroed
             * cell gives: -0 becomes +0), the others +0; no two windows share a cell */
            float gb[16] = {0};
            memcpy(gb, g + pl * nw + w0, (size_t)n * sizeof(float));
            const v16 share = (v16){0} + vload(gb);
            v16 cells[4];
            for (int j = 0; j < 4; j++)
                cells[j] = (v16)((p2_v16i)share & (arg == ((p2_v16i){0} + j)));
            if (row16 || rows8) {   /* the loads' places: lanes 0-7 to the first 16 floats */
                float *c0 = d + 2 * oh0 * W + 2 * o0, *c1 = c0 + W;
                float *c2 = row16 ? c0 + 16 : c0 + 2 * W, *c3 = row16 ? c1 + 16 : c1 + 2 * W;
                vstore(c0, __builtin_shufflevector(cells[0], cells[1], 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23));
                vstore(c2, __builtin_shufflevector(cells[0], cells[1], 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31));
                vstore(c1, __builtin_shufflevector(cells[2], cells[3], 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23));
                vstore(c3, __builtin_shufflevector(cells[2], cells[3], 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31));
                continue;
            }
            for (int i = 0; i < n; i++) {
                const int64_t w = w0 + i;
                float *c = d + 2 * (w / OW) * W + 2 * (w % OW);
                c[0] = cells[0][i]; c[1] = cells[1][i]; c[W] = cells[2][i]; c[W + 1] = cells[3][i];
            }
        }
    }
}

#else
/* Below AVX-512 the same 16 windows a step, as 16 / VN groups of VN lanes in the build's native
 * vectors (simd16.h's vn): v16 values went lane by lane through the stack there. Each window's
 * compares and selects are the ones above, so the bits are the same. */
#define P2_NG (16 / VN)
#if VN == 8
#define P2_EVEN 0, 2, 4, 6, 8, 10, 12, 14
#define P2_ODD 1, 3, 5, 7, 9, 11, 13, 15
#define P2_ZIPLO 0, 8, 1, 9, 2, 10, 3, 11
#define P2_ZIPHI 4, 12, 5, 13, 6, 14, 7, 15
#else
#define P2_EVEN 0, 2, 4, 6
#define P2_ODD 1, 3, 5, 7
#define P2_ZIPLO 0, 4, 1, 5
#define P2_ZIPHI 2, 6, 3, 7
#endif

/* pool2x2_small as above: windows 16 c .. 16 c + 15 read floats 64 c .. 64 c + 63 */
static void pool2x2_small(const geom_t *G, const float *x, float *y, const float *g, float *dx) {
    const int64_t OW = G->out[1], nw = G->n * G->cin * G->out[0] * OW, chunks = nw / 16;
    int idx[4][16];
    for (int j = 0; j < 4; j++)
        for (int i = 0; i < 16; i++)
            idx[j][i] = (int)((i / OW) * 4 * OW + 2 * (i % OW) + (j & 1) + (j >> 1) * 2 * OW);
#pragma omp parallel for schedule(static) if (nw * 4 > TL_PAR_MIN)
    for (int64_t c = 0; c < chunks; c++) {
        const float *blk = x + 64 * c;
        float t[4][16];
        for (int j = 0; j < 4; j++)
            for (int i = 0; i < 16; i++) t[j][i] = blk[idx[j][i]];
        float out[64];
        for (int h = 0; h < P2_NG; h++) {
            vn taps[4], best;
            p2_vni arg;
            for (int j = 0; j < 4; j++) taps[j] = vnload(t[j] + VN * h);
            win2x2_n(taps, &best, &arg);
            if (!g) {
                vnstore(y + 16 * c + VN * h, best);
                continue;
            }
            const vn share = (vn){0} + vnload(g + 16 * c + VN * h);   /* tlm_add(+0, g) */
            for (int j = 0; j < 4; j++) {
                float cell[VN];
                vnstore(cell, (vn)((p2_vni)share & (arg == ((p2_vni){0} + j))));
                for (int i = 0; i < VN; i++) out[idx[j][VN * h + i]] = cell[i];
            }
        }
        if (g) memcpy(dx + 64 * c, out, sizeof out);
    }
    small_tail(OW, chunks * 16, nw, x, y, g, dx);
}

/* pool2x2_max as above: lanes VN h .. VN h + VN - 1 of 16 windows in one output row (row16) or
 * 8 of each of two rows (rows8) read 2 VN floats of each input row from the same offset, and
 * their dx cells are those floats */
static void pool2x2_max(const geom_t *G, const float *x, float *y, const float *g, float *dx) {
    const int64_t planes = G->n * G->cin, H = G->in[0], W = G->in[1], OH = G->out[0], OW = G->out[1];
    const int64_t nw = OH * OW;
#pragma omp parallel for schedule(static) if (planes * H * W > TL_PAR_MIN)
    for (int64_t pl = 0; pl < planes; pl++) {
        const float *xp = x + pl * H * W;
        float *d = g ? dx + pl * H * W : NULL;
        if (g && (2 * OH != H || 2 * OW != W))   /* cells in no window (odd sizes) stay +0 */
            memset(d, 0, (size_t)(H * W) * sizeof(float));
        for (int64_t w0 = 0; w0 < nw; w0 += 16) {
            const int n = nw - w0 < 16 ? (int)(nw - w0) : 16;
            const int64_t oh0 = w0 / OW, o0 = w0 % OW;
            const int row16 = n == 16 && o0 + 16 <= OW;            /* 16 windows of one row */
            const int rows8 = n == 16 && OW == 8;                  /* 8 of each of two rows */
            const int64_t first = 2 * oh0 * W + 2 * o0;            /* window w0's first cell */
            float t[4][16] = {{0}}, gb[16] = {0};
            if (!(row16 || rows8))
                for (int i = 0; i < n; i++) {
                    const int64_t w = w0 + i, c = 2 * (w / OW) * W + 2 * (w % OW);
                    t[0][i] = xp[c]; t[1][i] = xp[c + 1]; t[2][i] = xp[c + W]; t[3][i] = xp[c + W + 1];
                }
            if (g) memcpy(gb, g + pl * nw + w0, (size_t)n * sizeof(float));
            float b[16], cl[4][16];
            for (int h = 0; h < P2_NG; h++) {
                /* lanes VN h ..: the offset of their first cell from window w0's */
                const int64_t at = rows8 && VN * h >= 8 ? 2 * W + 2 * (VN * h - 8) : 2 * VN * h;
                vn taps[4], best;
                p2_vni arg;
                if (row16 || rows8) {
                    const float *r0 = xp + first + at, *r1 = r0 + W;
                    const vn a0 = vnload(r0), a1 = vnload(r0 + VN), b0 = vnload(r1), b1 = vnload(r1 + VN);
                    taps[0] = __builtin_shufflevector(a0, a1, P2_EVEN);
                    taps[1] = __builtin_shufflevector(a0, a1, P2_ODD);
                    taps[2] = __builtin_shufflevector(b0, b1, P2_EVEN);
                    taps[3] = __builtin_shufflevector(b0, b1, P2_ODD);
                } else {
                    for (int j = 0; j < 4; j++) taps[j] = vnload(t[j] + VN * h);
                }
                win2x2_n(taps, &best, &arg);
                if (!g) {
                    vnstore(b + VN * h, best);
                    continue;
                }
                /* each window's cells: its winner gets tlm_add(+0, g) (what the add onto the
                 * zeroed cell gives: -0 becomes +0), the others +0; no two windows share a cell */
                const vn share = (vn){0} + vnload(gb + VN * h);
                vn cells[4];
                for (int j = 0; j < 4; j++)
                    cells[j] = (vn)((p2_vni)share & (arg == ((p2_vni){0} + j)));
                if (row16 || rows8) {
                    float *c0 = d + first + at, *c1 = c0 + W;
                    vnstore(c0, __builtin_shufflevector(cells[0], cells[1], P2_ZIPLO));
                    vnstore(c0 + VN, __builtin_shufflevector(cells[0], cells[1], P2_ZIPHI));
                    vnstore(c1, __builtin_shufflevector(cells[2], cells[3], P2_ZIPLO));
                    vnstore(c1 + VN, __builtin_shufflevector(cells[2], cells[3], P2_ZIPHI));
                } else {
                    for (int j = 0; j < 4; j++) vnstore(cl[j] + VN * h, cells[j]);
                }
            }
            if (!g) {
                memcpy(y + pl * nw + w0, b, (size_t)n * sizeof(float));
                continue;
            }
            if (row16 || rows8) continue;
            for (int i = 0; i < n; i++) {
                const int64_t w = w0 + i;
                float *c = d + 2 * (w / OW) * W + 2 * (w % OW);
                c[0] = cl[0][i]; c[1] = cl[1][i]; c[W] = cl[2][i]; c[W + 1] = cl[3][i];
            }
        }
    }
}
#endif

/* max (kind 0), average (1) and smooth-max (2, with b = beta) pooling, N-D and 2-D alike */
int tlk_pool_forward(const char *op, tl_buf input, tl_buf y, const tl_geom *geom, double b,
                     int64_t kind) {
    if (kind == POOL_MAX && is_pool2x2(geom)) {
        (is_small2x2(geom) ? pool2x2_small : pool2x2_max)(geom, input->data, y->data, NULL, NULL);
        return TL_OK;
    }
    return pool(op, (int)kind, input, NULL, y, geom, b, 0);
}

int tlk_pool_backward(const char *op, tl_buf input, tl_buf grad_out, tl_buf dinput,
                      const tl_geom *geom, double b, int64_t kind) {
    if (kind == POOL_MAX && is_pool2x2(geom)) {
        (is_small2x2(geom) ? pool2x2_small : pool2x2_max)(geom, input->data, NULL, grad_out->data,
                                                          dinput->data);
        return TL_OK;
    }
    if (kind == POOL_MAX && geom->r <= 3 && geom->in_n < INT32_MAX)
        return max_pool_backward(op, input, grad_out, dinput, geom);
    return pool(op, (int)kind, input, grad_out, dinput, geom, b, 1);
}
