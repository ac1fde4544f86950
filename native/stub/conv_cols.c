/* conv_cols.c (stub): im2col / col2im (conv_cols.h) in runs along the last spatial axis.
 *
 * A col row (channel, kernel offset) splits into runs of out[last] positions that share every
 * other axis; a run reads (or adds into) one image row, cells o*s + k - p for o in a closed-form
 * range [lo, hi) (the rest is padding), so for stride 1 a run is a memcpy or a vector add. No
 * per-element table: each element costs a load and a store, not a table lookup and a branch. */
#include <string.h>
#include "stub.h"
#include "conv_cols.h"

/* per (kernel offset, run): where a run starts in the image, or -1 in the padding */
typedef struct run_walk {
    const tl_geom *G;
    int64_t L, OL, IL, runs;     /* last axis; its output and image lengths; runs per row */
    int64_t ko[TL_MAX_RANK];
} run_walk;

static void walk_init(run_walk *w, const tl_geom *G, int64_t kk) {
    w->G = G;
    w->L = G->r - 1;
    w->OL = G->out[w->L];
    w->IL = G->in[w->L];
    w->runs = w->OL ? G->out_n / w->OL : 0;
    for (int64_t a = G->r - 1; a >= 0; a--) { w->ko[a] = G->k[a] ? kk % G->k[a] : 0; if (G->k[a]) kk /= G->k[a]; }
}

/* valid outputs [*lo, *hi) of the last axis and the image column of output 0 (may be < 0) */
static void last_range(const run_walk *w, int64_t *lo, int64_t *hi, int64_t *start) {
    const tl_geom *G = w->G;
    int64_t s = G->s[w->L], d = w->ko[w->L] - G->p[w->L];   /* image column = o*s + d */
    *start = d;
    *lo = d >= 0 ? 0 : (-d + s - 1) / s;
    int64_t top = w->IL - 1 - d;                             /* o*s <= top */
    *hi = top < 0 ? 0 : top / s + 1;
    if (*hi > w->OL) *hi = w->OL;
    if (*lo > *hi) *lo = *hi;
}

/* image offset of the row that run q reads (all axes but the last), or -1 in the padding */
static int64_t run_row(const run_walk *w, int64_t q) {
    const tl_geom *G = w->G;
    int64_t off = 0, oo[TL_MAX_RANK];
    for (int64_t a = w->L - 1; a >= 0; a--) { oo[a] = q % G->out[a]; q /= G->out[a]; }
    for (int64_t a = 0; a < w->L; a++) {
        int64_t i = oo[a] * G->s[a] + w->ko[a] - G->p[a];
        if (i < 0 || i >= G->in[a]) return -1;
        off = off * G->in[a] + i;
    }
    return off * w->IL;
}

void tl_im2col(const tl_geom *G, int64_t C, const float *img, int64_t o0, int64_t o1, float *col,
               int64_t ld, int par) {
    const int64_t K = G->k_n, img_n = G->in_n;
#pragma omp parallel for schedule(static) if (par && C * K * (o1 - o0) > TL_PAR_MIN)
    for (int64_t ck = 0; ck < C * K; ck++) {
        run_walk w;
        walk_init(&w, G, ck % K);
        int64_t lo, hi, d, s = G->s[w.L];
        last_range(&w, &lo, &hi, &d);
        const float *im = img + (ck / K) * img_n;
        float *row = col + ck * ld - o0;          /* row[o] for o in [o0, o1) */
        for (int64_t q = o0 / w.OL; q * w.OL < o1; q++) {
            int64_t r0 = q * w.OL, a = o0 > r0 ? o0 - r0 : 0, e = o1 - r0 < w.OL ? o1 - r0 : w.OL;
            float *dst = row + r0;
            int64_t off = run_row(&w, q);
            if (off < 0) { for (int64_t o = a; o < e; o++) dst[o] = 0.0f; continue; }
            const float *src = im + off + d;
            int64_t l = lo > a ? lo : a, h = hi < e ? hi : e;
            for (int64_t o = a; o < (l < e ? l : e); o++) dst[o] = 0.0f;
            if (s == 1 && h > l) memcpy(dst + l, src + l, (size_t)(h - l) * sizeof(float));
            else for (int64_t o = l; o < h; o++) dst[o] = src[o * s];
            for (int64_t o = (h > a ? h : a); o < e; o++) dst[o] = 0.0f;
        }
    }
}

void tl_col2im(const tl_geom *G, int64_t C, const float *col, float *img, int par) {
    const int64_t K = G->k_n, P = G->out_n, img_n = G->in_n;
#pragma omp parallel for schedule(static) if (par && C * K * P > TL_PAR_MIN)
    for (int64_t c = 0; c < C; c++) {
        float *im = img + c * img_n;
        for (int64_t kk = 0; kk < K; kk++) {
            run_walk w;
            walk_init(&w, G, kk);
            int64_t lo, hi, d, s = G->s[w.L];
            last_range(&w, &lo, &hi, &d);
            const float *row = col + (c * K + kk) * P;
            for (int64_t q = 0; q < w.runs; q++, row += w.OL) {
                int64_t off = run_row(&w, q);
                if (off < 0) continue;
                float *dst = im + off + d;
                if (s == 1) {
#pragma omp simd
                    for (int64_t o = lo; o < hi; o++) dst[o] = tlm_add(dst[o], row[o]);
                } else {
                    for (int64_t o = lo; o < hi; o++) dst[o * s] = tlm_add(dst[o * s], row[o]);
                }
            }
        }
    }
}
