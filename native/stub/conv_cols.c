/* conv_cols.c (stub): im2col / col2im (conv_cols.h) in runs along the last spatial axis.
 *
 * A col row (channel, kernel offset) splits into runs of out[last] positions that share every
 * other axis; a run reads (or adds into) one image row, cells o*s + k - p for o in a closed-form
 * range [lo, hi) (the rest is padding), so for stride 1 a run is a copy or a vector add. No
 * per-element table: each element costs a load and a store, not a table lookup and a branch;
 * what a kernel offset's runs share is worked out once per call (tl_cols_init). */
#include <stdlib.h>
#include <string.h>
#include "stub.h"
#include "conv_cols.h"

/* image offset of the row the run at outer output index oo reads (all axes but the last), or
 * -1 in the padding */
static inline int64_t run_row(const tl_cols *R, const tl_col_tap *t, const int64_t *oo) {
    const tl_geom *G = R->G;
    int64_t off = 0;
    for (int64_t a = 0; a < R->L; a++) {
        int64_t i = oo[a] * G->s[a] + t->ko[a] - G->p[a];
        if (i < 0 || i >= G->in[a]) return -1;
        off = off * G->in[a] + i;
    }
    return off * R->IL;
}

/* oo: the outer output index of run q (unravelled once), then stepped run by run */
static void run_index(const tl_cols *R, int64_t q, int64_t *oo) {
    for (int64_t a = R->L - 1; a >= 0; a--) { oo[a] = q % R->G->out[a]; q /= R->G->out[a]; }
}

static inline void run_next(const tl_cols *R, int64_t *oo) {
    for (int64_t a = R->L - 1; a >= 0; a--) {
        if (++oo[a] < R->G->out[a]) return;
        oo[a] = 0;
    }
}

int tl_cols_init(tl_cols *R, const tl_geom *G) {
    R->G = G;
    R->L = G->r - 1;
    R->OL = G->out[R->L];
    R->IL = G->in[R->L];
    R->runs = R->OL ? G->out_n / R->OL : 0;
    R->taps = (tl_col_tap *)malloc((size_t)(G->k_n > 0 ? G->k_n : 1) * sizeof(tl_col_tap));
    R->rows = (int64_t *)malloc((size_t)(G->k_n * R->runs > 0 ? G->k_n * R->runs : 1) * sizeof(int64_t));
    if (!R->taps || !R->rows) { tl_cols_free(R); return 0; }
    const int64_t s = G->s[R->L];
    for (int64_t kk = 0; kk < G->k_n; kk++) {
        tl_col_tap *t = &R->taps[kk];
        for (int64_t a = G->r - 1, q = kk; a >= 0; a--) { t->ko[a] = q % G->k[a]; q /= G->k[a]; }
        int64_t d = t->ko[R->L] - G->p[R->L], top = R->IL - 1 - d;   /* image column o*s + d */
        t->d = d;
        t->lo = d >= 0 ? 0 : (-d + s - 1) / s;
        t->hi = top < 0 ? 0 : top / s + 1;
        if (t->hi > R->OL) t->hi = R->OL;
        if (t->lo > t->hi) t->lo = t->hi;
        int64_t oo[TL_MAX_RANK];
        run_index(R, 0, oo);
        for (int64_t q = 0; q < R->runs; q++, run_next(R, oo))
            R->rows[kk * R->runs + q] = run_row(R, t, oo);
    }
    return 1;
}

void tl_cols_free(tl_cols *R) {
    free(R->taps);
    free(R->rows);
    R->taps = NULL;
    R->rows = NULL;
}

void tl_im2col(const tl_cols *R, int64_t C, const float *img, int64_t o0, int64_t o1, float *col,
               int64_t ld, int par) {
    const tl_geom *G = R->G;
    const int64_t K = G->k_n, img_n = G->in_n, OL = R->OL, s = G->s[R->L];
#pragma omp parallel for schedule(static) if (par && C * K * (o1 - o0) > TL_PAR_MIN)
    for (int64_t ck = 0; ck < C * K; ck++) {
        const int64_t kk = ck % K, lo = R->taps[kk].lo, hi = R->taps[kk].hi, d = R->taps[kk].d;
        const int64_t *rows = R->rows + kk * R->runs;
        const float *im = img + (ck / K) * img_n;
        float *row = col + ck * ld - o0;          /* row[o] for o in [o0, o1) */
        for (int64_t q = o0 / OL; q * OL < o1; q++) {
            int64_t r0 = q * OL, a = o0 > r0 ? o0 - r0 : 0, e = o1 - r0 < OL ? o1 - r0 : OL;
            float *dst = row + r0;
            int64_t off = rows[q];
            if (off < 0) { for (int64_t o = a; o < e; o++) dst[o] = 0.0f; continue; }
            const float *src = im + off + d;
            if (s == 1 && a >= lo && e <= hi) {        /* all inside the image: a copy */
                if (e - a >= 32) memcpy(dst + a, src + a, (size_t)(e - a) * sizeof(float));
                else for (int64_t o = a; o < e; o++) dst[o] = src[o];
                continue;
            }
            for (int64_t o = a; o < e; o++) dst[o] = o >= lo && o < hi ? src[o * s] : 0.0f;
        }
    }
}

void tl_col2im(const tl_cols *R, int64_t C, const float *col, float *img, int par) {
    const tl_geom *G = R->G;
    const int64_t K = G->k_n, P = G->out_n, img_n = G->in_n, OL = R->OL, s = G->s[R->L];
#pragma omp parallel for schedule(static) if (par && C * K * P > TL_PAR_MIN)
    for (int64_t c = 0; c < C; c++) {
        float *im = img + c * img_n;
        for (int64_t kk = 0; kk < K; kk++) {
            const int64_t lo = R->taps[kk].lo, hi = R->taps[kk].hi, d = R->taps[kk].d;
            const int64_t *rows = R->rows + kk * R->runs;
            const float *row = col + (c * K + kk) * P;
            for (int64_t q = 0; q < R->runs; q++, row += OL) {
                int64_t off = rows[q];
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
