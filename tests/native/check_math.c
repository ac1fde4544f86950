/* check_math.c: exhaustive proof that tl_math.h's transcendental functions are correctly rounded.
 *
 *     make check-math                       # every function, all 2^32 inputs
 *     build/check_math exp tanh             # some functions
 *     build/check_math --stride 251 log     # every 251st input (a quick look)
 *     build/check_math --positive sin       # inputs with the sign bit clear only: enough for
 *                                           # functions computed from |x| with the sign applied
 *                                           # exactly afterwards (odd or even by construction)
 *
 * For each function, every float32 bit pattern is evaluated by tl_math.h (compiled with the
 * stub's flags) and compared with cr_oracle.h's independent value (glibc double, quad precision
 * near midpoints). Prints one line per function (inputs, mismatches, quad fallbacks, hard cases,
 * seconds), a `hard` line per input within 2^-48 of a rounding midpoint
 * (tests/native/tl_math_hard_cases.txt keeps them for CI) and a line per mismatch. Exits 1 on any
 * mismatch or unresolved input. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include "cr_oracle.h"

int main(int argc, char **argv) {
    uint32_t stride = 1, hi = 0xffffffffu;
    int want[CR_COUNT], any = 0, failed = 0;
    memset(want, 0, sizeof want);
    for (int a = 1; a < argc; a++) {
        if (!strcmp(argv[a], "--stride") && a + 1 < argc) { stride = (uint32_t)atol(argv[++a]); continue; }
        if (!strcmp(argv[a], "--positive")) { hi = 0x7fffffffu; continue; }
        int found = 0;
        for (int f = 0; f < CR_COUNT; f++)
            if (!strcmp(argv[a], CR_NAMES[f])) { want[f] = 1; any = found = 1; }
        if (!found) { fprintf(stderr, "unknown function %s\n", argv[a]); return 2; }
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    printf("threads %d, stride %u, inputs 0x00000000..0x%08x\n", omp_get_max_threads(), stride, hi);
    for (int f = 0; f < CR_COUNT; f++) {
        if (any && !want[f]) continue;
        cr_stats st;
        double t0 = omp_get_wtime();
        cr_check_range(f, 0, hi, stride, &st);
        double dt = omp_get_wtime() - t0;
        printf("%-9s inputs=%lld mismatches=%lld quad=%lld unresolved=%lld hard=%lld seconds=%.0f\n",
               CR_NAMES[f], (long long)st.checked, (long long)st.mismatches, (long long)st.quad,
               (long long)st.unresolved, (long long)st.nhard, dt);
        for (int i = 0; i < st.nhard && i < 4096; i++) {
            float x;
            int hard;
            memcpy(&x, &st.hard[i], sizeof x);
            printf("  hard %s 0x%08x 0x%08x\n", CR_NAMES[f], st.hard[i],
                   (uint32_t)tlm_to_bits(cr_oracle(f, x, &hard)));
        }
        for (int i = 0; i < st.nbad; i++) {
            float x, ours;
            int hard;
            memcpy(&x, &st.bad[i], sizeof x);
            ours = cr_ours(f, x);
            float want_y = cr_oracle(f, x, &hard);
            printf("  mismatch %s x=0x%08x (%a) ours=%a correctly rounded=%a\n", CR_NAMES[f],
                   st.bad[i], x, ours, want_y);
        }
        failed |= st.mismatches != 0 || st.unresolved != 0;
    }
    printf("check-math: %s\n", failed ? "FAIL" : "all correctly rounded");
    return failed;
}
