/* tl_math.h: torchlean's canonical float32 arithmetic, written once for both libraries.
 *
 * Exact mode promises that the stub and CUDA give the same bits. That holds only when both
 * evaluate the same sequence of IEEE-rounded operations, so this header defines every
 * operation an exact kernel may use as `static inline` code compiled into the stub (host C) and
 * into CUDA device code. The rules, also listed in README "Reproducibility levels":
 *
 *  1. Elementary operations are IEEE float32 with round-to-nearest-even: tlm_add, tlm_sub,
 *     tlm_mul, tlm_div, tlm_sqrt, and tlm_fma (one rounding of a*b+c); a few IEEE double
 *     operations (tlm_dadd, tlm_ddiv, tlm_d2f) where a function needs one unrounded sum. Both libraries compile
 *     with contraction off (-ffp-contract=off, nvcc --fmad=false) and device code names the
 *     rounding (__fmul_rn, __fdiv_rn, ...) so no compiler can fuse or approximate.
 *  2. Transcendental functions are the explicit polynomial code below: no libm, no CUDA
 *     intrinsics. They use plain rounded products and sums, no FMA, so a machine without FMA
 *     hardware computes the same bits at full speed. Each is within 2 ulp of the true value over
 *     all float32 inputs (tests/test_exact_math.py measures it); gelu follows the registry's
 *     stagewise formula instead (see tlm_gelu).
 *  3. A dot product is a sequential FMA in k order: acc = fma(a[k], b[k], acc) for k = 0..K-1,
 *     acc starting at 0 (or at a stated initial value such as a bias). This is the GEMM rule.
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
 */
#ifndef TL_MATH_H
#define TL_MATH_H

#include <stdint.h>
#if !defined(__CUDA_ARCH__)
#include <string.h>
#endif

#if defined(__CUDACC__)
#define TLM_HD __host__ __device__ __forceinline__ static
#else
#define TLM_HD static inline
#endif

#define TLM_CHUNK 256      /* rule 4: values summed sequentially before the tree */
#define TLM_ATTN_TILE 64   /* rule 5: keys per online-softmax tile */

/* ---- rule 1: IEEE-rounded elementary operations ---- */
#if defined(__CUDA_ARCH__)
TLM_HD float tlm_add(float a, float b) { return __fadd_rn(a, b); }
TLM_HD float tlm_sub(float a, float b) { return __fsub_rn(a, b); }
TLM_HD float tlm_mul(float a, float b) { return __fmul_rn(a, b); }
TLM_HD float tlm_div(float a, float b) { return __fdiv_rn(a, b); }
TLM_HD float tlm_sqrt(float a) { return __fsqrt_rn(a); }
TLM_HD float tlm_fma(float a, float b, float c) { return __fmaf_rn(a, b, c); }
TLM_HD float tlm_from_bits(int32_t b) { return __int_as_float(b); }
TLM_HD int32_t tlm_to_bits(float f) { return __float_as_int(f); }
TLM_HD double tlm_dadd(double a, double b) { return __dadd_rn(a, b); }
TLM_HD double tlm_ddiv(double a, double b) { return __ddiv_rn(a, b); }
TLM_HD float tlm_d2f(double a) { return __double2float_rn(a); }
TLM_HD double tlm_pow2d(int32_t k) { return __longlong_as_double((long long)(1023 + k) << 52); }
#else
TLM_HD float tlm_add(float a, float b) { return a + b; }
TLM_HD float tlm_sub(float a, float b) { return a - b; }
TLM_HD float tlm_mul(float a, float b) { return a * b; }
TLM_HD float tlm_div(float a, float b) { return a / b; }
TLM_HD float tlm_sqrt(float a) { return __builtin_sqrtf(a); }   /* IEEE sqrt instruction */
TLM_HD float tlm_fma(float a, float b, float c) { return __builtin_fmaf(a, b, c); }
TLM_HD float tlm_from_bits(int32_t b) { float f; memcpy(&f, &b, sizeof f); return f; }
TLM_HD int32_t tlm_to_bits(float f) { int32_t b; memcpy(&b, &f, sizeof b); return b; }
TLM_HD double tlm_dadd(double a, double b) { return a + b; }
TLM_HD double tlm_ddiv(double a, double b) { return a / b; }
TLM_HD float tlm_d2f(double a) { return (float)a; }
TLM_HD double tlm_pow2d(int32_t k) { int64_t b = (int64_t)(1023 + k) << 52; double d; memcpy(&d, &b, sizeof d); return d; }
#endif

/* sign-bit operations: exact, never rounded */
TLM_HD float tlm_abs(float x) { return tlm_from_bits(tlm_to_bits(x) & 0x7fffffff); }
TLM_HD float tlm_copysign(float mag, float sgn) {
    return tlm_from_bits((tlm_to_bits(mag) & 0x7fffffff) | (tlm_to_bits(sgn) & (int32_t)0x80000000));
}
TLM_HD float tlm_rsqrt(float x) { return tlm_div(1.0f, tlm_sqrt(x)); }

/* ---- rule 2: transcendental functions ---- */

/* e^x, max error 1 ulp. k = round(x / ln2), r = x - k ln2 (Cody-Waite: ln2 = C1 + C2 with C1 of
 * 9 bits, so k C1 and x - k C1 are exact), e^r = 1 + r + r^2 P(r) on |r| <= ln2 / 2 (Cephes
 * expf minimax polynomial), then e^x = e^r 2^k1 2^k2 with k = k1 + k2 built from exponent bits;
 * the two steps keep each factor normal, so subnormal results round once and overflow gives
 * +inf. x is clamped to [-104, 89] first (e^-104 rounds to 0, e^89 overflows); NaN gives NaN.
 * Branch-free, so stub loops vectorise. */
/* The reduction and polynomial of tlm_exp: e^x = 2^k (1 + t) for x clamped to [-104, 89], t
 * not yet added to 1 (tlm_sigmoid keeps that sum unrounded). */
TLM_HD float tlm_exp_parts(float x, int32_t *k) {
    const float log2e = 1.44269504088896341f, c1 = 0.693359375f, c2 = -2.12194440e-4f;
    const float shifter = 12582912.0f; /* 1.5 * 2^23: adding it rounds to an integer */
    float xc = x < 89.0f ? x : 89.0f;  /* NaN -> 89: callers fix NaN themselves */
    xc = xc > -104.0f ? xc : -104.0f;
    float kf = tlm_sub(tlm_add(tlm_mul(xc, log2e), shifter), shifter); /* |kf| <= 151 */
    float r = tlm_sub(xc, tlm_mul(kf, c1));
    r = tlm_sub(r, tlm_mul(kf, c2));
    float p = 1.9875691500e-4f;
    p = tlm_add(tlm_mul(p, r), 1.3981999507e-3f);
    p = tlm_add(tlm_mul(p, r), 8.3334519073e-3f);
    p = tlm_add(tlm_mul(p, r), 4.1665795894e-2f);
    p = tlm_add(tlm_mul(p, r), 1.6666665459e-1f);
    p = tlm_add(tlm_mul(p, r), 5.0000001201e-1f);
    *k = (int32_t)kf;
    return tlm_add(r, tlm_mul(tlm_mul(r, r), p));
}

TLM_HD float tlm_exp(float x) {
    int32_t k;
    float y = tlm_add(1.0f, tlm_exp_parts(x, &k));
    int32_t k1 = k >> 1, k2 = k - k1; /* each in [-75, 64]: normal scales */
    y = tlm_mul(y, tlm_from_bits((k1 + 127) << 23));
    y = tlm_mul(y, tlm_from_bits((k2 + 127) << 23));
    return x != x ? tlm_add(x, x) : y;
}

/* log(1 + f) for f in [sqrt(1/2) - 1, sqrt(2) - 1]: f - f^2/2 + f^3 P(f), P a degree-8
 * least-squares fit on Chebyshev nodes (relative error 4e-9 of the result). */
TLM_HD float tlm_log1p_reduced(float f) {
    float z = tlm_mul(f, f);
    float p = 7.149753720e-02f;
    p = tlm_add(tlm_mul(p, f), -1.157120094e-01f);
    p = tlm_add(tlm_mul(p, f), 1.166151091e-01f);
    p = tlm_add(tlm_mul(p, f), -1.241105050e-01f);
    p = tlm_add(tlm_mul(p, f), 1.424993724e-01f);
    p = tlm_add(tlm_mul(p, f), -1.666848063e-01f);
    p = tlm_add(tlm_mul(p, f), 2.000070810e-01f);
    p = tlm_add(tlm_mul(p, f), -2.499998957e-01f);
    p = tlm_add(tlm_mul(p, f), 3.333333135e-01f);
    float tail = tlm_sub(tlm_mul(tlm_mul(z, f), p), tlm_mul(0.5f, z));
    return tlm_add(f, tail);
}

/* Split x > 0 (finite) as m 2^e with m in [sqrt(1/2), sqrt(2)); returns m - 1 (exact). */
TLM_HD float tlm_log_split(float x, float *e_out) {
    int32_t sub = x < 1.17549435e-38f;                     /* subnormal: scale by 2^23 first */
    float xs = sub ? tlm_mul(x, 8388608.0f) : x;
    int32_t b = tlm_to_bits(xs);
    int32_t e = ((b >> 23) & 0xff) - 126 - (sub ? 23 : 0); /* xs = m' 2^e, m' in [0.5, 1) */
    float m = tlm_from_bits((b & 0x007fffff) | 0x3f000000);
    int32_t lowm = m < 0.70710678118654752f;
    e -= lowm;
    *e_out = (float)e;
    return lowm ? tlm_sub(tlm_add(m, m), 1.0f) : tlm_sub(m, 1.0f); /* Sterbenz: exact */
}

/* natural log, max error 1 ulp: log(m) + e ln2 with ln2 = C1 + C2 (C1 of 9 bits, e C1 exact).
 * log(+-0) = -inf, log(x < 0) = NaN, log(+inf) = +inf, NaN gives NaN. */
TLM_HD float tlm_log(float x) {
    float e, f = tlm_log_split(x > 0.0f && x <= 3.40282347e38f ? x : 1.0f, &e);
    float y = tlm_add(tlm_log1p_reduced(f), tlm_mul(e, -2.12194440e-4f));
    y = tlm_add(y, tlm_mul(e, 0.693359375f));
    if (x != x) return tlm_add(x, x);
    if (x == 0.0f) return tlm_from_bits((int32_t)0xff800000);  /* -inf */
    if (x < 0.0f) return tlm_from_bits(0x7fc00000);           /* NaN */
    if (x > 3.40282347e38f) return x;                          /* +inf */
    return y;
}

/* log(1 + x), max error 1 ulp. Inside [sqrt(1/2) - 1, sqrt(2) - 1] the reduced series is used
 * on x itself (1 + x is never rounded); outside, u = 1 + x rounded, log(u) plus c / u where
 * c = x - (u - 1) is the rounding error of u (exact). log1p(-1) = -inf, below it NaN. */
TLM_HD float tlm_log1p(float x) {
    int32_t inner = x >= -0.29289321881345248f && x <= 0.41421356237309505f;
    float u = tlm_add(1.0f, x);
    float c = x > 1.0f ? tlm_sub(1.0f, tlm_sub(u, x)) : tlm_sub(x, tlm_sub(u, 1.0f));
    float uu = inner ? 1.0f : (u > 0.0f && u <= 3.40282347e38f ? u : 1.0f);
    float e, f = tlm_log_split(uu, &e);
    float y = tlm_add(tlm_log1p_reduced(f), tlm_add(tlm_mul(e, -2.12194440e-4f), tlm_div(c, uu)));
    y = tlm_add(y, tlm_mul(e, 0.693359375f));
    if (inner) return tlm_log1p_reduced(x);  /* keeps -0 and tiny x exact */
    if (x != x) return tlm_add(x, x);
    if (x == -1.0f) return tlm_from_bits((int32_t)0xff800000);
    if (x < -1.0f) return tlm_from_bits(0x7fc00000);
    if (u > 3.40282347e38f) return u;        /* +inf */
    return y;
}

/* tanh, max error 1.4 ulp. On a = |x|: a < 0.625 uses a + a z P(z), z = a^2 (Cephes tanhf
 * minimax odd polynomial); above, 1 - 2 / (e^(2a) + 1), which saturates to exactly 1 once
 * e^(2a) is large (or +inf). The sign is copied from x (tanh(-0) = -0); NaN gives NaN. */
TLM_HD float tlm_tanh(float x) {
    float a = tlm_abs(x), z = tlm_mul(a, a);
    float p = -5.70498872745e-3f;
    p = tlm_add(tlm_mul(p, z), 2.06390887954e-2f);
    p = tlm_sub(tlm_mul(p, z), 5.37397155531e-2f);
    p = tlm_add(tlm_mul(p, z), 1.33314422036e-1f);
    p = tlm_sub(tlm_mul(p, z), 3.33332819422e-1f);
    float small = tlm_add(a, tlm_mul(tlm_mul(a, z), p));
    float big = tlm_sub(1.0f, tlm_div(2.0f, tlm_add(tlm_exp(tlm_add(a, a)), 1.0f)));
    return tlm_copysign(a < 0.625f ? small : big, x);  /* NaN stays NaN through both */
}

/* 1 / (1 + e^-x), max error 1 ulp, overflow-safe. With e^-|x| = 2^k (1 + t) (k <= 0), in
 * double: n = 1 + t, P = 2^-k, D = P + n; sigmoid = P / D for x >= 0 and n / D below, rounded
 * to float32 once. Rounding e^-|x| to float first would cost up to 2.3 ulp. */
TLM_HD float tlm_sigmoid(float x) {
    int32_t k;
    float t = tlm_exp_parts(-tlm_abs(x), &k);
    double n = tlm_dadd(1.0, (double)t), p = tlm_pow2d(-k), d = tlm_dadd(p, n);
    float y = tlm_d2f(tlm_ddiv(x >= 0.0f ? p : n, d));
    return x != x ? tlm_add(x, x) : y;
}

/* log(1 + e^x) = max(x, 0) + log1p(e^-|x|), exact for large |x| */
TLM_HD float tlm_softplus(float x) {
    float y = tlm_add(x > 0.0f ? x : 0.0f, tlm_log1p(tlm_exp(-tlm_abs(x))));
    return x != x ? tlm_add(x, x) : y;
}

/* erf, max error 1 ulp. |x| < 1: x + x q(x^2) (degree-6 fit of erf(x)/x - 1); 1 <= |x| < 4:
 * 1 - erfc(|x|) with erfc a polynomial in |x| - 1.5 (degree 9) or |x| - 3 (degree 11), fitted on
 * Chebyshev nodes; |x| >= 4 gives 1. Odd: the sign is copied from x (erf(-0) = -0). */
TLM_HD float tlm_erf(float x) {
    float a = tlm_abs(x), z = tlm_mul(a, a);
    float q = 7.933493907e-05f;
    q = tlm_add(tlm_mul(q, z), -8.034846396e-04f);
    q = tlm_add(tlm_mul(q, z), 5.191218574e-03f);
    q = tlm_add(tlm_mul(q, z), -2.685539983e-02f);
    q = tlm_add(tlm_mul(q, z), 1.128362566e-01f);
    q = tlm_add(tlm_mul(q, z), -3.761262894e-01f);
    q = tlm_add(tlm_mul(q, z), 1.283791661e-01f);
    float small = tlm_add(a, tlm_mul(a, q));
    float t = tlm_sub(a, 1.5f);
    float m = -1.540411497e-03f;
    m = tlm_add(tlm_mul(m, t), 2.401930280e-03f);
    m = tlm_add(tlm_mul(m, t), 4.701163620e-03f);
    m = tlm_add(tlm_mul(m, t), -1.933342963e-02f);
    m = tlm_add(tlm_mul(m, t), 1.487084292e-02f);
    m = tlm_add(tlm_mul(m, t), 4.459944740e-02f);
    m = tlm_add(tlm_mul(m, t), -1.387522072e-01f);
    m = tlm_add(tlm_mul(m, t), 1.783954203e-01f);
    m = tlm_add(tlm_mul(m, t), -1.189302877e-01f);
    m = tlm_add(tlm_mul(m, t), 3.389485180e-02f);
    float s = tlm_sub(a, 3.0f);
    float r = 9.467147720e-06f;
    r = tlm_add(tlm_mul(r, s), -2.211729043e-05f);
    r = tlm_add(tlm_mul(r, s), -1.189712657e-05f);
    r = tlm_add(tlm_mul(r, s), 1.411225967e-04f);
    r = tlm_add(tlm_mul(r, s), -3.918769071e-04f);
    r = tlm_add(tlm_mul(r, s), 7.350007072e-04f);
    r = tlm_add(tlm_mul(r, s), -1.016149879e-03f);
    r = tlm_add(tlm_mul(r, s), 1.045075478e-03f);
    r = tlm_add(tlm_mul(r, s), -7.891516434e-04f);
    r = tlm_add(tlm_mul(r, s), 4.177030642e-04f);
    r = tlm_add(tlm_mul(r, s), -1.392511913e-04f);
    r = tlm_add(tlm_mul(r, s), 2.209125705e-05f);
    float erfc = a < 2.0f ? m : r;
    float y = a < 1.0f ? small : (a < 4.0f ? tlm_sub(1.0f, erfc) : 1.0f);
    y = tlm_copysign(y, x);
    return x != x ? tlm_add(x, x) : y;
}

/* GELU, tanh form, the registry's stagewise formula with every stage rounded:
 * cubic = ((c x) x) x, t = tanh(k (x + cubic)), y = (x (1 + t)) / 2. Not within 2 ulp of the
 * true function where 1 + t cancels (x below about -3): the error there is about one ulp of
 * |x| (the formula is the contract, as in the registry). x (1 + t) overflows for |x| > 2^127,
 * and gelu(-inf) = -inf * 0 = NaN, as the formula says. */
#define TLM_GELU_K 0.7978845608f
#define TLM_GELU_A 0.044715f
TLM_HD float tlm_gelu(float x) {
    float cubic = tlm_mul(tlm_mul(tlm_mul(TLM_GELU_A, x), x), x);
    float t = tlm_tanh(tlm_mul(TLM_GELU_K, tlm_add(x, cubic)));
    return tlm_mul(tlm_mul(x, tlm_add(1.0f, t)), 0.5f);
}

/* d gelu / dx of the same formula, stagewise: (1 + t + (x (1 - t t)) (k (1 + (3c x) x))) / 2 */
TLM_HD float tlm_gelu_grad(float x) {
    float cubic = tlm_mul(tlm_mul(tlm_mul(TLM_GELU_A, x), x), x);
    float t = tlm_tanh(tlm_mul(TLM_GELU_K, tlm_add(x, cubic)));
    float du = tlm_mul(TLM_GELU_K, tlm_add(1.0f, tlm_mul(tlm_mul(3.0f * TLM_GELU_A, x), x)));
    float dt = tlm_mul(tlm_mul(x, tlm_sub(1.0f, tlm_mul(t, t))), du);
    return tlm_mul(tlm_add(tlm_add(1.0f, t), dt), 0.5f);
}

/* ---- rule 3: a dot product is a sequential FMA in k order ---- */
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


/* ==== additions: sin and cos of 2 pi u (Box-Muller's angle), and an exact integer power ====
 * Added after the functions above without changing their bits. */

/* sin(2 pi s) and cos(2 pi s) for |s| <= 1/8, s exact: s S(s^2) and 1 + s^2 C(s^2), degree-4
 * least-squares fits (Chebyshev nodes, relative weights) of sin(2 pi s) / s and
 * (cos(2 pi s) - 1) / s^2 in z = s^2, Horner in plain rounded operations. */
TLM_HD float tlm_sin_2pi_reduced(float s) {
    float z = tlm_mul(s, s);
    float p = 4.148257446e+01f;
    p = tlm_add(tlm_mul(p, z), -7.669820404e+01f);
    p = tlm_add(tlm_mul(p, z), 8.160520935e+01f);
    p = tlm_add(tlm_mul(p, z), -4.134170151e+01f);
    /* 2 pi = 6.283185482f - 1.7484555e-7: the low part joins the polynomial tail */
    return tlm_add(tlm_mul(s, 6.283185482e+00f), tlm_mul(s, tlm_add(-1.748455531e-07f, tlm_mul(z, p))));
}
TLM_HD float tlm_cos_2pi_reduced(float s) {
    float z = tlm_mul(s, s);
    float q = -2.606243134e+01f;
    q = tlm_add(tlm_mul(q, z), 6.023838043e+01f);
    q = tlm_add(tlm_mul(q, z), -8.545677185e+01f);
    q = tlm_add(tlm_mul(q, z), 6.493939209e+01f);
    q = tlm_add(tlm_mul(q, z), -1.973920822e+01f);
    return tlm_add(1.0f, tlm_mul(z, q));
}

/* Reduce u exactly: r = u - round(u) in [-1/2, 1/2] (|u| >= 2^23 is an integer: r = 0), then
 * t = |r| = q/4 + s with q = round(4t) in {0, 1, 2} and |s| <= 1/8 (both steps are exact
 * subtractions). Returns s, the quadrant q and the sign of r (1 or -1) for sin. */
TLM_HD float tlm_reduce_2pi(float u, int32_t *q, float *rsign) {
    const float shifter = 8388608.0f; /* 2^23: adding it to 0 <= a < 2^23 rounds a to an integer */
    float a = tlm_abs(u);
    float r = a < shifter ? tlm_sub(a, tlm_sub(tlm_add(a, shifter), shifter)) : 0.0f;
    float t = tlm_abs(r);
    float qf = tlm_sub(tlm_add(tlm_mul(t, 4.0f), shifter), shifter);
    *q = (int32_t)qf;
    *rsign = tlm_copysign(1.0f, tlm_mul(r, u));  /* sign of r times sign of u (odd sin) */
    return tlm_sub(t, tlm_mul(qf, 0.25f));
}

/* cos(2 pi u), max error 1.6 ulp (tests/test_exact_math.py): exact reduction, then
 * cos(2 pi (q/4 + s)) = cos, -sin, -cos of 2 pi s for q = 0, 1, 2. Exact at multiples of 1/4
 * (cos(pi/2) gives -0); +-inf and NaN give NaN. */
TLM_HD float tlm_cos_2pi(float u) {
    int32_t q;
    float sg, s = tlm_reduce_2pi(u, &q, &sg);
    float c = tlm_cos_2pi_reduced(s), sn = tlm_sin_2pi_reduced(s);
    float y = q == 0 ? c : (q == 1 ? -sn : -c);
    return u - u != 0.0f ? tlm_from_bits(0x7fc00000) : y;   /* inf - inf and NaN are NaN */
}

/* sin(2 pi u), max error 1.6 ulp: sin(2 pi (q/4 + s)) = sin, cos, -sin of 2 pi s, with the sign
 * of r u (sin is odd twice over). +-inf and NaN give NaN. */
TLM_HD float tlm_sin_2pi(float u) {
    int32_t q;
    float sg, s = tlm_reduce_2pi(u, &q, &sg);
    float c = tlm_cos_2pi_reduced(s), sn = tlm_sin_2pi_reduced(s);
    float y = q == 0 ? sn : (q == 1 ? c : -sn);
    return u - u != 0.0f ? tlm_from_bits(0x7fc00000) : tlm_mul(sg, y);
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
