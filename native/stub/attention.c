/* attention.c (stub): multi_head_attention forward and fused backward, and their core without
 * the projections (the attention op, H = 1). Exact mode follows the canonical order of
 * tl_math.h below (CUDA's exact path, cuda/attention.cu, follows the same order); the default
 * mode runs the projections on the default GEMM and the core as blocked GEMMs
 * (attention_blocked.c), deterministic but in another order.
 *
 * Layout: q, k, v and attn (the pre-projection output) are (B*n, H*hd) row-major, exactly what
 * the projections x @ W produce; head h of token i is the column block [h*hd, (h+1)*hd). lse is
 * (B, H, n): the per-row log-sum-exp of the scaled, masked scores, which lets the backward
 * recompute every probability without storing the n x n matrix.
 *
 * The order, which is the contract both libraries follow:
 *  - projections Q = x Wq, K, V, y = attn Wo and every weight gradient: tl_gemm_exact_f32
 *    (rule 3); dx = dQ Wq^T + dK Wk^T + dV Wv^T is one fma chain over dQ's, then dK's, then
 *    dV's columns (each GEMM continues the previous one's sums).
 *  - forward, per (sample, head, query row): rule 5 (online softmax, tiles of TLM_ATTN_TILE keys
 *    in order; masked keys score -inf and still take part in acc's fma with p = 0). The output
 *    is acc / l, lse = m + log(l). A row with no allowed key outputs 0 with lse 0; a row that
 *    met a NaN score outputs NaN with lse NaN (the softmax would otherwise drop it).
 *  - backward: D_i = dot(dO_i, O_i); per allowed pair p and ds from tlm_attn_prob/dscore
 *    (scores recomputed from lse); dQ_i = sum of ds_ij k_j over keys j in order, dK_j = sum of
 *    ds_ij q_i and dV_j = sum of p_ij dO_i over queries i in order, each one fma chain from 0;
 *    masked pairs add nothing.
 * Causal (query i attends keys j <= i) is one more blocking rule, ANDed with the mask: exactly
 * the lower-triangular boolean mask, bit for bit. Work on blocked pairs is skipped only where
 * the order above makes it vanish: the dot products of blocked keys (their score is -inf
 * whatever it was) and the backward's masked pairs. The forward keeps the p = 0 fma of keys
 * after the query, since fma(0, v, acc) is not acc when v is inf or NaN or acc is -0.
 * Empty problems (no rows, no head dims or d_model 0) give all-zero outputs, as on CUDA.
 * Speed: dot products of a query against a block of keys run as fma chains over the head dim,
 * vectorised across the keys (head-major transposed copies of K, V, Q, dO), never across a sum.
 */
#include <stdlib.h>
#include <string.h>
#include "stub.h"
#include "sgemm.h"
#include "attention_blocked.h"
#include "generated/attention_kernels.h"

#define TILE TLM_ATTN_TILE

/* T[((bb*h + hh)*hd + p)*n + j] = A[(bb*n + j)*HD + hh*hd + p]: per (sample, head), the head's
 * columns as rows, so one query's dots against consecutive keys read contiguous memory */
static void head_transpose(const float *A, float *T, int64_t b, int64_t n, int64_t h, int64_t hd) {
    const int64_t HD = h * hd;
#pragma omp parallel for collapse(2) schedule(static) if (b * n * HD > TL_PAR_MIN)
    for (int64_t bh = 0; bh < b * h; bh++)
        for (int64_t p = 0; p < hd; p++) {
            int64_t bb = bh / h, hh = bh % h;
            const float *src = A + bb * n * HD + hh * hd + p;
            float *dst = T + (bh * hd + p) * n;
            for (int64_t j = 0; j < n; j++) dst[j] = src[j * HD];
        }
}

/* s[jj] = dot(a, column j0 + jj of T) for jj < nt: per output one fma chain over p in order from
 * 0 (rule 3); T is one (sample, head) block of head_transpose, hd rows of length n */
static void dots_block(const float *a, const float *T, int64_t n, int64_t hd, int64_t j0, int64_t nt,
                       float *s) {
    for (int64_t jj = 0; jj < nt; jj++) s[jj] = 0.0f;
    for (int64_t p = 0; p < hd; p++) {
        const float ap = a[p], *t = T + p * n + j0;
        for (int64_t jj = 0; jj < nt; jj++) s[jj] = tlm_fma(ap, t[jj], s[jj]);
    }
}

/* the pair (query i, key j) is blocked by the mask or, when causal, because j > i */
static inline int blocked(const float *M, int causal, int64_t n, int64_t i, int64_t j) {
    return (causal && j > i) || (M && M[i * n + j] == 0.0f);
}

/* The mask in the simplest form the kernels take: NULL where it blocks nothing the causal flag
 * does not (every pair j <= i allowed, and causal set or every pair allowed), and the causal flag
 * instead of an exactly lower-triangular mask. The blocked set is the same, and the order above
 * (and attention_blocked.c's) gives causal and that mask the same bits, so only work changes:
 * the causal paths skip the upper tiles without reading a mask. */
static const float *simplest_mask(const float *M, int64_t n, int64_t *causal) {
    if (!M) return NULL;
    int upper_all = 1, upper_none = 1;
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < n; j++) {
            const int allowed = M[i * n + j] != 0.0f;
            if (j <= i && !allowed) return M;
            if (j > i) upper_all &= allowed, upper_none &= !allowed;
        }
    if (*causal || upper_all) return NULL;
    if (upper_none) {
        *causal = 1;
        return NULL;
    }
    return M;
}

static int zero_all(tl_buf *outs, int count) {
    for (int i = 0; i < count; i++)
        if (outs[i]->n) memset(outs[i]->data, 0, sizeof(float) * (size_t)outs[i]->n);
    return TL_OK;
}

static float head_scale(int64_t hd) { return (float)(1.0 / sqrt((double)hd)); }

/* C (m, nc) = op(A) (m, k) @ op(B) (k, nc), or C += it: a projection or weight gradient; op(A)
 * stored (m, k) or, with ta, (k, m), lda apart; op(B) likewise with tb. Exact mode: rule 3
 * (tl_gemm_exact_f32); the default: the default GEMM. */
static int proj(const char *op, int ta, int tb, int64_t m, int64_t nc, int64_t k, const float *A,
                int64_t lda, const float *B, int64_t ldb, float *C, int64_t ldc, int accumulate) {
    if (tl_exact())
        return tl_gemm_exact_f32(op, ta, tb, 1, m, nc, k, A, lda, 0, B, ldb, 0, C, ldc, 0, accumulate);
    if (tl_sgemm(A, ta ? 1 : lda, ta ? lda : 1, B, tb ? 1 : ldb, tb ? ldb : 1, C, ldc, m, k, nc,
                 accumulate, 1))
        return tl_fail(TL_E_OOM, "%s: out of host memory for packed GEMM panels", op);
    return TL_OK;
}

/* The attention core on (B*n, H*hd) Q, K, V: O and lse by rule 5, per (sample, head, row)
 * (exact mode), or blocked (the default). */
static int core_forward(const char *op, const float *Q, const float *K, const float *V, const float *M,
                        int causal, float *O, float *L, int64_t b, int64_t n, int64_t h, int64_t hd) {
    const int64_t R = b * n, HD = h * hd;
    if (!tl_exact()) {
        if (tl_attn_blocked_forward(Q, K, V, M, causal, O, L, b, n, h, hd))
            return tl_fail(TL_E_OOM, "%s: out of host memory for %lld x %lld score blocks", op,
                           (long long)n, (long long)n);
        return TL_OK;
    }
    float *KT = malloc(sizeof(float) * (size_t)(R * HD));
    if (!KT) return tl_fail(TL_E_OOM, "%s: out of host memory for %lld-element temporaries", op, (long long)(R * HD));
    head_transpose(K, KT, b, n, h, hd);
    const float scale = head_scale(hd), neg_inf = tlm_from_bits((int32_t)0xff800000);
    int oom = 0;
#pragma omp parallel if (b * h * n * n * hd > TL_PAR_MIN) reduction(|| : oom)
    {
        float s[TILE], *acc = malloc(sizeof(float) * (size_t)hd);
        oom = !acc;
#pragma omp for schedule(static)
        for (int64_t bhi = 0; bhi < b * h * n; bhi++) {
            if (!acc) continue;
            int64_t bb = bhi / (h * n), hh = (bhi / n) % h, i = bhi % n;
            const float *qi = Q + (bb * n + i) * HD + hh * hd, *KTbh = KT + (bb * h + hh) * hd * n;
            float *oi = O + (bb * n + i) * HD + hh * hd;
            tlm_osm st;
            tlm_osm_init(&st);
            int nan_seen = 0;
            for (int64_t p = 0; p < hd; p++) acc[p] = 0.0f;
            for (int64_t j0 = 0; j0 < n; j0 += TILE) {
                int nt = (int)(n - j0 < TILE ? n - j0 : TILE);
                /* causal: keys after i score -inf whatever their dot, so it is not computed */
                int64_t nd = causal ? i + 1 - j0 : nt;
                nd = nd < 0 ? 0 : nd > nt ? nt : nd;
                dots_block(qi, KTbh, n, hd, j0, nd, s);
                for (int jj = 0; jj < nt; jj++) {
                    s[jj] = blocked(M, causal, n, i, j0 + jj) ? neg_inf : tlm_mul(s[jj], scale);
                    nan_seen |= s[jj] != s[jj];
                }
                float alpha = tlm_osm_tile(&st, s, nt);
                for (int64_t p = 0; p < hd; p++) acc[p] = tlm_mul(acc[p], alpha);
                for (int jj = 0; jj < nt; jj++) {
                    const float pj = s[jj], *vj = V + (bb * n + j0 + jj) * HD + hh * hd;
                    for (int64_t p = 0; p < hd; p++) acc[p] = tlm_fma(pj, vj[p], acc[p]);
                }
            }
            const float nan = tlm_from_bits(0x7fc00000);
            for (int64_t p = 0; p < hd; p++) oi[p] = nan_seen ? nan : tlm_osm_finish(&st, acc[p]);
            L[bhi] = tlm_attn_lse(st.m, st.l, nan_seen);
        }
        free(acc);
    }
    free(KT);
    if (oom) return tl_fail(TL_E_OOM, "%s: out of host memory for a row accumulator of %lld", op, (long long)hd);
    return TL_OK;
}

int tlk_multi_head_attention(const char *op, tl_buf wq, tl_buf wk, tl_buf wv, tl_buf wo, tl_buf x, tl_buf mask,
                            tl_buf y, tl_buf q, tl_buf k, tl_buf v, tl_buf lse, tl_buf attn,
                            int64_t b, int64_t n, int64_t dm, int64_t h, int64_t hd,
                            int64_t has_mask, int64_t flash, int64_t causal) {
    const int64_t R = b * n, HD = h * hd;
    if (R == 0 || HD == 0 || dm == 0) {
        tl_buf outs[] = {y, q, k, v, lse, attn};
        return zero_all(outs, 6);
    }
    const float *M = simplest_mask(has_mask ? mask->data : NULL, n, &causal), *X = x->data;
    TL_TRY(proj(op, 0, 0, R, HD, dm, X, dm, wq->data, HD, q->data, HD, 0));
    TL_TRY(proj(op, 0, 0, R, HD, dm, X, dm, wk->data, HD, k->data, HD, 0));
    TL_TRY(proj(op, 0, 0, R, HD, dm, X, dm, wv->data, HD, v->data, HD, 0));
    TL_TRY(core_forward(op, q->data, k->data, v->data, M, (int)causal, attn->data, lse->data, b, n, h, hd));
    TL_TRY(proj(op, 0, 0, R, dm, HD, attn->data, HD, wo->data, dm, y->data, dm, 0));
    (void)flash;
    return TL_OK;
}

int tlk_attention(const char *op, tl_buf q, tl_buf k, tl_buf v, tl_buf mask, tl_buf o, tl_buf lse,
                  int64_t b, int64_t n, int64_t e, int64_t has_mask, int64_t flash, int64_t causal) {
    if (b * n == 0 || e == 0) {
        tl_buf outs[] = {o, lse};
        return zero_all(outs, 2);
    }
    (void)flash;
    const float *M = simplest_mask(has_mask ? mask->data : NULL, n, &causal);
    return core_forward(op, q->data, k->data, v->data, M, (int)causal, o->data,
                        lse->data, b, n, 1, e);
}

/* dQ (per query row, over keys in order) or dK and dV (per key row, over queries in order) */
static void grad_rows(int key_rows, const float *Q, const float *K, const float *V, const float *dO,
                      const float *T1, const float *T2, const float *L, const float *Dr, const float *M,
                      int causal, float *G1, float *G2, int64_t b, int64_t n, int64_t h, int64_t hd,
                      float scale, int *oom) {
    const int64_t HD = h * hd;
    int bad = 0;
#pragma omp parallel if (b * h * n * n * hd > TL_PAR_MIN) reduction(|| : bad)
    {
        float s[TILE], dp[TILE], pr[TILE], ds[TILE];
        int ok[TILE];
        float *g1 = malloc(sizeof(float) * (size_t)(2 * hd)), *g2 = g1 ? g1 + hd : NULL;
        bad = !g1;
#pragma omp for schedule(static)
        for (int64_t row = 0; row < b * h * n; row++) {
            if (!g1) continue;
            int64_t bb = row / (h * n), hh = (row / n) % h, r = row % n;
            const int64_t off = (bb * n + r) * HD + hh * hd, blk = (bb * h + hh) * hd * n;
            /* query rows: this row's q and dO against K^T and V^T; key rows: k and v against
             * Q^T and dO^T (the same fma chains: fma(a, b, c) == fma(b, a, c)) */
            const float *a1 = key_rows ? K + off : Q + off, *a2 = key_rows ? V + off : dO + off;
            for (int64_t p = 0; p < 2 * hd; p++) g1[p] = 0.0f;
            /* causal: a query row sees keys c <= r, a key row is seen by queries c >= r; the
             * tiles outside hold only masked pairs, which add nothing */
            const int64_t c_lo = causal && key_rows ? r / TILE * TILE : 0;
            const int64_t c_hi = causal && !key_rows ? r + 1 : n;
            for (int64_t c0 = c_lo; c0 < c_hi; c0 += TILE) {
                int nt = (int)(c_hi - c0 < TILE ? c_hi - c0 : TILE);
                dots_block(a1, T1 + blk, n, hd, c0, nt, s);
                dots_block(a2, T2 + blk, n, hd, c0, nt, dp);
                for (int cc = 0; cc < nt; cc++) {
                    int64_t i = key_rows ? c0 + cc : r, j = key_rows ? r : c0 + cc;
                    int64_t qrow = (bb * h + hh) * n + i;
                    ok[cc] = !blocked(M, causal, n, i, j);
                    pr[cc] = tlm_attn_prob(tlm_mul(s[cc], scale), L[qrow]);
                    ds[cc] = tlm_attn_dscore(pr[cc], dp[cc], Dr[qrow], scale);
                }
                for (int cc = 0; cc < nt; cc++) {
                    if (!ok[cc]) continue;
                    const int64_t coff = (bb * n + c0 + cc) * HD + hh * hd;
                    if (key_rows) {
                        const float *qi = Q + coff, *doi = dO + coff;
                        for (int64_t p = 0; p < hd; p++) g1[p] = tlm_fma(ds[cc], qi[p], g1[p]);
                        for (int64_t p = 0; p < hd; p++) g2[p] = tlm_fma(pr[cc], doi[p], g2[p]);
                    } else {
                        const float *kj = K + coff;
                        for (int64_t p = 0; p < hd; p++) g1[p] = tlm_fma(ds[cc], kj[p], g1[p]);
                    }
                }
            }
            memcpy(G1 + off, g1, sizeof(float) * (size_t)hd);
            if (key_rows) memcpy(G2 + off, g2, sizeof(float) * (size_t)hd);
        }
        free(g1);
    }
    *oom = bad;
}

/* The core's backward: dQ, dK, dV (B*n, H*hd) from dO and the forward's O and lse. */
static int core_backward(const char *op, const float *Q, const float *K, const float *V, const float *O,
                         const float *L, const float *dO, const float *M, int causal, float *dQ, float *dK,
                         float *dV, int64_t b, int64_t n, int64_t h, int64_t hd) {
    const int64_t HD = h * hd;
    const size_t big = (size_t)(b * n * HD);
    if (!tl_exact()) {
        if (tl_attn_blocked_backward(Q, K, V, O, L, dO, M, causal, dQ, dK, dV, b, n, h, hd))
            return tl_fail(TL_E_OOM, "%s: out of host memory for %lld x %lld score blocks", op,
                           (long long)n, (long long)n);
        return TL_OK;
    }
    /* two transposes (B*n x H*hd each) and D (b*h*n) */
    float *work = malloc(sizeof(float) * (2 * big + (size_t)(b * h * n)));
    if (!work) return tl_fail(TL_E_OOM, "%s: out of host memory for %lld-element temporaries", op, (long long)(3 * big));
    float *T1 = work, *T2 = T1 + big, *Dr = T2 + big;
    for (int64_t bhi = 0; bhi < b * h * n; bhi++) {   /* D_i = dot(dO_i, O_i) */
        int64_t bb = bhi / (h * n), hh = (bhi / n) % h, i = bhi % n;
        const int64_t off = (bb * n + i) * HD + hh * hd;
        Dr[bhi] = tlm_dot(dO + off, 1, O + off, 1, hd, 0.0f);
    }
    const float scale = head_scale(hd);
    int oom = 0;
    head_transpose(K, T1, b, n, h, hd);
    head_transpose(V, T2, b, n, h, hd);
    grad_rows(0, Q, K, V, dO, T1, T2, L, Dr, M, causal, dQ, NULL, b, n, h, hd, scale, &oom);
    if (!oom) {
        head_transpose(Q, T1, b, n, h, hd);
        head_transpose(dO, T2, b, n, h, hd);
        grad_rows(1, Q, K, V, dO, T1, T2, L, Dr, M, causal, dK, dV, b, n, h, hd, scale, &oom);
    }
    free(work);
    if (oom) return tl_fail(TL_E_OOM, "%s: out of host memory for row accumulators of %lld", op, (long long)hd);
    return TL_OK;
}

int tlk_multi_head_attention_backward(const char *op, tl_buf g, tl_buf wq, tl_buf wk, tl_buf wv, tl_buf wo,
                                     tl_buf x, tl_buf q, tl_buf k, tl_buf v, tl_buf lse,
                                     tl_buf attn, tl_buf mask, tl_buf dwq, tl_buf dwk, tl_buf dwv,
                                     tl_buf dwo, tl_buf dx, int64_t b, int64_t n, int64_t dm,
                                     int64_t h, int64_t hd, int64_t has_mask, int64_t flash,
                                     int64_t causal) {
    const int64_t R = b * n, HD = h * hd;
    if (R == 0 || HD == 0 || dm == 0) {
        tl_buf outs[] = {dwq, dwk, dwv, dwo, dx};
        return zero_all(outs, 5);
    }
    const float *M = simplest_mask(has_mask ? mask->data : NULL, n, &causal);
    size_t big = (size_t)(R * HD);
    /* dO, dQ, dK, dV (R x HD each) */
    float *work = malloc(sizeof(float) * 4 * big);
    if (!work) return tl_fail(TL_E_OOM, "%s: out of host memory for %lld-element temporaries", op, (long long)(4 * big));
    float *dO = work, *dQ = dO + big, *dK = dQ + big, *dV = dK + big;
    const float *G = g->data, *O = attn->data;
    int st = proj(op, 1, 0, HD, dm, R, O, HD, G, dm, dwo->data, dm, 0);
    if (!st) st = proj(op, 0, 1, R, HD, dm, G, dm, wo->data, dm, dO, HD, 0);
    if (!st) st = core_backward(op, q->data, k->data, v->data, O, lse->data, dO, M, (int)causal, dQ, dK, dV, b,
                                n, h, hd);
    const float *X = x->data;
    if (!st) st = proj(op, 1, 0, dm, HD, R, X, dm, dQ, HD, dwq->data, HD, 0);
    if (!st) st = proj(op, 1, 0, dm, HD, R, X, dm, dK, HD, dwk->data, HD, 0);
    if (!st) st = proj(op, 1, 0, dm, HD, R, X, dm, dV, HD, dwv->data, HD, 0);
    if (!st) st = proj(op, 0, 1, R, dm, HD, dQ, HD, wq->data, HD, dx->data, dm, 0);
    if (!st) st = proj(op, 0, 1, R, dm, HD, dK, HD, wk->data, HD, dx->data, dm, 1);
    if (!st) st = proj(op, 0, 1, R, dm, HD, dV, HD, wv->data, HD, dx->data, dm, 1);
    free(work);
    (void)flash;
    return st;
}

int tlk_attention_backward(const char *op, tl_buf g, tl_buf q, tl_buf k, tl_buf v, tl_buf o, tl_buf lse,
                           tl_buf mask, tl_buf dq, tl_buf dk, tl_buf dv, int64_t b, int64_t n, int64_t e,
                           int64_t has_mask, int64_t flash, int64_t causal) {
    if (b * n == 0 || e == 0) {
        tl_buf outs[] = {dq, dk, dv};
        return zero_all(outs, 3);
    }
    (void)flash;
    const float *M = simplest_mask(has_mask ? mask->data : NULL, n, &causal);
    return core_backward(op, q->data, k->data, v->data, o->data, lse->data, g->data, M, (int)causal,
                         dq->data, dk->data, dv->data, b, n, 1, e);
}
