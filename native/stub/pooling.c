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

/* the winning tap (0..3, -1 for none) of window o of the row pair r0, r1; its value in *best_out */
static inline int win2x2(const float *r0, const float *r1, int64_t o, float *best_out) {
    const float v[4] = {r0[2 * o], r0[2 * o + 1], r1[2 * o], r1[2 * o + 1]};
    float best = -FLT_MAX;
    int arg = -1;
    for (int j = 0; j < 4; j++)
        if (v[j] > best || (v[j] != v[j] && best == best)) { best = v[j]; arg = j; }
    *best_out = best;
    return arg;
}

/* forward (g NULL: y = the window maxima) or backward (dx from the output gradient g) */
static void pool2x2_max(const geom_t *G, const float *x, float *y, const float *g, float *dx) {
    const int64_t planes = G->n * G->cin, H = G->in[0], W = G->in[1], OH = G->out[0], OW = G->out[1];
#pragma omp parallel for schedule(static) if (planes * H * W > TL_PAR_MIN)
    for (int64_t pl = 0; pl < planes; pl++) {
        const float *xp = x + pl * H * W;
        const float *gp = g ? g + pl * OH * OW : NULL;
        float *out = g ? dx + pl * H * W : y + pl * OH * OW;
        if (g) memset(out, 0, (size_t)(H * W) * sizeof(float));
        for (int64_t oh = 0; oh < OH; oh++) {
            const float *r0 = xp + 2 * oh * W, *r1 = r0 + W;
            for (int64_t o = 0; o < OW; o++) {
                float best;
                int arg = win2x2(r0, r1, o, &best);
                if (!g) {
                    out[oh * OW + o] = best;
                } else if (arg >= 0) {
                    float *cell = out + (2 * oh + (arg >> 1)) * W + 2 * o + (arg & 1);
                    *cell = tlm_add(*cell, gp[oh * OW + o]);
                }
            }
        }
    }
}

/* max (kind 0), average (1) and smooth-max (2, with b = beta) pooling, N-D and 2-D alike */
int tlk_pool_forward(const char *op, tl_buf input, tl_buf y, const tl_geom *geom, double b,
                     int64_t kind) {
    if (kind == POOL_MAX && is_pool2x2(geom)) {
        pool2x2_max(geom, input->data, y->data, NULL, NULL);
        return TL_OK;
    }
    return pool(op, (int)kind, input, NULL, y, geom, b, 0);
}

int tlk_pool_backward(const char *op, tl_buf input, tl_buf grad_out, tl_buf dinput,
                      const tl_geom *geom, double b, int64_t kind) {
    if (kind == POOL_MAX && is_pool2x2(geom)) {
        pool2x2_max(geom, input->data, NULL, grad_out->data, dinput->data);
        return TL_OK;
    }
    if (kind == POOL_MAX && geom->r <= 3 && geom->in_n < INT32_MAX)
        return max_pool_backward(op, input, grad_out, dinput, geom);
    return pool(op, (int)kind, input, grad_out, dinput, geom, b, 1);
}
