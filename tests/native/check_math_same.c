/* check_math_same.c: tl_math.h's functions give the same bits as the version that
 * `make check-math` proved correctly rounded (tests/native/tl_math_cr_ref.h, double-double
 * throughout), on all 2^32 inputs: so the current, faster code is correctly rounded too.
 *
 *     make check-math-same                  # every function
 *     build/check_math_same exp tanh        # some functions
 *
 * Multi-threaded (OpenMP) over runs of 2^16 inputs; bits compared exactly (NaN payloads too).
 * One line per function (mismatches, seconds), the first mismatching inputs, exit 1 on any. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>

void ref_eval(int fn, uint32_t base, uint32_t n, uint32_t *out);
void cur_eval(int fn, uint32_t base, uint32_t n, uint32_t *out);

static const char *NAMES[] = {"exp", "expm1", "log", "log1p", "tanh", "sigmoid", "softplus", "erf",
                              "sin_2pi", "cos_2pi", "gelu", "gelu_grad"};
#define NFN 12
#define RUN 65536u

int main(int argc, char **argv) {
    int want[NFN] = {0}, any = 0, failed = 0;
    for (int a = 1; a < argc; a++) {
        int found = 0;
        for (int f = 0; f < NFN; f++)
            if (!strcmp(argv[a], NAMES[f])) { want[f] = 1; any = found = 1; }
        if (!found) { fprintf(stderr, "unknown function %s\n", argv[a]); return 2; }
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    printf("check_math_same: all 2^32 inputs, %d threads\n", omp_get_max_threads());
    for (int f = 0; f < NFN; f++) {
        if (any && !want[f]) continue;
        long long bad = 0;
        uint32_t shown[8];
        int nshown = 0;
        double t0 = omp_get_wtime();
#pragma omp parallel
        {
            uint32_t *r = malloc(RUN * sizeof *r), *c = malloc(RUN * sizeof *c);
#pragma omp for schedule(dynamic, 16) reduction(+ : bad)
            for (long long k = 0; k < (1LL << 32) / RUN; k++) {
                uint32_t base = (uint32_t)(k * RUN);
                ref_eval(f, base, RUN, r);
                cur_eval(f, base, RUN, c);
                for (uint32_t i = 0; i < RUN; i++) {
                    if (r[i] == c[i]) continue;
                    bad++;
#pragma omp critical
                    if (nshown < 8) shown[nshown++] = base + i;
                }
            }
            free(r);
            free(c);
        }
        printf("%-9s inputs=4294967296 mismatches=%lld seconds=%.1f\n", NAMES[f], bad, omp_get_wtime() - t0);
        for (int i = 0; i < nshown; i++) {
            uint32_t r, c;
            ref_eval(f, shown[i], 1, &r);
            cur_eval(f, shown[i], 1, &c);
            printf("  mismatch %s x=0x%08x proven=0x%08x current=0x%08x\n", NAMES[f], shown[i], r, c);
        }
        failed |= bad != 0;
    }
    printf("check_math_same: %s\n", failed ? "FAIL" : "all bit-identical to the proven version");
    return failed;
}
