/* conv_pool.c (stub): N-D convolution, transposed convolution and pooling, with an optional
 * batch axis. The 2-D entry points are the N-D kernels with two spatial axes.
 *
 * Geometry arrives as one flat array (torchlean/shapes.py conv_geom / pool_geom):
 *   [r, N, C_in, C_out, in_1..in_r, k_1..k_r, out_1..out_r, s_1..s_r, p_1..p_r]
 * Convolution is im2col + the exact GEMM per sample (rule 3 of native/common/tl_math.h; the same
 * formulation as the CUDA library, which uses it in exact mode), so in every mode:
 *   forward            y_b = fma chain over (c_in, kernel offset) in order, from the bias
 *   kernel gradient    per sample b, one fma chain per weight over b's positions in order,
 *                      from 0; then rule 4 over the samples (chunks of 256 samples, the tree)
 *   input gradient     dcol = W^T g_b (fma chain over c_out), then col2im
 * col2im adds each image cell's taps in kernel-offset order onto its start value (the bias for
 * the transposed forward, 0 for gradients); the bias gradient is rule 4 over (sample,
 * position). Pooling: window values in row-major kernel order; avg and smooth-max window sums
 * are rule 4, smooth-max uses tlm_exp / tlm_log; backward adds each window's shares into its
 * cells window by window in row-major output order. Nothing depends on the thread count.
 */
#include <float.h>
#include <stdlib.h>
#include <string.h>
#include "stub.h"
#include "entry/conv_pool_kernels.h"

/* the geometry the generated entry parsed (native/common/contract.h) */
typedef tl_geom geom_t;

/* ------------------------------------------------------------------ im2col / col2im
 * col has rows (c, kernel offset) and columns (output position): col[(c*K + k) * P + o]
 * holds image[c, o*s + k - p] (0 outside). "img" is the image side (conv input), P the
 * output side (conv output). */
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

static void im2col(const geom_t *G, int64_t C, const float *img, float *col) {
    int64_t K = G->k_n, P = G->out_n;
#pragma omp parallel for schedule(static) if (C * K * P > TL_PAR_MIN)
    for (int64_t ck = 0; ck < C * K; ck++) {
        int64_t c = ck / K, kk = ck % K, ko[8], oo[8];
        unravel(kk, G->k, G->r, ko);
        const float *im = img + c * G->in_n;
        float *row = col + ck * P;
        for (int64_t o = 0; o < P; o++) {
            unravel(o, G->out, G->r, oo);
            int64_t t = tap(G, ko, oo);
            row[o] = t < 0 ? 0.0f : im[t];
        }
    }
}

/* img[c] += col rows of channel c, kernel offsets in order (each cell gets its taps in that
 * order: one kernel offset touches a cell at most once); channels in parallel */
static void col2im(const geom_t *G, int64_t C, const float *col, float *img) {
    int64_t K = G->k_n, P = G->out_n;
#pragma omp parallel for schedule(static) if (C * K * P > TL_PAR_MIN)
    for (int64_t c = 0; c < C; c++) {
        float *im = img + c * G->in_n;
        int64_t ko[8], oo[8];
        for (int64_t kk = 0; kk < K; kk++) {
            unravel(kk, G->k, G->r, ko);
            const float *row = col + (c * K + kk) * P;
            for (int64_t o = 0; o < P; o++) {
                unravel(o, G->out, G->r, oo);
                int64_t t = tap(G, ko, oo);
                if (t >= 0) im[t] = tlm_add(im[t], row[o]);
            }
        }
    }
}

/* C (M, N), row-major, (=|+=) op(A) op(B): the exact GEMM on one sample (batch strides unused) */
static int gemm1(const char *op, int ta, int tb, int64_t M, int64_t N, int64_t K, const float *A,
                 int64_t lda, const float *B, int64_t ldb, float *C, int accumulate) {
    return tl_gemm_exact_f32(op, ta, tb, 1, M, N, K, A, lda, 0, B, ldb, 0, C, N, 0, accumulate);
}

/* dbias[c] = rule 4 over g[b][c][o] for (b, o) in order */
static void bias_grad(const float *g, int64_t N, int64_t C, int64_t P, float *db) {
#pragma omp parallel for schedule(static) if (N * C * P > TL_PAR_MIN)
    for (int64_t c = 0; c < C; c++) {
        tlm_sumacc acc;
        tlm_sumacc_init(&acc);
        for (int64_t b = 0; b < N; b++) {
            const float *gp = g + (b * C + c) * P;
            for (int64_t o = 0; o < P; o++) tlm_sumacc_push(&acc, gp[o]);
        }
        db[c] = tlm_sumacc_finish(&acc);
    }
}

/* ------------------------------------------------------------------ rule 4 over samples
 * The kernel gradient is a rule-4 sum over samples of per-sample gradients (vectors of nk
 * weights). The samples arrive one at a time, so this is tlm_sumacc run on nk outputs at once:
 * cur[i] is output i's open chunk, part[h * nk + i] its stack of closed chunk partials. The
 * counters are the same for every output, so they are kept once. Scratch: (1 + depth) nk
 * floats, whatever the batch size. CUDA (linalg.cuh rule4_stream) runs the same steps. */
typedef struct sample_sum {
    int64_t nk, len, chunks; /* outputs; samples in the open chunk; chunks closed */
    int top, depth;          /* partials on the stack; its capacity */
    float *cur, *part;
} sample_sum;

static int sample_sum_init(sample_sum *s, int64_t nk, int64_t n_samples) {
    int64_t nchunks = (n_samples + TLM_CHUNK - 1) / TLM_CHUNK;
    s->depth = 1;
    while (((int64_t)1 << s->depth) <= nchunks) s->depth++;  /* the bits of nchunks: one partial per set bit */
    s->nk = nk; s->len = 0; s->chunks = 0; s->top = 0;
    s->cur = (float *)malloc((size_t)(nk > 0 ? nk : 1) * (size_t)(1 + s->depth) * sizeof(float));
    s->part = s->cur ? s->cur + nk : NULL;
    return s->cur != NULL;
}

/* close the open chunk: merge it with the partials of equal height (tlm_sumacc_close_chunk) */
static void sample_sum_close(sample_sum *s) {
    int merges = 0;
    for (int64_t c = s->chunks; c & 1; c >>= 1) merges++;
    const int64_t nk = s->nk;
    const int top = s->top;
    float *cur = s->cur, *part = s->part;
#pragma omp parallel for schedule(static) if (nk * (merges + 1) > TL_PAR_MIN)
    for (int64_t i = 0; i < nk; i++) {
        float v = cur[i];
        for (int t = 1; t <= merges; t++) v = tlm_add(part[(top - t) * nk + i], v);
        part[(top - merges) * nk + i] = v;
    }
    s->top = top - merges + 1;
    s->chunks++;
    s->len = 0;
}

/* add one sample's vector x[0..nk) */
static void sample_sum_push(sample_sum *s, const float *x) {
    const int64_t nk = s->nk;
    float *cur = s->cur;
    if (s->len == 0) memcpy(cur, x, (size_t)nk * sizeof(float));
    else {
#pragma omp parallel for schedule(static) if (nk > TL_PAR_MIN)
        for (int64_t i = 0; i < nk; i++) cur[i] = tlm_add(cur[i], x[i]);
    }
    if (++s->len == TLM_CHUNK) sample_sum_close(s);
}

/* out[i] = the rule-4 sum of everything pushed (tlm_sumacc_finish); frees the scratch */
static void sample_sum_finish(sample_sum *s, float *out) {
    const int64_t nk = s->nk;
    if (s->chunks == 0) {
        if (s->len > 0) memcpy(out, s->cur, (size_t)nk * sizeof(float));
        else memset(out, 0, (size_t)nk * sizeof(float));
    } else {
        if (s->len > 0) sample_sum_close(s);
        const int top = s->top;
        const float *part = s->part;
#pragma omp parallel for schedule(static) if (nk * top > TL_PAR_MIN)
        for (int64_t i = 0; i < nk; i++) {
            float v = part[(top - 1) * nk + i];
            for (int h = top - 2; h >= 0; h--) v = tlm_add(part[h * nk + i], v);
            out[i] = v;
        }
    }
    free(s->cur);
    s->cur = s->part = NULL;
}

/* ------------------------------------------------------------------ convolution */
/* conv (transpose = 0) and conv_transpose (transpose = 1), N-D and 2-D alike */
int tlk_conv_forward(const char *op, tl_buf kernel, tl_buf bias, tl_buf input, tl_buf y,
                     const tl_geom *geom, int64_t transpose) {
    const geom_t G = *geom;
    int64_t K = G.k_n, xin = G.cin * G.in_n, yout = G.cout * G.out_n;
    float *Y = y->data;
    const float *W = kernel->data, *B = bias->data, *X = input->data;
    if (G.n * yout == 0) return TL_OK;
    /* conv: image = input (in), columns = output (out); transpose: the swapped geometry, so
     * "image" = output (size out), columns = input (in) */
    geom_t T = G;
    if (transpose) {
        for (int64_t a = 0; a < G.r; a++) { T.in[a] = G.out[a]; T.out[a] = G.in[a]; }
        T.in_n = G.out_n; T.out_n = G.in_n;
    }
    int64_t P = T.out_n, CK = (transpose ? G.cout : G.cin) * K;
    float *col = (float *)malloc((size_t)(CK * P > 0 ? CK * P : 1) * sizeof(float));
    if (!col) return tl_fail(TL_E_OOM, "%s: out of host memory for the im2col buffer", op);
    int st = TL_OK;
    for (int64_t b = 0; b < G.n && !st; b++) {
        float *yb = Y + b * yout;
        int64_t cells = transpose ? T.in_n : P;
        for (int64_t oc = 0; oc < G.cout; oc++)
            for (int64_t o = 0; o < cells; o++) yb[oc * cells + o] = B[oc];
        if (!transpose) {
            im2col(&G, G.cin, X + b * xin, col);
            st = gemm1(op, 0, 0, G.cout, P, CK, W, CK, col, P, yb, 1); /* y_b += W col */
        } else {
            /* col[(co, k), p] = sum_ci W[ci, (co, k)] x[ci, p], then gathered onto y_b */
            st = gemm1(op, 1, 0, CK, P, G.cin, W, CK, X + b * xin, P, col, 0);
            if (!st) col2im(&T, G.cout, col, yb);
        }
    }
    free(col);
    return st;
}

/* the backward of conv (transpose = 0) and conv_transpose (transpose = 1) */
int tlk_conv_backward(const char *op, tl_buf kernel, tl_buf input, tl_buf g, tl_buf dk, tl_buf db,
                      tl_buf dx, const tl_geom *geom, int64_t transpose) {
    const geom_t G = *geom;
    int64_t K = G.k_n;
    int64_t xin = G.cin * G.in_n, yout = G.cout * G.out_n;
    const float *W = kernel->data, *X = input->data, *Gd = g->data;
    float *DK = dk->data, *DX = dx->data;
    memset(DK, 0, (size_t)(G.cout * G.cin * K) * sizeof(float));
    memset(DX, 0, (size_t)(G.n * xin) * sizeof(float));
    bias_grad(Gd, G.n, G.cout, G.out_n, db->data);
    if (G.n * yout == 0 || G.n * xin == 0) return TL_OK;
    geom_t T = G;
    if (transpose) {
        for (int64_t a = 0; a < G.r; a++) { T.in[a] = G.out[a]; T.out[a] = G.in[a]; }
        T.in_n = G.out_n; T.out_n = G.in_n;
    }
    int64_t P = T.out_n, CK = (transpose ? G.cout : G.cin) * K, nk = G.cout * G.cin * K;
    float *col = (float *)malloc((size_t)(CK * P > 0 ? CK * P : 1) * sizeof(float));
    float *dkb = (float *)malloc((size_t)(nk > 0 ? nk : 1) * sizeof(float)); /* one sample's */
    sample_sum acc;
    if (!col || !dkb || !sample_sum_init(&acc, nk, G.n)) {
        free(col); free(dkb);
        return tl_fail(TL_E_OOM, "%s: out of host memory for the im2col and kernel-gradient buffers", op);
    }
    int st = TL_OK;
    for (int64_t b = 0; b < G.n && !st; b++) {
        if (!transpose) {
            const float *gb = Gd + b * yout;
            im2col(&G, G.cin, X + b * xin, col);
            st = gemm1(op, 0, 1, G.cout, CK, P, gb, P, col, P, dkb, 0);     /* dW_b = g_b col^T */
            if (!st) st = gemm1(op, 1, 0, CK, P, G.cout, W, CK, gb, P, col, 0); /* dcol = W^T g */
            if (!st) col2im(&G, G.cin, col, DX + b * xin);
        } else {
            const float *xb = X + b * xin;
            im2col(&T, G.cout, Gd + b * yout, col);                          /* the grad's columns */
            st = gemm1(op, 0, 1, G.cin, CK, P, xb, P, col, P, dkb, 0);      /* dW_b = x_b col^T */
            if (!st) st = gemm1(op, 0, 0, G.cin, P, CK, W, CK, col, P, DX + b * xin, 0); /* dx = W col */
        }
        if (!st) sample_sum_push(&acc, dkb);
    }
    sample_sum_finish(&acc, DK);  /* dW = rule 4 over the samples' dW_b */
    free(dkb);
    free(col);
    return st;
}


/* ------------------------------------------------------------------ pooling */
enum { POOL_MAX, POOL_AVG, POOL_SMOOTH };

/* Gather the window of output o of one plane: vals[j] (padding: pad_value), offs[j] (-1 for
 * padding), in kernel row-major order. */
static void window(const geom_t *G, const float *plane, int64_t o, float pad_value, float *vals,
                   int64_t *offs) {
    int64_t oo[8], ko[8];
    unravel(o, G->out, G->r, oo);
    for (int64_t j = 0; j < G->k_n; j++) {
        unravel(j, G->k, G->r, ko);
        int64_t t = tap(G, ko, oo);
        offs[j] = t;
        vals[j] = t < 0 ? pad_value : plane[t];
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

static void smooth_plane(const geom_t *G, const float *x, const float *gp, float *y, float beta,
                         int backward, float *v, float *pv, int64_t *offs) {
    const int64_t KN = G->k_n, blk = smooth_block(KN);
    float piv[SMOOTH_BLOCK], s[SMOOTH_BLOCK];
    for (int64_t o0 = 0; o0 < G->out_n; o0 += blk) {
        int64_t nb = G->out_n - o0 < blk ? G->out_n - o0 : blk;
        for (int64_t q = 0; q < nb; q++) {
            float *vq = v + q * KN;
            window(G, x, o0 + q, 0.0f, vq, offs + q * KN);
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
#pragma omp for schedule(static)
        for (int64_t pl = 0; pl < planes; pl++) {
            if (!vals || !offs) continue;
            const float *x = input->data + pl * G.in_n;
            const float *gp = backward ? g->data + pl * G.out_n : NULL;
            float *y = backward ? out->data + pl * G.in_n : out->data + pl * G.out_n;
            if (kind == POOL_SMOOTH) {
                smooth_plane(&G, x, gp, y, beta, backward, vals, vals + wn, offs);
                continue;
            }
            for (int64_t o = 0; o < G.out_n; o++) {
                if (kind == POOL_MAX) {
                    window(&G, x, o, -INFINITY, vals, offs);
                    float best = -FLT_MAX;
                    int64_t arg = -1;
                    for (int64_t j = 0; j < KN; j++) /* the first NaN wins for good (PyTorch) */
                        if (vals[j] > best || (vals[j] != vals[j] && best == best)) {
                            best = vals[j]; arg = j;
                        }
                    if (!backward) y[o] = best;
                    else if (arg >= 0 && offs[arg] >= 0) y[offs[arg]] = tlm_add(y[offs[arg]], gp[o]);
                } else if (kind == POOL_AVG) {
                    window(&G, x, o, 0.0f, vals, offs);
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
    if (err) return tl_fail(TL_E_OOM, "%s: out of host memory for a pooling window", op);
    return TL_OK;
}

/* max (kind 0), average (1) and smooth-max (2, with b = beta) pooling, N-D and 2-D alike */
int tlk_pool_forward(const char *op, tl_buf input, tl_buf y, const tl_geom *geom, double b,
                     int64_t kind) {
    return pool(op, (int)kind, input, NULL, y, geom, b, 0);
}

int tlk_pool_backward(const char *op, tl_buf input, tl_buf grad_out, tl_buf dinput,
                      const tl_geom *geom, double b, int64_t kind) {
    return pool(op, (int)kind, input, grad_out, dinput, geom, b, 1);
}
