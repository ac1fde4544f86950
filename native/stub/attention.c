/* attention.c (stub): multi_head_attention forward and fused backward, plain C.
 *
 * Layout: q, k, v and attn (the pre-projection output) are (B*n, H*hd) row-major, exactly what
 * the projections x @ W produce; head h of token i is the column block [h*hd, (h+1)*hd). lse is
 * (B, H, n): the per-row log-sum-exp of the scaled, masked scores, which lets the backward
 * recompute every probability without storing the n x n matrix. A fully blocked row has no
 * allowed key, outputs 0 and stores lse 0 (never read). Both use_flash settings share this code.
 */
#include <float.h>
#include <stdlib.h>
#include <string.h>
#include "stub.h"
#include "entry/attention_kernels.h"

/* C (M x N) (+)= A (M x K) @ B (K x N) */
static void mm_nn(const float *A, const float *B, float *C, int64_t M, int64_t K, int64_t N, int acc) {
#pragma omp parallel for schedule(static) if (M * N * K > TL_PAR_MIN)
    for (int64_t i = 0; i < M; i++) {
        float *c = C + i * N;
        if (!acc) for (int64_t j = 0; j < N; j++) c[j] = 0.0f;
        for (int64_t p = 0; p < K; p++) {
            float a = A[i * K + p];
            const float *b = B + p * N;
            for (int64_t j = 0; j < N; j++) c[j] += a * b[j];
        }
    }
}

/* C (M x N) = A^T @ B with A (K x M), B (K x N) */
static void mm_tn(const float *A, const float *B, float *C, int64_t M, int64_t K, int64_t N) {
#pragma omp parallel for schedule(static) if (M * N * K > TL_PAR_MIN)
    for (int64_t i = 0; i < M; i++) {
        float *c = C + i * N;
        for (int64_t j = 0; j < N; j++) c[j] = 0.0f;
        for (int64_t p = 0; p < K; p++) {
            float a = A[p * M + i];
            const float *b = B + p * N;
            for (int64_t j = 0; j < N; j++) c[j] += a * b[j];
        }
    }
}

/* C (M x N) (+)= A @ B^T with A (M x K), B (N x K) */
static void mm_nt(const float *A, const float *B, float *C, int64_t M, int64_t K, int64_t N, int acc) {
#pragma omp parallel for schedule(static) if (M * N * K > TL_PAR_MIN)
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            float s = 0.0f;
            for (int64_t p = 0; p < K; p++) s += A[i * K + p] * B[j * K + p];
            C[i * N + j] = acc ? C[i * N + j] + s : s;
        }
}

int tlk_multi_head_attention(const char *op, tl_buf wq, tl_buf wk, tl_buf wv, tl_buf wo, tl_buf x, tl_buf mask,
                            tl_buf y, tl_buf q, tl_buf k, tl_buf v, tl_buf lse, tl_buf attn,
                            int64_t b, int64_t n, int64_t dm, int64_t h, int64_t hd,
                            int64_t has_mask, int64_t flash) {
    const int64_t R = b * n, HD = h * hd;
    const float *M = has_mask ? mask->data : NULL;
    mm_nn(x->data, wq->data, q->data, R, dm, HD, 0);
    mm_nn(x->data, wk->data, k->data, R, dm, HD, 0);
    mm_nn(x->data, wv->data, v->data, R, dm, HD, 0);
    const float scale = hd > 0 ? (float)(1.0 / sqrt((double)hd)) : 1.0f;
    const float *Q = q->data, *K = k->data, *V = v->data;
    float *O = attn->data, *L = lse->data;
#pragma omp parallel if (b * h * n * n * hd > TL_PAR_MIN)
    {
        float *s = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
#pragma omp for schedule(static)
        for (int64_t bhi = 0; bhi < b * h * n; bhi++) {
            int64_t bb = bhi / (h * n), hh = (bhi / n) % h, i = bhi % n;
            const float *qi = Q + (bb * n + i) * HD + hh * hd;
            float *oi = O + (bb * n + i) * HD + hh * hd;
            float mx = -INFINITY;
            for (int64_t j = 0; j < n; j++) {
                if (M && M[i * n + j] == 0.0f) { s[j] = -INFINITY; continue; }
                const float *kj = K + (bb * n + j) * HD + hh * hd;
                float d = 0.0f;
                for (int64_t p = 0; p < hd; p++) d += qi[p] * kj[p];
                s[j] = d * scale;
                if (s[j] > mx || s[j] != s[j]) mx = s[j]; /* a NaN score poisons the row */
            }
            for (int64_t p = 0; p < hd; p++) oi[p] = 0.0f;
            if (mx == -INFINITY) { L[bhi] = 0.0f; continue; } /* fully blocked: output 0 */
            float den = 0.0f;
            for (int64_t j = 0; j < n; j++) {
                if (s[j] == -INFINITY) continue;
                float pj = tl_expf(s[j] - mx);
                den += pj;
                const float *vj = V + (bb * n + j) * HD + hh * hd;
                for (int64_t p = 0; p < hd; p++) oi[p] += pj * vj[p];
            }
            for (int64_t p = 0; p < hd; p++) oi[p] /= den;
            L[bhi] = mx + logf(den);
        }
        free(s);
    }
    mm_nn(O, wo->data, y->data, R, HD, dm, 0);
    (void)flash;
    return TL_OK;
}

int tlk_multi_head_attention_backward(const char *op, tl_buf g, tl_buf wq, tl_buf wk, tl_buf wv, tl_buf wo,
                                     tl_buf x, tl_buf q, tl_buf k, tl_buf v, tl_buf lse,
                                     tl_buf attn, tl_buf mask, tl_buf dwq, tl_buf dwk, tl_buf dwv,
                                     tl_buf dwo, tl_buf dx, int64_t b, int64_t n, int64_t dm,
                                     int64_t h, int64_t hd, int64_t has_mask, int64_t flash) {
    const int64_t R = b * n, HD = h * hd;
    const float *M = has_mask ? mask->data : NULL;
    size_t big = sizeof(float) * (size_t)(R * HD > 0 ? R * HD : 1);
    float *dO = malloc(big), *dQ = malloc(big), *dK = malloc(big), *dV = malloc(big);
    float *Dr = malloc(sizeof(float) * (size_t)(b * h * n > 0 ? b * h * n : 1));
    if (!dO || !dQ || !dK || !dV || !Dr) {
        free(dO); free(dQ); free(dK); free(dV); free(Dr);
        return tl_fail(TL_E_OOM, "%s: out of host memory for %lld-element temporaries", op, (long long)(R * HD));
    }
    const float *G = g->data, *Q = q->data, *K = k->data, *V = v->data, *O = attn->data, *L = lse->data;
    mm_tn(O, G, dwo->data, HD, R, dm);          /* dWo = attn^T g */
    mm_nt(G, wo->data, dO, R, dm, HD, 0);       /* dAttn = g Wo^T */
    const float scale = hd > 0 ? (float)(1.0 / sqrt((double)hd)) : 1.0f;
    /* D_i = dO_i . O_i per head and row */
    for (int64_t bhi = 0; bhi < b * h * n; bhi++) {
        int64_t bb = bhi / (h * n), hh = (bhi / n) % h, i = bhi % n;
        const float *o = O + (bb * n + i) * HD + hh * hd, *d = dO + (bb * n + i) * HD + hh * hd;
        float s = 0.0f;
        for (int64_t p = 0; p < hd; p++) s += d[p] * o[p];
        Dr[bhi] = s;
    }
    /* dQ: one query row at a time over keys in order */
#pragma omp parallel for schedule(static) if (b * h * n * n * hd > TL_PAR_MIN)
    for (int64_t bhi = 0; bhi < b * h * n; bhi++) {
        int64_t bb = bhi / (h * n), hh = (bhi / n) % h, i = bhi % n;
        const float *qi = Q + (bb * n + i) * HD + hh * hd, *doi = dO + (bb * n + i) * HD + hh * hd;
        float *dqi = dQ + (bb * n + i) * HD + hh * hd;
        for (int64_t p = 0; p < hd; p++) dqi[p] = 0.0f;
        for (int64_t j = 0; j < n; j++) {
            if (M && M[i * n + j] == 0.0f) continue;
            const float *kj = K + (bb * n + j) * HD + hh * hd, *vj = V + (bb * n + j) * HD + hh * hd;
            float sd = 0.0f, dp = 0.0f;
            for (int64_t p = 0; p < hd; p++) { sd += qi[p] * kj[p]; dp += doi[p] * vj[p]; }
            float pij = tl_expf(sd * scale - L[bhi]);
            float ds = pij * (dp - Dr[bhi]) * scale;
            for (int64_t p = 0; p < hd; p++) dqi[p] += ds * kj[p];
        }
    }
    /* dK, dV: one key row at a time over queries in order (no shared accumulation) */
#pragma omp parallel for schedule(static) if (b * h * n * n * hd > TL_PAR_MIN)
    for (int64_t bhj = 0; bhj < b * h * n; bhj++) {
        int64_t bb = bhj / (h * n), hh = (bhj / n) % h, j = bhj % n;
        const float *kj = K + (bb * n + j) * HD + hh * hd, *vj = V + (bb * n + j) * HD + hh * hd;
        float *dkj = dK + (bb * n + j) * HD + hh * hd, *dvj = dV + (bb * n + j) * HD + hh * hd;
        for (int64_t p = 0; p < hd; p++) { dkj[p] = 0.0f; dvj[p] = 0.0f; }
        for (int64_t i = 0; i < n; i++) {
            if (M && M[i * n + j] == 0.0f) continue;
            int64_t bhi = (bb * h + hh) * n + i;
            const float *qi = Q + (bb * n + i) * HD + hh * hd, *doi = dO + (bb * n + i) * HD + hh * hd;
            float sd = 0.0f, dp = 0.0f;
            for (int64_t p = 0; p < hd; p++) { sd += qi[p] * kj[p]; dp += doi[p] * vj[p]; }
            float pij = tl_expf(sd * scale - L[bhi]);
            float ds = pij * (dp - Dr[bhi]) * scale;
            for (int64_t p = 0; p < hd; p++) { dkj[p] += ds * qi[p]; dvj[p] += pij * doi[p]; }
        }
    }
    const float *X = x->data;
    mm_tn(X, dQ, dwq->data, dm, R, HD);
    mm_tn(X, dK, dwk->data, dm, R, HD);
    mm_tn(X, dV, dwv->data, dm, R, HD);
    mm_nt(dQ, wq->data, dx->data, R, HD, dm, 0);
    mm_nt(dK, wk->data, dx->data, R, HD, dm, 1);
    mm_nt(dV, wv->data, dx->data, R, HD, dm, 1);
    free(dO); free(dQ); free(dK); free(dV); free(Dr);
    (void)flash;
    return TL_OK;
}
