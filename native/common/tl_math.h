/* tl_math.h: torchlean's canonical float32 arithmetic, written once for both libraries.
 *
 * Exact mode promises that the stub and CUDA give the same bits. That holds only when both
 * evaluate the same sequence of IEEE-rounded operations, so this header defines every
 * operation an exact kernel may use as `static inline` code compiled into the stub (host C) and
 * into CUDA device code. The rules, also listed in README "Reproducibility levels":
 *
 *  1. Elementary operations are IEEE float32 with round-to-nearest-even: tlm_add, tlm_sub,
 *     tlm_mul, tlm_div, tlm_sqrt, and tlm_fma (one rounding of a*b+c); IEEE double operations
 *     (tlm_dadd, tlm_dmul, tlm_dfma, tlm_ddiv, tlm_d2f) inside rule 2. Both libraries compile
 *     with contraction off (-ffp-contract=off, nvcc --fmad=false) and device code names the
 *     rounding (__fmul_rn, __fdiv_rn, ...) so no compiler can fuse or approximate.
 *  2. Transcendental functions (exp, expm1, log, log1p, tanh, sigmoid, softplus, erf, sin and
 *     cos of 2 pi u) are correctly rounded: the float32 nearest the true value, ties to even,
 *     for every input (see "rule 2" below; `make check-math` proves it on all 2^32 inputs). No
 *     libm, no CUDA intrinsics; any correctly rounded library gives the same bits. gelu and the
 *     derivatives follow the registry's stagewise formulas over them, every stage rounded.
 *  3. A dot product is a sequential FMA in k order: acc = fma(a[k], b[k], acc) for k = 0..K-1,
 *     acc starting at 0 (or at a stated initial value such as a bias). The exact GEMM
 *     (tl_gemm_exact_f32; exact_version 7) runs the chain in float64 over chunks of
 *     TL_EXACT_KCHUNK k's: partial p_c is the double chain p = fma((double)a[k], (double)b[k], p)
 *     over k in [c TL_EXACT_KCHUNK, (c + 1) TL_EXACT_KCHUNK) in increasing order, p_0 from the
 *     initial value converted to double, every later p_c from 0; the output is
 *     (float)(((p_0 + p_1) + p_2) + ...): the partials left-folded in float64, one rounding to
 *     float32 (nearest even) per output. A float32 product is exact in float64, so each fma is
 *     the double add p + (double)a (double)b. CUDA runs the chains on the FP64 tensor cores
 *     (mma.sync .f64 computes each output as a float64 FMA chain in k order). tlm_dot and the
 *     unchunked chain of convolutions (tl_gemm_exact_chain_f32) stay float32 chains.
 *  4. A sum of n values: sequential adds within chunks of TLM_CHUNK (in index order, from the
 *     chunk's first value), then a fixed binary tree over the chunk partials: level by level,
 *     p[i] = p[2i] + p[2i+1], an odd last partial carried up unchanged. Neither the thread
 *     count nor the device changes the tree.
 *  5. Online softmax (attention): keys in tiles of TLM_ATTN_TILE, processed in order. Per query
 *     row the state is (m, l, acc[]), starting at (-inf, 0, 0). For each tile: scores s_j are
 *     the rule-3 dot q.k_j times the scale (one tlm_mul); m_new = max(m, max_j s_j) (j order);
 *     alpha = m == m_new ? 1 : exp(m - m_new); p_j = exp(s_j - m_new); l = l*alpha + t where t
 *     is the sequential sum of the tile's p_j; acc[d] = acc[d]*alpha, then
 *     acc[d] = fma(p_j, v_j[d], acc[d]) in j order. The output is acc[d] / l. See tlm_osm_*.
 *
 * The rules live in three headers, each on the one before: tl_math_ieee.h (rule 1),
 * tl_math_transcendental.h (rule 2, but sin and cos of 2 pi u, below) and this one (rules 3 to
 * 5 and the steps built on them). Every user includes this header.
 */
#ifndef TL_MATH_H
#define TL_MATH_H

#include "tl_math_transcendental.h"

#define TLM_CHUNK 256      /* rule 4: values summed sequentially before the tree */
#define TLM_ATTN_TILE 64   /* rule 5: keys per online-softmax tile */

/* ---- rule 3: a dot product is a sequential FMA in k order ---- */

/* The exact GEMM's k chunk (rule 3 above; exact_version 3, float64 chains from version 7):
 * chunk partials are independent chains, so CUDA may split K across blocks and the CPU may block
 * k. Every exact GEMM kernel's k tiles must divide it. */
#define TL_EXACT_KCHUNK 256

TLM_HD float tlm_dot(const float *a, int64_t sa, const float *b, int64_t sb, int64_t k, float acc) {
    for (int64_t i = 0; i < k; i++) acc = tlm_fma(a[i * sa], b[i * sb], acc);
    return acc;
}

/* ---- rule 4: chunked sequential sums, then a fixed binary tree ---- */

/* sequential sum of x[0..n) (n <= TLM_CHUNK), from x[0]; 0 when n == 0 */
TLM_HD float tlm_chunk_sum(const float *x, int64_t stride, int64_t n) {
    float s = n > 0 ? x[0] : 0.0f;
    for (int64_t i = 1; i < n; i++) s = tlm_add(s, x[i * stride]);
    return s;
}

/* The binary tree over p[0..count), in place (p[0] holds the result): level by level,
 * p[i] = p[2i] + p[2i+1], an odd last partial carried up unchanged. */
TLM_HD float tlm_tree_sum(float *p, int64_t count) {
    if (count <= 0) return 0.0f;
    while (count > 1) {
        int64_t half = count / 2;
        for (int64_t i = 0; i < half; i++) p[i] = tlm_add(p[2 * i], p[2 * i + 1]);
        if (count & 1) p[half] = p[count - 1];
        count = half + (count & 1);
    }
    return p[0];
}

/* Rule 4 over x[0..n) in one pass with a small stack instead of a partials array: merging two
 * partials of equal height as soon as both exist, then folding the stack from the top, builds
 * the same tree as tlm_tree_sum (tests/test_exact_math.py checks it against the level form). */
TLM_HD float tlm_sum(const float *x, int64_t stride, int64_t n) {
    float val[64];
    int height[64], top = 0;
    for (int64_t c = 0; c < n; c += TLM_CHUNK) {
        int64_t len = n - c < TLM_CHUNK ? n - c : TLM_CHUNK;
        float s = tlm_chunk_sum(x + c * stride, stride, len);
        int h = 0;
        while (top > 0 && height[top - 1] == h) { s = tlm_add(val[--top], s); h++; }
        val[top] = s; height[top] = h; top++;
    }
    if (top == 0) return 0.0f;
    float s = val[--top];
    while (top > 0) s = tlm_add(val[--top], s);
    return s;
}

/* ---- rule 5: the online-softmax tile rule ---- */
typedef struct tlm_osm { float m, l; } tlm_osm;   /* running max and running denominator */

TLM_HD void tlm_osm_init(tlm_osm *st) {
    st->m = tlm_from_bits((int32_t)0xff800000);  /* -inf */
    st->l = 0.0f;
}

/* Fold one tile of n scores (already dot * scale): s[j] becomes p_j = exp(s_j - m_new) and the
 * return value is alpha, by which the caller multiplies acc[] before accumulating
 * acc[d] = fma(p_j, v_j[d], acc[d]) in j order. A fully masked row so far (m_new = -inf) gives
 * p_j = 0 and alpha = 1. */
TLM_HD float tlm_osm_tile(tlm_osm *st, float *s, int n) {
    float m_new = st->m;
    for (int j = 0; j < n; j++) m_new = s[j] > m_new ? s[j] : m_new;
    int none = m_new == tlm_from_bits((int32_t)0xff800000);
    float alpha = (st->m == m_new) ? 1.0f : tlm_exp(tlm_sub(st->m, m_new));
    float t = 0.0f;
    for (int j = 0; j < n; j++) {
        s[j] = none ? 0.0f : tlm_exp(tlm_sub(s[j], m_new));
        t = j == 0 ? s[0] : tlm_add(t, s[j]);
    }
    st->l = tlm_add(tlm_mul(st->l, alpha), t);
    st->m = m_new;
    return alpha;
}

/* the row's output: acc[d] / l (l == 0, a fully masked row, gives 0) */
TLM_HD float tlm_osm_finish(const tlm_osm *st, float acc) {
    return st->l == 0.0f ? 0.0f : tlm_div(acc, st->l);
}

/* ==================================================================================== */
/* ---- attention, spectral: shared steps of the attention backward, DFT twiddles ---- */

/* Attention scores and their backward, one (query i, key j) pair (rule 5 and its backward):
 * s = dot(q_i, k_j) (rule 3) times scale; p = exp(s - lse_i) recomputes the probability from
 * the forward's log-sum-exp; ds = (p (dp - D_i)) scale with dp = dot(dO_i, v_j) (rule 3) and
 * D_i = dot(dO_i, O_i) (rule 3). Both libraries call these, so every pass that needs p or ds
 * (dQ over keys, dK and dV over queries) gets the same bits. */
TLM_HD float tlm_attn_score(const float *q, const float *k, int64_t hd, float scale) {
    return tlm_mul(tlm_dot(q, 1, k, 1, hd, 0.0f), scale);
}
TLM_HD float tlm_attn_prob(float s, float lse) { return tlm_exp(tlm_sub(s, lse)); }
/* a row's saved log-sum-exp from its final running max m and denominator l: NaN when a NaN
 * score was seen, 0 for a fully masked row (l = 0), else m + log(l) */
TLM_HD float tlm_attn_lse(float m, float l, int nan_seen) {
    return nan_seen ? tlm_from_bits(0x7fc00000) : l == 0.0f ? 0.0f : tlm_add(m, tlm_log(l));
}
TLM_HD float tlm_attn_dscore(float p, float dp, float d, float scale) {
    return tlm_mul(tlm_mul(p, tlm_sub(dp, d)), scale);
}

/* IEEE double product for the twiddle series (device code names the rounding) */
#if defined(__CUDA_ARCH__)
TLM_HD double tlm_tw_dmul(double a, double b) { return __dmul_rn(a, b); }
#else
TLM_HD double tlm_tw_dmul(double a, double b) { return a * b; }
#endif

/* DFT twiddles c = cos(2 pi r / n), s = sin(2 pi r / n) for integer 0 <= r < n, in double,
 * from IEEE operations only (no libm, no sincospi), so both libraries build the same table.
 * Integer octant reduction: 8r = o n + u, the angle is o pi/4 + (pi/4) u/n; odd octants use
 * the complement (pi/4)(n - u)/n, so the series argument x lies in [0, pi/4]; Taylor series
 * of sin to x^21 and cos to x^22 (truncation below 1e-21) in Horner form. Exact at the
 * quarter points (0, pi/2, pi, 3 pi/2). Error a few double ulp: far below float32. */
TLM_HD void tlm_twiddle(int64_t r, int64_t n, double *c_out, double *s_out) {
    if ((4 * r) % n == 0) {
        int64_t q = (4 * r) / n;
        *c_out = q == 0 ? 1.0 : q == 2 ? -1.0 : 0.0;
        *s_out = q == 1 ? 1.0 : q == 3 ? -1.0 : 0.0;
        return;
    }
    int64_t o = (8 * r) / n, u = 8 * r - o * n;
    if (o & 1) u = n - u;
    double x = tlm_tw_dmul(0.7853981633974483, tlm_ddiv((double)u, (double)n));
    double z = tlm_tw_dmul(x, x);
    double sp = 1.9572941063391263e-20;                 /* 1/21! */
    sp = tlm_dadd(tlm_tw_dmul(sp, z), -8.22063524662433e-18);
    sp = tlm_dadd(tlm_tw_dmul(sp, z), 2.8114572543455206e-15);
    sp = tlm_dadd(tlm_tw_dmul(sp, z), -7.647163731819816e-13);
    sp = tlm_dadd(tlm_tw_dmul(sp, z), 1.6059043836821613e-10);
    sp = tlm_dadd(tlm_tw_dmul(sp, z), -2.505210838544172e-08);
    sp = tlm_dadd(tlm_tw_dmul(sp, z), 2.7557319223985893e-06);
    sp = tlm_dadd(tlm_tw_dmul(sp, z), -0.0001984126984126984);
    sp = tlm_dadd(tlm_tw_dmul(sp, z), 0.008333333333333333);
    sp = tlm_dadd(tlm_tw_dmul(sp, z), -0.16666666666666666);
    double sn = tlm_dadd(x, tlm_tw_dmul(tlm_tw_dmul(x, z), sp));
    double cp = -8.896791392450574e-22;                 /* -1/22! */
    cp = tlm_dadd(tlm_tw_dmul(cp, z), 4.110317623312165e-19);
    cp = tlm_dadd(tlm_tw_dmul(cp, z), -1.5619206968586225e-16);
    cp = tlm_dadd(tlm_tw_dmul(cp, z), 4.779477332387385e-14);
    cp = tlm_dadd(tlm_tw_dmul(cp, z), -1.1470745597729725e-11);
    cp = tlm_dadd(tlm_tw_dmul(cp, z), 2.08767569878681e-09);
    cp = tlm_dadd(tlm_tw_dmul(cp, z), -2.755731922398589e-07);
    cp = tlm_dadd(tlm_tw_dmul(cp, z), 2.48015873015873e-05);
    cp = tlm_dadd(tlm_tw_dmul(cp, z), -0.001388888888888889);
    cp = tlm_dadd(tlm_tw_dmul(cp, z), 0.041666666666666664);
    cp = tlm_dadd(tlm_tw_dmul(cp, z), -0.5);
    double cs = tlm_dadd(1.0, tlm_tw_dmul(z, cp));
    /* angle = o pi/4 + x (even o) or (o + 1) pi/4 - x (odd o) */
    double c, s;
    switch (o) {
    case 0: c = cs; s = sn; break;
    case 1: c = sn; s = cs; break;
    case 2: c = -sn; s = cs; break;
    case 3: c = -cs; s = sn; break;
    case 4: c = -cs; s = -sn; break;
    case 5: c = -sn; s = -cs; break;
    case 6: c = sn; s = -cs; break;
    default: c = cs; s = -sn; break;
    }
    *c_out = c;
    *s_out = s;
}


/* ==== added for linalg / conv_pool: rule 4 fed one value at a time ====
 * For sums whose values are computed on the fly (squared differences, strided columns, window
 * taps): pushing x[0], x[1], ... gives the bits of tlm_sum(x, 1, n). After c whole chunks the
 * stack holds one partial per set bit of c (a binary counter), which is how tlm_sum merges. */
typedef struct tlm_sumacc {
    float part[64];  /* completed partials, oldest (tallest) first */
    int top;
    int len;         /* values in the current chunk */
    int64_t chunks;  /* chunks completed */
    float cur;       /* the current chunk's running sum */
} tlm_sumacc;

TLM_HD void tlm_sumacc_init(tlm_sumacc *a) { a->top = 0; a->len = 0; a->chunks = 0; a->cur = 0.0f; }

TLM_HD void tlm_sumacc_close_chunk(tlm_sumacc *a) {
    float s = a->cur;
    for (int64_t c = a->chunks; c & 1; c >>= 1) s = tlm_add(a->part[--a->top], s);
    a->part[a->top++] = s;
    a->chunks++;
    a->len = 0;
}

TLM_HD void tlm_sumacc_push(tlm_sumacc *a, float x) {
    a->cur = a->len == 0 ? x : tlm_add(a->cur, x);
    if (++a->len == TLM_CHUNK) tlm_sumacc_close_chunk(a);
}

/* the rule-4 sum of everything pushed (0 when nothing was) */
TLM_HD float tlm_sumacc_finish(tlm_sumacc *a) {
    if (a->chunks == 0) return a->len > 0 ? a->cur : 0.0f;  /* one chunk: its sequential sum */
    if (a->len > 0) tlm_sumacc_close_chunk(a);
    if (a->top == 0) return 0.0f;
    float s = a->part[--a->top];
    while (a->top > 0) s = tlm_add(a->part[--a->top], s);
    return s;
}
/* ==== end of the linalg / conv_pool additions ==== */

/* ==== additions: rule 4 fed one value at a time (reductions, softmax, norms) ==== */

/* Rule 4 over a sequence whose values arrive in order (computed on the fly, or read through a
 * gather such as batchnorm's (sample, position) walk): tlm_sum4_add each value, then
 * tlm_sum4_result. The chunking and the stack of partials are those of tlm_sum, so the result
 * is the same tree as tlm_tree_sum over the chunk partials. */
typedef struct tlm_sum4 {
    float val[64];
    int height[64];
    int top;
    int fill;   /* values in the open chunk */
    float cur;  /* the open chunk's sequential sum */
} tlm_sum4;

TLM_HD void tlm_sum4_init(tlm_sum4 *a) { a->top = 0; a->fill = 0; a->cur = 0.0f; }

/* push one finished chunk partial, merging equal heights as tlm_sum does */
TLM_HD void tlm_sum4_push(tlm_sum4 *a, float s) {
    int h = 0;
    while (a->top > 0 && a->height[a->top - 1] == h) { s = tlm_add(a->val[--a->top], s); h++; }
    a->val[a->top] = s; a->height[a->top] = h; a->top++;
}

TLM_HD void tlm_sum4_add(tlm_sum4 *a, float v) {
    a->cur = a->fill ? tlm_add(a->cur, v) : v;
    if (++a->fill == TLM_CHUNK) { tlm_sum4_push(a, a->cur); a->fill = 0; }
}

/* the sum of everything added (0 for nothing); the accumulator is spent afterwards */
TLM_HD float tlm_sum4_result(tlm_sum4 *a) {
    if (a->fill) { tlm_sum4_push(a, a->cur); a->fill = 0; }
    if (a->top == 0) return 0.0f;
    float s = a->val[--a->top];
    while (a->top > 0) s = tlm_add(a->val[--a->top], s);
    return s;
}

/* The maximum step of the exact reductions: v replaces m when greater, so among equal values
 * (+0 and -0) the first wins; NaN never replaces (softmax's row max, whose NaN propagates through
 * the sum of exps instead). Associative over ordered segments (left = earlier), so a chunk tree
 * gives the sequential result. */
TLM_HD float tlm_max_first(float m, float v) { return v > m ? v : m; }


/* ==== sin and cos of 2 pi u (Box-Muller's angle), correctly rounded; an exact integer power === */

/* sin(2 pi s) = s (2 pi + z S(z)) and cos(2 pi s) = 1 - 2 pi^2 z + z^2 C(z), z = s^2 (exact),
 * for |s| <= 1/8, in plain double (2 pi and 2 pi^2 as hi + lo, the lo parts added in with the
 * small terms) */
TLM_HD_INLINE double tlm_sin_2pi_d(double s) {
    double z = tlm_dmul(s, s);
    double p = -0x1.6cc577dadd922p-1;
    p = tlm_dfma(p, z, 0x1.e8f036bcd3237p+1);
    p = tlm_dfma(p, z, -0x1.e3074d2614b2dp+3);
    p = tlm_dfma(p, z, 0x1.50783486facaap+5);
    p = tlm_dfma(p, z, -0x1.32d2cce62b872p+6);
    p = tlm_dfma(p, z, 0x1.466bc6775aae1p+6);
    p = tlm_dfma(p, z, -0x1.4abbce625be53p+5);
    return tlm_dfma(s, 0x1.921fb54442d18p+2, tlm_dmul(s, tlm_dfma(z, p, 0x1.1a62633145c07p-52)));
}
TLM_HD_INLINE double tlm_cos_2pi_d(double s) {
    double z = tlm_dmul(s, s);
    double p = -0x1.b38340f56931fp+0;
    p = tlm_dfma(p, z, 0x1.f9cfc07738157p+2);
    p = tlm_dfma(p, z, -0x1.a6d1f0ab7905cp+4);
    p = tlm_dfma(p, z, 0x1.e1f50688302c5p+5);
    p = tlm_dfma(p, z, -0x1.55d3c7e3cbd74p+6);
    p = tlm_dfma(p, z, 0x1.03c1f081b5ac4p+6);
    double small = tlm_dfma(tlm_dmul(z, z), p, tlm_dmul(-0x1.692b71366cc04p-50, z));
    return tlm_dfma(-0x1.3bd3cc9be45dep+4, z, tlm_dadd(1.0, small));
}

/* Reduce u exactly: r = u - round(u) in [-1/2, 1/2] (|u| >= 2^23 is an integer: r = 0), then
 * t = |r| = q/4 + s with q = round(4t) in {0, 1, 2} and |s| <= 1/8 (both steps are exact
 * subtractions). Returns s, the quadrant q and the sign of r (1 or -1) for sin. */
TLM_HD float tlm_reduce_2pi(float u, int32_t *q, float *rsign) {
    const float shifter = 8388608.0f; /* 2^23: adding it to 0 <= a < 2^23 rounds a to an integer */
    float a = tlm_abs(u);
    float r = tlm_sel(a < shifter, tlm_sub(a, tlm_sub(tlm_add(a, shifter), shifter)), 0.0f);
    float t = tlm_abs(r);
    float qf = tlm_sub(tlm_add(tlm_mul(t, 4.0f), shifter), shifter);
    *q = (int32_t)qf;
    *rsign = tlm_copysign(1.0f, tlm_mul(r, u));  /* sign of r times sign of u (odd sin) */
    return tlm_sub(t, tlm_mul(qf, 0.25f));
}

/* cos(2 pi u), correctly rounded: exact reduction, then cos(2 pi (q/4 + s)) = cos, -sin, -cos
 * of 2 pi s for q = 0, 1, 2. Exact at multiples of 1/4 (cos(pi/2) gives -0); +-inf and NaN
 * give NaN. */
TLM_HD_INLINE float tlm_cos_2pi(float u) {
    int32_t q;
    float sg, s = tlm_reduce_2pi(u, &q, &sg);
    double c = tlm_cos_2pi_d((double)s), sn = tlm_sin_2pi_d((double)s);
    float y = tlm_d2f(q == 0 ? c : (q == 1 ? -sn : -c));
    return tlm_sel(u - u != 0.0f, tlm_from_bits(0x7fc00000), y);   /* inf - inf and NaN */
}

/* sin(2 pi u), correctly rounded: sin(2 pi (q/4 + s)) = sin, cos, -sin of 2 pi s, with the sign
 * of r u (sin is odd twice over). +-inf and NaN give NaN. */
TLM_HD_INLINE float tlm_sin_2pi(float u) {
    int32_t q;
    float sg, s = tlm_reduce_2pi(u, &q, &sg);
    double c = tlm_cos_2pi_d((double)s), sn = tlm_sin_2pi_d((double)s);
    float y = tlm_mul(sg, tlm_d2f(q == 0 ? sn : (q == 1 ? c : -sn)));
    return tlm_sel(u - u != 0.0f, tlm_from_bits(0x7fc00000), y);
}

/* b^e for an integer e >= 0 by binary powering in IEEE double (square and multiply from the
 * low bit): a fixed sequence of rounded products, so every machine gets the same bits (libm's
 * pow may differ in the last place). Adam's bias corrections use it on the host. */
TLM_HD double tlm_powi_d(double b, int64_t e) {
    double r = 1.0, x = b;
    while (e > 0) {
        if (e & 1) r = r * x;
        x = x * x;
        e >>= 1;
    }
    return r;
}

#endif /* TL_MATH_H */
