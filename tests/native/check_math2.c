/* check_math2.c: the two-argument functions of tl_math_more.h (atan2, hypot) against glibc double
 * and quad precision, on random pairs (2^32 pairs cannot be enumerated twice over).
 *
 *     make build/check_math2 && build/check_math2 [pairs_log2]      # default 2^28 pairs each
 *
 * Pairs: random bit patterns for both arguments (every exponent equally likely), random pairs
 * with exponents within 4 of each other (the quotient near 1, where atan2 is least trivial), and
 * small integers (Pythagorean triples: exact hypot values). The oracle is cr_oracle.h's: glibc's
 * double rounded to float32 unless it lies within 2^-44 (relative) of a rounding midpoint, then
 * libquadmath; `unresolved` counts pairs whose true value is within 2^-100 of a midpoint (exact
 * midpoints, which round to even). One line per function; exit 1 on any mismatch. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include "cr_oracle.h"

static uint64_t splitmix(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static float from_bits(uint32_t b) { float f; memcpy(&f, &b, sizeof f); return f; }

/* pair number i of the three kinds */
static void make_pair(uint64_t i, float *y, float *x) {
    uint64_t s = i * 0x2545f4914f6cdd1dULL, r = splitmix(&s);
    uint32_t a = (uint32_t)r, b = (uint32_t)(r >> 32);
    switch (i % 3) {
    case 0: *y = from_bits(a); *x = from_bits(b); break;
    case 1: {
        uint32_t e = (a >> 23) & 0xff;
        int32_t d = (int32_t)(b >> 29) - 4;
        int32_t e2 = (int32_t)e + d;
        e2 = e2 < 1 ? 1 : (e2 > 254 ? 254 : e2);
        *y = from_bits(a);
        *x = from_bits((b & 0x807fffffu) | ((uint32_t)e2 << 23));
        break;
    }
    default: *y = (float)(int32_t)(a % 20001 - 10000); *x = (float)(int32_t)(b % 20001 - 10000);
    }
}

typedef struct { int64_t checked, mismatches, quad, unresolved; } stats;

int main(int argc, char **argv) {
    (void)cr_check_range;
    int lg = argc > 1 ? atoi(argv[1]) : 28;
    uint64_t n = (uint64_t)1 << lg;
    setvbuf(stdout, NULL, _IOLBF, 0);
    printf("threads %d, pairs per function 2^%d\n", omp_get_max_threads(), lg);
    int failed = 0;
    for (int fn = 0; fn < 2; fn++) {
        stats st = {0, 0, 0, 0};
        double t0 = omp_get_wtime();
#pragma omp parallel
        {
            stats loc = {0, 0, 0, 0};
#pragma omp for schedule(static)
            for (uint64_t i = 0; i < n; i++) {
                float y, x;
                make_pair(i, &y, &x);
                float got = fn == 0 ? tlm_atan2(y, x) : tlm_hypot(y, x);
                double v = fn == 0 ? atan2((double)y, (double)x) : hypot((double)y, (double)x);
                float want = (float)v;
                if (isfinite(v) && v != 0.0 && !(cr_mid_dist(v) > 0x1p-44 * fabs(v))) {
                    __float128 q = fn == 0 ? atan2q(y, x) : hypotq(y, x);
                    loc.quad++;
                    if (cr_mid_dist_q(q) <= 0x1p-100Q * fabsq(q)) loc.unresolved++;
                    want = (float)q;
                }
                int same = (want != want) ? (got != got) : (tlm_to_bits(got) == tlm_to_bits(want));
                if (!same) {
                    loc.mismatches++;
#pragma omp critical
                    if (loc.mismatches <= 4)
                        printf("  mismatch %s y=%a x=%a ours=%a correctly rounded=%a\n",
                               fn == 0 ? "atan2" : "hypot", y, x, got, want);
                }
            }
#pragma omp critical
            { st.checked += (int64_t)n / omp_get_num_threads(); st.mismatches += loc.mismatches;
              st.quad += loc.quad; st.unresolved += loc.unresolved; }
        }
        printf("%-6s pairs=%llu mismatches=%lld quad=%lld unresolved=%lld seconds=%.0f\n",
               fn == 0 ? "atan2" : "hypot", (unsigned long long)n, (long long)st.mismatches,
               (long long)st.quad, (long long)st.unresolved, omp_get_wtime() - t0);
        failed |= st.mismatches != 0;
    }
    printf("check-math2: %s\n", failed ? "FAIL" : "all correctly rounded");
    return failed;
}
