/* conv_direct.c (stub): 2-D convolution's forward, kernel gradient and input gradient as
 * products whose one operand is read in place (conv_direct.h), with no im2col buffer.
 *
 * im2col's column (ci, ky, kx) at position (oy, ox) is the padded image's cell
 * ci plane + (oy s_0 + ky) Wp + (ox s_1 + kx) = kaddr[(ci, ky, kx)] + paddr[(oy, ox)], so a
 * micro-tile broadcasts that operand from DR row pointers plus one offset per k step, and its
 * other operand is packed in panels of DL lanes:
 *   forward          rows: positions,     lanes: c_out, k: (ci, ky, kx) in order, from the bias
 *   kernel gradient  rows: (ci, ky, kx),  lanes: c_out, k: positions in order, from 0
 *   input gradient   rows: image cells,   lanes: c_in,  k: c_out in order, from 0, per kernel
 *                    offset, the chains then added onto the cells in col2im's order
 * Each output is one fma chain over the same k order as the GEMM on im2col's columns, and the
 * padded border's zeros are the 0.0f im2col writes, so the bits are the GEMM path's. Writing no
 * columns saves im2col's stores and loads (the forward), the columns' transpose into the GEMM's
 * B panels (the kernel gradient) and col2im's pass (the input gradient). */
#include <stdlib.h>
#include <string.h>
#include "stub.h"
#include "simd16.h"
#include "transpose16.h"
#include "conv_direct.h"
#ifdef _OPENMP
#include <omp.h>
#else
static inline int omp_get_max_threads(void) { return 1; }
#endif

#define DL 32   /* micro-tile lanes (output channels): two 16-float vectors */
#define PW 2    /* native vectors per tile row in one pass over k */
#define LP (PW * VN)   /* lanes per pass: all DL with AVX-512, 16 (two passes) with AVX2 */
#define DW (DL / VN)   /* native vectors per tile row */
#if VN == 16
#define DR 8    /* micro-tile rows (16 accumulators of 32) */
#else
#define DR 6    /* (6 x 2 accumulators, B's 2 vectors and the broadcast: 15 of 16 registers) */
#endif
/* passes over k for `lanes` lanes, and the native vectors a pass computes (a constant once
 * inlined): one pass of 1 or 2 vectors with AVX-512, passes of 2 below it */
#define PASSES(lanes) (LP == DL ? 1 : (int)(((lanes) + LP - 1) / LP))
#define PASS_NW(lanes) (LP == DL && (lanes) <= 16 ? 1 : PW)

int tl_direct_applies(const tl_geom *G, int64_t transpose) {
    return G->r == 2 && !transpose;
}

/* A forward tile's transposed store (DR x DL scalar moves) costs about as much as 32 of its k
 * steps, so short chains (a 1x1 kernel over few channels) stay with im2col + the GEMM, whose
 * stores are whole vectors. */
int tl_direct_forward_applies(const tl_geom *G, int64_t transpose) {
    return tl_direct_applies(G, transpose) && G->cin * G->k_n >= 64;
}

int tl_direct_init(tl_direct *D, const tl_geom *G) {
    D->G = G;
    D->Hp = G->in[0] + 2 * G->p[0];
    D->Wp = G->in[1] + 2 * G->p[1];
    D->plane = D->Hp * D->Wp;
    D->CK = G->cin * G->k_n;
    D->P = G->out_n;
    D->panels = (G->cout + DL - 1) / DL;
    D->kaddr = (int64_t *)malloc((size_t)(D->CK > 0 ? D->CK : 1) * sizeof(int64_t));
    D->paddr = (int64_t *)malloc((size_t)(D->P > 0 ? D->P : 1) * sizeof(int64_t));
    D->gaddr = (int64_t *)malloc((size_t)(G->cout > 0 ? G->cout : 1) * sizeof(int64_t));
    if (!D->kaddr || !D->paddr || !D->gaddr) { tl_direct_free(D); return 0; }
    for (int64_t oc = 0; oc < G->cout; oc++) D->gaddr[oc] = oc * D->P;
    for (int64_t ci = 0, i = 0; ci < G->cin; ci++)
        for (int64_t ky = 0; ky < G->k[0]; ky++)
            for (int64_t kx = 0; kx < G->k[1]; kx++) D->kaddr[i++] = ci * D->plane + ky * D->Wp + kx;
    for (int64_t oy = 0, i = 0; oy < G->out[0]; oy++)
        for (int64_t ox = 0; ox < G->out[1]; ox++) D->paddr[i++] = oy * G->s[0] * D->Wp + ox * G->s[1];
    return 1;
}

void tl_direct_free(tl_direct *D) {
    free(D->kaddr);
    free(D->paddr);
    free(D->gaddr);
    D->kaddr = D->paddr = D->gaddr = NULL;
}

/* the sample's image with its zero border: x itself when there is no padding, else x's
 * channels copied into xp's interior (xp's border keeps its zeros) */
static const float *pad_image(const tl_direct *D, const float *x, float *xp) {
    const tl_geom *G = D->G;
    const int64_t H = G->in[0], W = G->in[1];
    if (G->p[0] == 0 && G->p[1] == 0) return x;
    for (int64_t ci = 0; ci < G->cin; ci++)
        for (int64_t y = 0; y < H; y++)
            memcpy(xp + ci * D->plane + (y + G->p[0]) * D->Wp + G->p[1], x + (ci * H + y) * W,
                   (size_t)W * sizeof(float));
    return xp;
}

/* panels of DL rows of the row-major (rows, K) matrix A: out[(q K + k) DL + j] = A[q DL + j, k],
 * rows past `rows` zero. A transpose, in blocks of TB k's: each row's TB values are read
 * together (a column walk would hit one cache set when K is a multiple of 1024) */
#define TB 16
static void pack_lanes(const float *A, int64_t rows, int64_t K, int64_t panels, float *out) {
    for (int64_t q = 0; q < panels; q++) {
        float *d = out + q * K * DL;
        for (int64_t k0 = 0; k0 < K; k0 += TB) {
            const int64_t kb = K - k0 < TB ? K - k0 : TB;
            if (kb == TB && (q + 1) * DL <= rows) {   /* whole: VN x VN register transposes */
                for (int64_t j0 = 0; j0 < DL; j0 += VN)
                    for (int64_t kk = 0; kk < TB; kk += VN) {
                        vn r[VN];
                        for (int i = 0; i < VN; i++) r[i] = vnload(A + (q * DL + j0 + i) * K + k0 + kk);
                        tl_transpose_vn(r);
                        for (int k = 0; k < VN; k++) vnstore(d + (k0 + kk + k) * DL + j0, r[k]);
                    }
                continue;
            }
            for (int64_t j = 0; j < DL; j++) {
                const int64_t i = q * DL + j;
                const float *a = A + i * K + k0;
                for (int64_t k = 0; k < kb; k++) d[(k0 + k) * DL + j] = i < rows ? a[k] : 0.0f;
            }
        }
    }
}

/* acc[r] (its first nw native vectors, the pass's lanes of Bp's rows) = fma chain over k of
 * rows[r][koff[k]] times Bp's row k, from acc's start; nw is a constant at each call site after
 * inlining */
static inline __attribute__((always_inline)) void
addr_tile(const int nw, int64_t K, const float *const *rows, const int64_t *restrict koff,
          const float *restrict Bp, vn acc[DR][PW]) {
    const float *rp[DR];
    for (int r = 0; r < DR; r++) rp[r] = rows[r];
    for (int64_t k = 0; k < K; k++) {
        const int64_t o = koff[k];
        vn b[PW];
        for (int w = 0; w < nw; w++) b[w] = vnload(Bp + k * DL + VN * w);
        for (int r = 0; r < DR; r++) {
            float a = rp[r][o];
            for (int w = 0; w < nw; w++) acc[r][w] = VNFMA(a, b[w], acc[r][w]);
        }
    }
}

/* one micro-tile: every row's chains start from start[0..DL); the result in t[r][j]. Lanes
 * past 16 are not computed when lanes <= 16 (one 16-lane half) */
static void run_tile(int64_t lanes, int64_t K, const float *const *rows, const int64_t *koff,
                     const float *Bp, const float *start, float t[DR][DL]) {
    for (int h = 0; h < PASSES(lanes); h++) {
        vn acc[DR][PW];
        for (int r = 0; r < DR; r++)
            for (int w = 0; w < PW; w++) acc[r][w] = vnload(start + h * LP + VN * w);
        if (PASS_NW(lanes) == 2) addr_tile(2, K, rows, koff, Bp + h * LP, acc);
        else addr_tile(1, K, rows, koff, Bp + h * LP, acc);
        for (int r = 0; r < DR; r++)
            for (int w = 0; w < PW; w++) vnstore(t[r] + h * LP + VN * w, acc[r][w]);
    }
}

/* the tile t (DR rows of DL lanes) transposed: out[j ld + r rs] = t[r][j] for j < lanes, r < mr;
 * whole tiles with a constant row count, so the rows' stores need no bound checks */
static void store_rows(const float *t, int64_t lanes, int64_t mr, float *out, int64_t ld,
                       int64_t rs) {
    if (mr == DR) {
        for (int64_t j = 0; j < lanes; j++)
            for (int r = 0; r < DR; r++) out[j * ld + r * rs] = t[r * DL + j];
        return;
    }
    for (int64_t j = 0; j < lanes; j++)
        for (int64_t r = 0; r < mr; r++) out[j * ld + r * rs] = t[r * DL + j];
}

/* forward tile: positions [o0, o0 + DR) (those < P) x channels of panel q of sample image xp */
static void fwd_tile(const tl_direct *D, const float *xp, const float *Wt, const float *bias,
                     float *yb, int64_t q, int64_t o0) {
    const int64_t P = D->P, mr = P - o0 < DR ? P - o0 : DR;
    const int64_t lanes = D->G->cout - q * DL < DL ? D->G->cout - q * DL : DL;
    const float *rows[DR];
    float start[DL] = {0}, t[DR][DL];
    for (int r = 0; r < DR; r++) rows[r] = xp + D->paddr[o0 + (r < mr ? r : mr - 1)];
    memcpy(start, bias + q * DL, (size_t)lanes * sizeof(float));
    run_tile(lanes, D->CK, rows, D->kaddr, Wt + q * D->CK * DL, start, t);
    store_rows(&t[0][0], lanes, mr, yb + q * DL * P + o0, P, 1);
}

/* tiles [t0, t1) of one sample, panel-major (a panel of the kernel stays in cache) */
static void fwd_tiles(const tl_direct *D, const float *xp, const float *Wt, const float *bias,
                      float *yb, int64_t t0, int64_t t1) {
    const int64_t per = (D->P + DR - 1) / DR;
    for (int64_t t = t0; t < t1; t++) fwd_tile(D, xp, Wt, bias, yb, t / per, t % per * DR);
}

int tl_direct_forward(const tl_direct *D, const float *W, const float *bias, const float *X,
                      float *Y) {
    const tl_geom *G = D->G;
    const int64_t img = G->cin * D->plane, tiles = D->panels * ((D->P + DR - 1) / DR);
    const int64_t xin = G->cin * G->in_n, yout = G->cout * G->out_n;
    float *Wt = (float *)malloc((size_t)(D->panels * D->CK * DL + 1) * sizeof(float));
    if (!Wt) return TL_E_OOM;
    pack_lanes(W, G->cout, D->CK, D->panels, Wt);
    const int par = (double)G->n * G->cout * D->CK * D->P > 65536.0;
    int st = TL_OK;
    if (G->n == 1) {   /* one image: the threads split its tiles */
        float *xp = (float *)calloc((size_t)(img + 1), sizeof(float));
        if (xp) {
            const float *img_p = pad_image(D, X, xp);
#pragma omp parallel for schedule(dynamic, 4) if (par)
            for (int64_t t = 0; t < tiles; t++) fwd_tiles(D, img_p, Wt, bias, Y, t, t + 1);
        }
        st = xp ? TL_OK : TL_E_OOM;
        free(xp);
    } else {           /* a sample per thread at a time, each with its own padded image */
#pragma omp parallel if (par)
        {
            float *xp = (float *)calloc((size_t)(img + 1), sizeof(float));
            if (!xp) {
#pragma omp atomic write
                st = TL_E_OOM;
            }
#pragma omp for schedule(dynamic, 1) nowait
            for (int64_t b = 0; b < G->n; b++) {
                if (!xp) continue;
                fwd_tiles(D, pad_image(D, X + b * xin, xp), Wt, bias, Y + b * yout, 0, tiles);
            }
            free(xp);
        }
    }
    free(Wt);
    return st;
}

int64_t tl_direct_bias_floats(const tl_direct *D) {
    return D->P % TLM_CHUNK ? 0 : D->panels * (D->P / TLM_CHUNK) * DL;
}

/* bpart[(q chunks + c) DL + j]: the sequential sum (from its first value) of chunk c of output
 * channel q DL + j's positions, DL channels at once down g_b^T's panel rows */
static void bias_chunks(const tl_direct *D, const float *gt, float *bpart) {
    const int64_t chunks = D->P / TLM_CHUNK;
    for (int64_t q = 0; q < D->panels; q++)
        for (int64_t c = 0; c < chunks; c++) {
            const float *row = gt + (q * D->P + c * TLM_CHUNK) * DL;
            vn sum[DW];
            for (int w = 0; w < DW; w++) sum[w] = vnload(row + VN * w);
            for (int64_t o = 1; o < TLM_CHUNK; o++)
                for (int w = 0; w < DW; w++) sum[w] = sum[w] + vnload(row + o * DL + VN * w);
            for (int w = 0; w < DW; w++) vnstore(bpart + (q * chunks + c) * DL + VN * w, sum[w]);
        }
}

void tl_direct_bias_finish(const tl_direct *D, const float *bpart, float *db) {
    const tl_geom *G = D->G;
    const int64_t chunks = D->P / TLM_CHUNK, per = tl_direct_bias_floats(D);
#pragma omp parallel for schedule(static) if (G->n * chunks * G->cout > TL_PAR_MIN)
    for (int64_t oc = 0; oc < G->cout; oc++) {
        const int64_t q = oc / DL, j = oc % DL;
        tlm_sum4 acc;
        tlm_sum4_init(&acc);
        for (int64_t b = 0; b < G->n; b++)
            for (int64_t c = 0; c < chunks; c++) tlm_sum4_push(&acc, bpart[b * per + (q * chunks + c) * DL + j]);
        db[oc] = tlm_sum4_result(&acc);
    }
}

/* The kernel gradient's samples are summed by rule 4 in sample order, so each weight tile runs
 * its sample chains one after another and adds each onto its running sum while the tile is still
 * in registers: no per-sample gradient is stored and summed in a second pass. The sums live in
 * tile layout, acc[(q rows + i) DL + j] for weight (q DL + j, i), rows = CK in whole tiles. */
static int64_t kg_rows(const tl_direct *D) { return (D->CK + DR - 1) / DR * DR; }

int64_t tl_direct_kacc_floats(const tl_direct *D) { return D->panels * kg_rows(D) * DL; }

/* Summing in the tile pays where a sample's chains are short (the per-sample gradients' second
 * pass is then a large share) and there are tiles enough to share among threads; with long
 * chains (32x32 images) the threads are better kept on their own samples, whose g_b^T panels
 * (128 KiB) each tile then reads once from L2, not once per group of samples from L3. */
int tl_direct_kgrad_fuses(const tl_direct *D) {
    return D->P <= 256 && D->panels * (kg_rows(D) / DR) >= 16;
}

int64_t tl_direct_sample_floats(const tl_direct *D) {
    return D->G->cin * D->plane + D->panels * D->P * DL;
}

void tl_direct_prep(const tl_direct *D, const float *xb, const float *gb, float *slot,
                    float *bpart, const float **img, const float **gt) {
    float *g = slot + D->G->cin * D->plane;
    *img = pad_image(D, xb, slot);
    pack_lanes(gb, D->G->cout, D->P, D->panels, g);   /* g_b^T in panels */
    if (bpart) bias_chunks(D, g, bpart);
    *gt = g;
}

/* weight tile (q, rows [i0, i0 + DR)): sample j's chains over the positions (from 0), then
 * onto the tile's sum: the sum is that chain when `first` (a rule-4 chunk's first sample),
 * else sum + chain, tlm_add's operand order */
static void kacc_tile(const tl_direct *D, const float *img, const float *gt, int first,
                      float *a, int64_t q, int64_t i0) {
    const int64_t CK = D->CK, mr = CK - i0 < DR ? CK - i0 : DR;
    const float *rows[DR];
    const int64_t lanes = D->G->cout - q * DL < DL ? D->G->cout - q * DL : DL;
    for (int r = 0; r < DR; r++) rows[r] = img + D->kaddr[i0 + (r < mr ? r : mr - 1)];
    for (int h = 0; h < PASSES(lanes); h++) {
        vn acc[DR][PW];
        for (int r = 0; r < DR; r++)
            for (int w = 0; w < PW; w++) acc[r][w] = (vn){0};
        if (PASS_NW(lanes) == 2) addr_tile(2, D->P, rows, D->paddr, gt + q * D->P * DL + h * LP, acc);
        else addr_tile(1, D->P, rows, D->paddr, gt + q * D->P * DL + h * LP, acc);
        for (int r = 0; r < DR; r++) {
            float *ar = a + r * DL + h * LP;
            for (int w = 0; w < PW; w++)
                vnstore(ar + VN * w, first ? acc[r][w] : vnload(ar + VN * w) + acc[r][w]);
        }
    }
    const int ran = PASSES(lanes) * LP;
    if (ran < DL && first)   /* (lanes no pass ran: zero, as a pass of zeros would leave them) */
        for (int r = 0; r < DR; r++) memset(a + r * DL + ran, 0, (size_t)(DL - ran) * sizeof(float));
}

/* tiles [t0, t1) of panel q, samples in order (a sample's panel stays in cache across tiles) */
static void kacc_run(const tl_direct *D, const float *const *img, const float *const *gt,
                     int64_t nb, int first, float *acc, int64_t q, int64_t t0, int64_t t1) {
    const int64_t rows = kg_rows(D);
    for (int64_t j = 0; j < nb; j++)
        for (int64_t t = t0; t < t1; t++)
            kacc_tile(D, img[j], gt[j], first && j == 0, acc + (q * rows + t * DR) * DL, q, t * DR);
}

/* The threads split the weight tiles, not the samples (the sum's order runs over those): about
 * 16 runs of tiles, each within one panel, taken dynamically. */
void tl_direct_kgrad_group(const tl_direct *D, const float *const *img, const float *const *gt,
                           int64_t nb, int first, float *acc, int par) {
    const tl_geom *G = D->G;
    const int64_t rt = kg_rows(D) / DR, split = (16 + D->panels - 1) / D->panels;
    const int64_t per = (rt + split - 1) / split, runs_q = (rt + per - 1) / per;
#pragma omp parallel for schedule(dynamic, 1) if (par && nb * G->cout * D->CK * D->P > 65536)
    for (int64_t u = 0; u < D->panels * runs_q; u++) {
        const int64_t q = u / runs_q, t0 = u % runs_q * per, t1 = t0 + per < rt ? t0 + per : rt;
        kacc_run(D, img, gt, nb, first, acc, q, t0, t1);
    }
}

void tl_direct_kgrad_store(const tl_direct *D, const float *acc, float *dk) {
    const int64_t CK = D->CK, rows = kg_rows(D);
    for (int64_t oc = 0; oc < D->G->cout; oc++)
        for (int64_t i = 0; i < CK; i++) dk[oc * CK + i] = acc[(oc / DL * rows + i) * DL + oc % DL];
}

/* The input gradient's lanes are input channels: with fewer than 16 (an RGB image) most of
 * each vector would idle, and the GEMM on W^T (rows: c_in x kernel offsets) + col2im is faster.
 * A tile's transposed store costs about as much as two chains, so the path also needs two or
 * more kernel offsets reaching a cell on average (k_n / (s_0 s_1): not the 1x1 stride-2
 * shortcut, one in four of whose cells one offset reaches). */
int tl_direct_dgrad_applies(const tl_geom *G, int64_t transpose) {
    return tl_direct_applies(G, transpose) && G->cin >= 16 && G->k_n >= 2 * G->s[0] * G->s[1];
}

/* Wk[((q k_n + kk) c_out + oc) DL + j] = W[oc, q DL + j, kk]: per panel of input channels and
 * kernel offset, the (c_out, DL) operand of that offset's products; NULL when out of memory */
float *tl_direct_pack_dgrad(const tl_direct *D, const float *W) {
    const tl_geom *G = D->G;
    const int64_t K = G->k_n, ci_panels = (G->cin + DL - 1) / DL;
    float *Wk = (float *)malloc((size_t)(ci_panels * K * G->cout * DL + 1) * sizeof(float));
    if (!Wk) return NULL;
    for (int64_t q = 0; q < ci_panels; q++)
        for (int64_t kk = 0; kk < K; kk++)
            for (int64_t oc = 0; oc < G->cout; oc++) {
                float *d = Wk + ((q * K + kk) * G->cout + oc) * DL;
                for (int64_t j = 0; j < DL; j++) {
                    const int64_t ci = q * DL + j;
                    d[j] = ci < G->cin ? W[(oc * G->cin + ci) * K + kk] : 0.0f;
                }
            }
    return Wk;
}

/* one kernel offset's chains (from 0, over K) added onto the valid rows' sums straight from the
 * registers: sum + chain per lane, tlm_add's order */
static void offset_onto(int64_t lanes, int64_t K, const float *const *rows, const int64_t *koff,
                        const float *Bp, const int *valid, float sum[DR][DL]) {
    for (int h = 0; h < PASSES(lanes); h++) {
        vn acc[DR][PW];
        for (int r = 0; r < DR; r++)
            for (int w = 0; w < PW; w++) acc[r][w] = (vn){0};
        if (PASS_NW(lanes) == 2) addr_tile(2, K, rows, koff, Bp + h * LP, acc);
        else addr_tile(1, K, rows, koff, Bp + h * LP, acc);
        for (int r = 0; r < DR; r++)
            if (valid[r])
                for (int w = 0; w < PW; w++)
                    vnstore(sum[r] + h * LP + VN * w, vnload(sum[r] + h * LP + VN * w) + acc[r][w]);
    }
}

/* An input-gradient tile is DR cells of one image row y whose columns share a phase modulo the
 * stride: x = ph + s_1 (i0 + r). A kernel offset then reaches all of them or none from the
 * output row, and all or none by the columns' phase, so with stride 2 the tile runs the chains
 * of the offsets that reach it only (1 in 4), not all of them. */
static int64_t phase_len(const tl_geom *G, int64_t ph) { return (G->in[1] - ph + G->s[1] - 1) / G->s[1]; }

/* tiles per image row: over the phases, their columns in runs of DR */
static int64_t row_tiles(const tl_geom *G) {
    int64_t n = 0;
    for (int64_t ph = 0; ph < G->s[1] && ph < G->in[1]; ph++) n += (phase_len(G, ph) + DR - 1) / DR;
    return n;
}

/* input-gradient tile: cells (y, ph + s_1 (i0 + r)) for r < DR (those in the row) x input
 * channels of panel q. Per kernel offset in order, each cell that offset reaches from an output
 * position o gets the chain over c_out of W[oc, ci, kk] g[oc, o] (from 0) added onto its sum
 * (from 0): col2im's adds, in its order, onto the GEMM's chains. A cell the offset does not
 * reach adds nothing. */
static void dgrad_tile(const tl_direct *D, const float *Wk, const float *gb, float *dxb,
                       int64_t q, int64_t y, int64_t ph, int64_t i0) {
    const tl_geom *G = D->G;
    const int64_t s0 = G->s[0], s1 = G->s[1], OW = G->out[1], n = G->in_n;
    const int64_t len = phase_len(G, ph), mr = len - i0 < DR ? len - i0 : DR;
    const int64_t lanes = G->cin - q * DL < DL ? G->cin - q * DL : DL;
    float sum[DR][DL] = {{0}};
    int reached = 0;
    for (int64_t kk = 0; kk < G->k_n; kk++) {
        const int64_t ky = kk / G->k[1], kx = kk % G->k[1];
        const int64_t ny = y + G->p[0] - ky, nx = ph + s1 * i0 + G->p[1] - kx;
        if (ny < 0 || ny % s0 || ny / s0 >= G->out[0] || nx % s1) continue;
        const float *rows[DR];
        int valid[DR], any = 0;
        for (int r = 0; r < DR; r++) {   /* row r reads output column (nx + s_1 r) / s_1 */
            const int64_t ox = nx / s1 + r;   /* exact: s_1 divides nx */
            valid[r] = r < mr && ox >= 0 && ox < OW;
            rows[r] = valid[r] ? gb + ny / s0 * OW + ox : gb;
            any |= valid[r];
        }
        if (!any) continue;
        reached = 1;
        offset_onto(lanes, G->cout, rows, D->gaddr, Wk + (q * G->k_n + kk) * G->cout * DL, valid, sum);
    }
    if (reached)   /* else the cells keep the zeros dx starts from */
        store_rows(&sum[0][0], lanes, mr, dxb + q * DL * n + y * G->in[1] + ph + s1 * i0, n, s1);
}

/* tile t of a panel: row y = t / row_tiles, then the phase and run within the row */
static void dgrad_tile_at(const tl_direct *D, const float *Wk, const float *gb, float *dxb,
                          int64_t q, int64_t t, int64_t per_row) {
    const tl_geom *G = D->G;
    int64_t y = t / per_row, rest = t % per_row, ph = 0;
    for (;; ph++) {
        const int64_t runs = (phase_len(G, ph) + DR - 1) / DR;
        if (rest < runs) break;
        rest -= runs;
    }
    dgrad_tile(D, Wk, gb, dxb, q, y, ph, rest * DR);
}

void tl_direct_dgrad(const tl_direct *D, const float *Wk, const float *gb, float *dxb, int par) {
    const tl_geom *G = D->G;
    const int64_t per_row = row_tiles(G), per = G->in[0] * per_row;
    const int64_t tiles = (G->cin + DL - 1) / DL * per;
#pragma omp parallel for schedule(dynamic, 4) if (par && G->cin * G->cout * G->in_n * G->k_n > 65536)
    for (int64_t t = 0; t < tiles; t++) dgrad_tile_at(D, Wk, gb, dxb, t / per, t % per, per_row);
}

/* ---- forward with the output positions as the lanes (stride 1) ----
 * The 8 x 32 tile above (rows: positions, lanes: output channels) stores its results
 * transposed, DR x DL scalar moves, which costs about as much as 32 of its k steps: most of the
 * work for a short chain (an RGB first layer's 27 k steps, which therefore ran on im2col + the
 * GEMM) and a few per cent for long ones. At stride 1 a run of 16 output positions of one
 * output row reads 16 consecutive cells of the padded image at every k step, so a tile here is
 * PR output channels (the broadcast operand: the kernel, transposed once) by 32 positions (two
 * such vectors), stored as whole vectors into y's planes. The padded copy's channel planes are
 * PS floats apart, PS not a multiple of 256 (planes 4 KiB apart put a k walk's lines in one L1
 * set). Each output is still the fma chain over (ci, ky, kx) in order from the bias: the same
 * bits. */
#if VN == 16
#define PR 8
#else
#define PR 6    /* (6 x 2 accumulators, 16 positions a pass, beside 2 image vectors: 15 registers) */
#endif

int tl_direct_forward_pl_applies(const tl_geom *G, int64_t transpose) {
    return tl_direct_applies(G, transpose) && G->s[0] == 1 && G->s[1] == 1 &&
           G->out[1] % 16 == 0 && G->out_n % 32 == 0;
}

typedef struct {
    int64_t W, PS;      /* the padded image's row and channel plane, floats */
    int64_t *koff;      /* koff[(ci, ky, kx)]: ci PS + ky W + kx */
    int64_t *poff;      /* poff[(oy, ox)]: oy W + ox, the first cell position (oy, ox) reads */
} pl_geom;

/* the sample's image into xs's interior (its border keeps the zeros of calloc) */
static void pl_copy(const tl_direct *D, const pl_geom *Q, const float *x, float *xs) {
    const tl_geom *G = D->G;
    const int64_t H = G->in[0], W = G->in[1];
    for (int64_t ci = 0; ci < G->cin; ci++)
        for (int64_t y = 0; y < H; y++)
            memcpy(xs + ci * Q->PS + (y + G->p[0]) * Q->W + G->p[1], x + (ci * H + y) * W,
                   (size_t)W * sizeof(float));
}

/* channels [oc0, oc0 + mr) x positions [o0, o0 + 32) */
static inline __attribute__((always_inline)) void
pl_tile(int64_t K, const int64_t *restrict koff, const float *x0, const float *x1,
        const float *restrict w, int64_t ldw, const float *bias, float *y, int64_t P, int64_t mr) {
    /* positions h LP .. h LP + LP - 1 a pass (all 32 with AVX-512), o0 .. o0 + 15 read from
     * x0 and o0 + 16 .. from x1 */
    for (int h = 0; h < 32 / LP; h++) {
        const float *src[PW];
        for (int v = 0; v < PW; v++) {
            const int p = h * LP + VN * v;
            src[v] = p < 16 ? x0 + p : x1 + (p - 16);
        }
        vn acc[PR][PW];
#pragma GCC unroll 8
        for (int r = 0; r < PR; r++) {
            const float b = bias[r < mr ? r : mr - 1];
            for (int v = 0; v < PW; v++) acc[r][v] = vnset1(b);
        }
        for (int64_t k = 0; k < K; k++) {
            const int64_t o = koff[k];
            vn a[PW];
            for (int v = 0; v < PW; v++) a[v] = vnload(src[v] + o);
#pragma GCC unroll 8
            for (int r = 0; r < PR; r++) {
                const float c = w[k * ldw + r];
                for (int v = 0; v < PW; v++) acc[r][v] = VNFMA(c, a[v], acc[r][v]);
            }
        }
#pragma GCC unroll 8
        for (int r = 0; r < PR; r++)   /* constant indices: acc stays in registers */
            if (r < mr)
                for (int v = 0; v < PW; v++) vnstore(y + r * P + h * LP + VN * v, acc[r][v]);
    }
}

/* position blocks [j0, j1) of 32 of one sample, channel tiles inner (each block's cells are
 * read by every channel tile) */
static void pl_blocks(const tl_direct *D, const pl_geom *Q, const float *xs, const float *Wt,
                      int64_t ldw, const float *bias, float *yb, int64_t j0, int64_t j1) {
    const tl_geom *G = D->G;
    const int64_t P = D->P;
    for (int64_t o0 = j0 * 32; o0 < j1 * 32; o0 += 32) {
        const float *x0 = xs + Q->poff[o0], *x1 = xs + Q->poff[o0 + 16];
        for (int64_t oc0 = 0; oc0 < G->cout; oc0 += PR) {
            const int64_t mr = G->cout - oc0 < PR ? G->cout - oc0 : PR;
            pl_tile(D->CK, Q->koff, x0, x1, Wt + oc0, ldw, bias + oc0, yb + oc0 * P + o0, P, mr);
        }
    }
}

int tl_direct_forward_pl(const tl_direct *D, const float *W, const float *bias, const float *X,
                         float *Y) {
    const tl_geom *G = D->G;
    const int64_t xin = G->cin * G->in_n, yout = G->cout * G->out_n, P = D->P;
    const int64_t ldw = (G->cout + PR - 1) / PR * PR, K = D->CK;
    pl_geom Q;
    Q.W = D->Wp;
    Q.PS = (D->plane + 15) / 16 * 16;
    if (Q.PS % 256 == 0) Q.PS += 16;
    const int64_t img = G->cin * Q.PS;
    Q.koff = (int64_t *)malloc((size_t)K * sizeof(int64_t));
    Q.poff = (int64_t *)malloc((size_t)P * sizeof(int64_t));
    float *Wt = (float *)calloc((size_t)(K * ldw + 1), sizeof(float));   /* Wt[k ldw + oc] */
    int st = TL_OK;
    if (!Q.koff || !Q.poff || !Wt) { st = TL_E_OOM; goto out; }
    for (int64_t ci = 0, i = 0; ci < G->cin; ci++)
        for (int64_t ky = 0; ky < G->k[0]; ky++)
            for (int64_t kx = 0; kx < G->k[1]; kx++) Q.koff[i++] = ci * Q.PS + ky * Q.W + kx;
    for (int64_t oy = 0, i = 0; oy < G->out[0]; oy++)
        for (int64_t ox = 0; ox < G->out[1]; ox++) Q.poff[i++] = oy * Q.W + ox;
    for (int64_t oc = 0; oc < G->cout; oc++)
        for (int64_t k = 0; k < K; k++) Wt[k * ldw + oc] = W[oc * K + k];
    const int par = (double)G->n * G->cout * K * P > 65536.0;
    const int64_t blocks = P / 32;
    if (par && G->n < 2 * omp_get_max_threads()) {   /* few images: the threads split each one's blocks */
        float *xs = (float *)calloc((size_t)(img + 1), sizeof(float));
        if (!xs) { st = TL_E_OOM; goto out; }
        for (int64_t b = 0; b < G->n; b++) {
            pl_copy(D, &Q, X + b * xin, xs);
#pragma omp parallel for schedule(dynamic, 1)
            for (int64_t j = 0; j < blocks; j++) pl_blocks(D, &Q, xs, Wt, ldw, bias, Y + b * yout, j, j + 1);
        }
        free(xs);
        goto out;
    }
#pragma omp parallel if (par)
    {
        float *xs = (float *)calloc((size_t)(img + 1), sizeof(float));
        if (!xs) {
#pragma omp atomic write
            st = TL_E_OOM;
        }
#pragma omp for schedule(dynamic, 1) nowait
        for (int64_t b = 0; b < G->n; b++) {
            if (!xs) continue;
            pl_copy(D, &Q, X + b * xin, xs);
            pl_blocks(D, &Q, xs, Wt, ldw, bias, Y + b * yout, 0, blocks);
        }
        free(xs);
    }
out:
    free(Q.koff);
    free(Q.poff);
    free(Wt);
    return st;
}
