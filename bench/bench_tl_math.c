/* bench_tl_math.c: ns per element of tl_math.h's transcendental functions in the stub's loop form
 * (a plain loop over a block, vectorised at 512 bits as native/stub does), one thread.
 * Compiled once per header version (bench/bench_tl_math.sh: -I picks the header), so one source
 * compares the pre-CR polynomials (bench/ref/tl_math_poly.h), the first correctly rounded
 * double-double version (tests/native/tl_math_cr_ref.h) and the current header.
 * Prints `name ns_per_element` lines (thread CPU time): best of ROUNDS timings of REPS passes
 * over N elements. */
#include <stdio.h>
#include <time.h>
#include "tl_math.h"

#define N 16384          /* 64 KiB in, 64 KiB out: in L2, so the arithmetic is what counts */
#define REPS 200
#define ROUNDS 7
float X[N], Y[N];   /* not static: the stores must stay */

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);   /* CPU time: other jobs on a shared machine count less */
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

/* inputs: lo + (hi - lo) u, u uniform from a fixed LCG; log and log1p take e^(that) - offset */
static void fill(float lo, float hi, int expo) {
    uint32_t s = 12345;
    for (int i = 0; i < N; i++) {
        s = s * 1664525u + 1013904223u;
        float v = lo + (hi - lo) * (float)(s >> 8) * (1.0f / 16777216.0f);
        X[i] = expo ? __builtin_expf(v) : v;
    }
}

#define BENCH(NAME, LO, HI, EXPO)                                                              \
    static __attribute__((noinline, target("prefer-vector-width=512"))) void loop_##NAME(void) { \
        for (int i = 0; i < N; i++) Y[i] = tlm_##NAME(X[i]);                                   \
    }                                                                                          \
    static void run_##NAME(void) {                                                             \
        fill(LO, HI, EXPO);                                                                    \
        double best = 1e9;                                                                     \
        for (int r = 0; r < ROUNDS; r++) {                                                     \
            double t0 = now();                                                                 \
            for (int k = 0; k < REPS; k++) { loop_##NAME(); __asm__ volatile("" ::: "memory"); } \
            double t = (now() - t0) / ((double)REPS * N) * 1e9;                                \
            best = t < best ? t : best;                                                        \
        }                                                                                      \
        printf("%s %.3f\n", #NAME, best);                                                      \
    }

BENCH(exp, -10.0f, 10.0f, 0)
BENCH(log, -10.0f, 10.0f, 1)
BENCH(log1p, -0.9f, 10.0f, 0)
BENCH(tanh, -5.0f, 5.0f, 0)
BENCH(sigmoid, -10.0f, 10.0f, 0)
BENCH(softplus, -10.0f, 10.0f, 0)
BENCH(erf, -3.0f, 3.0f, 0)
BENCH(gelu, -5.0f, 5.0f, 0)
BENCH(gelu_grad, -5.0f, 5.0f, 0)
BENCH(sin_2pi, 0.0f, 1.0f, 0)
BENCH(cos_2pi, 0.0f, 1.0f, 0)

int main(void) {
    run_exp(); run_log(); run_log1p(); run_tanh(); run_sigmoid(); run_softplus(); run_erf();
    run_gelu(); run_gelu_grad(); run_sin_2pi(); run_cos_2pi();
    return 0;
}
