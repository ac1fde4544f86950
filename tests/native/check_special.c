/* check_special.c: exhaustive check of the special functions' float32 results (the formulas
 * the ops run, native/common/formulas/pointwise_math.h) against independent references
 * (tests/native/cr_special_oracle.h: glibc double, then libquadmath near a rounding midpoint).
 *
 *     make build/check_special
 *     build/check_special erfc lgamma              # all 2^32 inputs (or the sign-bit-clear
 *                                                   # half where the formula applies the sign
 *                                                   # exactly: i0 i1 i0e i1e j0 j1 y0 y1,
 *                                                   # the K functions: NaN below 0)
 *     build/check_special --stride 997 erfc         # every 997th input (a quick look)
 *     build/check_special --from 0x37d4f000 --to 0x37d50fff digamma
 *                                                   # the bit patterns from .. to (inclusive;
 *                                                   # with --stride: every stride-th from --from)
 *
 * One line per function: inputs, mismatches (results that are not the correctly rounded value),
 * quad fallbacks, unresolved inputs (even quad within its error bound of a midpoint), the largest
 * error in ulps and, for J and Y, relative to the envelope max(|v|, sqrt(2 / (pi x))) (for Ai,
 * max(|v|, |x|^-1/4 / sqrt(pi)) below -1; below -2^64 Ai is compared with that envelope only, and
 * the line after says how many inputs that was); then up to 32 mismatches. The verdict line says "correctly rounded" only without mismatches and unresolved
 * inputs; exit status 1 otherwise. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include "formulas/pointwise_math.h"
#include "cr_special_oracle.h"

enum { F_ERFC, F_ERFCX, F_NDTR, F_LOG_NDTR, F_LGAMMA, F_DIGAMMA, F_ERFINV, F_NDTRI, F_I0, F_I0E,
       F_I1, F_I1E, F_J0, F_J1, F_Y0, F_Y1, F_K0, F_K1, F_K0E, F_K1E, F_AI, F_SJ0, F_COUNT };
static const char *const NAMES[] = {"erfc", "erfcx", "ndtr", "log_ndtr", "lgamma", "digamma",
                                    "erfinv", "ndtri", "i0", "i0e", "i1", "i1e", "bessel_j0",
                                    "bessel_j1", "bessel_y0", "bessel_y1", "modified_bessel_k0",
                                    "modified_bessel_k1", "scaled_modified_bessel_k0",
                                    "scaled_modified_bessel_k1", "airy_ai", "spherical_bessel_j0"};
/* sign-bit-clear half only: the formula takes |x| and applies the sign exactly (or NaN below 0).
 * erfinv: tls_erfinv works on |y| and negates exactly, tlf_erfinv copies x's sign onto that
 * (and onto +-inf at +-1, NaN beyond), so erfinv(-x) = -erfinv(x) bit for bit by construction */
static const int HALF[] = {0, 0, 0, 0, 0, 0, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0};
/* errors measured against an envelope (J, Y, and Ai on the negative axis): max_err/envelope */
static int has_env(int f) { return (f >= F_J0 && f <= F_Y1) || f == F_AI; }

static float ours(int f, float x) {
    switch (f) {
    case F_ERFC: return tlf_erfc(x);
    case F_ERFCX: return tlf_erfcx(x);
    case F_NDTR: return tlf_ndtr(x);
    case F_LOG_NDTR: return tlf_log_ndtr(x);
    case F_LGAMMA: return tlf_lgamma(x);
    case F_DIGAMMA: return tlf_digamma(x);
    case F_ERFINV: return tlf_erfinv(x);
    case F_NDTRI: return tlf_ndtri(x);
    case F_I0: return tlf_i0(x);
    case F_I0E: return tlf_i0e(x);
    case F_I1: return tlf_i1(x);
    case F_I1E: return tlf_i1e(x);
    case F_J0: return tlf_bessel_j0(x);
    case F_J1: return tlf_bessel_j1(x);
    case F_Y0: return tlf_bessel_y0(x);
    case F_Y1: return tlf_bessel_y1(x);
    case F_K0: return tlf_modified_bessel_k0(x);
    case F_K1: return tlf_modified_bessel_k1(x);
    case F_K0E: return tlf_scaled_modified_bessel_k0(x);
    case F_K1E: return tlf_scaled_modified_bessel_k1(x);
    case F_AI: return tlf_airy_ai(x);
    default: return tlf_spherical_bessel_j0(x);
    }
}
static cr_d ref_d(int f, double x) {
    switch (f) {
    case F_ERFC: return d_erfc(x);
    case F_ERFCX: return d_erfcx(x);
    case F_NDTR: return d_ndtr(x);
    case F_LOG_NDTR: return d_log_ndtr(x);
    case F_LGAMMA: return d_lgamma(x);
    case F_DIGAMMA: return d_digamma(x);
    case F_I0: return d_bessel_i(x, 0, 0);
    case F_I0E: return d_bessel_i(x, 0, 1);
    case F_I1: return d_bessel_i(x, 1, 0);
    case F_I1E: return d_bessel_i(x, 1, 1);
    case F_K0: case F_K1: case F_K0E: case F_K1E: return d_bessel_k(x, (f - F_K0) & 1, f >= F_K0E);
    case F_AI: return d_airy_ai(x);
    case F_SJ0: return d_sph_j0(x);
    default: return d_bessel_jy(x, f - F_J0);
    }
}
static cr_q ref_q(int f, double x) {
    switch (f) {
    case F_ERFC: return q_erfc(x);
    case F_ERFCX: return q_erfcx(x);
    case F_NDTR: return q_ndtr(x);
    case F_LOG_NDTR: return q_log_ndtr(x);
    case F_LGAMMA: return q_lgamma(x);
    case F_DIGAMMA: return q_digamma(x);
    case F_I0: return q_bessel_i(x, 0, 0);
    case F_I0E: return q_bessel_i(x, 0, 1);
    case F_I1: return q_bessel_i(x, 1, 0);
    case F_I1E: return q_bessel_i(x, 1, 1);
    case F_K0: case F_K1: case F_K0E: case F_K1E: return q_bessel_k(x, (f - F_K0) & 1, f >= F_K0E);
    case F_AI: return q_airy_ai(x);
    case F_SJ0: return q_sph_j0(x);
    default: return q_bessel_jy(x, f - F_J0);
    }
}

static float fbits(uint32_t b) { float f; memcpy(&f, &b, 4); return f; }
static uint32_t bitsf(float f) { uint32_t b; memcpy(&b, &f, 4); return b; }
/* the rounding interval (lo, hi) of y: the midpoints with its neighbours (0x1p128 beyond
 * FLT_MAX; +-2^-150 around zero) */
static void interval(float y, double *lo, double *hi) {
    if (isinf(y)) { *lo = y > 0 ? 0x1.ffffffp127 : -INFINITY; *hi = y > 0 ? INFINITY : -0x1.ffffffp127; return; }
    float up = nextafterf(y, INFINITY), dn = nextafterf(y, -INFINITY);
    *hi = isinf(up) ? 0x1.ffffffp127 : ((double)y + up) / 2;
    *lo = isinf(dn) ? -0x1.ffffffp127 : ((double)y + dn) / 2;
}
/* 1: v +- e lies inside y's interval (and on y's side of 0 when y is a zero); 0: undecided */
static int surely(float y, double v, double e) {
    double lo, hi;
    if (y != y || v != v) return 0;
    interval(y, &lo, &hi);
    if (y == 0.0f && (v == 0 || signbit(v) != signbit(y))) return 0;
    return v - e > lo && v + e < hi;
}
static double ulp_of(float w) {
    float a = fabsf(w);
    if (isinf(a)) return ldexp(1.0, 104);
    return (double)nextafterf(a, INFINITY) - a;
}

/* inverse functions: the sign of F(m) - t at a midpoint m, F = erf (erfinv) or ndtr (ndtri),
 * +-1 when certain, 0 when not even quad decides */
static int fwd_sign(int f, double m, double t, int *quad_used) {
    double c = 1.0 - t;                                   /* exact for a float t in [0.5, 1] */
    int up = t >= 0.5, s;
    double v, e;
    if (f == F_ERFINV) { v = up ? c - erfc(m) : erf(m) - t; e = 0x1p-48 * (up ? erfc(m) : fabs(erf(m))); }
    else {
        double g = 0.5 * erfc((up ? m : -m) * 0.70710678118654752440);
        v = up ? c - g : g - t;
        e = (0x1p-48 + (m * m + 2) * 0x1p-52) * g;
    }
    if (v > e) return 1;
    if (v < -e) return -1;
    *quad_used = 1;
    quad mq = m, r2 = sqrtq(2.0Q), vq, eq;
    if (f == F_ERFINV) { quad g = up ? erfcq(mq) : erfq(mq); vq = up ? (quad)c - g : g - t; eq = Q100 * fabsq(g); }
    else { quad g = 0.5Q * erfcq((up ? mq : -mq) / r2); vq = up ? (quad)c - g : g - t; eq = Q100 * g; }
    s = vq > eq ? 1 : (vq < -eq ? -1 : 0);
    return s;
}
/* 0 when y is the correctly rounded inverse at t, else the signed distance in ulps to it
 * (searched up to 4096 steps); *unres when a comparison stayed undecided */
static int inverse_check(int f, float y, double t, int *quad_used, int *unres) {
    for (int step = 0; step < 4096; step++) {
        double lo, hi;
        interval(y, &lo, &hi);
        int a = fwd_sign(f, lo, t, quad_used), b = fwd_sign(f, hi, t, quad_used);
        if (a == 0 || b == 0) { *unres = 1; return 0; }
        if (a < 0 && b > 0) return step;
        y = b < 0 ? nextafterf(y, INFINITY) : nextafterf(y, -INFINITY);
    }
    return 4096;
}

typedef struct {
    int64_t checked, mismatches, quad, unresolved, env_only;
    double max_ulp, max_env;
    uint32_t bad[32], unr[4];
    int nbad, nunr;
} stats;

/* the bit patterns lo, lo + stride, ... up to hi */
static void check(int f, uint32_t lo, uint32_t hi, uint32_t stride, stats *st) {
    int64_t steps = hi < lo ? 0 : (int64_t)(hi - lo) / stride + 1;
    memset(st, 0, sizeof *st);
#pragma omp parallel
    {
        stats my;
        memset(&my, 0, sizeof my);
#pragma omp for schedule(dynamic, 65536)
        for (int64_t s = 0; s < steps; s++) {
            uint32_t b = lo + (uint32_t)(s * stride);
            float x = fbits(b), y = ours(f, x);
            int bad = 0, used = 0, unres = 0;
            double ulps = 0, env = 0;
            if (f == F_ERFINV || f == F_NDTRI) {
                double t = fabs((double)x);
                float want = NAN;
                int special = 1;
                if (x != x || (f == F_ERFINV ? t > 1 : (x < 0 || x > 1))) want = NAN;
                else if (f == F_ERFINV && t == 1) want = copysignf(INFINITY, x);
                else if (f == F_ERFINV && t == 0) want = x;
                else if (f == F_NDTRI && (x == 0 || x == 1)) want = x == 0 ? -INFINITY : INFINITY;
                else if (f == F_NDTRI && x == 0.5f) want = 0.0f;
                else special = 0;
                if (special) bad = !(want != want ? y != y : bitsf(y) == bitsf(want));
                else {
                    float yy = f == F_ERFINV && x < 0 ? -y : y;
                    int d = yy != yy ? 4096 : inverse_check(f, yy, f == F_ERFINV ? t : (double)x, &used, &unres);
                    bad = d != 0;
                    ulps = d;
                }
            } else if ((f == F_I1 || f == F_I1E || f == F_J1) && x > 0 && x < 0x1p-60f) {
                float want = cr_half_directed((double)x, f == F_I1);
                bad = bitsf(y) != bitsf(want);
                ulps = bad ? 1 : 0;
            } else if (f == F_AI && x < -0x1p64f) {
                /* the phase zeta = 2/3 |x|^1.5 mod 2 pi is beyond quad's reach: only the
                 * envelope, |Ai(x)| <= M(x) = |x|^-1/4 / sqrt(pi) (1 + O(|x|^-3)) */
                my.env_only++;
                bad = !(fabs((double)y) <= pow(-(double)x, -0.25) * 0.56418958354775628695 * (1 + 0x1p-20));
                ulps = bad ? 4096 : 0;
            } else {
                cr_d r = ref_d(f, (double)x);
                if (r.e == 0 || r.v != r.v) {
                    float want = (float)r.v;
                    bad = !(want != want ? y != y : bitsf(y) == bitsf(want));
                    ulps = bad ? 4096 : 0;
                } else if (!surely(y, r.v, r.e)) {
                    used = 1;
                    cr_q q = ref_q(f, (double)x);
                    float want = (float)q.v;
                    double lo, hi;
                    interval(want, &lo, &hi);
                    if ((quad)hi == q.v && q.lo > 0) want = nextafterf(want, INFINITY);   /* a tie: */
                    if ((quad)lo == q.v && q.lo < 0) want = nextafterf(want, -INFINITY);  /* q.lo decides */
                    interval(want, &lo, &hi);
                    quad dl = (q.v - lo) + q.lo, dh = (hi - q.v) - q.lo;
                    if (!(dl > q.e && dh > q.e) && !isinf(want)) unres = 1;
                    bad = bitsf(y) != bitsf(want) && !(want == 0 && y == 0 && has_env(f));
                    ulps = fabs((double)((quad)y - q.v)) / ulp_of(want);
                    if (f == F_AI) env = fabs((double)((quad)y - q.v)) / cr_ai_env((double)x, (double)q.v);
                    else if (has_env(f)) env = fabs((double)((quad)y - q.v)) / cr_env(fabs((double)x), (double)q.v, f == F_Y0 ? 0.25 : 2.0);
                }
            }
            my.quad += used;
            my.unresolved += unres;
            if (unres && my.nunr < 4) my.unr[my.nunr++] = b;
            if (bad) {
                my.mismatches++;
                if (my.nbad < 32) my.bad[my.nbad++] = b;
                if (ulps > my.max_ulp) my.max_ulp = ulps;
                if (env > my.max_env) my.max_env = env;
            }
        }
#pragma omp critical
        {
            st->mismatches += my.mismatches;
            st->quad += my.quad;
            st->unresolved += my.unresolved;
            st->env_only += my.env_only;
            if (my.max_ulp > st->max_ulp) st->max_ulp = my.max_ulp;
            if (my.max_env > st->max_env) st->max_env = my.max_env;
            for (int i = 0; i < my.nbad && st->nbad < 32; i++) st->bad[st->nbad++] = my.bad[i];
            for (int i = 0; i < my.nunr && st->nunr < 4; i++) st->unr[st->nunr++] = my.unr[i];
        }
    }
    st->checked = steps;
}

int main(int argc, char **argv) {
    uint32_t stride = 1, from = 0, to = 0xffffffffu;
    int want[F_COUNT] = {0}, any = 0, failed = 0;
    for (int a = 1; a < argc; a++) {
        if (!strcmp(argv[a], "--stride") && a + 1 < argc) { stride = (uint32_t)atol(argv[++a]); continue; }
        if (!strcmp(argv[a], "--from") && a + 1 < argc) { from = (uint32_t)strtoul(argv[++a], NULL, 0); continue; }
        if (!strcmp(argv[a], "--to") && a + 1 < argc) { to = (uint32_t)strtoul(argv[++a], NULL, 0); continue; }
        int found = 0;
        for (int f = 0; f < F_COUNT; f++)
            if (!strcmp(argv[a], NAMES[f])) { want[f] = 1; any = found = 1; }
        if (!found) { fprintf(stderr, "unknown function %s\n", argv[a]); return 2; }
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (stride == 0) { fprintf(stderr, "--stride must be >= 1\n"); return 2; }
    printf("threads %d, stride %u", omp_get_max_threads(), stride);
    if (from != 0 || to != 0xffffffffu) printf(", bits 0x%08x..0x%08x", from, to);
    printf("\n");
    for (int f = 0; f < F_COUNT; f++) {
        if (any && !want[f]) continue;
        stats st;
        uint32_t hi = HALF[f] && to > 0x7fffffffu ? 0x7fffffffu : to;
        double t0 = omp_get_wtime();
        check(f, from, hi, stride, &st);
        printf("%-10s inputs=%lld%s mismatches=%lld quad=%lld unresolved=%lld max_ulps=%.3g",
               NAMES[f], (long long)st.checked, HALF[f] ? " (sign bit clear)" : "", (long long)st.mismatches,
               (long long)st.quad, (long long)st.unresolved, st.max_ulp);
        if (has_env(f)) printf(" max_err/envelope=%.3g", st.max_env);
        printf(" seconds=%.1f\n", omp_get_wtime() - t0);
        if (st.env_only)
            printf("  (%lld of them below -2^64: checked against the envelope only)\n", (long long)st.env_only);
        for (int i = 0; i < st.nbad; i++) {
            float x = fbits(st.bad[i]);
            printf("  mismatch %s x=0x%08x (%a) ours=%a\n", NAMES[f], st.bad[i], x, ours(f, x));
        }
        for (int i = 0; i < st.nunr; i++)
            printf("  unresolved %s x=0x%08x (%a) ours=%a\n", NAMES[f], st.unr[i], fbits(st.unr[i]), ours(f, fbits(st.unr[i])));
        failed |= st.mismatches != 0 || st.unresolved != 0;
    }
    printf("check-special: %s\n", failed ? "NOT all correctly rounded (see the lines above)" : "all correctly rounded");
    return failed;
}
