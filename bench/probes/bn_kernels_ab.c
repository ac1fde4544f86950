/* bn_kernels_ab.c: the stub's batchnorm_channel_first forward and backward kernels from two
 * libraries in one process, through the C ABI, in alternating rounds (medians, ms per call), and
 * every output compared bit for bit between them.
 *
 *   cc -O2 -o /tmp/bn_ab bench/probes/bn_kernels_ab.c -ldl
 *   OMP_NUM_THREADS=2 /tmp/bn_ab /before/libtorchlean_stub.so $PWD/torchlean/lib/libtorchlean_stub.so N C S [rounds] [reps]
 *
 * S is the plane (H W). CPUCLK=1 times with the process's CPU clock instead of the wall clock
 * (with one thread, immune to other jobs taking the core). Both libraries are dlopen'ed with
 * RTLD_LOCAL, so each keeps its own buffers, cache of freed blocks and OpenMP pool. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <time.h>
typedef struct tl_buffer *tl_buf;
typedef int (*alloc_t)(int64_t, tl_buf *);
typedef int (*ptr_t)(tl_buf, uint64_t *);
typedef int (*fwd_t)(tl_buf, tl_buf, tl_buf, tl_buf, tl_buf, tl_buf, tl_buf, tl_buf, int64_t, int64_t, int64_t, double);
typedef int (*bwd_t)(tl_buf, tl_buf, tl_buf, tl_buf, tl_buf, tl_buf, tl_buf, int64_t, int64_t, int64_t);
typedef struct { alloc_t alloc; ptr_t ptr; fwd_t fwd; bwd_t bwd; tl_buf x, ga, be, y, xh, m, v, is, g, dx, dg, db; } L;
static int g_clk = CLOCK_MONOTONIC;
static double now(void) { struct timespec t; clock_gettime(g_clk, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }
static float *P(L *l, tl_buf b) { uint64_t p; l->ptr(b, &p); return (float *)(uintptr_t)p; }
static tl_buf A(L *l, int64_t n) { tl_buf b; l->alloc(n, &b); return b; }
static int cmpd(const void *a, const void *b) { double x = *(double *)a, y = *(double *)b; return x < y ? -1 : x > y; }
int main(int argc, char **argv) {
    if (argc < 6) { fprintf(stderr, "usage: %s LIB_A LIB_B N C S [rounds] [reps]\n", argv[0]); return 2; }
    int64_t n = atoll(argv[3]), c = atoll(argv[4]), s = atoll(argv[5]);
    int rounds = argc > 6 ? atoi(argv[6]) : 15, reps = argc > 7 ? atoi(argv[7]) : 5;
    if (rounds < 1 || rounds > 63) rounds = rounds < 1 ? 1 : 63;
    int64_t tot = n * c * s;
    if (getenv("CPUCLK")) g_clk = CLOCK_PROCESS_CPUTIME_ID;
    L lib[2];
    float *x0 = malloc(tot * 4), *g0 = malloc(tot * 4);
    srand(1);
    for (int64_t i = 0; i < tot; i++) { x0[i] = (rand() / (float)RAND_MAX - 0.5f) * 3 + (i / s % c) * 0.01f; g0[i] = rand() / (float)RAND_MAX - 0.5f; }
    for (int k = 0; k < 2; k++) {
        void *h = dlopen(argv[1 + k], RTLD_NOW | RTLD_LOCAL);
        if (!h) { fprintf(stderr, "%s\n", dlerror()); return 1; }
        L *l = &lib[k];
        l->alloc = (alloc_t)dlsym(h, "tl_buf_alloc"); l->ptr = (ptr_t)dlsym(h, "tl_buf_data_ptr");
        l->fwd = (fwd_t)dlsym(h, "tl_batchnorm_channel_first"); l->bwd = (bwd_t)dlsym(h, "tl_batchnorm_channel_first_backward");
        l->x = A(l, tot); l->g = A(l, tot); l->y = A(l, tot); l->xh = A(l, tot); l->dx = A(l, tot);
        l->ga = A(l, c); l->be = A(l, c); l->m = A(l, c); l->v = A(l, c); l->is = A(l, c); l->dg = A(l, c); l->db = A(l, c);
        memcpy(P(l, l->x), x0, tot * 4); memcpy(P(l, l->g), g0, tot * 4);
        for (int64_t i = 0; i < c; i++) { P(l, l->ga)[i] = 1.0f + 0.01f * i; P(l, l->be)[i] = 0.1f * i; }
    }
    double t[2][2][64];
    for (int r = 0; r < rounds; r++)
        for (int k0 = 0; k0 < 2; k0++) {
            int k = (r & 1) ? 1 - k0 : k0;
            L *l = &lib[k];
            double a = now();
            for (int i = 0; i < reps; i++) l->fwd(l->x, l->ga, l->be, l->y, l->xh, l->m, l->v, l->is, n, c, s, 1e-5);
            double b = now();
            for (int i = 0; i < reps; i++) l->bwd(l->g, l->xh, l->is, l->ga, l->dx, l->dg, l->db, n, c, s);
            double e = now();
            t[k][0][r] = (b - a) / reps * 1e3; t[k][1][r] = (e - b) / reps * 1e3;
        }
    for (int k = 0; k < 2; k++) for (int j = 0; j < 2; j++) qsort(t[k][j], rounds, sizeof(double), cmpd);
    int diff = 0;
    tl_buf outs[2][8] = {{lib[0].y, lib[0].xh, lib[0].dx, lib[0].m, lib[0].v, lib[0].is, lib[0].dg, lib[0].db}, {lib[1].y, lib[1].xh, lib[1].dx, lib[1].m, lib[1].v, lib[1].is, lib[1].dg, lib[1].db}};
    for (int o = 0; o < 8; o++) diff += memcmp(P(&lib[0], outs[0][o]), P(&lib[1], outs[1][o]), (o < 3 ? tot : c) * 4) != 0;
    double mb = tot * 4 / 1e6;
    printf("n%lld c%lld s%lld (%.1f MB): fwd A %.3f B %.3f (%.2fx)  bwd A %.3f B %.3f (%.2fx)  outputs differing: %d\n",
           (long long)n, (long long)c, (long long)s, mb, t[0][0][rounds / 2], t[1][0][rounds / 2], t[1][0][rounds / 2] / t[0][0][rounds / 2],
           t[0][1][rounds / 2], t[1][1][rounds / 2], t[1][1][rounds / 2] / t[0][1][rounds / 2], diff);
    return 0;
}
