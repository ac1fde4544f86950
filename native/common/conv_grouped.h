/* conv_grouped.h: the arithmetic of grouped and dilated convolution (depthwise when
 * groups = C_in), 1..3 spatial axes, written once for both backends. The stub loops over these
 * functions (native/stub/conv_grouped.c); the CUDA library runs one thread per value
 * (native/cuda/conv_grouped.cu). There is no im2col: every value is computed where it lands.
 *
 * Orders (README rule 3 and 4; with groups = 1 and dilation 1 they are the bits of the dense
 * convolution of conv_pool, which runs im2col and the exact GEMM):
 *   forward          an fma chain over (c_in of the group, kernel offset) in order, starting
 *                    from the bias; a tap in the padding multiplies 0 (as im2col's zeros do)
 *   input gradient   per image cell, for each kernel offset in order that reaches an output
 *                    position: an fma chain over the group's c_out from 0, added onto the
 *                    cell's sum (which starts at 0), as col2im adds the columns
 *   kernel gradient  per sample, an fma chain over the output positions in order from 0 (a
 *                    padding tap multiplies 0); then rule 4 over the samples
 *   bias gradient    rule 4 over (sample, output position)
 */
#ifndef TL_CONV_GROUPED_H
#define TL_CONV_GROUPED_H

#include "contract.h"
#include "tl_math.h"

/* One group's geometry plus the group count. cin and cout count one group's channels; axes
 * past the rank hold size 1, stride 1, padding 0 and dilation 1. */
typedef struct tl_gconv {
    int64_t n, cin, cout, groups;
    int64_t in[3], k[3], out[3], s[3], p[3], d[3];
    int64_t in_n, k_n, out_n;
} tl_gconv;

/* host: the geometry the generated entry parsed, checked for the kernels (1..3 axes) */
static inline int tl_gconv_make(const char *op, const tl_geom *G, const int64_t *dil,
                                int64_t groups, tl_gconv *C) {
    if (G->r > 3)
        return tl_fail(TL_E_ARG, "%s: 1..3 spatial axes are supported, got %d", op, G->r);
    C->n = G->n; C->cin = G->cin; C->cout = G->cout; C->groups = groups;
    for (int a = 0; a < 3; a++) {
        if (dil[a] < 1)
            return tl_fail(TL_E_ARG, "%s: dilation must be >= 1, got %lld on axis %d", op,
                           (long long)dil[a], a);
        C->in[a] = G->in[a]; C->k[a] = G->k[a]; C->out[a] = G->out[a];
        C->s[a] = G->s[a]; C->p[a] = G->p[a]; C->d[a] = a < G->r ? dil[a] : 1;
    }
    C->in_n = G->in_n; C->k_n = G->k_n; C->out_n = G->out_n;
    return TL_OK;
}

/* the input offset along one axis of kernel tap kk at output position o, or -1 in the padding */
TLM_HD int64_t tl_gconv_at(const tl_gconv *C, int a, int64_t o, int64_t kk) {
    int64_t i = o * C->s[a] - C->p[a] + kk * C->d[a];
    return i >= 0 && i < C->in[a] ? i : -1;
}

/* y at sample n, output channel co (of all groups), output position (o0, o1, o2) */
TLM_HD float tl_gconv_forward(const tl_gconv *C, const float *w, const float *b, const float *x,
                              int64_t n, int64_t co, int64_t o0, int64_t o1, int64_t o2) {
    const float *wk = w + co * C->cin * C->k_n;
    const float *xg = x + (n * C->cin * C->groups + (co / C->cout) * C->cin) * C->in_n;
    float acc = b[co];
    for (int64_t c = 0; c < C->cin; c++) {
        const float *xc = xg + c * C->in_n;
        for (int64_t k0 = 0; k0 < C->k[0]; k0++) {
            const int64_t i0 = tl_gconv_at(C, 0, o0, k0);
            for (int64_t k1 = 0; k1 < C->k[1]; k1++) {
                const int64_t i1 = tl_gconv_at(C, 1, o1, k1);
                for (int64_t k2 = 0; k2 < C->k[2]; k2++) {
                    const int64_t i2 = tl_gconv_at(C, 2, o2, k2);
                    const float v = (i0 >= 0 && i1 >= 0 && i2 >= 0)
                        ? xc[(i0 * C->in[1] + i1) * C->in[2] + i2] : 0.0f;
                    acc = tlm_fma(*wk++, v, acc);
                }
            }
        }
    }
    return acc;
}

/* the output position that kernel tap kk reaches from input offset i along axis a, or -1 */
TLM_HD int64_t tl_gconv_from(const tl_gconv *C, int a, int64_t i, int64_t kk) {
    const int64_t t = i + C->p[a] - kk * C->d[a];
    if (C->s[a] == 1) return t >= 0 && t < C->out[a] ? t : -1;   /* no division at stride 1 */
    if (t < 0 || t % C->s[a]) return -1;
    return t / C->s[a] < C->out[a] ? t / C->s[a] : -1;
}

/* dinput at sample n, input channel ci (of all groups), input position (q0, q1, q2) */
TLM_HD float tl_gconv_dinput(const tl_gconv *C, const float *w, const float *g, int64_t n,
                             int64_t ci, int64_t q0, int64_t q1, int64_t q2) {
    const int64_t otot = C->cout * C->groups;
    const int64_t grp = ci / C->cin, cl = ci % C->cin;
    const float *gg = g + (n * otot + grp * C->cout) * C->out_n;
    const float *wg = w + (grp * C->cout * C->cin + cl) * C->k_n;
    float acc = 0.0f;
    int64_t kk = 0;
    for (int64_t k0 = 0; k0 < C->k[0]; k0++) {
        const int64_t o0 = tl_gconv_from(C, 0, q0, k0);
        for (int64_t k1 = 0; k1 < C->k[1]; k1++) {
            const int64_t o1 = tl_gconv_from(C, 1, q1, k1);
            for (int64_t k2 = 0; k2 < C->k[2]; k2++, kk++) {
                const int64_t o2 = tl_gconv_from(C, 2, q2, k2);
                if (o0 < 0 || o1 < 0 || o2 < 0) continue;
                const int64_t o = (o0 * C->out[1] + o1) * C->out[2] + o2;
                float t = 0.0f;
                for (int64_t c = 0; c < C->cout; c++)
                    t = tlm_fma(wg[c * C->cin * C->k_n + kk], gg[c * C->out_n + o], t);
                acc = tlm_add(acc, t);
            }
        }
    }
    return acc;
}

/* sample n's share of the kernel gradient at (co of all groups, cl of its group, tap k0 k1 k2) */
TLM_HD float tl_gconv_dkernel_sample(const tl_gconv *C, const float *x, const float *g,
                                     int64_t co, int64_t cl, int64_t k0, int64_t k1, int64_t k2,
                                     int64_t n) {
    const int64_t otot = C->cout * C->groups;
    const float *xc = x + (n * C->cin * C->groups + (co / C->cout) * C->cin + cl) * C->in_n;
    const float *gc = g + (n * otot + co) * C->out_n;
    float acc = 0.0f;
    for (int64_t o0 = 0; o0 < C->out[0]; o0++) {
        const int64_t i0 = tl_gconv_at(C, 0, o0, k0);
        for (int64_t o1 = 0; o1 < C->out[1]; o1++) {
            const int64_t i1 = tl_gconv_at(C, 1, o1, k1);
            for (int64_t o2 = 0; o2 < C->out[2]; o2++) {
                const int64_t i2 = tl_gconv_at(C, 2, o2, k2);
                const float v = (i0 >= 0 && i1 >= 0 && i2 >= 0)
                    ? xc[(i0 * C->in[1] + i1) * C->in[2] + i2] : 0.0f;
                acc = tlm_fma(*gc++, v, acc);
            }
        }
    }
    return acc;
}

/* the sequential sum of chunk `chunk` (TLM_CHUNK values) of channel co's bias-gradient
 * sequence, which runs over (sample, output position) */
TLM_HD float tl_gconv_dbias_chunk(const tl_gconv *C, const float *g, int64_t co, int64_t chunk) {
    const int64_t otot = C->cout * C->groups, len = C->n * C->out_n;
    const int64_t j0 = chunk * TLM_CHUNK, j1 = j0 + TLM_CHUNK < len ? j0 + TLM_CHUNK : len;
    int64_t n = j0 / C->out_n, o = j0 % C->out_n;   /* then walked, not divided per value */
    const float *gp = g + (n * otot + co) * C->out_n;
    float s = 0.0f;
    for (int64_t j = j0; j < j1; j++) {
        const float v = gp[o];
        s = j == j0 ? v : tlm_add(s, v);
        if (++o == C->out_n) { o = 0; gp += otot * C->out_n; }
    }
    return s;
}

#endif /* TL_CONV_GROUPED_H */
