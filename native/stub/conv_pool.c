/* conv_pool.c (stub): N-D convolution and transposed convolution, with an optional batch
 * axis. The 2-D entry points are the N-D kernels with two spatial axes; the family's pooling
 * kernels are pooling.c.
 *
 * Geometry arrives as one flat array (torchlean/shapes.py conv_geom / pool_geom):
 *   [r, N, C_in, C_out, in_1..in_r, k_1..k_r, out_1..out_r, s_1..s_r, p_1..p_r]
 * Convolution is im2col + a GEMM per sample whose outputs are rule 3 chains of native/common/
 * tl_math.h (the packed GEMM of linalg.c, bit for bit the exact GEMM; the same
 * formulation as the CUDA library, which uses it in exact mode). 2-D convolutions read the
 * columns straight from a zero-padded copy of the image instead (conv_direct.c: the kernel
 * gradient, the forward and the input gradient where that pays), with the same chains and
 * adds in the same order. In every mode:
 *   forward            y_b = fma chain over (c_in, kernel offset) in order, from the bias
 *   kernel gradient    per sample b, one fma chain per weight over b's positions in order,
 *                      from 0; then rule 4 over the samples (chunks of 256 samples, the tree)
 *   input gradient     dcol = W^T g_b (fma chain over c_out), then col2im
 * col2im adds each image cell's taps in kernel-offset order onto its start value (the bias for
 * the transposed forward, 0 for gradients); the bias gradient is rule 4 over (sample,
 * position). Nothing depends on the thread count.
 */
#include <stdlib.h>
#include <string.h>
#include <omp.h>
#include "stub.h"
#include "sgemm.h"
#include "conv_cols.h"
#include "conv_direct.h"
#include "generated/conv_pool_kernels.h"

/* the geometry the generated entry parsed (native/common/contract.h) */
typedef tl_geom geom_t;

/* dbias[c] = rule 4 over g[b][c][o] for (b, o) in order (its chunks side by side) */
static void bias_grad(const float *g, int64_t N, int64_t C, int64_t P, float *db) {
#pragma omp parallel for schedule(static) if (N * C * P > TL_PAR_MIN)
    for (int64_t c = 0; c < C; c++) db[c] = tl_stub_channel_sum(g, N, C, P, c);
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

/* count samples were added onto the open chunk's sums in place (all in that chunk): the
 * counters step, and a chunk that is full closes */
static void sample_sum_added(sample_sum *s, int64_t count) {
    s->len += count;
    if (s->len < TLM_CHUNK) return;
    const int64_t nk = s->nk, ranges = (nk + SS_RANGE - 1) / SS_RANGE;
#pragma omp parallel for schedule(static) if (nk > TL_PAR_MIN && ranges > 1)
    for (int64_t q = 0; q < ranges; q++) {
        sample_sum l = *s;
        ss_close(&l, q * SS_RANGE, q * SS_RANGE + SS_RANGE < nk ? q * SS_RANGE + SS_RANGE : nk);
    }
    ss_close(s, 0, 0);   /* the shared counters */
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
 * batch too small to share, runs its im2col, GEMMs and col2im on all threads instead.
 * A sample's columns never exist whole: products that read them take them in blocks of
 * positions (every output's chain still runs whole in one GEMM, or k in order over
 * consecutive accumulating GEMMs, the same chain), and products whose result goes through
 * col2im make them in blocks of channels (col2im is per channel); a block is about COL_BLOCK
 * floats, so it is still in cache when the GEMM or col2im reads it. */
#define COL_BLOCK (1 << 17)   /* floats per column block (512 KiB) */
#define COL_PAD 16            /* row padding of a position block: no 4 KiB-strided rows */

typedef struct conv_plan {
    const char *op;
    geom_t G, T;        /* T: the image-side geometry (G, or G swapped for the transpose) */
    int transpose;
    int64_t K, P, CK, xin, yout, nk;
    int64_t pb, ld;     /* positions per block, and a block's row stride */
    int64_t cb;         /* channels per channel block (its rows a multiple of TL_SGEMM_MR) */
    int outer;          /* parallel over samples */
    float *wp;          /* the kernel packed once for every sample's products (tl_sgemm_pack_a) */
    tl_cols cols;       /* T's im2col / col2im runs */
    tl_direct *direct;  /* the kernel gradient read from the padded image (conv_direct.h), or NULL */
    float *bpart;       /* the direct path's bias chunk sums, per sample, or NULL */
    float *wk;          /* the kernel packed for the direct input gradient, or NULL */
} conv_plan;

/* 0 when out of memory (nothing left to free) */
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
    c->pb = COL_BLOCK / (c->CK > 0 ? c->CK : 1) / 32 * 32;
    if (c->pb < 32) c->pb = 32;
    if (c->pb > c->P) c->pb = c->P;
    c->ld = c->pb + COL_PAD;
    int64_t chans = transpose ? c->G.cout : c->G.cin, kp = c->K * c->P;
    int64_t step = 1;   /* channels whose K rows make whole packed panels */
    while (step * c->K % TL_SGEMM_MR) step++;
    c->cb = (COL_BLOCK / (kp > 0 ? kp : 1) + step - 1) / step * step;
    if (c->cb < step) c->cb = step;
    if (c->cb > chans) c->cb = chans;
    c->wp = NULL;
    c->direct = NULL;
    c->bpart = NULL;
    c->wk = NULL;
    double work = (double)c->G.n * (double)(transpose ? c->G.cin : c->G.cout) * c->CK * c->P;
    c->outer = c->G.n > 1 && work > 65536.0;
    return tl_cols_init(&c->cols, &c->T);
}

static float *col_buffer(const conv_plan *c) {
    int64_t a = c->CK * c->ld, b = c->cb * c->K * c->P, n = a > b ? a : b;
    return (float *)malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
}

/* img (C channels of T's image) += the columns A B, made cb channels at a time:
 * col[(ch, k), p] = sum_j A[(ch, k), j] B[j, p] over j < kdim in order, A = W^T of a (kdim,
 * CK) kernel (packed in c->wp) and B (kdim, P) row-major; then col2im onto img */
static int cols_to_image(const conv_plan *c, const float *Bm, int64_t kdim, int64_t C, float *img,
                         float *col, int par) {
    for (int64_t c0 = 0; c0 < C; c0 += c->cb) {
        int64_t nc = C - c0 < c->cb ? C - c0 : c->cb;
        if (tl_sgemm_prepacked(c->wp, c->CK, c0 * c->K, Bm, c->P, 1, col, c->P, nc * c->K, kdim,
                               c->P, 0, par))
            return TL_E_OOM;
        tl_col2im(&c->cols, nc, col, img + c0 * c->T.in_n, par);
    }
    return TL_OK;
}

/* y_b = bias + conv(x_b): the rule-3 chain over (c_in, kernel offset) from the bias */
static int forward_sample(const conv_plan *c, const float *B, const float *X,
                          float *Y, int64_t b, float *col, int par) {
    const geom_t *G = &c->G;
    float *yb = Y + b * c->yout;
    int64_t cells = G->out_n;
    for (int64_t oc = 0; oc < G->cout; oc++)
        for (int64_t o = 0; o < cells; o++) yb[oc * cells + o] = B[oc];
    if (c->transpose)   /* col[(co, k), p] = sum_ci W[ci, (co, k)] x[ci, p], then onto y_b */
        return cols_to_image(c, X + b * c->xin, G->cin, G->cout, yb, col, par);
    for (int64_t o0 = 0; o0 < c->P; o0 += c->pb) {
        int64_t no = c->P - o0 < c->pb ? c->P - o0 : c->pb;
        tl_im2col(&c->cols, G->cin, X + b * c->xin, o0, o0 + no, col, c->ld, par);
        if (tl_sgemm_prepacked(c->wp, G->cout, 0, col, c->ld, 1, yb + o0, c->P, G->cout, c->CK,
                               no, 1, par))
            return TL_E_OOM;
    }
    return TL_OK;
}

/* one sample's kernel gradient dkb (the rule-3 chain over its positions, from 0) and input
 * gradient dx_b (dcol = W^T g_b, chains over c_out, then col2im onto zeros) */
static int backward_sample(const conv_plan *c, const float *X, const float *Gd,
                           float *DX, float *dkb, int64_t b, float *col, int par) {
    const geom_t *G = &c->G;
    const int64_t P = c->P, CK = c->CK, m = c->transpose ? G->cin : G->cout;
    const float *xb = X + b * c->xin, *gb = Gd + b * c->yout;
    /* the columns: of x_b (conv) or of the output gradient (transpose); A: g_b or x_b */
    const float *img = c->transpose ? gb : xb, *A = c->transpose ? xb : gb;
    if (P == 0) memset(dkb, 0, (size_t)(m * CK) * sizeof(float));
    for (int64_t o0 = 0; o0 < P; o0 += c->pb) {
        int64_t no = P - o0 < c->pb ? P - o0 : c->pb;
        tl_im2col(&c->cols, c->transpose ? G->cout : G->cin, img, o0, o0 + no, col, c->ld, par);
        /* dW_b (+)= A[:, block] col^T: each weight's chain over the positions in order */
        if (tl_sgemm(A + o0, P, 1, col, 1, c->ld, dkb, CK, m, no, CK, o0 > 0, par)) return TL_E_OOM;
        /* transpose: dx[:, block] = W col, the chain over (c_out, kernel offset) whole */
        if (c->transpose && tl_sgemm_prepacked(c->wp, G->cin, 0, col, c->ld, 1, DX + b * c->xin + o0,
                                               P, G->cin, CK, no, 0, par))
            return TL_E_OOM;
    }
    if (c->transpose) return TL_OK;
    return cols_to_image(c, gb, G->cout, G->cin, DX + b * c->xin, col, par);  /* W^T g_b */
}

/* conv (transpose = 0) and conv_transpose (transpose = 1), N-D and 2-D alike */
int tlk_conv_forward(const char *op, tl_buf kernel, tl_buf bias, tl_buf input, tl_buf y,
                     const tl_geom *geom, int64_t transpose) {
    if (geom->n * geom->cout * geom->out_n == 0) return TL_OK;
    const int pl = tl_direct_forward_pl_applies(geom, transpose);
    if (pl || tl_direct_forward_applies(geom, transpose)) {
        tl_direct D;
        int e = !tl_direct_init(&D, geom) ? TL_E_OOM
                : pl ? tl_direct_forward_pl(&D, kernel->data, bias->data, input->data, y->data)
                     : tl_direct_forward(&D, kernel->data, bias->data, input->data, y->data);
        tl_direct_free(&D);
        return e ? tl_fail(e, "%s: out of host memory for the padded images", op) : TL_OK;
    }
    conv_plan c;
    if (!plan_conv(&c, op, geom, transpose))
        return tl_fail(TL_E_OOM, "%s: out of host memory for the im2col runs", op);
    const float *W = kernel->data, *B = bias->data, *X = input->data;
    float *Y = y->data;
    /* A of every sample's product: W (c_out, CK), or W^T of (c_in, CK) for the transpose */
    c.wp = transpose ? tl_sgemm_pack_a(W, 1, c.CK, c.CK, c.G.cin) : tl_sgemm_pack_a(W, c.CK, 1, c.G.cout, c.CK);
    if (!c.wp) {
        tl_cols_free(&c.cols);
        return tl_fail(TL_E_OOM, "%s: out of host memory for the packed kernel", op);
    }
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
            int e = forward_sample(&c, B, X, Y, b, col, !c.outer);
            if (e) {
#pragma omp atomic write
                st = e;
            }
        }
        free(col);
    }
    free(c.wp);
    tl_cols_free(&c.cols);
    if (st == TL_E_OOM) return tl_fail(TL_E_OOM, "%s: out of host memory for the im2col buffer", op);
    return st;
}

#define DK_SCRATCH (1 << 22) /* floats of per-sample kernel gradients held at once (16 MiB) */

/* one sample's input gradient on the direct path: from the kernel packed for it (c->wk), else
 * the GEMM on W^T + col2im (c->wp, the thread's column buffer col) */
static int direct_dgrad(const conv_plan *c, const float *gb, float *dxb, float *col, int par) {
    if (c->wk) {
        tl_direct_dgrad(c->direct, c->wk, gb, dxb, par);
        return TL_OK;
    }
    return cols_to_image(c, gb, c->G.cout, c->G.cin, dxb, col, par);
}

/* a group's samples [b0, b0 + nb), in parallel over the samples: their slots for the kernel
 * gradient and their input gradients (while g_b is in cache). With dkb (not fused), sample j's
 * chains go into dkb's j-th tile-layout vector and a thread reuses one slot; else sample j
 * keeps slot j for the group's tiles. */
static int direct_samples(const conv_plan *c, const float *X, const float *Gd, float *DX,
                          int64_t b0, int64_t nb, float *slots, const float **img,
                          const float **gt, float *dkb) {
    const tl_direct *D = c->direct;
    const int64_t sf = tl_direct_sample_floats(D), bf = tl_direct_bias_floats(D);
    const int64_t nt = tl_direct_kacc_floats(D);
    int st = TL_OK;
#pragma omp parallel if (c->outer && nb > 1)
    {
        float *col = c->wk ? NULL : col_buffer(c);
        if (!c->wk && !col) {
#pragma omp atomic write
            st = TL_E_OOM;
        }
#pragma omp for schedule(dynamic, 1) nowait
        for (int64_t j = 0; j < nb; j++) {
            if ((!c->wk && !col) || st) continue;
            const int64_t b = b0 + j;
            float *slot = slots + (dkb ? omp_get_thread_num() : j) * sf;
            tl_direct_prep(D, X + b * c->xin, Gd + b * c->yout, slot,
                           c->bpart ? c->bpart + b * bf : NULL, &img[j], &gt[j]);
            if (dkb) tl_direct_kgrad_group(D, &img[j], &gt[j], 1, 1, dkb + j * nt, !c->outer);
            int e = direct_dgrad(c, Gd + b * c->yout, DX + b * c->xin, col, !c->outer);
            if (e) {
#pragma omp atomic write
                st = e;
            }
        }
        free(col);
    }
    return st;
}

#define KG_GROUP (1 << 22)   /* floats of samples' slots held at once (16 MiB: in L3) */

/* samples per group when fused: the batch in equal groups of at most KG_GROUP floats, each a
 * multiple of the thread count (a group's input gradients are split over the threads by
 * sample, and the threads wait for the group's last one); else groups whose per-sample
 * gradients fit DK_SCRATCH, one sample at a time when the threads share each sample */
static int64_t kgrad_group(const conv_plan *c, int fused, int64_t sf, int64_t nt) {
    const int64_t n = c->G.n, threads = c->outer ? omp_get_max_threads() : 1;
    if (!fused) {
        const int64_t g = c->outer ? DK_SCRATCH / nt : 1;
        return g < 1 ? 1 : g < n ? g : n;
    }
    int64_t cap = KG_GROUP / sf;
    if (cap < 1) cap = 1;
    const int64_t groups = (n + cap - 1) / cap;
    int64_t group = (n + groups - 1) / groups;
    if (threads > 1 && group > threads) group = (group + threads - 1) / threads * threads;
    return group < n ? group : n;
}

/* the direct path's kernel and input gradients: samples in groups (within one rule-4 chunk
 * when fused); a group's slots and input gradients in parallel over its samples, then its
 * kernel chains onto the chunk's sums in parallel over weight tiles (fused), or each sample's
 * chains stored with its slot and pushed onto rule 4 after the group */
static int direct_kgrad(const conv_plan *c, const float *X, const float *Gd, float *DX,
                        float *DK) {
    const tl_direct *D = c->direct;
    const int64_t n = c->G.n, sf = tl_direct_sample_floats(D), nt = tl_direct_kacc_floats(D);
    const int fused = tl_direct_kgrad_fuses(D);
    const int64_t group = kgrad_group(c, fused, sf, nt);
    const int64_t nslots = fused ? group : omp_get_max_threads();
    float *slots = (float *)calloc((size_t)(nslots * sf + 1), sizeof(float));
    float *tmp = (float *)malloc((size_t)nt * sizeof(float));
    float *dkb = fused ? NULL : (float *)malloc((size_t)(group * nt) * sizeof(float));
    const float **img = (const float **)malloc((size_t)group * sizeof(float *));
    const float **gt = (const float **)malloc((size_t)group * sizeof(float *));
    sample_sum acc = {0};
    const int ok = slots && tmp && (fused || dkb) && img && gt && sample_sum_init(&acc, nt, n);
    int st = ok ? TL_OK : TL_E_OOM;
    for (int64_t b0 = 0, nb; !st && b0 < n; b0 += nb) {
        nb = n - b0 < group ? n - b0 : group;
        if (fused && nb > TLM_CHUNK - acc.len) nb = TLM_CHUNK - acc.len;
        st = direct_samples(c, X, Gd, DX, b0, nb, slots, img, gt, dkb);
        if (st) break;
        if (!fused) {
            sample_sum_push(&acc, dkb, nb, 1);
            continue;
        }
        tl_direct_kgrad_group(D, img, gt, nb, acc.len == 0, acc.cur, 1);
        sample_sum_added(&acc, nb);
    }
    if (!st) {
        sample_sum_finish(&acc, tmp);   /* dW = rule 4 over the samples' dW_b */
        tl_direct_kgrad_store(D, tmp, DK);
    }
    free(acc.cur);
    free(slots);
    free(tmp);
    free(dkb);
    free(img);
    free(gt);
    return st;
}

/* the backward of a 2-D convolution on the direct path (conv_direct.h); DK, DX, db zeroed or
 * set by the caller as tlk_conv_backward's */
static int backward_direct(conv_plan *c, const float *W, const float *X, const float *Gd,
                           float *DK, float *DX, float *db, int fused_bias) {
    const geom_t *G = &c->G;
    tl_direct D = {0};
    int st = TL_E_OOM;
    if (!tl_direct_init(&D, G)) return st;
    c->direct = &D;
    if (tl_direct_dgrad_applies(G, 0)) c->wk = tl_direct_pack_dgrad(&D, W);
    else c->wp = tl_sgemm_pack_a(W, 1, c->CK, c->CK, G->cout);   /* W^T of (c_out, CK) */
    if (fused_bias) c->bpart = (float *)malloc((size_t)(G->n * tl_direct_bias_floats(&D)) * sizeof(float));
    if ((c->wk || c->wp) && (!fused_bias || c->bpart)) {
        st = direct_kgrad(c, X, Gd, DX, DK);
        if (!st && c->bpart) tl_direct_bias_finish(&D, c->bpart, db);
    }
    free(c->wp);
    free(c->wk);
    free(c->bpart);
    tl_direct_free(&D);
    return st;
}

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
    /* the direct path takes the bias gradient from its panels of g when it can */
    const int direct = tl_direct_applies(geom, transpose);
    const int fused_bias = direct && G->out_n % TLM_CHUNK == 0 && G->n * yout > 0 && G->n * xin > 0;
    if (!fused_bias) bias_grad(Gd, G->n, G->cout, G->out_n, db->data);
    if (G->n * yout == 0 || G->n * xin == 0) return TL_OK;
    conv_plan c;
    if (!plan_conv(&c, op, geom, transpose))
        return tl_fail(TL_E_OOM, "%s: out of host memory for the im2col runs", op);
    if (direct) {
        int e = backward_direct(&c, W, X, Gd, DK, DX, db->data, fused_bias);
        tl_cols_free(&c.cols);
        return e ? tl_fail(e, "%s: out of host memory for the kernel-gradient buffers", op) : TL_OK;
    }
    /* samples go in groups whose kernel gradients fit DK_SCRATCH (at least one sample) */
    int64_t group = nk > 0 ? DK_SCRATCH / nk : G->n;
    if (group < 1) group = 1;
    if (group > G->n) group = G->n;
    if (!c.outer) group = 1;
    float *dkb = (float *)malloc((size_t)(group * nk > 0 ? group * nk : 1) * sizeof(float));
    /* A of dx's product: W (c_in, CK) for the transpose, else W^T of (c_out, CK) */
    c.wp = transpose ? tl_sgemm_pack_a(W, c.CK, 1, G->cin, c.CK) : tl_sgemm_pack_a(W, 1, c.CK, c.CK, G->cout);
    sample_sum acc;
    if (!dkb || !c.wp || !sample_sum_init(&acc, nk, G->n)) {
        free(dkb);
        free(c.wp);
        tl_cols_free(&c.cols);
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
                int e = backward_sample(&c, X, Gd, DX, dkb + j * nk, b0 + j, col, !c.outer);
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
    free(c.wp);
    tl_cols_free(&c.cols);
    if (st == TL_E_OOM) return tl_fail(TL_E_OOM, "%s: out of host memory for the im2col buffer", op);
    return st;
}
