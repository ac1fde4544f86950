/* attention_blocked.c (stub): the default mode's attention core, as blocked GEMMs.
 *
 * Exact mode keeps attention.c's canonical order (one query row at a time, rule 5). The default
 * mode only promises deterministic results, so here each (sample, head) works on blocks of QB
 * query rows with the default GEMM (sgemm.h): S = Q K^T, a softmax over each whole row, O = P V;
 * the backward recomputes P from the saved log-sum-exp and runs dP = dO V^T, dQ = dS K,
 * dK += dS^T Q and dV += P^T dO, query blocks in order. A (sample, head) is one thread's work, so
 * every result is the same for any thread count, and each GEMM sums in increasing k.
 *
 * The products run as register tiles of RB query (or key) rows here rather than through
 * tl_sgemm, whose packing cost half as much as its arithmetic at these sizes: every output is the
 * chain tl_sgemm computes (from +0, or from the accumulated value, one FMA per k in order), so the
 * bits are the GEMM's. Scores (S, dP) are computed only for the keys a row group reads, which
 * skips the causal upper tiles. P V, dS K, dS^T Q and P^T dO keep the GEMM's chains, blocked
 * pairs' zeros included, except for runs of terms +0 * x at a chain's end (P V, dS K: keys past
 * a row group's last allowed key) or start (dS^T Q, P^T dO: query rows that do not reach a key
 * group yet). Such a term can change nothing but the sign of a zero result (x finite: -0 + +0 =
 * +0) or make it NaN (x inf or NaN), so the runs stop at any row of x that is not finite and a
 * -0 that a left-out non-negative x would have made +0 is made +0 (zero_terms). Head dims that
 * are not a multiple of 16 keep tl_sgemm for those four.
 *
 * The softmax of a row runs in 16-lane vectors in the order it always had: the max lane l taking
 * keys l mod 16 then folded lanes 0..15, the sum 8 partials (keys k mod 8) then pairs, every
 * exponential tl_expf (the correctly rounded tlm_exp) on whole vectors, the log-sum-exps of a
 * block as one vector loop.
 *
 * Blocked pairs (mask, causal) get probability and score gradient 0. A query block's keys stop
 * after the last key any of its rows may attend; the rest would add only zeros. That key range
 * depends on the blocked set alone, so causal and the explicit lower-triangular mask give the
 * same bits. As in exact mode: a row with no allowed key outputs 0 with lse 0, and a row that met
 * a NaN score outputs NaN with lse NaN.
 */
#include <stdlib.h>
#include <string.h>
#include "stub.h"
#include "sgemm.h"
#include "simd16.h"
#include "transpose16.h"
#include "attention_blocked.h"

#define QB 64 /* query rows per block */
#define RB 8  /* query (key) rows per row group of the products */

/* The products' register tiles hold their accumulators in the build's native vectors (simd16.h's
 * vn): GCC keeps a v16 in memory where registers are narrower, so an AVX2 build of 16-float
 * tiles moved every lane through the stack. A tile is TR rows of an RB-row group by TV 16-float
 * columns (TW native vectors): with AVX-512 the whole group by 2 as always (16 of the 32
 * registers), below it 4 rows (2 with 4-float vectors) by 1, 8 accumulators of 16 registers.
 * Every output keeps its chain whatever the tile (lanes are independent), so no bit changes. */
#if VN == 16
#define TR RB
#define TV 2
#elif VN == 8
#define TR 4
#define TV 1
#else
#define TR 2
#define TV 1
#endif
#define TW (TV * VPV)

typedef int32_t v16i __attribute__((vector_size(64)));
typedef int32_t vni __attribute__((vector_size(4 * VN)));
typedef float v8f __attribute__((vector_size(32)));

/* 1 + the last key row i may attend (0 when none) */
static int64_t key_end(const float *M, int causal, int64_t n, int64_t i) {
    int64_t j = causal ? i : n - 1;
    if (M)
        while (j >= 0 && M[i * n + j] == 0.0f) j--;
    return j + 1;
}

/* keys a query block [i0, i1) needs: the largest key_end of its rows */
static int64_t block_keys(const float *M, int causal, int64_t n, int64_t i0, int64_t i1) {
    if (!M) return causal ? i1 : n;
    int64_t kn = 0;
    for (int64_t i = i0; i < i1; i++) {
        int64_t e = key_end(M, causal, n, i);
        kn = e > kn ? e : kn;
    }
    return kn;
}

/* ke rounded up to whole 16-key vectors, at most kn: loops run to it so none has a scalar tail
 * (the keys in [ke, kv) are blocked for the row and come out 0) */
static inline int64_t vec_end(int64_t ke, int64_t kn) {
    int64_t e = (ke + 15) & ~(int64_t)15;
    return e < kn ? e : kn;
}

/* The lanes of x folded 0..15 by m = x[l] > m ? x[l] : m (no NaN among them): the largest, the
 * lowest lane of equals (so of +0 and -0, whichever comes first). A tree of the same rule, in
 * registers: each step keeps its lower half's value unless the upper one is greater, which picks
 * the same lane as the sequential fold. */
static inline __attribute__((always_inline)) float max_lanes(v16 x) {
    v16 u = __builtin_shufflevector(x, x, 1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14);
    x = (v16)(((v16i)u & (v16i)(u > x)) | ((v16i)x & ~(v16i)(u > x)));   /* even lanes: pairs */
    u = __builtin_shufflevector(x, x, 2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13);
    x = (v16)(((v16i)u & (v16i)(u > x)) | ((v16i)x & ~(v16i)(u > x)));   /* lanes 0 mod 4 */
    u = __builtin_shufflevector(x, x, 4, 5, 6, 7, 0, 1, 2, 3, 12, 13, 14, 15, 8, 9, 10, 11);
    x = (v16)(((v16i)u & (v16i)(u > x)) | ((v16i)x & ~(v16i)(u > x)));   /* lanes 0 mod 8 */
    u = __builtin_shufflevector(x, x, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7);
    x = (v16)(((v16i)u & (v16i)(u > x)) | ((v16i)x & ~(v16i)(u > x)));   /* lane 0 */
    return x[0];
}

/* the OR of the lanes of x, in registers */
static inline __attribute__((always_inline)) int32_t or_lanes(v16i x) {
    x |= __builtin_shufflevector(x, x, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7);
    x |= __builtin_shufflevector(x, x, 4, 5, 6, 7, 0, 1, 2, 3, 12, 13, 14, 15, 8, 9, 10, 11);
    x |= __builtin_shufflevector(x, x, 2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13);
    x |= __builtin_shufflevector(x, x, 1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14);
    return x[0];
}

/* the OR of the lanes of a native vector */
#if VN == 16
#define or_lanes_n(x) or_lanes(x)
#else
static inline __attribute__((always_inline)) int32_t or_lanes_n(vni x) {
    int32_t o = 0;
    for (int l = 0; l < VN; l++) o |= x[l];
    return o;
}
#endif

/* ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7)) of the lanes of a, in registers, each add's
 * operands in that order */
static inline __attribute__((always_inline)) float sum_tree8(v8f a) {
    a = a + __builtin_shufflevector(a, a, 1, 0, 3, 2, 5, 4, 7, 6);
    a = a + __builtin_shufflevector(a, a, 2, 3, 0, 1, 6, 7, 4, 5);
    a = a + __builtin_shufflevector(a, a, 4, 5, 6, 7, 0, 1, 2, 3);
    return a[0];
}

/* One query row's scores s[0..kv): each scaled, blocked pairs (keys from ke on, which covers the
 * causal ones, and the mask's zeros in mi) set to -inf, in place. Returns their largest (NaN
 * ignored; -inf when none) and sets *nan_seen. The maximum runs in 16 lanes, lane l taking the
 * keys j = l mod 16 of the whole vectors in order and lane 0 then the last kv mod 16 keys, and
 * the lanes are folded 0..15 with the first of equals kept: the order the softmax has always
 * used, so a zero maximum keeps its sign. */
#if VN == 16
static TL_VEC512 float row_scale_max(float *s, const float *mi, int64_t ke, int64_t kv, float scale,
                                     int *nan_seen) {
    const float neg_inf = tlm_from_bits((int32_t)0xff800000);
    const v16i ninf = (v16i){0} + (int32_t)0xff800000;
    const v16i lane = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
    v16i mx = ninf, nan = {0};
    int64_t j = 0;
    for (; j + 16 <= kv; j += 16) {
        const v16 x = vload(s + j) * scale;
        v16i blk = lane >= (int32_t)(ke - j);
        if (mi) blk |= vload(mi + j) == 0.0f;
        const v16i xb = ((v16i)x & ~blk) | (ninf & blk);
        vstore(s + j, (v16)xb);
        nan |= (v16)xb != (v16)xb;
        const v16i gt = (v16)xb > (v16)mx;
        mx = (xb & gt) | (mx & ~gt);
    }
    if (j < kv) {
        float m0 = ((v16)mx)[0];
        int32_t a0 = nan[0];
        for (; j < kv; j++) {
            const int blk = j >= ke || (mi && mi[j] == 0.0f);
            const float x = blk ? neg_inf : tlm_mul(s[j], scale);
            s[j] = x;
            a0 |= x != x;
            m0 = x > m0 ? x : m0;
        }
        v16 t = (v16)mx;
        t[0] = m0;
        mx = (v16i)t;
        nan[0] = a0;
    }
    *nan_seen = or_lanes(nan) != 0;
    return max_lanes((v16)mx);
}
#else
/* Below AVX-512 the 16 lanes run as VPV native vectors (the running maximum and NaN flags of
 * v16s lived on the stack there), lane l still taking the keys j = l mod 16 */
static float row_scale_max(float *s, const float *mi, int64_t ke, int64_t kv, float scale,
                           int *nan_seen) {
    const float neg_inf = tlm_from_bits((int32_t)0xff800000);
    const vni ninf = (vni){0} + (int32_t)0xff800000;
    vni lane;
    for (int l = 0; l < VN; l++) lane[l] = l;
    vni mx[VPV], nan[VPV];
    for (int h = 0; h < VPV; h++) mx[h] = ninf, nan[h] = (vni){0};
    int64_t j = 0;
    for (; j + 16 <= kv; j += 16)
        for (int h = 0; h < VPV; h++) {
            const int64_t jh = j + VN * h;
            const vn x = vnload(s + jh) * scale;
            vni blk = lane >= (int32_t)(ke - jh);
            if (mi) blk |= vnload(mi + jh) == 0.0f;
            const vni xb = ((vni)x & ~blk) | (ninf & blk);
            vnstore(s + jh, (vn)xb);
            nan[h] |= (vn)xb != (vn)xb;
            const vni gt = (vn)xb > (vn)mx[h];
            mx[h] = (xb & gt) | (mx[h] & ~gt);
        }
    int32_t mt[16], nt[16];
    for (int h = 0; h < VPV; h++) {
        memcpy(mt + VN * h, &mx[h], sizeof mx[h]);
        memcpy(nt + VN * h, &nan[h], sizeof nan[h]);
    }
    if (j < kv) {
        float m0 = tlm_from_bits(mt[0]);
        int32_t a0 = nt[0];
        for (; j < kv; j++) {
            const int blk = j >= ke || (mi && mi[j] == 0.0f);
            const float x = blk ? neg_inf : tlm_mul(s[j], scale);
            s[j] = x;
            a0 |= x != x;
            m0 = x > m0 ? x : m0;
        }
        memcpy(&mt[0], &m0, sizeof m0);
        nt[0] = a0;
    }
    v16i m16, n16;
    memcpy(&m16, mt, sizeof m16);
    memcpy(&n16, nt, sizeof n16);
    *nan_seen = or_lanes(n16) != 0;
    return max_lanes((v16)m16);
}
#endif

/* s[j] = e^(s[j] - m) for j < ke, 0 for j in [ke, kn) (keys from ke on are blocked: their
 * e^-inf is +0); returns the sum of s[0..ke) in tl_sum_f32_block's order (8 interleaved
 * partials, partial k taking the keys j = k mod 8 in order, then the pairs), the row sum's order
 * before (a partial is a sum of exponentials, never -0, so the +0 of a blocked key left out
 * changes none). The exponentials run as one plain loop of tl_expf, which the compiler vectorises
 * as it does the exp op's (the same instruction count as the earlier 16-lane groups, in less
 * code). */
static float row_exp_sum(float *s, int64_t ke, int64_t kn, float m) {
    for (int64_t j = 0; j < ke; j++) s[j] = tl_expf(tlm_sub(s[j], m));
    for (int64_t j = ke; j < kn; j++) s[j] = 0.0f;
    v8f acc = {0};
    int64_t j = 0;
    for (; j + 8 <= ke; j += 8) {
        v8f e;
        memcpy(&e, s + j, sizeof e);
        acc += e;
    }
    for (int l = 0; j < ke; j++, l++) acc[l] += s[j];
    return sum_tree8(acc);
}

/* lse[r] = tlm_attn_lse(m[r], l[r], bad[r]) for the QB rows of a block, as selects so the
 * logarithms run in vectors (the same bits as the function's branches) */
static TL_VEC512 void block_lse(const float *m, const float *l, const int32_t *bad, float *lse) {
    for (int r = 0; r < QB; r++) {
        const float y = tlm_sel(l[r] == 0.0f, 0.0f, tlm_add(m[r], tlm_log(l[r])));
        lse[r] = tlm_sel(bad[r] != 0, tlm_from_bits(0x7fc00000), y);
    }
}

/* One query row of the backward, in place: p[j] (its score) becomes the probability
 * tlm_attn_prob(p[j] scale, lse) and ds[j] (its dP) the score gradient tlm_attn_dscore(p, dP, D,
 * scale), for the keys j < ke; blocked pairs (the mask's zeros in mi, keys from ke on) get +0.
 * One plain loop, which the compiler vectorises. */
static void row_probs(float *p, float *ds, const float *mi, int64_t ke, int64_t kn, float lse,
                      float D, float scale) {
    for (int64_t j = 0; j < ke; j++) {
        const float e = tlm_attn_prob(tlm_mul(p[j], scale), lse);
        ds[j] = tlm_attn_dscore(e, ds[j], D, scale);
        p[j] = e;
    }
    if (mi)
        for (int64_t j = 0; j < ke; j++)
            if (mi[j] == 0.0f) p[j] = ds[j] = 0.0f;
    for (int64_t j = ke; j < kn; j++) p[j] = ds[j] = 0.0f;
}

/* Kt rows (stride ks) for keys [k0, kn) from K, keys [kn, kp) zero; k0 a multiple of 16 */
static void pack_keys_from(const float *K, int64_t HD, int64_t hd, int64_t k0, int64_t kn,
                           int64_t kp, int64_t ks, float *Kt) {
    const int64_t jv = kn / 16 * 16, pv = hd / 16 * 16;
    for (int64_t j0 = k0; j0 < jv; j0 += 16)
        for (int64_t p0 = 0; p0 < pv; p0 += 16)
            for (int u = 0; u < 16 / VN; u++)   /* as VN x VN squares of native vectors */
                for (int v = 0; v < 16 / VN; v++) {
                    vn r[VN];
                    for (int i = 0; i < VN; i++) r[i] = vnload(K + (j0 + VN * v + i) * HD + p0 + VN * u);
                    tl_transpose_vn(r);
                    for (int i = 0; i < VN; i++) vnstore(Kt + (p0 + VN * u + i) * ks + j0 + VN * v, r[i]);
                }
    for (int64_t p = 0; p < hd; p++) {
        const int64_t j1 = p < pv ? (jv > k0 ? jv : k0) : k0; /* past the transposed tiles */
        for (int64_t j = j1; j < kn; j++) Kt[p * ks + j] = K[j * HD + p];
        for (int64_t j = kn; j < kp; j++) Kt[p * ks + j] = 0.0f;
    }
}

/* Kt (hd, kp) = K[0..kn)^T, keys kn..kp zero: 16 consecutive keys of one feature are one vector.
 * Whole 16 x 16 tiles go through a register transpose (strided single-float stores were most of
 * the packing's time), the edges one float at a time. */
static void pack_keys(const float *K, int64_t HD, int64_t hd, int64_t kn, int64_t kp, float *Kt) {
    pack_keys_from(K, HD, hd, 0, kn, kp, kp, Kt);
}

/* S rows [0, mr) (stride kn), keys [0, kend) in 16 TV-key tiles (kend a multiple of 16 or kn):
 * Q K^T with every score one FMA chain over the features in order from +0, the chain tl_sgemm
 * computes, so the bits are the GEMM's; keys a row never reads are left out */
static inline __attribute__((always_inline)) void
score_tile(const int mr, const float *Q, int64_t HD, int64_t hd, const float *Kt, int64_t kp,
           float *S, int64_t kn, int64_t kend) {
    for (int64_t j0 = 0; j0 < kend; j0 += 16 * TV) {
        int nw = 1; /* native vectors up to kend */
        while (nw < TW && j0 + VN * nw < kend) nw++;
        vn acc[TR][TW];
        for (int r = 0; r < mr; r++)
            for (int w = 0; w < TW; w++) acc[r][w] = (vn){0};
        for (int64_t p = 0; p < hd; p++) {
            vn b[TW];
            for (int w = 0; w < TW; w++)
                b[w] = w == 0 || w < nw ? vnload(Kt + p * kp + j0 + VN * w) : b[0];
            for (int r = 0; r < mr; r++) {
                const float a = Q[r * HD + p];
                for (int w = 0; w < TW; w++)
                    if (w == 0 || w < nw) acc[r][w] = VNFMA(a, b[w], acc[r][w]);
            }
        }
        for (int r = 0; r < mr; r++)
            for (int w = 0; w < nw; w++) {
                const int64_t j = j0 + VN * w, n = kn - j < VN ? kn - j : VN;
                float t[VN];
                if (n == VN) {
                    vnstore(S + r * kn + j, acc[r][w]);
                } else {
                    vnstore(t, acc[r][w]);
                    memcpy(S + r * kn + j, t, sizeof(float) * (size_t)n);
                }
            }
    }
}

/* The left-out terms +0 * V[j][p], j in [jn, kn), of outputs O[r][p] (mr rows HD apart, w
 * features): each that is -0 becomes +0 if some such V[j][p] has its sign bit clear, as the
 * whole chain would give (V finite there). */
static __attribute__((noinline, cold)) void zero_terms(float *O, int mr, int w, int64_t HD,
                                                       const float *V, int64_t jn, int64_t kn) {
    for (int r = 0; r < mr; r++)
        for (int p = 0; p < w; p++) {
            int32_t ob;
            memcpy(&ob, O + r * HD + p, sizeof ob);
            if (ob != (int32_t)0x80000000) continue;
            for (int64_t j = jn; j < kn; j++) {
                int32_t vb;
                memcpy(&vb, V + j * HD + p, sizeof vb);
                if (vb >= 0) { O[r * HD + p] = 0.0f; break; }
            }
        }
}

/* O rows [0, mr) (stride HD), features [0, 16 nv) = P V over keys [0, jn) in order from +0, the
 * chain tl_sgemm computes (keys a row may not attend have P = 0 and stay in the chain). The
 * caller leaves out keys [jn, kn) only where they are +0 for every row and V is finite there;
 * then the only thing those terms can do is turn an output -0 into +0 (when some left-out
 * V[j][p] is +0 or positive): lanes that come out -0 go through zero_terms. */
static inline __attribute__((always_inline)) void
value_tile(const int mr, const int nv, const float *P, int64_t kn, const float *V, int64_t HD,
           float *O, int64_t jn, const float *den, const int32_t *bad) {
    const int nw = nv * VPV;
    vn acc[TR][TW];
    for (int r = 0; r < mr; r++)
        for (int w = 0; w < nw; w++) acc[r][w] = (vn){0};
    for (int64_t j = 0; j < jn; j++) {
        vn b[TW];
        for (int w = 0; w < nw; w++) b[w] = vnload(V + j * HD + VN * w);
        for (int r = 0; r < mr; r++) {
            const float a = P[r * kn + j];
            for (int w = 0; w < nw; w++) acc[r][w] = VNFMA(a, b[w], acc[r][w]);
        }
    }
    vni nz = {0};
    for (int r = 0; r < mr; r++)
        for (int w = 0; w < nw; w++) nz |= (vni)acc[r][w] == (int32_t)0x80000000;
    if (jn < kn && or_lanes_n(nz)) {
        for (int r = 0; r < mr; r++)
            for (int w = 0; w < nw; w++) vnstore(O + r * HD + VN * w, acc[r][w]);
        zero_terms(O, mr, 16 * nv, HD, V, jn, kn);
        for (int r = 0; r < mr; r++)
            for (int w = 0; w < nw; w++) acc[r][w] = vnload(O + r * HD + VN * w);
    }
    /* the forward's softmax divisor: NaN for a row that met a NaN score, 0 for a row with no
     * allowed key (divisor 0), else the sum divided by it */
    if (den)
        for (int r = 0; r < mr; r++)
            for (int w = 0; w < nw; w++)
                acc[r][w] = bad[r] ? (vn){0} + tlm_from_bits(0x7fc00000)
                          : den[r] == 0.0f ? (vn){0} : acc[r][w] / den[r];
    for (int r = 0; r < mr; r++)
        for (int w = 0; w < nw; w++) vnstore(O + r * HD + VN * w, acc[r][w]);
}

/* mr <= RB rows as tiles of TR, each at constant rows r0 and count m (with TR == RB just the one
 * tile; a loop over them left m unknown and the accumulators on the stack) */
#define TILE_AT(mr, R0, TILE)                                                               \
    if ((R0) < (mr)) {                                                                      \
        const int r0 = (R0), m = (mr) - r0 < TR ? (mr) - r0 : TR;                           \
        TILE;                                                                               \
    }
#define TILE_ROWS(mr, TILE)                                                                 \
    TILE_AT(mr, 0, TILE) TILE_AT(mr, TR, TILE) TILE_AT(mr, 2 * TR, TILE) TILE_AT(mr, 3 * TR, TILE)
#define TILE_CASES(X) X(8) X(7) X(6) X(5) X(4) X(3) X(2) X(1)
#define SCORE_CASE(R)                                                                       \
    case R: TILE_ROWS(R, score_tile(m, Q + r0 * HD, HD, hd, Kt, kp, S + r0 * kn, kn, kend)) break;
#define VALUE_CASE(R)                                                                       \
    case R:                                                                                 \
        TILE_ROWS(R, if (TV > 1 && nv == 2)                                                 \
                         value_tile(m, 2, P + r0 * kn, kn, V, HD, O + r0 * HD, jn,          \
                                    den ? den + r0 : NULL, bad ? bad + r0 : NULL);          \
                     else value_tile(m, 1, P + r0 * kn, kn, V, HD, O + r0 * HD, jn,         \
                                     den ? den + r0 : NULL, bad ? bad + r0 : NULL))         \
        break;

static void score_rows(int mr, const float *Q, int64_t HD, int64_t hd, const float *Kt, int64_t kp,
                       float *S, int64_t kn, int64_t kend) {
    switch (mr) { TILE_CASES(SCORE_CASE) }
}

/* features [0, 16 nv) (nv <= TV) */
static void value_rows(int mr, int nv, const float *P, int64_t kn, const float *V, int64_t HD,
                       float *O, int64_t jn, const float *den, const int32_t *bad) {
    switch (mr) { TILE_CASES(VALUE_CASE) }
}

/* S (qb, kn) = Q_blk K^T for the keys each RB-row group reads (up to its rows' vec_end), from
 * Kt packed by pack_keys with kp >= kn keys */
static void block_scores(const float *Q, const float *Kt, int64_t kp, const float *M, int causal,
                         int64_t n, int64_t HD, int64_t hd, int64_t i0, int64_t qb, int64_t kn,
                         float *S) {
    for (int64_t r0 = 0; r0 < qb; r0 += RB) {
        const int mr = (int)(qb - r0 < RB ? qb - r0 : RB);
        int64_t kend = 0;
        for (int r = 0; r < mr; r++) {
            const int64_t e = vec_end(key_end(M, causal, n, i0 + r0 + r), kn);
            kend = e > kend ? e : kend;
        }
        score_rows(mr, Q + (i0 + r0) * HD, HD, hd, Kt, kp, S + r0 * kn, kn, kend);
    }
}

/* 1 + the last of rows [lo, kn) of X (hd features, rows HD apart) holding an inf or NaN, lo when
 * none */
static int64_t last_nonfinite(const float *X, int64_t HD, int64_t hd, int64_t lo, int64_t kn) {
    for (int64_t j = kn - 1; j >= lo; j--) {
        int32_t bad = 0;
        for (int64_t p = 0; p < hd; p++) {
            int32_t b;
            memcpy(&b, X + j * HD + p, sizeof b);
            bad |= (b & 0x7f800000) == 0x7f800000;
        }
        if (bad) return j + 1;
    }
    return lo;
}

/* the smallest of a block's key ends ke[0..qb): P V and dS K leave out no key below it */
static int64_t min_key_end(const int64_t *ke, int64_t qb) {
    int64_t m = ke[0];
    for (int64_t r = 1; r < qb; r++) m = ke[r] < m ? ke[r] : m;
    return m;
}

/* the first row r with ke[r] >= kn (qb when none): dS^T Q and P^T dO leave out no row from it
 * on */
static int64_t first_full_row(const int64_t *ke, int64_t qb, int64_t kn) {
    int64_t r = 0;
    while (r < qb && ke[r] < kn) r++;
    return r;
}

/* O_blk (qb, hd) = P V[0..kn) in RB-row, 16 TV-feature tiles (hd a multiple of 16). ke[r] (or NULL):
 * row r's P is +0 from key ke[r] on, so a row group's chains stop after its last ke (but not
 * before key nf, 1 + the last key whose V row is not finite), the rest left to zero_terms. */
static void block_values(const float *P, const float *V, float *O, int64_t HD, int64_t hd,
                         int64_t qb, int64_t kn, const int64_t *ke, int64_t nf, const float *den,
                         const int32_t *bad) {
    for (int64_t r0 = 0; r0 < qb; r0 += RB) {
        const int mr = (int)(qb - r0 < RB ? qb - r0 : RB);
        int64_t jn = kn;
        if (ke) {
            jn = nf;
            for (int r = 0; r < mr; r++) jn = ke[r0 + r] > jn ? ke[r0 + r] : jn;
        }
        for (int64_t c = 0; c < hd; c += 16 * TV)
            value_rows(mr, TV > 1 && hd - c > 16 ? 2 : 1, P + r0 * kn, kn, V + c, HD, O + r0 * HD + c, jn,
                       den ? den + r0 : NULL, den ? bad + r0 : NULL);
    }
}

/* C rows [0, mr) (stride HD), features [0, 16 nv) += A^T B over the qb query rows in order,
 * A (qb, kn) read at columns [0, mr), B rows HD apart: tl_sgemm's accumulating chain (C loaded,
 * then one FMA per query row) */
static inline __attribute__((always_inline)) void
key_tile(const int mr, const int nv, const float *A, int64_t kn, const float *B, int64_t HD,
         int64_t qb, float *C, int64_t rs, int fresh) {
    const int nw = nv * VPV;
    vn acc[TR][TW];
    vni nz = {0};
    for (int j = 0; j < mr; j++)
        for (int w = 0; w < nw; w++) {
            acc[j][w] = fresh ? (vn){0} : vnload(C + j * HD + VN * w);
            nz |= (vni)acc[j][w] == (int32_t)0x80000000;
        }
    if (rs > 0 && or_lanes_n(nz)) {
        zero_terms(C, mr, 16 * nv, HD, B, 0, rs);
        for (int j = 0; j < mr; j++)
            for (int w = 0; w < nw; w++) acc[j][w] = vnload(C + j * HD + VN * w);
    }
    for (int64_t r = rs; r < qb; r++) {
        vn b[TW];
        for (int w = 0; w < nw; w++) b[w] = vnload(B + r * HD + VN * w);
        for (int j = 0; j < mr; j++) {
            const float a = A[r * kn + j];
            for (int w = 0; w < nw; w++) acc[j][w] = VNFMA(a, b[w], acc[j][w]);
        }
    }
    for (int j = 0; j < mr; j++)
        for (int w = 0; w < nw; w++) vnstore(C + j * HD + VN * w, acc[j][w]);
}

#define KEY_CASE(R)                                                                         \
    case R:                                                                                 \
        TILE_ROWS(R, if (TV > 1 && nv == 2)                                                 \
                         key_tile(m, 2, A + r0, kn, B, HD, qb, C + r0 * HD, rs, fresh);     \
                     else key_tile(m, 1, A + r0, kn, B, HD, qb, C + r0 * HD, rs, fresh))    \
        break;

/* features [0, 16 nv) (nv <= TV) */
static void key_rows(int mr, int nv, const float *A, int64_t kn, const float *B, int64_t HD,
                     int64_t qb, float *C, int64_t rs, int fresh) {
    switch (mr) { TILE_CASES(KEY_CASE) }
}

/* the first of rows [0, qb) of X (hd features, rows HD apart) holding an inf or NaN, qb when
 * none */
static int64_t first_nonfinite(const float *X, int64_t HD, int64_t hd, int64_t qb) {
    for (int64_t r = 0; r < qb; r++) {
        int32_t bad = 0;
        for (int64_t p = 0; p < hd; p++) {
            int32_t b;
            memcpy(&b, X + r * HD + p, sizeof b);
            bad |= (b & 0x7f800000) == 0x7f800000;
        }
        if (bad) return r;
    }
    return qb;
}

/* C[0..kn) (hd features, rows HD apart) += A^T B_blk, A (qb, kn), B qb rows (hd a multiple
 * of 16). ke[r]: row r's A is +0 from key ke[r] on, so the query rows before the first that
 * reaches a key group add only +0 terms to it and are left out (never from row fb on, the first
 * whose B row is not finite); what those terms could do, turn a -0 in C into +0, zero_terms
 * does. Rows [kz, kn) of C are written for the first time: their chains start from +0 in
 * registers (what zeroed memory would give) instead of a load. */
static void block_keys_acc(const float *A, const float *B, float *C, int64_t HD, int64_t hd,
                           int64_t qb, int64_t kn, const int64_t *ke, int64_t fb, int64_t kz) {
    int64_t rs = 0;
    for (int64_t j0 = 0; j0 < kn; j0 += RB) {
        const int mr = (int)(kn - j0 < RB ? kn - j0 : RB);
        while (rs < fb && ke[rs] <= j0) rs++;
        if (j0 < kz && j0 + mr > kz)
            for (int64_t j = kz; j < j0 + mr; j++)
                memset(C + j * HD, 0, sizeof(float) * (size_t)hd);
        for (int64_t c = 0; c < hd; c += 16 * TV)
            key_rows(mr, TV > 1 && hd - c > 16 ? 2 : 1, A + j0, kn, B + c, HD, qb, C + j0 * HD + c, rs,
                     j0 >= kz);
    }
}

/* one query block of one (sample, head): O rows and lse; S is scratch of QB * n floats, Kt of
 * hd * (n rounded up to 16) */
static int forward_block(const float *Q, const float *K, const float *V, const float *M, int causal,
                         float *O, float *L, int64_t n, int64_t HD, int64_t hd, int64_t i0,
                         int64_t i1, float scale, float *S, float *Kt, int64_t *packed) {
    const int64_t qb = i1 - i0, kn = block_keys(M, causal, n, i0, i1);
    const float nan = tlm_from_bits(0x7fc00000);
    if (kn == 0) {
        for (int64_t i = i0; i < i1; i++) {
            memset(O + i * HD, 0, sizeof(float) * (size_t)hd);
            L[i] = 0.0f;
        }
        return 0;
    }
    /* Kt holds this head's keys [0, *packed) (rows kp apart), kept from the block before */
    const int64_t kp = (n + 15) & ~(int64_t)15;
    if (kn > *packed) {
        const int64_t k0 = *packed / 16 * 16;
        pack_keys_from(K, HD, hd, k0, kn, (kn + 15) & ~(int64_t)15, kp, Kt);
        *packed = kn;
    }
    block_scores(Q, Kt, kp, M, causal, n, HD, hd, i0, qb, kn, S);
    /* each row's max, divisor (0 for a row with no allowed key) and NaN flag; rows past qb get
     * harmless values so the lse loop runs over whole vectors */
    float mrow[QB], inv[QB], lse[QB];
    int32_t bad[QB];
    int64_t kerow[QB];
    for (int r = 0; r < QB; r++) { mrow[r] = 0.0f; inv[r] = 1.0f; bad[r] = 0; kerow[r] = kn; }
    for (int64_t r = 0; r < qb; r++) {
        /* keys past ke are blocked for this row: probability 0, no exponential needed */
        float *s = S + r * kn;
        const int64_t ke = key_end(M, causal, n, i0 + r), kv = vec_end(ke, kn);
        int nan_seen;
        const float m = row_scale_max(s, M ? M + (i0 + r) * n : NULL, ke, kv, scale, &nan_seen);
        float l = 0.0f;
        if (m == tlm_from_bits((int32_t)0xff800000))
            memset(s, 0, sizeof(float) * (size_t)kn);
        else
            l = row_exp_sum(s, ke, kn, m);
        mrow[r] = m;
        kerow[r] = ke;
        bad[r] = nan_seen;
        inv[r] = l;
    }
    block_lse(mrow, inv, bad, lse);
    memcpy(L + i0, lse, sizeof(float) * (size_t)qb);
    /* O_blk (qb, hd) = P V[0..kn), each row divided by its sum (NaN for a row that met a NaN
     * score, 0 for a row with no allowed key) */
    if (hd % 16 == 0) {
        const int64_t nf = last_nonfinite(V, HD, hd, min_key_end(kerow, qb), kn);
        block_values(S, V, O + i0 * HD, HD, hd, qb, kn, kerow, nf, inv, bad);
        return 0;
    }
    if (tl_sgemm(S, kn, 1, V, HD, 1, O + i0 * HD, HD, qb, kn, hd, 0, 0)) return 1;
    for (int64_t r = 0; r < qb; r++) {
        float *o = O + (i0 + r) * HD, l = inv[r];
        for (int64_t p = 0; p < hd; p++) o[p] = bad[r] ? nan : l == 0.0f ? 0.0f : tlm_div(o[p], l);
    }
    return 0;
}

int tl_attn_blocked_forward(const float *Q, const float *K, const float *V, const float *M,
                            int causal, float *O, float *L, int64_t b, int64_t n, int64_t h,
                            int64_t hd) {
    const int64_t HD = h * hd, nqb = (n + QB - 1) / QB;
    const float scale = (float)(1.0 / sqrt((double)hd));
    int bad = 0;
#pragma omp parallel if (b * h * n * n * hd > TL_PAR_MIN) reduction(|| : bad)
    {
        float *S = malloc(sizeof(float) * (size_t)(QB * n + hd * ((n + 15) & ~(int64_t)15)));
        int64_t packed_bh = -1, packed = 0; /* the head whose keys [0, packed) S + QB n holds */
        bad = !S;
#pragma omp for schedule(static)
        for (int64_t t = 0; t < b * h * nqb; t++) {
            if (!S) continue;
            int64_t bh = t / nqb, bb = bh / h, hh = bh % h, i0 = (t % nqb) * QB;
            int64_t i1 = i0 + QB < n ? i0 + QB : n, off = bb * n * HD + hh * hd;
            if (bh != packed_bh) packed_bh = bh, packed = 0;
            bad |= forward_block(Q + off, K + off, V + off, M, causal, O + off, L + bh * n, n, HD,
                                 hd, i0, i1, scale, S, S + QB * n, &packed);
        }
        free(S);
    }
    return bad;
}

/* c + a b per lane with one rounding, a, b and c all native vectors (simd16.h's VNFMA with a
 * vector a) */
#if VN == 16
#define VNFMA_V(a, b, c) ((vn)_mm512_fmadd_ps((__m512)(a), (__m512)(b), (__m512)(c)))
#elif VN == 8
#define VNFMA_V(a, b, c) ((vn)_mm256_fmadd_ps((__m256)(a), (__m256)(b), (__m256)(c)))
#else
#define VNFMA_V(a, b, c) __extension__({                                                       \
    vn a_ = (a), b_ = (b), c_ = (c), r_;                                                        \
    for (int l_ = 0; l_ < VN; l_++) r_[l_] = __builtin_fmaf(a_[l_], b_[l_], c_[l_]);            \
    r_; })
#endif

/* D[r] = tlm_dot(dO row r, O row r) for the qb rows of a block (hd a multiple of 16; rows HD
 * apart): VN rows at a time, their features turned into VN-row vectors by register transposes
 * (VN x VN squares of native vectors), so each lane is one row's chain, one FMA per feature in
 * order from +0, as tlm_dot's */
static void block_rowdots(const float *A, const float *B, int64_t HD, int64_t hd, int64_t qb,
                          float *D) {
    int64_t r0 = 0;
    for (; r0 + VN <= qb; r0 += VN) {
        vn acc = {0};
        for (int64_t p0 = 0; p0 < hd; p0 += VN) {
            vn a[VN], b[VN];
            for (int i = 0; i < VN; i++) {
                a[i] = vnload(A + (r0 + i) * HD + p0);
                b[i] = vnload(B + (r0 + i) * HD + p0);
            }
            tl_transpose_vn(a);
            tl_transpose_vn(b);
            for (int p = 0; p < VN; p++) acc = VNFMA_V(a[p], b[p], acc);
        }
        vnstore(D + r0, acc);
    }
    for (; r0 < qb; r0++) D[r0] = tlm_dot(A + r0 * HD, 1, B + r0 * HD, 1, hd, 0.0f);
}

/* one (sample, head) of the backward: dQ, dK, dV rows of this head; S and dP are scratch of
 * QB * n floats each, Kt and Vt of hd * (n rounded up to 16) */
static int backward_head(const float *Q, const float *K, const float *V, const float *O,
                         const float *L, const float *dO, const float *M, int causal, float *dQ,
                         float *dK, float *dV, int64_t n, int64_t HD, int64_t hd, float scale,
                         float *S, float *dP, float *Kt, float *Vt) {
    const int64_t kp = (n + 15) & ~(int64_t)15;
    const int tiles = hd % 16 == 0; /* dQ, dK, dV by the tiles above, else by tl_sgemm */
    pack_keys(K, HD, hd, n, kp, Kt);
    pack_keys(V, HD, hd, n, kp, Vt);
    /* dK and dV rows [0, kz) hold sums; the tiles start the others from +0, tl_sgemm needs
     * them zeroed first */
    int64_t kz = 0;
    if (!tiles) {
        for (int64_t j = 0; j < n; j++) {
            memset(dK + j * HD, 0, sizeof(float) * (size_t)hd);
            memset(dV + j * HD, 0, sizeof(float) * (size_t)hd);
        }
        kz = n;
    }
    for (int64_t i0 = 0; i0 < n; i0 += QB) {
        const int64_t i1 = i0 + QB < n ? i0 + QB : n, qb = i1 - i0;
        const int64_t kn = block_keys(M, causal, n, i0, i1);
        int64_t kerow[QB];
        for (int r = 0; r < QB; r++) kerow[r] = kn;
        if (kn == 0) {
            for (int64_t i = i0; i < i1; i++) memset(dQ + i * HD, 0, sizeof(float) * (size_t)hd);
            continue;
        }
        block_scores(Q, Kt, kp, M, causal, n, HD, hd, i0, qb, kn, S);
        block_scores(dO, Vt, kp, M, causal, n, HD, hd, i0, qb, kn, dP);
        float Drow[QB];
        if (tiles)
            block_rowdots(dO + i0 * HD, O + i0 * HD, HD, hd, qb, Drow);
        else
            for (int64_t r = 0; r < qb; r++)
                Drow[r] = tlm_dot(dO + (i0 + r) * HD, 1, O + (i0 + r) * HD, 1, hd, 0.0f);
        for (int64_t r = 0; r < qb; r++) {
            const int64_t i = i0 + r;
            float *p = S + r * kn, *ds = dP + r * kn;
            const float lse = L[i], D = Drow[r];
            const int64_t ke = key_end(M, causal, n, i);
            kerow[r] = ke;
            row_probs(p, ds, M ? M + i * n : NULL, ke, kn, lse, D, scale);
        }
        /* dQ_blk = dS K[0..kn); dK[0..kn) += dS^T Q_blk; dV[0..kn) += P^T dO_blk */
        if (tiles) {
            block_values(dP, K, dQ + i0 * HD, HD, hd, qb, kn, kerow,
                         last_nonfinite(K, HD, hd, min_key_end(kerow, qb), kn), NULL, NULL);
            const int64_t rf = first_full_row(kerow, qb, kn);
            block_keys_acc(dP, Q + i0 * HD, dK, HD, hd, qb, kn, kerow,
                           first_nonfinite(Q + i0 * HD, HD, hd, rf), kz);
            block_keys_acc(S, dO + i0 * HD, dV, HD, hd, qb, kn, kerow,
                           first_nonfinite(dO + i0 * HD, HD, hd, rf), kz);
            kz = kn > kz ? kn : kz;
            continue;
        }
        if (tl_sgemm(dP, kn, 1, K, HD, 1, dQ + i0 * HD, HD, qb, kn, hd, 0, 0)) return 1;
        if (tl_sgemm(dP, 1, kn, Q + i0 * HD, HD, 1, dK, HD, kn, qb, hd, 1, 0)) return 1;
        if (tl_sgemm(S, 1, kn, dO + i0 * HD, HD, 1, dV, HD, kn, qb, hd, 1, 0)) return 1;
    }
    for (int64_t j = kz; j < n; j++) { /* keys no query block reached */
        memset(dK + j * HD, 0, sizeof(float) * (size_t)hd);
        memset(dV + j * HD, 0, sizeof(float) * (size_t)hd);
    }
    return 0;
}

int tl_attn_blocked_backward(const float *Q, const float *K, const float *V, const float *O,
                             const float *L, const float *dO, const float *M, int causal,
                             float *dQ, float *dK, float *dV, int64_t b, int64_t n, int64_t h,
                             int64_t hd) {
    const int64_t HD = h * hd;
    const float scale = (float)(1.0 / sqrt((double)hd));
    int bad = 0;
#pragma omp parallel if (b * h * n * n * hd > TL_PAR_MIN) reduction(|| : bad)
    {
        const int64_t kt = hd * ((n + 15) & ~(int64_t)15);
        float *S = malloc(sizeof(float) * (size_t)(2 * QB * n + 2 * kt));
        bad = !S;
#pragma omp for schedule(static)
        for (int64_t bh = 0; bh < b * h; bh++) {
            if (!S) continue;
            int64_t off = (bh / h) * n * HD + (bh % h) * hd;
            bad |= backward_head(Q + off, K + off, V + off, O + off, L + bh * n, dO + off, M, causal,
                                 dQ + off, dK + off, dV + off, n, HD, hd, scale, S, S + QB * n,
                                 S + 2 * QB * n, S + 2 * QB * n + kt);
        }
        free(S);
    }
    return bad;
}
