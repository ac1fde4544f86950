/* views.c (stub): broadcasting and its adjoint. Shapes are right-aligned (NumPy rules). */
#include <stdlib.h>
#include <string.h>
#include "stub.h"
#include "transpose16.h"
#include "generated/views_kernels.h"

/* The input stride (0 on broadcast axes) for each output axis; the entry has checked that
 * dims id (rank ir) broadcast to od (rank orank <= 64). Returns the output element count. */
static int64_t bcast_strides(const int64_t *id, int64_t ir, const int64_t *od, int64_t orank,
                             int64_t *stride) {
    int64_t no = 1;
    for (int64_t k = 0; k < orank; k++) no *= od[k];
    int64_t s = 1;
    for (int64_t k = orank - 1; k >= 0; k--) {
        int64_t ik = k - (orank - ir);
        if (ik < 0) { stride[k] = 0; continue; }
        stride[k] = (id[ik] == 1) ? 0 : s;
        s *= id[ik];
    }
    return no;
}

/* input offset of output linear index o */
static inline int64_t src_offset(int64_t o, const int64_t *od, const int64_t *stride, int64_t r) {
    int64_t off = 0;
    for (int64_t k = r - 1; k >= 0; k--) {
        int64_t c = o % od[k];
        o /= od[k];
        off += c * stride[k];
    }
    return off;
}

int tlk_broadcast_to(const char *op, tl_buf x, tl_buf y, const int64_t *in_dims, int64_t in_len,
                    const int64_t *out_dims, int64_t out_len) {
    int64_t stride[64];
    const int64_t n = bcast_strides(in_dims, in_len, out_dims, out_len, stride);
    const float *X = x->data; float *Y = y->data;
    if (n == 0) return TL_OK;
    int64_t inner = out_len ? out_dims[out_len - 1] : 1;
    if (out_len && stride[out_len - 1] == 1) {
        /* contiguous innermost axis: copy rows */
#pragma omp parallel for schedule(static) if (n > TL_PAR_MIN)
        for (int64_t r = 0; r < n / inner; r++)
            memcpy(Y + r * inner, X + src_offset(r * inner, out_dims, stride, out_len),
                   (size_t)inner * sizeof(float));
        return TL_OK;
    }
#pragma omp parallel for schedule(static) if (n > TL_PAR_MIN)
    for (int64_t o = 0; o < n; o++) Y[o] = X[src_offset(o, out_dims, stride, out_len)];
    return TL_OK;
}

/* sum_to: the adjoint of broadcast_to, used by the tape for every broadcast binary op.
 *
 * The (big) input shape is right-aligned with the target; axes of size 1 in the input are
 * dropped and neighbouring axes of the same kind (kept: target == input, summed: target 1) are
 * merged, leaving at most a few alternating groups. The recursion below walks x in row-major
 * order with pointer arithmetic only (no per-element division); every output element sums its
 * sources in increasing x index, a fixed order whatever the thread count. In exact mode each
 * output is instead rule 4 of tl_math.h over those sources (sumto_exact_*). */
#define SUMTO_MAXG 64

typedef struct {
    int g;                    /* number of groups */
    int64_t size[SUMTO_MAXG]; /* group extent */
    int kept[SUMTO_MAXG];     /* 1: the axis survives in y; 0: it is summed */
    int64_t xs[SUMTO_MAXG];   /* x stride of the group */
    int64_t ys[SUMTO_MAXG];   /* y stride (0 for summed groups) */
} sumto_plan;

static void sumto_rec(const sumto_plan *p, int lev, const float *X, float *Y) {
    int64_t d = p->size[lev];
    if (lev == p->g - 1) {
        if (p->kept[lev]) for (int64_t i = 0; i < d; i++) Y[i] += X[i];
        else Y[0] += (float)tl_sum_f32_block(X, d);
        return;
    }
    for (int64_t i = 0; i < d; i++) sumto_rec(p, lev + 1, X + i * p->xs[lev], Y + i * p->ys[lev]);
}

TL_HIDDEN int tl_stub_sum_fixed(const char *op, const float *x, int64_t n, double *out);

/* ---- exact mode: every output is rule 4 (tl_math.h) over its sources in increasing x index:
 * sequential within chunks of TLM_CHUNK sources, then the fixed binary tree over the chunk sums.
 * CUDA's views.cu computes the same chunks and tree. */

/* any plan: per output, walk its sources in increasing x index with an odometer over the summed
 * groups and feed rule 4 */
static void sumto_exact_generic(const sumto_plan *p, const float *X, float *Y, int64_t m) {
#pragma omp parallel for schedule(static) if (m > 64)
    for (int64_t j = 0; j < m; j++) {
        int64_t base = 0, r = j;
        for (int lev = p->g - 1; lev >= 0; lev--)
            if (p->kept[lev]) { base += (r % p->size[lev]) * p->xs[lev]; r /= p->size[lev]; }
        int sl[SUMTO_MAXG], ns = 0;   /* summed levels, outermost first */
        int64_t coord[SUMTO_MAXG];
        for (int lev = 0; lev < p->g; lev++) if (!p->kept[lev]) { sl[ns] = lev; coord[ns] = 0; ns++; }
        if (ns == 1 && sl[0] == p->g - 1) {   /* one contiguous run per output (row sums) */
            Y[j] = tlm_sum(X + base, 1, p->size[p->g - 1]);
            continue;
        }
        tlm_sum4 acc;
        tlm_sum4_init(&acc);
        int64_t off = 0;
        for (;;) {
            tlm_sum4_add(&acc, X[base + off]);
            int q = ns - 1;   /* increment the odometer, innermost summed group first */
            while (q >= 0) {
                int lev = sl[q];
                off += p->xs[lev];
                if (++coord[q] < p->size[lev]) break;
                off -= coord[q] * p->xs[lev];
                coord[q] = 0;
                q--;
            }
            if (q < 0) break;
        }
        Y[j] = tlm_sum4_result(&acc);
    }
}

int tlk_sum_to(const char *op, tl_buf x, tl_buf y, const int64_t *in_dims, int64_t in_len,
              const int64_t *out_dims, int64_t out_len) {
    /* x has the broadcast (big) shape in_dims, y the target shape out_dims */
    int64_t stride[64];
    const int64_t n = bcast_strides(out_dims, out_len, in_dims, in_len, stride);
    int64_t m = tl_buf_size(y);
    float *Y = y->data; const float *X = x->data;
    if (m == 0) return TL_OK;
    if (n == m) { memcpy(Y, X, (size_t)n * sizeof(float)); return TL_OK; }
    if (tl_exact() && m == 1) { Y[0] = tlm_sum(X, 1, n); return TL_OK; }
    if (m == 1 || n == 0) { /* everything sums into one element (or nothing flows) */
        double s = 0.0;
        if (n) TL_TRY(tl_stub_sum_fixed("sum_to", X, n, &s));
        for (int64_t i = 0; i < m; i++) Y[i] = (float)s;
        return TL_OK;
    }
    /* build the merged groups, outermost first */
    sumto_plan p = {0};
    int64_t tmp_size[64], tmp_kept[64]; int ng = 0;
    for (int64_t k = in_len - 1; k >= 0; k--) { /* innermost first, reversed below */
        int64_t d = in_dims[k];
        if (d == 1) continue;
        int kept = stride[k] != 0;
        if (ng && tmp_kept[ng - 1] == kept) tmp_size[ng - 1] *= d;
        else { tmp_size[ng] = d; tmp_kept[ng] = kept; ng++; }
    }
    p.g = ng;
    int64_t xs = 1, ys = 1;
    for (int q = 0; q < ng; q++) { /* q counts from the innermost group */
        int lev = ng - 1 - q;
        p.size[lev] = tmp_size[q];
        p.kept[lev] = (int)tmp_kept[q];
        p.xs[lev] = xs;
        p.ys[lev] = tmp_kept[q] ? ys : 0;
        xs *= tmp_size[q];
        if (tmp_kept[q]) ys *= tmp_size[q];
    }
    /* a group's x step is the product of the groups inside it; its y step counts kept ones */
    if (tl_exact()) {
        if (p.g == 2 && !p.kept[0]) return tl_stub_axis_sum(op, X, Y, 1, p.size[0], p.size[1]);
        sumto_exact_generic(&p, X, Y, m);
        return TL_OK;
    }
    for (int64_t i = 0; i < m; i++) Y[i] = 0.0f;
    if (p.kept[0]) {
        /* outermost group kept: its slices write disjoint outputs */
#pragma omp parallel for schedule(static) if (n > TL_PAR_MIN)
        for (int64_t i = 0; i < p.size[0]; i++)
            sumto_rec(&p, 1, X + i * p.xs[0], Y + i * p.ys[0]);
    } else if (p.g == 2) {
        /* (R, K) -> (K): column sums, parallel over column chunks, rows in order */
        int64_t R = p.size[0], K = p.size[1], CH = 2048, nch = (K + CH - 1) / CH;
#pragma omp parallel for schedule(static) if (n > TL_PAR_MIN)
        for (int64_t c = 0; c < nch; c++) {
            int64_t k0 = c * CH, w = K - k0 < CH ? K - k0 : CH;
            for (int64_t r = 0; r < R; r++) {
                const float *xr = X + r * K + k0;
                float *yr = Y + k0;
                for (int64_t i = 0; i < w; i++) yr[i] += xr[i];
            }
        }
    } else {
        sumto_rec(&p, 0, X, Y);
    }
    return TL_OK;
}

/* ------------------------------------------------------------------ permutations
 * Every permutation op here is a block swap y[o, b, a, i] = x[o, a, b, i] with geom =
 * (outer, A, B, inner) from shapes.swap_geom. inner > 1 copies contiguous runs; inner == 1 is a
 * batched 2-D transpose done in 16 x 16 register transposes (transpose16.h, as VN x VN squares
 * of the build's native vectors; a 32 x 32 tile a float at a time ran at a tenth of memcpy's
 * speed: 0.24 ms for 512 x 512). One body serves transpose2d, swap_adjacent, permute3d_bca,
 * permute3d_cab and swap_last2. */
int tlk_swap_blocks(const char *op, tl_buf x, tl_buf y, const int64_t *geom, int64_t geom_len) {
    const int64_t O = geom[0], A = geom[1], B = geom[2], I = geom[3], n = O * A * B * I;
    if (n == 0) return TL_OK;
    const float *X = x->data; float *Y = y->data;
    if (A == 1 || B == 1) { memcpy(Y, X, (size_t)n * sizeof(float)); return TL_OK; }
    if (I > 1) {
#pragma omp parallel for collapse(2) schedule(static) if (n > TL_PAR_MIN)
        for (int64_t o = 0; o < O; o++)
            for (int64_t b = 0; b < B; b++)
                for (int64_t a = 0; a < A; a++)
                    memcpy(Y + ((o * B + b) * A + a) * I, X + ((o * A + a) * B + b) * I,
                           (size_t)I * sizeof(float));
        return TL_OK;
    }
    /* threads take (o, 16-column block of x) pairs: each reads a 16-float strip down x's A
     * rows (whole 64-byte lines) and writes 16 of y's rows front to back */
    const int64_t T = 16, tb = (B + T - 1) / T, av = A / T * T;
#pragma omp parallel for collapse(2) schedule(static) if (n > TL_PAR_MIN)
    for (int64_t o = 0; o < O; o++)
        for (int64_t bt = 0; bt < tb; bt++) {
            const float *xo = X + o * A * B;
            float *yo = Y + o * A * B;
            const int64_t b0 = bt * T, b1 = b0 + T < B ? b0 + T : B;
            if (b1 - b0 == T)
                for (int64_t a = 0; a < av; a += T) /* whole 16 x 16 tiles in registers */
                    /* as VN x VN squares of native vectors (one with AVX-512; a 16 x 16 of
                     * v16 went through the stack below it) */
                    for (int j = 0; j < 16 / VN; j++)
                        for (int i = 0; i < 16 / VN; i++) {
                            vn r[VN];
                            for (int l = 0; l < VN; l++) r[l] = vnload(xo + (a + VN * i + l) * B + b0 + VN * j);
                            tl_transpose_vn(r);
                            for (int l = 0; l < VN; l++) vnstore(yo + (b0 + VN * j + l) * A + a + VN * i, r[l]);
                        }
            for (int64_t b = b0; b < b1; b++) /* the rest one float at a time */
                for (int64_t a = b1 - b0 == T ? av : 0; a < A; a++) yo[b * A + a] = xo[a * B + b];
        }
    return TL_OK;
}
