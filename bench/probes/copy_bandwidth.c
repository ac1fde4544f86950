/* copy_bandwidth.c: this machine's copy, read and write bandwidth at a working-set size, the
 * roofline reference for memory-bound stub kernels (bench/results/stub-layers-r45.md).
 *
 *   cc -O3 -march=native -fopenmp -o /tmp/copy_bw bench/probes/copy_bandwidth.c
 *   OMP_NUM_THREADS=1 /tmp/copy_bw MB     # MB MiB per array; medians of 31 rounds
 *
 * copy: b = a (MB read, MB written, counted as 2 MB moved); read: a vector sum of c; write:
 * c[i] = i. The three arrays stay allocated, so the working set is 3 MB; the same arrays are
 * reused every round (what a kernel that runs step after step on cached blocks sees). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <omp.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }
int cmpd(const void *a, const void *b) { double x = *(double *)a, y = *(double *)b; return x < y ? -1 : x > y; }
int main(int argc, char **argv) {
    size_t mb = atoi(argv[1]), n = mb << 18;   /* floats */
    float *a = aligned_alloc(64, n * 4), *b = aligned_alloc(64, n * 4), *c = aligned_alloc(64, n * 4);
    memset(a, 1, n * 4); memset(b, 1, n * 4); memset(c, 1, n * 4);
    double tc[31], tr[31], tw[31];
    for (int r = 0; r < 31; r++) {
        double t0 = now();
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < n; i++) b[i] = a[i];          /* copy: read + write */
        double t1 = now();
        float s = 0;
        typedef float v16 __attribute__((vector_size(64)));
#pragma omp parallel reduction(+:s)
        {
            v16 acc = {0};
#pragma omp for schedule(static)
            for (size_t i = 0; i < n; i += 16) acc += *(const v16 *)(c + i);   /* read only */
            for (int l = 0; l < 16; l++) s += acc[l];
        }
        double t2 = now();
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < n; i++) c[i] = (float)i;      /* write only */
        double t3 = now();
        tc[r] = t1 - t0; tr[r] = t2 - t1; tw[r] = t3 - t2; if (s == 12345) puts("");
    }
    qsort(tc, 31, 8, cmpd); qsort(tr, 31, 8, cmpd); qsort(tw, 31, 8, cmpd);
    double B = n * 4 / 1e9;
    printf("%zu MB, %d threads: copy %.3f ms (%.1f GB/s counted read+write), read %.3f ms (%.1f GB/s), write %.3f ms (%.1f GB/s)\n",
           mb, omp_get_max_threads(), tc[15] * 1e3, 2 * B / tc[15], tr[15] * 1e3, B / tr[15], tw[15] * 1e3, B / tw[15]);
}
