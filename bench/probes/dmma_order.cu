// dmma_order.cu: what the FP64 tensor-core MMA (mma.sync m8n8k4 .f64) computes per output, measured
// against candidate rules evaluated on the host. Float32 products are exact in float64, so if the
// MMA's rounding is a known rule, an exact GEMM could accumulate float32 products on the FP64 tensor
// cores and a CPU could reproduce the bits. Candidates for d = c + a0 b0 + a1 b1 + a2 b2 + a3 b3:
//   exact1 : the exact sum rounded once to float64 (a fused 4-term dot product plus c)
//   seq    : fma(a3, b3, fma(a2, b2, fma(a1, b1, fma(a0, b0, c)))) (a chain in k order)
//   seqrev : the chain in reverse k order
//   pair   : c + ((a0 b0 + a1 b1) + (a2 b2 + a3 b3)), each add rounded
//   sum4   : round(exact a0b0 + ... + a3b3) + c (the products' exact sum rounded, then c added)
// Inputs: float32 a, b with exponents in [-12, 12] and a float64 c with exponent in [-24, 24], so
// the exact sum is an integer multiple of 2^-(24+24+52) that fits in 128 bits.
// Build: nvcc -O2 -arch=sm_90 -Xcompiler -ffp-contract=off -o build/dmma_order bench/probes/dmma_order.cu
// Run:   build/dmma_order [tiles]   (prints how many of the outputs each candidate matches)
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
    fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_)); exit(2); } } while (0)

// one warp per 8x4 by 4x8 tile: a row-major (8 x 4), b row-major (4 x 8), c and d row-major (8 x 8)
__global__ void k_mma(const double *a, const double *b, const double *c, double *d, int tiles) {
    const int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32, lane = threadIdx.x % 32;
    if (warp >= tiles) return;
    const int g = lane >> 2, t = lane & 3;
    const double *A = a + warp * 32, *B = b + warp * 32, *C = c + warp * 64;
    double *D = d + warp * 64;
    double fa = A[g * 4 + t], fb = B[t * 8 + g], c0 = C[g * 8 + 2 * t], c1 = C[g * 8 + 2 * t + 1], d0, d1;
    asm volatile("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0,%1}, {%2}, {%3}, {%4,%5};"
                 : "=d"(d0), "=d"(d1) : "d"(fa), "d"(fb), "d"(c0), "d"(c1));
    D[g * 8 + 2 * t] = d0;
    D[g * 8 + 2 * t + 1] = d1;
}

static const int SHIFT = 100;   // values are integers times 2^-SHIFT
static __int128 scaled(double v) {   // v * 2^SHIFT exactly (v is a multiple of 2^-SHIFT)
    int e;
    double m = frexp(v, &e);                       // v = m 2^e, 0.5 <= |m| < 1
    __int128 q = (__int128)(int64_t)ldexp(m, 53);  // m 2^53, exact
    int sh = e - 53 + SHIFT;
    return sh >= 0 ? q << sh : q >> -sh;          // exact by the exponent ranges
}
static double unscaled(__int128 s) { return ldexp((double)s, -SHIFT); }   // correctly rounded

int main(int argc, char **argv) {
    const int tiles = argc > 1 ? atoi(argv[1]) : 200000;
    std::mt19937_64 rng(12345);
    std::uniform_real_distribution<double> u(-1.0, 1.0);
    std::uniform_int_distribution<int> ea(-12, 12), ec(-24, 24), pick(0, 9);
    std::vector<double> a(tiles * 32), b(tiles * 32), c(tiles * 64), d(tiles * 64);
    auto f32 = [&](int e) { return (double)(float)ldexp(u(rng), e); };
    for (int t = 0; t < tiles; t++) {
        for (int i = 0; i < 32; i++) { a[t * 32 + i] = f32(ea(rng)); b[t * 32 + i] = f32(ea(rng)); }
        for (int i = 0; i < 64; i++) {
            const int r = i / 8, col = i % 8;
            double v = ldexp(u(rng), ec(rng));
            if (pick(rng) < 4) {   // near-cancellation: c close to minus the products' sum
                double s = 0;
                for (int k = 0; k < 4; k++) s += a[t * 32 + r * 4 + k] * b[t * 32 + k * 8 + col];
                v = -s + ldexp(u(rng), ec(rng) - 30);
            }
            c[t * 64 + i] = ldexp(nearbyint(ldexp(v, SHIFT - 60)), 60 - SHIFT);   // a multiple of 2^-40
        }
    }
    double *da, *db, *dc, *dd;
    CK(cudaMalloc(&da, a.size() * 8)); CK(cudaMalloc(&db, b.size() * 8));
    CK(cudaMalloc(&dc, c.size() * 8)); CK(cudaMalloc(&dd, d.size() * 8));
    CK(cudaMemcpy(da, a.data(), a.size() * 8, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(db, b.data(), b.size() * 8, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dc, c.data(), c.size() * 8, cudaMemcpyHostToDevice));
    k_mma<<<(tiles * 32 + 255) / 256, 256>>>(da, db, dc, dd, tiles);
    CK(cudaGetLastError());
    CK(cudaMemcpy(d.data(), dd, d.size() * 8, cudaMemcpyDeviceToHost));
    long n = 0, exact1 = 0, seq = 0, seqrev = 0, pair = 0, sum4 = 0, differ_seq_exact = 0;
    for (int t = 0; t < tiles; t++)
        for (int i = 0; i < 64; i++) {
            const int r = i / 8, col = i % 8;
            double p[4];
            for (int k = 0; k < 4; k++) p[k] = a[t * 32 + r * 4 + k] * b[t * 32 + k * 8 + col];   // exact
            const double cc = c[t * 64 + i], got = d[t * 64 + i];
            __int128 s = scaled(cc), s4 = 0;
            for (int k = 0; k < 4; k++) s4 += scaled(p[k]);
            const double e1 = unscaled(s + s4);
            double q = cc;
            for (int k = 0; k < 4; k++) q = fma(a[t * 32 + r * 4 + k], b[t * 32 + k * 8 + col], q);
            double qr = cc;
            for (int k = 3; k >= 0; k--) qr = fma(a[t * 32 + r * 4 + k], b[t * 32 + k * 8 + col], qr);
            const double pr = cc + ((p[0] + p[1]) + (p[2] + p[3]));
            const double s4r = unscaled(s4) + cc;
            n++;
            exact1 += got == e1; seq += got == q; seqrev += got == qr; pair += got == pr; sum4 += got == s4r;
            differ_seq_exact += q != e1;
        }
    printf("outputs=%ld (candidates disagree: seq != exact1 on %ld)\n", n, differ_seq_exact);
    printf("exact1 %ld\nseq    %ld\nseqrev %ld\npair   %ld\nsum4   %ld\n", exact1, seq, seqrev, pair, sum4);
    return 0;
}
