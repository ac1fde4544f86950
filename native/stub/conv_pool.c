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
 * output side (conv output). Which image cell a (kernel offset, position) pair reads is the
 * same for every channel and sample, so it is computed once per call: tab[k * P + o] is its
 * offset in a channel's image, or -1 in the padding. */
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

/* The offsets of every (kernel offset, output position) pair of G (tap), in one table: kernel-
 * major tab[k * P + o] for im2col / col2im, or output-major tab[o * K + k] for pooling windows.
 * NULL when out of memory. */
static int64_t *tap_table(const geom_t *G, int kernel_major) {
    int64_t K = G->k_n, P = G->out_n;
    int64_t outer = kernel_major ? K : P, inner = kernel_major ? P : K;
    const int64_t *outer_dims = kernel_major ? G->k : G->out, *inner_dims = kernel_major ? G->out : G->k;
    int64_t *tab = (int64_t *)malloc((size_t)(K * P > 0 ? K * P : 1) * sizeof(int64_t));
    if (!tab) return NULL;
#pragma omp parallel for schedule(static) if (K * P * G->r > TL_PAR_MIN)
    for (int64_t a = 0; a < outer; a++) {
        int64_t ia[8], ib[8];
        unravel(a, outer_dims, G->r, ia);
        for (int64_t b = 0; b < inner; b++) {
            unravel(b, inner_dims, G->r, ib);
            tab[a * inner + b] = kernel_major ? tap(G, ia, ib) : tap(G, ib, ia);
        }
    }
    return tab;
}

static void im2col(const int64_t *tab, int64_t C, int64_t K, int64_t P, int64_t img_n,
                   const float *img, float *col, int par) {
#pragma omp parallel for schedule(static) if (par && C * K * P > TL_PAR_MIN)
    for (int64_t ck = 0; ck < C * K; ck++) {
        const float *im = img + (ck / K) * img_n;
        const int64_t *t = tab + (ck % K) * P;
        float *row = col + ck * P;
        for (int64_t o = 0; o < P; o++) row[o] = t[o] < 0 ? 0.0f : im[t[o]];
    }
}

/* img[c] += col rows of channel c, kernel offsets in order (each cell gets its taps in that
 * order: one kernel offset touches a cell at most once) */
static void col2im(const int64_t *tab, int64_t C, int64_t K, int64_t P, int64_t img_n,
                   const float *col, float *img, int par) {
#pragma omp parallel for schedule(static) if (par && C * K * P > TL_PAR_MIN)
    for (int64_t c = 0; c < C; c++) {
        float *im = img + c * img_n;
        for (int64_t kk = 0; kk < K; kk++) {
            const float *row = col + (c * K + kk) * P;
            const int64_t *t = tab + kk * P;
            for (int64_t o = 0; o < P; o++)
                if (t[o] >= 0) im[t[o]] = tlm_add(im[t[o]], row[o]);
        }
    }
}

/* C (M, N), row-major, (=|+=) op(A) op(B): the exact GEMM on one sample (batch strides unused);
 * inside a parallel region over samples its own loops run on the calling thread */
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
 * weights). The samples arrive in groups, so this is tlm_sumacc run on nk outputs at once:
 * cur[i] is output i's open chunk, part[h * nk + i] its stack of closed chunk partials. The
 * counters are the same for every output; a group is pushed in parallel over ranges of
 * outputs, each range running the same counter steps. Scratch: (1 + depth) nk floats, whatever
 * the batch size. CUDA (linalg.cuh rule4_stream) runs the same steps. */
typedef struct sample_sum {
    int64_t nk, len, chunks; /* outputs; samples in the open chunk; chunks closed */
    int top, depth;          /* partials on the stack; its capacity */
    float *cur, *part;
} sample_sum;

#define SS_RANGE 2048        /* outputs per parallel range */

static int sample_sum_init(sample_sum *s, int64_t nk, int64_t n_samples) {
    int64_t nchunks = (n_samples + TLM_CHUNK - 1) / TLM_CHUNK;
    s->depth = 1;
    while (((int64_t)1 << s->depth) <= nchunks) s->depth++;  /* the bits of nchunks: one partial per set bit */
    s->nk = nk; s->len = 0; s->chunks = 0; s->top = 0;
    s->cur = (float *)malloc((size_t)(nk > 0 ? nk : 1) * (size_t)(1 + s->depth) * sizeof(float));
    s->part = s->cur ? s->cur + nk : NULL;
    return s->cur != NULL;
}

/* close the open chunk of outputs [i0, i1): merge it with the partials of equal height
 * (tlm_sumacc_close_chunk); s is the range's copy of the counters */
static void ss_close(sample_sum *s, int64_t i0, int64_t i1) {
    int merges = 0;
    for (int64_t c = s->chunks; c & 1; c >>= 1) merges++;
    const int64_t nk = s->nk;
    const int top = s->top;
    for (int64_t i = i0; i < i1; i++) {
        float v = s->cur[i];
        for (int t = 1; t <= merges; t++) v = tlm_add(s->part[(top - t) * nk + i], v);
        s->part[(top - merges) * nk + i] = v;
    }
    s->top = top - merges + 1;
    s->chunks++;
    s->len = 0;
}

/* add one sample's vector x to outputs [i0, i1) */
static void ss_push(sample_sum *s, int64_t i0, int64_t i1, const float *x) {
    float *cur = s->cur;
    if (s->len == 0) for (int64_t i = i0; i < i1; i++) cur[i] = x[i];
    else for (int64_t i = i0; i < i1; i++) cur[i] = tlm_add(cur[i], x[i]);
    if (++s->len == TLM_CHUNK) ss_close(s, i0, i1);
}

/* push count samples' vectors (x + j * nk, in order) */
static void sample_sum_push(sample_sum *s, const float *x, int64_t count, int par) {
    const int64_t nk = s->nk, ranges = (nk + SS_RANGE - 1) / SS_RANGE;
#pragma omp parallel for schedule(static) if (par && nk * count > TL_PAR_MIN && ranges > 1)
    for (int64_t q = 0; q < ranges; q++) {
        sample_sum l = *s;
        int64_t i0 = q * SS_RANGE, i1 = i0 + SS_RANGE < nk ? i0 + SS_RANGE : nk;
        for (int64_t j = 0; j < count; j++) ss_push(&l, i0, i1, x + j * nk);
    }
    for (int64_t j = 0; j < count; j++) ss_push(s, 0, 0, NULL);   /* the shared counters */
}

/* out[i] = the rule-4 sum of everything pushed (tlm_sumacc_finish); frees the scratch */
static void sample_sum_finish(sample_sum *s, float *out) {
    const int64_t nk = s->nk;
    if (s->chunks == 0) {
        if (s->len > 0 && nk > 0) memcpy(out, s->cur, (size_t)nk * sizeof(float));
        else if (nk > 0) memset(out, 0, (size_t)nk * sizeof(float));
    } else {
        if (s->len > 0) {
            sample_sum l = *s;
            ss_close(&l, 0, nk);
            *s = l;
        }
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

/* ------------------------------------------------------------------ convolution
 * Samples are independent up to the kernel gradient's sum over them, so a batch runs one
 * sample per thread at a time (each thread with its own column buffer); a single sample, or a
 * batch too small to share, runs its im2col, GEMMs and col2im on all threads instead. */
typedef struct conv_plan {
    const char *op;
    geom_t G, T;        /* T: the image-side geometry (G, or G swapped for the transpose) */
    int transpose;
    int64_t K, P, CK, xin, yout, nk;
    int64_t *tab;       /* T's tap table */
    int outer;          /* parallel over samples */
} conv_plan;

static int plan_conv(conv_plan *c, const char *op, const tl_geom *geom, int64_t transpose) {
    c->op = op;
    c->G = *geom;
    c->T = c->G;
    c->transpose = (int)transpose;
    if (transpose) {
        for (int64_t a = 0; a < c->G.r; a++) { c->T.in[a] = c->G.out[a]; c->T.out[a] = c->G.in[a]; }
        c->T.in_n = c->G.out_n; c->T.out_n = c->G.in_n;
    }
    c->K = c->G.k_n;
    c->P = c->T.out_n;
    c->CK = (transpose ? c->G.cout : c->G.cin) * c->K;
    c->xin = c->G.cin * c->G.in_n;
    c->yout = c->G.cout * c->G.out_n;
    c->nk = c->G.cout * c->G.cin * c->K;
    double work = (double)c->G.n * (double)(transpose ? c->G.cin : c->G.cout) * c->CK * c->P;
    c->outer = c->G.n > 1 && work > 65536.0;
    c->tab = tap_table(&c->T, 1);
    return c->tab != NULL;
}

static float *col_buffer(const conv_plan *c) {
    return (float *)malloc((size_t)(c->CK * c->P > 0 ? c->CK * c->P : 1) * sizeof(float));
}

/* y_b = bias + conv(x_b): the rule-3 chain over (c_in, kernel offset) from the bias */
static int forward_sample(const conv_plan *c, const float *W, const float *B, const float *X,
                          float *Y, int64_t b, float *col, int par) {
    const geom_t *G = &c->G;
    float *yb = Y + b * c->yout;
    int64_t cells = G->out_n;
    for (int64_t oc = 0; oc < G->cout; oc++)
        for (int64_t o = 0; o < cells; o++) yb[oc * cells + o] = B[oc];
    if (!c->transpose) {
        im2col(c->tab, G->cin, c->K, c->P, G->in_n, X + b * c->xin, col, par);
        return gemm1(c->op, 0, 0, G->cout, c->P, c->CK, W, c->CK, col, c->P, yb, 1);
    }
    /* col[(co, k), p] = sum_ci W[ci, (co, k)] x[ci, p], then gathered onto y_b */
    int st = gemm1(c->op, 1, 0, c->CK, c->P, G->cin, W, c->CK, X + b * c->xin, c->P, col, 0);
    if (!st) col2im(c->tab, G->cout, c->K, c->P, c->T.in_n, col, yb, par);
    return st;
}

/* one sample's kernel gradient dkb (the rule-3 chain over its positions, from 0) and input
 * gradient dx_b (dcol = W^T g_b, chains over c_out, then col2im onto zeros) */
static int backward_sample(const conv_plan *c, const float *W, const float *X, const float *Gd,
                           float *DX, float *dkb, int64_t b, float *col, int par) {
    const geom_t *G = &c->G;
    int64_t P = c->P, CK = c->CK;
    int st;
    if (!c->transpose) {
        const float *gb = Gd + b * c->yout;
        im2col(c->tab, G->cin, c->K, P, G->in_n, X + b * c->xin, col, par);
        st = gemm1(c->op, 0, 1, G->cout, CK, P, gb, P, col, P, dkb, 0);          /* dW_b = g_b col^T */
        if (!st) st = gemm1(c->op, 1, 0, CK, P, G->cout, W, CK, gb, P, col, 0);  /* dcol = W^T g */
        if (!st) col2im(c->tab, G->cin, c->K, P, G->in_n, col, DX + b * c->xin, par);
    } else {
        const float *xb = X + b * c->xin;
        im2col(c->tab, G->cout, c->K, P, c->T.in_n, Gd + b * c->yout, col, par); /* the grad's columns */
        st = gemm1(c->op, 0, 1, G->cin, CK, P, xb, P, col, P, dkb, 0);           /* dW_b = x_b col^T */
        if (!st) st = gemm1(c->op, 0, 0, G->cin, P, CK, W, CK, col, P, DX + b * c->xin, 0); /* dx = W col */
    }
    return st;
}

/* conv (transpose = 0) and conv_transpose (transpose = 1), N-D and 2-D alike */
int tlk_conv_forward(const char *op, tl_buf kernel, tl_buf bias, tl_buf input, tl_buf y,
                     const tl_geom *geom, int64_t transpose) {
    if (geom->n * geom->cout * geom->out_n == 0) return TL_OK;
    conv_plan c;
    if (!plan_conv(&c, op, geom, transpose))
        return tl_fail(TL_E_OOM, "%s: out of host memory for the im2col tap table", op);
    const float *W = kernel->data, *B = bias->data, *X = input->data;
    float *Y = y->data;
    int st = TL_OK;
#pragma omp parallel if (c.outer)
    {
        float *col = col_buffer(&c);
        if (!col) {
#pragma omp atomic write
            st = TL_E_OOM;
        }
#pragma omp for schedule(dynamic, 1) nowait
        for (int64_t b = 0; b < c.G.n; b++) {
            if (!col || st) continue;
            int e = forward_sample(&c, W, B, X, Y, b, col, !c.outer);
            if (e) {
#pragma omp atomic write
                st = e;
            }
        }
        free(col);
    }
    free(c.tab);
    if (st == TL_E_OOM) return tl_fail(TL_E_OOM, "%s: out of host memory for the im2col buffer", op);
    return st;
}

#define DK_SCRATCH (1 << 22) /* floats of per-sample kernel gradients held at once (16 MiB) */

/* the backward of conv (transpose = 0) and conv_transpose (transpose = 1) */
int tlk_conv_backward(const char *op, tl_buf kernel, tl_buf input, tl_buf g, tl_buf dk, tl_buf db,
                      tl_buf dx, const tl_geom *geom, int64_t transpose) {
    const geom_t *G = geom;
    int64_t nk = G->cout * G->cin * G->k_n, xin = G->cin * G->in_n, yout = G->cout * G->out_n;
    const float *W = kernel->data, *X = input->data, *Gd = g->data;
    float *DK = dk->data, *DX = dx->data;
    /* empty buffers may have no storage at all: memset(NULL, 0, 0) is undefined */
    if (nk > 0) memset(DK, 0, (size_t)nk * sizeof(float));
    if (G->n * xin > 0) memset(DX, 0, (size_t)(G->n * xin) * sizeof(float));
    bias_grad(Gd, G->n, G->cout, G->out_n, db->data);
    if (G->n * yout == 0 || G->n * xin == 0) return TL_OK;
    conv_plan c;
    if (!plan_conv(&c, op, geom, transpose))
        return tl_fail(TL_E_OOM, "%s: out of host memory for the im2col tap table", op);
    /* samples go in groups whose kernel gradients fit DK_SCRATCH (at least one sample) */
    int64_t group = nk > 0 ? DK_SCRATCH / nk : G->n;
    if (group < 1) group = 1;
    if (group > G->n) group = G->n;
    if (!c.outer) group = 1;
    float *dkb = (float *)malloc((size_t)(group * nk > 0 ? group * nk : 1) * sizeof(float));
    sample_sum acc;
    if (!dkb || !sample_sum_init(&acc, nk, G->n)) {
        free(dkb); free(c.tab);
        return tl_fail(TL_E_OOM, "%s: out of host memory for the kernel-gradient buffers", op);
    }
    int st = TL_OK;
    for (int64_t b0 = 0; b0 < G->n && !st; b0 += group) {
        int64_t nb = G->n - b0 < group ? G->n - b0 : group;
#pragma omp parallel if (c.outer && nb > 1)
        {
            float *col = col_buffer(&c);
            if (!col) {
#pragma omp atomic write
                st = TL_E_OOM;
            }
#pragma omp for schedule(dynamic, 1) nowait
            for (int64_t j = 0; j < nb; j++) {
                if (!col || st) continue;
                int e = backward_sample(&c, W, X, Gd, DX, dkb + j * nk, b0 + j, col, !c.outer);
                if (e) {
#pragma omp atomic write
                    st = e;
                }
            }
            free(col);
        }
        if (!st) sample_sum_push(&acc, dkb, nb, 1);
    }
    sample_sum_finish(&acc, DK);  /* dW = rule 4 over the samples' dW_b */
    free(dkb);
    free(c.tab);
    if (st == TL_E_OOM) return tl_fail(TL_E_OOM, "%s: out of host memory for the im2col buffer", op);
    return st;
}


/* ------------------------------------------------------------------ pooling */
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
    int64_t *tab = tap_table(&G, 0);
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

/* max (kind 0), average (1) and smooth-max (2, with b = beta) pooling, N-D and 2-D alike */
int tlk_pool_forward(const char *op, tl_buf input, tl_buf y, const tl_geom *geom, double b,
                     int64_t kind) {
    return pool(op, (int)kind, input, NULL, y, geom, b, 0);
}

int tlk_pool_backward(const char *op, tl_buf input, tl_buf grad_out, tl_buf dinput,
                      const tl_geom *geom, double b, int64_t kind) {
    return pool(op, (int)kind, input, grad_out, dinput, geom, b, 1);
}
