/* sgemm_tiles.c: which register tile feeds this CPU's FMA units best. Each variant is the
 * stub GEMM's micro-kernel shape (linalg.c: acc[r][v] += A[k][r] * B[k][16 v .. 16 v + 15],
 * one fused multiply-add per lane, k in order) with MR rows and NV 16-float vectors, run over a
 * packed KC-deep A panel and B panel that stay in L1/L2, many times; GFLOP/s per thread against
 * an FMA probe (24 independent register chains). Tiles differ only in speed: every output is
 * the same FMA chain in k order.
 *   cc -O3 -march=native -fopenmp -ffp-contract=off bench/probes/sgemm_tiles.c -o build/sgemm_tiles
 *   build/sgemm_tiles [threads]
 */
#include <immintrin.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef float v16 __attribute__((vector_size(64)));
typedef float v16u __attribute__((vector_size(64), aligned(4), may_alias));
#define vload(p) ((v16)*(const v16u *)(p))
#define vstore(p, v) (*(v16u *)(p) = (v))
#define VFMA(a, b, c) ((v16)_mm512_fmadd_ps(_mm512_set1_ps(a), (__m512)(b), (__m512)(c)))
#define KC 384

#define KERNEL(NAME, MR, NV)                                                                  \
    static __attribute__((noinline)) void NAME(const float *restrict Ap, const float *restrict Bp, \
                                               float *C, int reps) {                           \
        for (int rep = 0; rep < reps; rep++) {                                                \
            v16 acc[MR][NV];                                                                  \
            for (int r = 0; r < MR; r++)                                                      \
                for (int v = 0; v < NV; v++) acc[r][v] = vload(C + r * 16 * NV + 16 * v);    \
            for (int k = 0; k < KC; k++) {                                                    \
                v16 b[NV];                                                                    \
                for (int v = 0; v < NV; v++) b[v] = vload(Bp + k * 16 * NV + 16 * v);        \
                for (int r = 0; r < MR; r++) {                                                \
                    float a = Ap[k * MR + r];                                                 \
                    for (int v = 0; v < NV; v++) acc[r][v] = VFMA(a, b[v], acc[r][v]);       \
                }                                                                             \
            }                                                                                 \
            for (int r = 0; r < MR; r++)                                                      \
                for (int v = 0; v < NV; v++) vstore(C + r * 16 * NV + 16 * v, acc[r][v]);    \
        }                                                                                     \
    }

KERNEL(k8x32, 8, 2)
KERNEL(k12x32, 12, 2)
KERNEL(k14x32, 14, 2)
KERNEL(k6x64, 6, 4)
KERNEL(k4x64, 4, 4)
KERNEL(k8x48, 8, 3)

typedef void (*kfn)(const float *, const float *, float *, int);
static const struct { const char *name; kfn f; int mr, nv; } VARIANTS[] = {
    {"8x32 (stub today, 16 acc)", k8x32, 8, 2}, {"12x32 (24 acc)", k12x32, 12, 2},
    {"14x32 (28 acc)", k14x32, 14, 2},          {"6x64 (24 acc)", k6x64, 6, 4},
    {"4x64 (16 acc)", k4x64, 4, 4},             {"8x48 (24 acc)", k8x48, 8, 3},
};

/* 24 independent FMA chains in zmm registers, written in assembly so nothing folds them */
static __attribute__((noinline)) void fma_probe(long iters) {
#define F(i) "vfmadd231ps %%zmm30, %%zmm31, %%zmm" #i "\n\t"
    __asm__ volatile(
        "vxorps %%zmm30, %%zmm30, %%zmm30\n\tvxorps %%zmm31, %%zmm31, %%zmm31\n\t"
        "1:\n\t" F(0) F(1) F(2) F(3) F(4) F(5) F(6) F(7) F(8) F(9) F(10) F(11) F(12) F(13)
        F(14) F(15) F(16) F(17) F(18) F(19) F(20) F(21) F(22) F(23)
        "dec %0\n\tjnz 1b\n\t"
        : "+r"(iters)
        :
        : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9",
          "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "xmm16", "xmm17", "xmm18",
          "xmm19", "xmm20", "xmm21", "xmm22", "xmm23", "xmm30", "xmm31", "cc");
#undef F
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 1;
    omp_set_num_threads(threads);
    double peak = 0;
    #pragma omp parallel reduction(+:peak)
    {
        long iters = 20000000;
        fma_probe(iters / 10);
        double t = omp_get_wtime();
        fma_probe(iters);
        peak += 24.0 * 32 * iters / (omp_get_wtime() - t) / 1e9;
    }
    printf("threads %d: FMA probe %.1f GFLOP/s in all (%.1f per thread)\n", threads, peak,
           peak / threads);
    for (size_t v = 0; v < sizeof VARIANTS / sizeof *VARIANTS; v++) {
        double total = 0;
        const int mr = VARIANTS[v].mr, nv = VARIANTS[v].nv;
        #pragma omp parallel reduction(+:total)
        {
            float *Ap = aligned_alloc(64, sizeof(float) * KC * 16);
            float *Bp = aligned_alloc(64, sizeof(float) * KC * 64);
            float *C = aligned_alloc(64, sizeof(float) * 16 * 64);
            for (int i = 0; i < KC * 16; i++) Ap[i] = (float)(i % 7) * 0.25f;
            for (int i = 0; i < KC * 64; i++) Bp[i] = (float)(i % 5) * 0.5f;
            memset(C, 0, sizeof(float) * 16 * 64);
            const int reps = 40000 / (mr * nv) * 4;
            VARIANTS[v].f(Ap, Bp, C, reps / 10);
            double t = omp_get_wtime();
            VARIANTS[v].f(Ap, Bp, C, reps);
            total += 2.0 * mr * 16 * nv * KC * reps / (omp_get_wtime() - t) / 1e9;
            free(Ap); free(Bp); free(C);
        }
        printf("  %-28s %7.1f GFLOP/s (%5.1f%% of the probe)\n", VARIANTS[v].name, total,
               100 * total / peak);
    }
    return 0;
}
