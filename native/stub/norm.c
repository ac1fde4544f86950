/* norm.c (stub): layer_norm and batchnorm_channel_first, forward and fused backward.
 *
 * The arithmetic around the sums is native/common/formulas/normalize.h (shared with CUDA):
 * biased variance, eps inside the sqrt, mean and variance by multiplication with float32(1/N),
 * xhat = (x - mean) / std (a division), y = xhat*gamma+beta.
 *
 * Every sum follows rule 4 of tl_math.h in every mode (the sums were sequential chains before,
 * so the canonical order costs nothing): the mean's sum of x, then the variance's sum of the
 * rounded squares (x - mean)^2, in index order; layer_norm over a row, batchnorm over a
 * channel's elements sample by sample (n outer, positions inner). The backward sums the
 * rounded products the same way: S1 = sum dxhat, S2 = sum dxhat * xhat per row (channel), and
 * dgamma = sum g * xhat, dbeta = sum g per column over rows in row order (layer_norm).
 * CUDA's exact mode computes the same sums in the same order (native/cuda/norm.cu).
 */
#include <stdlib.h>
#include "stub.h"
#include "formulas/normalize.h"
#include "transpose16.h"
#include "generated/norm_kernels.h"
#ifdef _OPENMP
#include <omp.h>
#else
static inline int omp_get_max_threads(void) { return 1; }
static inline int omp_get_thread_num(void) { return 0; }
#endif

/* Rows of up to TLM_CHUNK values (layer_norm's usual widths) go LN_ROWS at a time: a row's
 * rule-4 sum is then one chunk, the sequential chain from its first value, and the chains of
 * LN_ROWS rows run interleaved (row_chains), each add still in its row's index order, so they
 * overlap instead of each waiting on its row's previous add. Wider rows take tl_rule4_sum row
 * by row. Either way every row's sums, and so every bit, are the same. */
#define LN_ROWS 8

/* out[r] = tl_rule4_sum(x + r * ld, n) for r < R <= LN_ROWS, 1 <= n <= TLM_CHUNK */
static void row_chains(const float *x, int64_t ld, int64_t n, int R, float *out) {
    float s[LN_ROWS];
    int64_t off[LN_ROWS];
    for (int r = 0; r < LN_ROWS; r++) off[r] = (r < R ? r : 0) * ld;   /* spare lanes: row 0 */
    for (int r = 0; r < LN_ROWS; r++) s[r] = x[off[r]];
    for (int64_t i = 1; i < n; i++)
        for (int r = 0; r < LN_ROWS; r++) s[r] = tlm_add(s[r], x[off[r] + i]);
    for (int r = 0; r < R; r++) out[r] = s[r];
}

/* the rule-4 sums of R <= LN_ROWS rows of cols values, ld apart */
static void row_sums(const float *x, int64_t ld, int64_t cols, int R, float *out) {
    if (cols >= 1 && cols <= TLM_CHUNK) {
        row_chains(x, ld, cols, R, out);
        return;
    }
    for (int r = 0; r < R; r++) out[r] = tl_rule4_sum(x + r * ld, cols);
}

int tlk_layer_norm(const char *op, tl_buf x, tl_buf gamma, tl_buf beta, tl_buf y, tl_buf xhat, tl_buf inv_std,
                  int64_t rows, int64_t cols, double eps) {
    const int64_t n = rows * cols, groups = (rows + LN_ROWS - 1) / LN_ROWS;
    const float *X = x->data, *G = gamma->data, *B = beta->data;
    float *Y = y->data, *XH = xhat->data, *IS = inv_std->data;
    const float inv_cols = (float)(1.0 / (double)cols), e = (float)eps;
#pragma omp parallel for schedule(static) if (n > TL_PAR_MIN)
    for (int64_t gi = 0; gi < groups; gi++) {
        const int64_t r0 = gi * LN_ROWS;
        const int R = (int)(rows - r0 < LN_ROWS ? rows - r0 : LN_ROWS);
        float sum[LN_ROWS], mean[LN_ROWS];
        row_sums(X + r0 * cols, cols, cols, R, sum);
        for (int r = 0; r < R; r++) {
            const float *xr = X + (r0 + r) * cols;
            float *yr = Y + (r0 + r) * cols;
            mean[r] = tlf_mean(sum[r], inv_cols);
            for (int64_t j = 0; j < cols; j++) yr[j] = tlf_sqdev(xr[j], mean[r]);
        }
        row_sums(Y + r0 * cols, cols, cols, R, sum);   /* y holds the squares for now */
        for (int r = 0; r < R; r++) {
            const float *xr = X + (r0 + r) * cols;
            float *yr = Y + (r0 + r) * cols, *hr = XH + (r0 + r) * cols;
            float sd = tlf_norm_std(tlf_mean(sum[r], inv_cols), e);
            IS[r0 + r] = tlf_norm_inv(sd);
            for (int64_t j = 0; j < cols; j++) {
                float xh = tlf_norm_xhat(xr[j], mean[r], sd);
                hr[j] = xh;
                yr[j] = tlf_affine(xh, G[j], B[j]);
            }
        }
    }
    return TL_OK;
}

int tlk_layer_norm_backward(const char *op, tl_buf g, tl_buf xhat, tl_buf inv_std, tl_buf gamma, tl_buf dx,
                           tl_buf dgamma, tl_buf dbeta, int64_t rows, int64_t cols) {
    const int64_t n = rows * cols, groups = (rows + LN_ROWS - 1) / LN_ROWS;
    const float *GO = g->data, *XH = xhat->data, *IS = inv_std->data, *GA = gamma->data;
    float *DX = dx->data, *DG = dgamma->data, *DB = dbeta->data;
    const float fc = (float)cols, inv_cols = cols ? (float)(1.0 / (double)cols) : 0.0f;
    /* column sums first, with dx as the scratch for the products g * xhat */
#pragma omp parallel for schedule(static) if (n > TL_PAR_MIN)
    for (int64_t i = 0; i < n; i++) DX[i] = tlm_mul(GO[i], XH[i]);
    TL_TRY(tl_stub_axis_sum(op, DX, DG, 1, rows, cols));
    TL_TRY(tl_stub_axis_sum(op, GO, DB, 1, rows, cols));
#pragma omp parallel for schedule(static) if (n > TL_PAR_MIN)
    for (int64_t gi = 0; gi < groups; gi++) {
        const int64_t r0 = gi * LN_ROWS;
        const int R = (int)(rows - r0 < LN_ROWS ? rows - r0 : LN_ROWS);
        float S1[LN_ROWS], S2[LN_ROWS];
        float *d0 = DX + r0 * cols;
        for (int r = 0; r < R; r++) {
            const float *gr = GO + (r0 + r) * cols;
            float *dr = d0 + r * cols;
            for (int64_t j = 0; j < cols; j++) dr[j] = tlm_mul(gr[j], GA[j]);
        }
        row_sums(d0, cols, cols, R, S1);
        for (int r = 0; r < R; r++) {
            const float *xr = XH + (r0 + r) * cols;
            float *dr = d0 + r * cols;
            for (int64_t j = 0; j < cols; j++) dr[j] = tlm_mul(dr[j], xr[j]);
        }
        row_sums(d0, cols, cols, R, S2);
        for (int r = 0; r < R; r++) {
            const float *gr = GO + (r0 + r) * cols, *xr = XH + (r0 + r) * cols;
            float *dr = d0 + r * cols, is = IS[r0 + r];
            for (int64_t j = 0; j < cols; j++)
                dr[j] = tlf_norm_dx(tlm_mul(gr[j], GA[j]), xr[j], S1[r], S2[r], fc, is, inv_cols);
        }
    }
    return TL_OK;
}

/* kinds of per-channel sums over the (sample, position) walk */
enum { BN_X, BN_SQDEV, BN_PROD };

/* Rule 4 over channel ch's n*s elements, sample by sample: a[off] (BN_X), (a[off] - mu)^2
 * (BN_SQDEV) or a[off] * b[off] (BN_PROD), every step rounded. The chunks' sequential sums are
 * independent, so BN_LANES of them run side by side as the lanes of one vector; the chunk
 * partials then go onto the tree in chunk order (tlm_sum4_push), exactly as tlm_sum4_add would
 * have pushed them. */
#define BN_LANES 16


/* One block of up to BN_LANES chunks from walk position p0, any s: the values are copied
 * (computed on the way) into buf lane-interleaved (buf[i * BN_LANES + l] = value i of chunk l)
 * and summed as vectors of one value per chunk. Writes the chunk partials to part and returns
 * how many chunks the block holds. */
static int64_t bn_block_copy(int kind, const float *a, const float *b, float mu, int64_t n,
                             int64_t c, int64_t s, int64_t ch, int64_t p0, float part[BN_LANES]) {
    float buf[BN_LANES * TLM_CHUNK];
    const int64_t total = n * s;
    int64_t lanes = 0, last = TLM_CHUNK;   /* chunks in this block; the last one's length */
    for (int64_t l = 0; l < BN_LANES && p0 + l * TLM_CHUNK < total; l++, lanes++) {
        int64_t p = p0 + l * TLM_CHUNK, len = total - p < TLM_CHUNK ? total - p : TLM_CHUNK;
        int64_t bi = p / s, off = p % s;
        last = len;
        for (int64_t i = 0; i < len;) {
            int64_t seg = s - off < len - i ? s - off : len - i, base = (bi * c + ch) * s + off;
            float *dst = buf + i * BN_LANES + l;
            if (kind == BN_X)
                for (int64_t t = 0; t < seg; t++) dst[t * BN_LANES] = a[base + t];
            else if (kind == BN_SQDEV)
                for (int64_t t = 0; t < seg; t++) dst[t * BN_LANES] = tlf_sqdev(a[base + t], mu);
            else
                for (int64_t t = 0; t < seg; t++) dst[t * BN_LANES] = tlm_mul(a[base + t], b[base + t]);
            i += seg; bi++; off = 0;
        }
    }
    if (lanes == BN_LANES && last == TLM_CHUNK) {
        for (int l = 0; l < BN_LANES; l++) part[l] = buf[l];
        for (int64_t i = 1; i < TLM_CHUNK; i++)
#pragma omp simd
            for (int l = 0; l < BN_LANES; l++) part[l] = tlm_add(part[l], buf[i * BN_LANES + l]);
    } else {
        for (int64_t l = 0; l < lanes; l++) {
            int64_t len = l == lanes - 1 ? last : TLM_CHUNK;
            float v = buf[l];
            for (int64_t i = 1; i < len; i++) v = tlm_add(v, buf[i * BN_LANES + l]);
            part[l] = v;
        }
    }
    return lanes;
}

/* The walk offset of position p of channel ch, and the values left in its sample's plane */
static inline int64_t bn_offset(int64_t p, int64_t c, int64_t s, int64_t ch, int64_t *left) {
    *left = s - p % s;
    return (p / s * c + ch) * s + p % s;
}

#if VN == 16
/* The AVX-512 build: squares of 16 x 16 (32 registers hold them) */
typedef float tl_v16u __attribute__((vector_size(64), aligned(4), may_alias));
#define BN_LOAD(p) ((tl_v16)*(const tl_v16u *)(p))

/* 16 rows (a row of 16 values per chunk) transposed and added into acc in walk order; the
 * first group of a chunk (first) starts the sums from its first value */
static inline __attribute__((always_inline)) tl_v16 bn_add_rows(tl_v16 r[16], tl_v16 acc, int first) {
    tl_transpose16(r);
    acc = first ? r[0] : acc + r[0];   /* constant indices: r stays in registers */
#pragma GCC unroll 16
    for (int i = 1; i < 16; i++) acc = acc + r[i];
    return acc;
}

/* One block of BN_LANES whole chunks from walk position p0 when s % 16 == 0: every run of 16
 * values inside a chunk is then contiguous in one sample's plane, so lane l's next 16 values
 * are one vector load at cur[l]. 16 such rows (a row per chunk) transposed give 16 vectors of
 * one value per chunk, added in walk order: the same sequential sums as bn_block_copy, without
 * the trip through memory. BN_X and BN_SQDEV sum a's values into part; BN_PROD sums both a's
 * values (part) and a * b (part2) in the one walk (the backward's two sums). */
static void bn_block_rows(int kind, const float *a, const float *b, float mu, int64_t c,
                          int64_t s, int64_t ch, int64_t p0, float part[BN_LANES],
                          float part2[BN_LANES]) {
    int64_t cur[BN_LANES], left[BN_LANES];   /* next offset; values left in its sample's plane */
    for (int l = 0; l < BN_LANES; l++) cur[l] = bn_offset(p0 + (int64_t)l * TLM_CHUNK, c, s, ch, &left[l]);
    tl_v16 acc = {0}, acc2 = {0};
    for (int t = 0; t < TLM_CHUNK / 16; t++) {
        tl_v16 r[16];
        for (int l = 0; l < 16; l++) {
            tl_v16 v = BN_LOAD(a + cur[l]);
            if (kind == BN_SQDEV) { v = v - mu; v = v * v; }
            r[l] = v;
        }
        acc = bn_add_rows(r, acc, t == 0);
        if (kind == BN_PROD) {
            for (int l = 0; l < 16; l++) r[l] = BN_LOAD(a + cur[l]) * BN_LOAD(b + cur[l]);
            acc2 = bn_add_rows(r, acc2, t == 0);
        }
        for (int l = 0; l < 16; l++) {
            cur[l] += 16;
            if ((left[l] -= 16) == 0) { cur[l] += (c - 1) * s; left[l] = s; }
        }
    }
    for (int l = 0; l < BN_LANES; l++) { part[l] = acc[l]; part2[l] = acc2[l]; }
}

#else
/* Below AVX-512 the 16 lanes are 16 / VN groups of VN, each summed from VN x VN squares in
 * the build's native vectors (simd16.h's vn): a 16 x 16 square of v16 does not fit 16
 * registers and went through the stack. Each lane adds the same values in the same order,
 * so the sums are the same bits. */
/* VN rows (a row of VN values per chunk or channel) transposed and added into acc in walk order;
 * the first group of a chunk (first) starts the sums from its first value. In the build's native
 * vectors (simd16.h's vn): below AVX-512 a 16 x 16 square of v16 does not fit the registers and
 * went through the stack, so there the 16 lanes are VN-lane groups, each summed from VN x VN
 * squares in the same walk order (lanes are independent: the same bits). */
#define BN_NG (16 / VN) /* VN-lane groups (and VN-position steps) per 16 */
static inline __attribute__((always_inline)) vn bn_add_rows(vn r[VN], vn acc, int first) {
    tl_transpose_vn(r);
    acc = first ? r[0] : acc + r[0];   /* constant indices: r stays in registers */
#pragma GCC unroll 16
    for (int i = 1; i < VN; i++) acc = acc + r[i];
    return acc;
}

/* One block of BN_LANES whole chunks from walk position p0 when s % 16 == 0: every run of 16
 * values inside a chunk is then contiguous in one sample's plane, so lane l's next 16 values
 * are one vector load at cur[l]. 16 such rows (a row per chunk) transposed give 16 vectors of
 * one value per chunk, added in walk order: the same sequential sums as bn_block_copy, without
 * the trip through memory. BN_X and BN_SQDEV sum a's values into part; BN_PROD sums both a's
 * values (part) and a * b (part2) in the one walk (the backward's two sums). */
static void bn_block_rows(int kind, const float *a, const float *b, float mu, int64_t c,
                          int64_t s, int64_t ch, int64_t p0, float part[BN_LANES],
                          float part2[BN_LANES]) {
    int64_t cur[BN_LANES], left[BN_LANES];   /* next offset; values left in its sample's plane */
    for (int l = 0; l < BN_LANES; l++) cur[l] = bn_offset(p0 + (int64_t)l * TLM_CHUNK, c, s, ch, &left[l]);
    vn acc[BN_NG] = {0}, acc2[BN_NG] = {0};
    for (int t = 0; t < TLM_CHUNK / 16; t++) {
        for (int h = 0; h < BN_NG; h++)   /* chunks h VN .. h VN + VN - 1 */
            for (int k = 0; k < BN_NG; k++) {   /* their values 16 t + k VN .. */
                const int64_t *cu = cur + h * VN;
                vn r[VN];
                for (int l = 0; l < VN; l++) {
                    vn v = vnload(a + cu[l] + k * VN);
                    if (kind == BN_SQDEV) { v = v - mu; v = v * v; }
                    r[l] = v;
                }
                acc[h] = bn_add_rows(r, acc[h], t == 0 && k == 0);
                if (kind == BN_PROD) {
                    for (int l = 0; l < VN; l++) r[l] = vnload(a + cu[l] + k * VN) * vnload(b + cu[l] + k * VN);
                    acc2[h] = bn_add_rows(r, acc2[h], t == 0 && k == 0);
                }
            }
        for (int l = 0; l < 16; l++) {
            cur[l] += 16;
            if ((left[l] -= 16) == 0) { cur[l] += (c - 1) * s; left[l] = s; }
        }
    }
    for (int h = 0; h < BN_NG; h++) {
        vnstore(part + h * VN, acc[h]);
        vnstore(part2 + h * VN, acc2[h]);
    }
}

#endif

/* Rule 4 over channel ch's walk: sums[0] of a's values (BN_X), of (a - mu)^2 (BN_SQDEV); for
 * BN_PROD sums[0] of a's values and sums[1] of a * b */
static void bn_channel_sums(int kind, const float *a, const float *b, float mu, int64_t n,
                            int64_t c, int64_t s, int64_t ch, float sums[2]) {
    tlm_sum4 acc, acc2;
    tlm_sum4_init(&acc);
    tlm_sum4_init(&acc2);
    const int64_t total = n * s;
    for (int64_t p0 = 0; p0 < total; p0 += BN_LANES * TLM_CHUNK) {
        float part[BN_LANES], part2[BN_LANES];
        int64_t lanes = BN_LANES;
        if (s % 16 == 0 && total - p0 >= BN_LANES * TLM_CHUNK) {
            bn_block_rows(kind, a, b, mu, c, s, ch, p0, part, part2);
        } else if (kind == BN_PROD) {
            lanes = bn_block_copy(BN_X, a, NULL, 0.0f, n, c, s, ch, p0, part);
            bn_block_copy(BN_PROD, a, b, 0.0f, n, c, s, ch, p0, part2);
        } else {
            lanes = bn_block_copy(kind, a, NULL, mu, n, c, s, ch, p0, part);
        }
        for (int64_t l = 0; l < lanes; l++) {
            tlm_sum4_push(&acc, part[l]);
            if (kind == BN_PROD) tlm_sum4_push(&acc2, part2[l]);
        }
    }
    sums[0] = tlm_sum4_result(&acc);
    sums[1] = kind == BN_PROD ? tlm_sum4_result(&acc2) : 0.0f;
}

#if VN == 16
/* w < 16 floats from p as a vector, zeros past them (nothing past p + w is read) */
static inline tl_v16 bn_load_part(const float *p, int64_t w) {
#if defined(__AVX512F__)
    return (tl_v16)_mm512_maskz_loadu_ps((__mmask16)((1u << w) - 1u), p);
#else
    float t[16] = {0};
    for (int64_t i = 0; i < w; i++) t[i] = p[i];
    return BN_LOAD(t);
#endif
}

#else
/* w < VN floats from p as a vector, zeros past them (nothing past p + w is read) */
static inline vn bn_load_part(const float *p, int64_t w) {
    float t[VN] = {0};
    for (int64_t i = 0; i < w; i++) t[i] = p[i];
    return vnload(t);
}

#endif

/* Rule 4 over the walks of 16 channels ch0..ch0+15 at once, a channel per lane: at each walk
 * position the 16 channels' runs of up to 16 values (rows s floats apart, one stretch of 16 s
 * floats per sample) go through a register transpose, giving a vector of one value per channel
 * for each position, added in walk order into the open chunk's sums. The same sums as
 * bn_channel_sums, reading memory front to back: its 16 lanes are 16 chunks of one channel, 256
 * positions apart, whose rows, c s floats apart with a power of two there, fall in one L1 and
 * one L2 set and miss both on every load (at 8x8 and 16x16 planes the sums ran from L3), and
 * planes of other sizes (7x7, 2x2) were copied a float at a time.
 * The walkers below cover chunks [q0, q1) of the walk and store chunk q's 16 sums (lane l:
 * channel ch0 + l) at P[(q - q0) * 16 + l] (P2 for BN_PROD's second sum); bn_fold then pushes
 * them onto each channel's tree in chunk order, so a walk may be split between threads at any
 * chunk. Kinds as bn_channel_sums; mu: the channels' means (BN_SQDEV). */

#if VN == 16
/* any s: runs cut at a plane's end, chunks closing inside a run */
static void bn_group_walk_any(int kind, const float *a, const float *b, const float *mu, int64_t n,
                              int64_t c, int64_t s, int64_t ch0, int64_t q0, int64_t q1, float *P,
                              float *P2) {
    const int64_t total = n * s, p1 = q1 * TLM_CHUNK < total ? q1 * TLM_CHUNK : total;
    int64_t p = q0 * TLM_CHUNK, bi = p / s, pos = p % s;
    tl_v16 part = {0}, part2 = {0};
    int64_t fill = 0;   /* positions in the open chunk */
    while (p < p1) {
        const int64_t base = (bi * c + ch0) * s;
        int64_t w = s - pos < 16 ? s - pos : 16;   /* positions in this run */
        if (p1 - p < w) w = p1 - p;
        tl_v16 r[16], q[16];
        for (int l = 0; l < 16; l++) {
            const int64_t off = base + l * s + pos;
            tl_v16 v = w == 16 ? BN_LOAD(a + off) : bn_load_part(a + off, w);
            if (kind == BN_SQDEV) { v = v - mu[l]; v = v * v; }
            r[l] = v;
            if (kind == BN_PROD) q[l] = v * (w == 16 ? BN_LOAD(b + off) : bn_load_part(b + off, w));
        }
        if (w == 16 && fill + 16 <= TLM_CHUNK) {   /* no chunk closes before the run's end */
            part = bn_add_rows(r, part, fill == 0);
            if (kind == BN_PROD) part2 = bn_add_rows(q, part2, fill == 0);
            fill += 16;
            if (fill == TLM_CHUNK) {
                vstore(P, part); P += 16;
                if (kind == BN_PROD) { vstore(P2, part2); P2 += 16; }
                fill = 0;
            }
        } else {   /* position by position, closing chunks where they end */
            tl_transpose16(r);
            if (kind == BN_PROD) tl_transpose16(q);
            for (int64_t i = 0; i < w; i++) {
                part = fill ? part + r[i] : r[i];
                if (kind == BN_PROD) part2 = fill ? part2 + q[i] : q[i];
                if (++fill == TLM_CHUNK) {
                    vstore(P, part); P += 16;
                    if (kind == BN_PROD) { vstore(P2, part2); P2 += 16; }
                    fill = 0;
                }
            }
        }
        p += w;
        if ((pos += w) == s) { pos = 0; bi++; }
    }
    if (fill) {   /* the walk's last chunk, short */
        vstore(P, part);
        if (kind == BN_PROD) vstore(P2, part2);
    }
}

#else
/* rows [0, VN) (channels, s floats apart) of VN-lane group h: VN values of each from offset off
 * (n <= VN of them, zeros past them), (x - mu)^2 for BN_SQDEV, a * b for BN_PROD's second
 * sum (prod) */
static inline __attribute__((always_inline)) void
bn_rows(int kind, int prod, const float *a, const float *b, const float *mu, int64_t s,
        int64_t off, int64_t n, vn r[VN]) {
    for (int l = 0; l < VN; l++) {
        const int64_t o = off + l * s;
        vn v = n == VN ? vnload(a + o) : bn_load_part(a + o, n);
        if (kind == BN_SQDEV) { v = v - mu[l]; v = v * v; }
        if (prod) v = v * (n == VN ? vnload(b + o) : bn_load_part(b + o, n));
        r[l] = v;
    }
}

/* any s: runs cut at a plane's end, chunks closing inside a run */
static void bn_group_walk_any(int kind, const float *a, const float *b, const float *mu, int64_t n,
                              int64_t c, int64_t s, int64_t ch0, int64_t q0, int64_t q1, float *P,
                              float *P2) {
    const int64_t total = n * s, p1 = q1 * TLM_CHUNK < total ? q1 * TLM_CHUNK : total;
    int64_t p = q0 * TLM_CHUNK, bi = p / s, pos = p % s;
    vn part[BN_NG] = {0}, part2[BN_NG] = {0};
    int64_t fill = 0;   /* positions in the open chunk */
    while (p < p1) {
        const int64_t base = (bi * c + ch0) * s;
        int64_t w = s - pos < 16 ? s - pos : 16;   /* positions in this run */
        if (p1 - p < w) w = p1 - p;
        if (w == 16 && fill + 16 <= TLM_CHUNK) {   /* no chunk closes before the run's end */
            for (int h = 0; h < BN_NG; h++)
                for (int k = 0; k < BN_NG; k++) {
                    const int64_t off = base + h * VN * s + pos + k * VN;
                    vn r[VN];
                    bn_rows(kind, 0, a, b, kind == BN_SQDEV ? mu + h * VN : NULL, s, off, VN, r);
                    part[h] = bn_add_rows(r, part[h], fill == 0 && k == 0);
                    if (kind == BN_PROD) {
                        bn_rows(kind, 1, a, b, NULL, s, off, VN, r);
                        part2[h] = bn_add_rows(r, part2[h], fill == 0 && k == 0);
                    }
                }
            fill += 16;
            if (fill == TLM_CHUNK) {
                for (int h = 0; h < BN_NG; h++) {
                    vnstore(P + h * VN, part[h]);
                    if (kind == BN_PROD) vnstore(P2 + h * VN, part2[h]);
                }
                P += 16;
                if (kind == BN_PROD) P2 += 16;
                fill = 0;
            }
        } else {   /* position by position, closing chunks where they end; each lane group
                    * in turn from the same chunk state */
            const int64_t fill0 = fill;
            float *const Pr = P, *const P2r = P2;
            for (int h = 0; h < BN_NG; h++) {
                fill = fill0, P = Pr, P2 = P2r;
                for (int k = 0; k < BN_NG && k * VN < w; k++) {
                    const int64_t off = base + h * VN * s + pos + k * VN;
                    const int64_t m = w - k * VN < VN ? w - k * VN : VN;
                    vn r[VN], q[VN];
                    bn_rows(kind, 0, a, b, kind == BN_SQDEV ? mu + h * VN : NULL, s, off, m, r);
                    tl_transpose_vn(r);
                    if (kind == BN_PROD) {
                        bn_rows(kind, 1, a, b, NULL, s, off, m, q);
                        tl_transpose_vn(q);
                    }
                    for (int64_t i = 0; i < m; i++) {
                        part[h] = fill ? part[h] + r[i] : r[i];
                        if (kind == BN_PROD) part2[h] = fill ? part2[h] + q[i] : q[i];
                        if (++fill == TLM_CHUNK) {
                            vnstore(P + h * VN, part[h]); P += 16;
                            if (kind == BN_PROD) { vnstore(P2 + h * VN, part2[h]); P2 += 16; }
                            fill = 0;
                        }
                    }
                }
            }
        }
        p += w;
        if ((pos += w) == s) { pos = 0; bi++; }
    }
    if (fill)   /* the walk's last chunk, short */
        for (int h = 0; h < BN_NG; h++) {
            vnstore(P + h * VN, part[h]);
            if (kind == BN_PROD) vnstore(P2 + h * VN, part2[h]);
        }
}

#endif

#ifndef BN_PF_SAMPLES
#define BN_PF_SAMPLES 1
#endif
/* The walk reads 16 rows s floats apart, 16 floats of each per step, and jumps c s floats at
 * each sample: short rows (s <= 256) are streams the hardware prefetchers lose, so each step
 * also prefetches its share of the block BN_PF_SAMPLES samples ahead (0.7-0.8x per backward
 * at 8x8 and 16x16 planes, one thread). Prefetches change no value. */
/* s % 16 == 0: every run is 16 positions and chunks close only at a run's end (fewer live
 * vectors than bn_group_walk_any's, which ran 20-30% slower on such planes) */
#if VN == 16
static void bn_group_walk16(int kind, const float *a, const float *b, const float *mu, int64_t n,
                            int64_t c, int64_t s, int64_t ch0, int64_t q0, int64_t q1, float *P,
                            float *P2) {
    const int64_t total = n * s, p1 = q1 * TLM_CHUNK < total ? q1 * TLM_CHUNK : total;
    int64_t p = q0 * TLM_CHUNK, bi = p / s, pos = p % s;
    tl_v16 part = {0}, part2 = {0};
    int64_t fill = 0;   /* positions in the open chunk, a multiple of 16 */
    for (; p < p1; p += 16) {
        const int64_t base = (bi * c + ch0) * s;
        tl_v16 r[16];
        if (s <= 256 && bi + BN_PF_SAMPLES < n) {
            /* the group's block BN_PF_SAMPLES samples ahead (16 s contiguous floats), the same
             * share of it as this step walks of the current one: 16 lines per array */
            const int64_t nb = ((bi + BN_PF_SAMPLES) * c + ch0) * s + pos * 16;
            for (int j = 0; j < 16; j++) {
                __builtin_prefetch(a + nb + j * 16);
                if (kind == BN_PROD) __builtin_prefetch(b + nb + j * 16);
            }
        }
        for (int l = 0; l < 16; l++) {
            tl_v16 v = BN_LOAD(a + base + l * s + pos);
            if (kind == BN_SQDEV) { v = v - mu[l]; v = v * v; }
            r[l] = v;
        }
        part = bn_add_rows(r, part, fill == 0);
        if (kind == BN_PROD) {
            for (int l = 0; l < 16; l++)
                r[l] = BN_LOAD(a + base + l * s + pos) * BN_LOAD(b + base + l * s + pos);
            part2 = bn_add_rows(r, part2, fill == 0);
        }
        if ((fill += 16) == TLM_CHUNK) {
            vstore(P, part); P += 16;
            if (kind == BN_PROD) { vstore(P2, part2); P2 += 16; }
            fill = 0;
        }
        if ((pos += 16) == s) { pos = 0; bi++; }
    }
    if (fill) {
        vstore(P, part);
        if (kind == BN_PROD) vstore(P2, part2);
    }
}

#else
static void bn_group_walk16(int kind, const float *a, const float *b, const float *mu, int64_t n,
                            int64_t c, int64_t s, int64_t ch0, int64_t q0, int64_t q1, float *P,
                            float *P2) {
    const int64_t total = n * s, p1 = q1 * TLM_CHUNK < total ? q1 * TLM_CHUNK : total;
    int64_t p = q0 * TLM_CHUNK, bi = p / s, pos = p % s;
    vn part[BN_NG] = {0}, part2[BN_NG] = {0};
    int64_t fill = 0;   /* positions in the open chunk, a multiple of 16 */
    for (; p < p1; p += 16) {
        const int64_t base = (bi * c + ch0) * s;
        if (s <= 256 && bi + BN_PF_SAMPLES < n) {
            /* the group's block BN_PF_SAMPLES samples ahead (16 s contiguous floats), the same
             * share of it as this step walks of the current one: 16 lines per array */
            const int64_t nb = ((bi + BN_PF_SAMPLES) * c + ch0) * s + pos * 16;
            for (int j = 0; j < 16; j++) {
                __builtin_prefetch(a + nb + j * 16);
                if (kind == BN_PROD) __builtin_prefetch(b + nb + j * 16);
            }
        }
        for (int h = 0; h < BN_NG; h++)   /* channels ch0 + h VN .. */
            for (int k = 0; k < BN_NG; k++) {   /* positions pos + k VN .. */
                const int64_t off = base + h * VN * s + pos + k * VN;
                vn r[VN];
                for (int l = 0; l < VN; l++) {
                    vn v = vnload(a + off + l * s);
                    if (kind == BN_SQDEV) { v = v - mu[h * VN + l]; v = v * v; }
                    r[l] = v;
                }
                part[h] = bn_add_rows(r, part[h], fill == 0 && k == 0);
                if (kind == BN_PROD) {
                    for (int l = 0; l < VN; l++)
                        r[l] = vnload(a + off + l * s) * vnload(b + off + l * s);
                    part2[h] = bn_add_rows(r, part2[h], fill == 0 && k == 0);
                }
            }
        if ((fill += 16) == TLM_CHUNK) {
            for (int h = 0; h < BN_NG; h++) {
                vnstore(P + h * VN, part[h]);
                if (kind == BN_PROD) vnstore(P2 + h * VN, part2[h]);
            }
            P += 16;
            if (kind == BN_PROD) P2 += 16;
            fill = 0;
        }
        if ((pos += 16) == s) { pos = 0; bi++; }
    }
    if (fill)
        for (int h = 0; h < BN_NG; h++) {
            vnstore(P + h * VN, part[h]);
            if (kind == BN_PROD) vnstore(P2 + h * VN, part2[h]);
        }
}

#endif

static void bn_group_walk(int kind, const float *a, const float *b, const float *mu, int64_t n,
                          int64_t c, int64_t s, int64_t ch0, int64_t q0, int64_t q1, float *P,
                          float *P2) {
    if (s % 16 == 0) bn_group_walk16(kind, a, b, mu, n, c, s, ch0, q0, q1, P, P2);
    else bn_group_walk_any(kind, a, b, mu, n, c, s, ch0, q0, q1, P, P2);
}

/* lane l's rule-4 sum from nch chunk sums P (16 per chunk) */
static float bn_fold(const float *P, int64_t nch, int l) {
    tlm_sum4 acc;
    tlm_sum4_init(&acc);
    for (int64_t q = 0; q < nch; q++) tlm_sum4_push(&acc, P[q * 16 + l]);
    return tlm_sum4_result(&acc);
}

/* The channels' order of work: groups of 16 channels (the first cg), then the others one by
 * one. With fewer groups than threads, each group's walk is split into `split` pieces of
 * whole chunks that threads take in turn (16 channels on 2 threads: a thread per group left one
 * idle, 1.4x the per-channel walks). P: room for the chunk sums of every group walked at once
 * (all of them when split, else one per thread): 2 * 16 * nch floats each. */
typedef struct {
    int64_t cg, units, split, nch;
    float *P;
} bn_plan;

static int bn_plan_make(bn_plan *pl, int64_t n, int64_t c, int64_t s) {
    const int64_t total = n * c * s, T = total > TL_PAR_MIN ? omp_get_max_threads() : 1;
    pl->cg = c / 16 * 16;
    pl->units = pl->cg / 16 + (c - pl->cg);
    pl->nch = (n * s + TLM_CHUNK - 1) / TLM_CHUNK;
    pl->split = pl->cg && pl->cg / 16 < T ? (T + pl->cg / 16 - 1) / (pl->cg / 16) : 1;
    if (pl->split > pl->nch) pl->split = pl->nch;
    const int64_t walks = pl->split > 1 ? pl->cg / 16 : T;
    pl->P = pl->cg ? (float *)malloc((size_t)(walks * 32 * pl->nch) * sizeof(float)) : NULL;
    return pl->cg && !pl->P;
}

/* piece k of split of nch chunks: [q0, q1) */
static void bn_piece(int64_t nch, int64_t split, int64_t k, int64_t *q0, int64_t *q1) {
    *q0 = nch * k / split;
    *q1 = nch * (k + 1) / split;
}

float tl_stub_channel_sum(const float *a, int64_t n, int64_t c, int64_t s, int64_t ch) {
    float sums[2];
    bn_channel_sums(BN_X, a, NULL, 0.0f, n, c, s, ch, sums);
    return sums[0];
}

/* Planes of fewer than this many values are mapped (xhat, y; the backward's dx) in a second
 * sweep in memory order after all the channel statistics, rather than channel by channel: a
 * channel's walk of short planes (c s floats apart) reads and writes a few cache lines per
 * sample and jumps, which the hardware prefetchers do not follow, so the map ran at a third of
 * the copy bandwidth. Larger planes keep the fused walk (the channel's x is still in L2). */
#define BN_SWEEP_MAX_S 2048
#define BN_SWEEP_MIN (1 << 16) /* and only past this many values (below, all of it is in L2) */
#define BN_LOCAL_CH 1024 /* per-channel scratch on the stack up to this many channels */

static inline void bn_map_plane(const float *x, float *xh, float *y, int64_t s, float mu, float sd,
                                float gamma, float beta) {
    for (int64_t i = 0; i < s; i++) {
        float h = tlf_norm_xhat(x[i], mu, sd);
        xh[i] = h;
        y[i] = tlf_affine(h, gamma, beta);
    }
}

int tlk_batchnorm_channel_first(const char *op, tl_buf x, tl_buf gamma, tl_buf beta, tl_buf y, tl_buf xhat,
                               tl_buf mean, tl_buf var, tl_buf inv_std, int64_t n, int64_t c,
                               int64_t s, double eps) {
    const int64_t total = n * c * s;
    const float *X = x->data, *G = gamma->data, *B = beta->data;
    float *Y = y->data, *XH = xhat->data, *M = mean->data, *V = var->data, *IS = inv_std->data;
    const float inv_cnt = (float)(1.0 / (double)(n * s)), e = (float)eps;
    const int sweep = s < BN_SWEEP_MAX_S && total >= BN_SWEEP_MIN;
    bn_plan pl;
    float local[BN_LOCAL_CH], *SD = local;
    if (bn_plan_make(&pl, n, c, s) ||
        (sweep && c > BN_LOCAL_CH && !(SD = (float *)malloc((size_t)c * sizeof(float))))) {
        free(pl.P);
        return tl_fail(TL_E_OOM, "%s: out of host memory for %lld channels", op, (long long)c);
    }
    const int64_t ng = pl.cg / 16, nch = pl.nch, split = pl.split;
#pragma omp parallel if (total > TL_PAR_MIN)
    {
        if (split > 1) {
            /* few groups: threads take pieces of every group's walk, then fold per channel */
#pragma omp for schedule(static)
            for (int64_t t = 0; t < ng * split; t++) {
                int64_t q0, q1;
                bn_piece(nch, split, t % split, &q0, &q1);
                bn_group_walk(BN_X, X, NULL, NULL, n, c, s, t / split * 16, q0, q1,
                              pl.P + t / split * 32 * nch + q0 * 16, NULL);
            }
#pragma omp for schedule(static)
            for (int64_t ch = 0; ch < pl.cg; ch++)
                M[ch] = tlf_mean(bn_fold(pl.P + ch / 16 * 32 * nch, nch, (int)(ch % 16)), inv_cnt);
#pragma omp for schedule(static)
            for (int64_t t = 0; t < ng * split; t++) {
                int64_t q0, q1;
                bn_piece(nch, split, t % split, &q0, &q1);
                bn_group_walk(BN_SQDEV, X, NULL, M + t / split * 16, n, c, s, t / split * 16, q0, q1,
                              pl.P + t / split * 32 * nch + q0 * 16, NULL);
            }
#pragma omp for schedule(static)
            for (int64_t ch = 0; ch < pl.cg; ch++) {
                float vr = tlf_mean(bn_fold(pl.P + ch / 16 * 32 * nch, nch, (int)(ch % 16)), inv_cnt);
                float sd = tlf_norm_std(vr, e), mu = M[ch];
                V[ch] = vr; IS[ch] = tlf_norm_inv(sd);
                if (sweep) { SD[ch] = sd; continue; }
                for (int64_t b = 0; b < n; b++) {
                    int64_t off = (b * c + ch) * s;
                    bn_map_plane(X + off, XH + off, Y + off, s, mu, sd, G[ch], B[ch]);
                }
            }
        }
        /* units: groups of 16 channels (unless split above), then the channels left one by one */
#pragma omp for schedule(dynamic, 1)
        for (int64_t u = split > 1 ? ng : 0; u < pl.units; u++) {
            const int64_t ch0 = u < ng ? u * 16 : pl.cg + (u - ng), k = u < ng ? 16 : 1;
            float sx[BN_LANES], sq[BN_LANES], mu[BN_LANES];
            if (k == 16) {
                float *P = pl.P + omp_get_thread_num() * 32 * nch;
                bn_group_walk(BN_X, X, NULL, NULL, n, c, s, ch0, 0, nch, P, NULL);
                for (int l = 0; l < 16; l++) mu[l] = tlf_mean(bn_fold(P, nch, l), inv_cnt);
                bn_group_walk(BN_SQDEV, X, NULL, mu, n, c, s, ch0, 0, nch, P, NULL);
                for (int l = 0; l < 16; l++) sq[l] = bn_fold(P, nch, l);
            } else {
                bn_channel_sums(BN_X, X, NULL, 0.0f, n, c, s, ch0, sx);
                mu[0] = tlf_mean(sx[0], inv_cnt);
                bn_channel_sums(BN_SQDEV, X, NULL, mu[0], n, c, s, ch0, sq);
            }
            for (int64_t l = 0; l < k; l++) {
                const int64_t ch = ch0 + l;
                float vr = tlf_mean(sq[l], inv_cnt);
                float sd = tlf_norm_std(vr, e);
                M[ch] = mu[l]; V[ch] = vr; IS[ch] = tlf_norm_inv(sd);
                if (sweep) { SD[ch] = sd; continue; }
                for (int64_t b = 0; b < n; b++) {
                    int64_t off = (b * c + ch) * s;
                    bn_map_plane(X + off, XH + off, Y + off, s, mu[l], sd, G[ch], B[ch]);
                }
            }
        }
        if (sweep) {
#pragma omp for schedule(static)
            for (int64_t bc = 0; bc < n * c; bc++) {
                const int64_t ch = bc % c;
                bn_map_plane(X + bc * s, XH + bc * s, Y + bc * s, s, M[ch], SD[ch], G[ch], B[ch]);
            }
        }
    }
    if (SD != local) free(SD);
    free(pl.P);
    return TL_OK;
}

int tlk_batchnorm_channel_first_backward(const char *op, tl_buf g, tl_buf xhat, tl_buf inv_std, tl_buf gamma,
                                        tl_buf dx, tl_buf dgamma, tl_buf dbeta, int64_t n,
                                        int64_t c, int64_t s) {
    const int64_t total = n * c * s;
    const float *GO = g->data, *XH = xhat->data, *IS = inv_std->data, *GA = gamma->data;
    float *DX = dx->data, *DG = dgamma->data, *DB = dbeta->data;
    const int64_t cnt = n * s;
    const float fc = (float)cnt, inv_cnt = cnt ? (float)(1.0 / (double)cnt) : 0.0f;
    const int sweep = s < BN_SWEEP_MAX_S && total >= BN_SWEEP_MIN;
    bn_plan pl;
    float local[2 * BN_LOCAL_CH], *S12 = local;   /* S1, S2 of each channel */
    if (bn_plan_make(&pl, n, c, s) ||
        (sweep && c > BN_LOCAL_CH && !(S12 = (float *)malloc((size_t)c * 2 * sizeof(float))))) {
        free(pl.P);
        return tl_fail(TL_E_OOM, "%s: out of host memory for %lld channels", op, (long long)c);
    }
    const int64_t ng = pl.cg / 16, nch = pl.nch, split = pl.split;
#pragma omp parallel if (total > TL_PAR_MIN)
    {
        /* channel ch's sums sb = sum g and sg = sum g * xhat: dbeta and dgamma, and dx's S1, S2 */
#define BN_BWD_STATS(ch, sb, sg)                                                                 \
        do {                                                                                     \
            DB[ch] = (sb); DG[ch] = (sg);                                                        \
            /* sum(dxhat) = gamma * sum(g), sum(dxhat * xhat) = gamma * sum(g * xhat) */        \
            const float S1_ = tlm_mul((sb), GA[ch]), S2_ = tlm_mul((sg), GA[ch]);                \
            if (sweep) { S12[2 * (ch)] = S1_; S12[2 * (ch) + 1] = S2_; break; }                  \
            for (int64_t b_ = 0; b_ < n; b_++) {                                                 \
                const int64_t off_ = (b_ * c + (ch)) * s;                                        \
                for (int64_t i_ = 0; i_ < s; i_++)                                               \
                    DX[off_ + i_] = tlf_norm_dx(tlm_mul(GO[off_ + i_], GA[ch]), XH[off_ + i_],   \
                                                S1_, S2_, fc, IS[ch], inv_cnt);                  \
            }                                                                                    \
        } while (0)
        if (split > 1) {
#pragma omp for schedule(static)
            for (int64_t t = 0; t < ng * split; t++) {
                int64_t q0, q1;
                bn_piece(nch, split, t % split, &q0, &q1);
                float *P = pl.P + t / split * 32 * nch;
                bn_group_walk(BN_PROD, GO, XH, NULL, n, c, s, t / split * 16, q0, q1, P + q0 * 16,
                              P + 16 * nch + q0 * 16);
            }
#pragma omp for schedule(static)
            for (int64_t ch = 0; ch < pl.cg; ch++) {
                const float *P = pl.P + ch / 16 * 32 * nch;
                BN_BWD_STATS(ch, bn_fold(P, nch, (int)(ch % 16)), bn_fold(P + 16 * nch, nch, (int)(ch % 16)));
            }
        }
        /* units as in the forward */
#pragma omp for schedule(dynamic, 1)
        for (int64_t u = split > 1 ? ng : 0; u < pl.units; u++) {
            const int64_t ch0 = u < ng ? u * 16 : pl.cg + (u - ng), k = u < ng ? 16 : 1;
            float sbs[BN_LANES], sgs[BN_LANES];   /* sum g, sum g * xhat */
            if (k == 16) {
                float *P = pl.P + omp_get_thread_num() * 32 * nch;
                bn_group_walk(BN_PROD, GO, XH, NULL, n, c, s, ch0, 0, nch, P, P + 16 * nch);
                for (int l = 0; l < 16; l++) { sbs[l] = bn_fold(P, nch, l); sgs[l] = bn_fold(P + 16 * nch, nch, l); }
            } else {
                float sums[2];
                bn_channel_sums(BN_PROD, GO, XH, 0.0f, n, c, s, ch0, sums);
                sbs[0] = sums[0]; sgs[0] = sums[1];
            }
            for (int64_t l = 0; l < k; l++) BN_BWD_STATS(ch0 + l, sbs[l], sgs[l]);
        }
#undef BN_BWD_STATS
        if (sweep) {
#pragma omp for schedule(static)
            for (int64_t bc = 0; bc < n * c; bc++) {
                const int64_t ch = bc % c, off = bc * s;
                const float S1 = S12[2 * ch], S2 = S12[2 * ch + 1], is = IS[ch], ga = GA[ch];
                for (int64_t i = 0; i < s; i++)
                    DX[off + i] = tlf_norm_dx(tlm_mul(GO[off + i], ga), XH[off + i], S1, S2, fc, is, inv_cnt);
            }
        }
    }
    if (S12 != local) free(S12);
    free(pl.P);
    return TL_OK;
}
