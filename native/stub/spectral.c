/* spectral.c (stub): real DFTs over the last axis and the FNO spectral convolution.
 *
 * Direct transforms (not FFTs): the stub is the reference, and the sizes it meets are small.
 * Twiddles come from one float64 table of cos/sin(2 pi r / n) built by tlm_twiddle (tl_math.h:
 * IEEE operations only, exact at the quarter points), indexed by r = k t mod n, and every sum
 * accumulates in double, sequentially in index order (t, k, channel or sample), with no
 * contraction. CUDA (cuda/spectral.cu) builds the same table and runs the same sums in the same
 * order, one thread per output, so the two give the same bits in every mode; results do not
 * depend on the thread count. The spectral convolution transforms only the `modes`
 * retained bins: O(grid * modes * width) per sample instead of a full spectrum.
 *
 * Conventions (inventory section 10.8): rfft is unnormalised with exp(-2 pi i k t / n), packed
 * [re, im] for k = 0..n/2; irfft scales by 1/n, weights interior bins by 2 and ignores the
 * imaginary parts of the DC and (even n) Nyquist bins.
 */
#include <stdlib.h>
#include <omp.h>
#include <string.h>
#include "stub.h"
#include "generated/spectral_kernels.h"

/* tw[2r] = cos(2 pi r / n), tw[2r + 1] = sin(2 pi r / n) for r = 0..n-1, from tlm_twiddle
 * (IEEE operations only), so CUDA's table has the same bits */
static int twiddles(const char *op, int64_t n, double **out) {
    double *tw = malloc(sizeof(double) * 2 * (size_t)(n > 0 ? n : 1));
    if (!tw) return tl_fail(TL_E_OOM, "%s: cannot allocate a twiddle table for n = %lld", op, (long long)n);
    for (int64_t r = 0; r < n; r++) tlm_twiddle(r, n, &tw[2 * r], &tw[2 * r + 1]);
    *out = tw;
    return TL_OK;
}

/* weight of bin k in a real inverse transform of length n: 1 at DC and (even n) Nyquist, else 2 */
static inline double bin_weight(int64_t k, int64_t n) {
    return (k == 0 || (n % 2 == 0 && k == n / 2)) ? 1.0 : 2.0;
}

static inline int is_edge_bin(int64_t k, int64_t n) {
    return k == 0 || (n % 2 == 0 && k == n / 2);
}

/* ------------------------------------------------------------------ 1-D transforms */

/* spec = scale_k * rfft(x) per row; with `adjoint_of_irfft`, scale_k = w_k / n and the edge
 * imaginary parts are zeroed (irfft ignores them). */
static int analysis(const char *op, tl_buf x, tl_buf y, int64_t batch, int64_t n, int adjoint_of_irfft) {
    int64_t bins = n / 2 + 1;
    if (batch == 0) return TL_OK;
    double *tw;
    TL_TRY(twiddles(op, n, &tw));
    const float *X = x->data;
    float *Y = y->data;
#pragma omp parallel for collapse(2) schedule(static) if (batch * bins * n > TL_PAR_MIN)
    for (int64_t b = 0; b < batch; b++)
        for (int64_t k = 0; k < bins; k++) {
            const float *xr = X + b * n;
            double re = 0.0, im = 0.0;
            int64_t r = 0;
            for (int64_t t = 0; t < n; t++) {
                re += (double)xr[t] * tw[2 * r];
                im -= (double)xr[t] * tw[2 * r + 1];
                r += k;
                if (r >= n) r -= n;
            }
            if (adjoint_of_irfft) {
                double s = bin_weight(k, n) / (double)n;
                re *= s;
                im = is_edge_bin(k, n) ? 0.0 : im * s;
            }
            Y[(b * bins + k) * 2] = (float)re;
            Y[(b * bins + k) * 2 + 1] = (float)im;
        }
    free(tw);
    return TL_OK;
}

/* y_t = scale * sum_k w_k (re_k cos - im_k sin), edge imaginary parts ignored. irfft: w_k =
 * bin_weight, scale = 1/n. Adjoint of rfft: w_k = 1, scale = 1 (sin vanishes at the edges). */
static int synthesis(const char *op, tl_buf x, tl_buf y, int64_t batch, int64_t n, int is_irfft) {
    int64_t bins = n / 2 + 1;
    if (batch == 0) return TL_OK;
    double *tw;
    TL_TRY(twiddles(op, n, &tw));
    const float *S = x->data;
    float *Y = y->data;
    double scale = is_irfft ? 1.0 / (double)n : 1.0;
#pragma omp parallel for collapse(2) schedule(static) if (batch * bins * n > TL_PAR_MIN)
    for (int64_t b = 0; b < batch; b++)
        for (int64_t t = 0; t < n; t++) {
            const float *sr = S + b * bins * 2;
            double acc = 0.0;
            int64_t r = 0;
            for (int64_t k = 0; k < bins; k++) {
                double w = is_irfft ? bin_weight(k, n) : 1.0;
                double im = is_edge_bin(k, n) ? 0.0 : (double)sr[2 * k + 1];
                acc += w * ((double)sr[2 * k] * tw[2 * r] - im * tw[2 * r + 1]);
                r += t;
                if (r >= n) r -= n;
            }
            Y[b * n + t] = (float)(acc * scale);
        }
    free(tw);
    return TL_OK;
}

/* rfft (adjoint = 0) and irfft_backward (adjoint = 1) */
int tlk_rfft(const char *op, tl_buf x, tl_buf y, int64_t batch, int64_t n, int64_t adjoint) {
    return analysis(op, x, y, batch, n, (int)adjoint);
}

/* irfft (adjoint = 0) and rfft_backward (adjoint = 1) */
int tlk_irfft(const char *op, tl_buf x, tl_buf y, int64_t batch, int64_t n, int64_t adjoint) {
    return synthesis(op, x, y, batch, n, !adjoint);
}

/* ------------------------------------------------------------------ spectral convolution
 *
 * The same sums as a one-output-at-a-time loop, computed in register blocks: each output keeps
 * its accumulator in a register across its whole sum (stored to memory and reloaded between row
 * blocks, which rounds nothing), so only *which* outputs run side by side changes, never the
 * order of the additions into any one of them. Vectors run across channels (vd: VD doubles, the
 * build's native width); spectra live in split planes re[k][wp], im[k][wp] with the width padded
 * to wp (a multiple of 8, the padding lanes zero and never written out).
 *
 * Tile sizes per ISA, counted in vd vectors: GCC keeps a vector wider than the ISA's registers
 * in memory, so an AVX2 build of the 8-double tiles moved every accumulator through the stack;
 * below AVX-512 the tiles are cut to fit 16 registers. A tile steps CV vectors of channels (up
 * to 2), so CV VD divides 8 below AVX-512 and only the 8-wide build has a one-vector remainder. */

#if defined(__AVX512F__)
#define VD 8
#define DFT_KBMAX 8 /* modes by one vector: 16 accumulators of 32 registers */
#define DFT_NV 1
#define IDFT_TPN 8
#define IDFT_CV 2
#define PAIR_TPN 4
#define PAIR_CV 2
#define MIX_SBN 4
#define MIX_CV 2
#define DW_CBN 4
#define DW_CV 2
#else /* 16 registers: VD = 4 with AVX2, 2 below */
#if defined(__AVX__)
#define VD 4
#else
#define VD 2
#endif
#define DFT_KBMAX 3 /* 3 modes by 2 vectors: 12 accumulators beside the row's 2 vectors */
#define DFT_NV 2
#define IDFT_TPN 4
#define IDFT_CV 1
#define PAIR_TPN 2  /* 2 row pairs by 2 vectors: 8 accumulators beside Z's 4 vectors */
#define PAIR_CV 2
#define MIX_SBN 4   /* 4 samples (or inputs) by 1 vector: 8 accumulators */
#define MIX_CV 1
#define DW_CBN 4
#define DW_CV 1
#endif
typedef double vd __attribute__((vector_size(8 * VD)));
typedef double vdu __attribute__((vector_size(8 * VD), aligned(8), may_alias));
typedef float vf __attribute__((vector_size(4 * VD)));
typedef float vfu __attribute__((vector_size(4 * VD), aligned(4), may_alias));
#define VLD(p) ((vd) * (const vdu *)(p))
#define VST(p, v) (*(vdu *)(p) = (v))
#define VZERO ((vd){0})
#define AI static inline __attribute__((always_inline))

static inline int64_t pad8(int64_t n) { return (n + 7) & ~(int64_t)7; }

/* out[c .. c + VD) = v's lanes, those before `width` only (a row's last, partial vector) */
AI void storev(float *out, int64_t c, int64_t width, vf v) {
    if (c + VD <= width) {
        *(vfu *)(out + c) = v;
    } else {
        for (int l = 0; c + l < width; l++) out[c + l] = v[l];
    }
}
static inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* rows of x converted to double, each padded with zeros to wp */
static void rows_to_double(const float *x, int64_t rows, int64_t width, int64_t wp, double *xd) {
    for (int64_t t = 0; t < rows; t++) {
        for (int64_t c = 0; c < width; c++) xd[t * wp + c] = (double)x[t * width + c];
        for (int64_t c = width; c < wp; c++) xd[t * wp + c] = 0.0;
    }
}

/* rows of the truncated DFT: Xr/Xi[k][c0 .. c0 + DFT_NV VD) for KB modes from k0, over `rows`
 * grid rows from t0 (xd: those rows in double, row stride wp). Each (k, c) chain: re += x c,
 * im -= x s. Up to DFT_KBMAX modes by DFT_NV vectors of channels: each twiddle is read once per
 * row, straight into its multiplies (with AVX-512, more channels per tile and fewer modes
 * measured slower). */
AI void dft_tile(const double *xd, int64_t wp, int64_t rows, int64_t t0, int64_t grid, const double *tw,
                 int64_t k0, int KB, int64_t c0, double *Xr, double *Xi) {
    vd ar[DFT_KBMAX][DFT_NV], ai[DFT_KBMAX][DFT_NV];
    int64_t r[DFT_KBMAX];
    for (int j = 0; j < KB; j++) {
        r[j] = ((k0 + j) * t0) % grid;
        for (int v = 0; v < DFT_NV; v++) {
            ar[j][v] = VLD(Xr + (k0 + j) * wp + c0 + VD * v);
            ai[j][v] = VLD(Xi + (k0 + j) * wp + c0 + VD * v);
        }
    }
    for (int64_t tt = 0; tt < rows; tt++) {
        vd xv[DFT_NV];
        for (int v = 0; v < DFT_NV; v++) xv[v] = VLD(xd + tt * wp + c0 + VD * v);
        for (int j = 0; j < KB; j++) {
            /* vector 0 apart: with AVX-512 (one vector) GCC then schedules as before */
            ar[j][0] += xv[0] * tw[2 * r[j]];
            ai[j][0] -= xv[0] * tw[2 * r[j] + 1];
            for (int v = 1; v < DFT_NV; v++) {
                ar[j][v] += xv[v] * tw[2 * r[j]];
                ai[j][v] -= xv[v] * tw[2 * r[j] + 1];
            }
            r[j] += k0 + j;
            if (r[j] >= grid) r[j] -= grid;
        }
    }
    for (int j = 0; j < KB; j++)
        for (int v = 0; v < DFT_NV; v++) {
            VST(Xr + (k0 + j) * wp + c0 + VD * v, ar[j][v]);
            VST(Xi + (k0 + j) * wp + c0 + VD * v, ai[j][v]);
        }
}

#define DFT_KB(KB)                                                                                 \
    do {                                                                                           \
        for (int64_t c0 = 0; c0 < wp; c0 += DFT_NV * VD)                                           \
            dft_tile(xd, wp, rows, t0, grid, tw, k0, KB, c0, Xr, Xi);                              \
    } while (0)

/* rows of the DFT kept per pass: about 16 KiB of doubles, at least 8 rows */
static inline int64_t dft_rows(int64_t wp) {
    int64_t tb = 2048 / wp;
    return tb < 8 ? 8 : tb;
}

/* X[k, c] = sum_t x[t, c] exp(-2 pi i k t / grid) for k in [klo, khi): planes Xr, Xi (modes, wp),
 * zeroed here for those modes. xd: scratch of dft_rows(wp) * wp doubles. */
static void dft_trunc(const float *x, int64_t grid, int64_t width, int64_t klo, int64_t khi, const double *tw,
                      double *Xr, double *Xi, double *xd) {
    int64_t wp = pad8(width), tb = dft_rows(wp);
    memset(Xr + klo * wp, 0, sizeof(double) * (size_t)((khi - klo) * wp));
    memset(Xi + klo * wp, 0, sizeof(double) * (size_t)((khi - klo) * wp));
    for (int64_t t0 = 0; t0 < grid; t0 += tb) {
        int64_t rows = min64(tb, grid - t0);
        rows_to_double(x + t0 * width, rows, width, wp, xd);
        for (int64_t k0 = klo; k0 < khi; k0 += DFT_KBMAX) {
            switch (min64(DFT_KBMAX, khi - k0)) {
#if DFT_KBMAX == 8
            case 8: DFT_KB(8); break;
            case 7: DFT_KB(7); break;
            case 6: DFT_KB(6); break;
            case 5: DFT_KB(5); break;
            case 4: DFT_KB(4); break;
#endif
            case 3: DFT_KB(3); break;
            case 2: DFT_KB(2); break;
            default: DFT_KB(1); break;
            }
        }
    }
}

/* y[t, c] = scale * sum_{k < modes} w_k (Re Z cos - Im Z sin) for TP rows from t0 and CV vectors
 * from c0; edge imaginary parts ignored (sin taken as 0), w_k = bin_weight when `weighted`, else
 * 1 (w * d with w = 1 is d, so the multiply is skipped then). */
AI void idft_tile(const double *Zr, const double *Zi, int64_t wp, int64_t grid, int64_t modes, const double *tw,
                  double scale, int weighted, int64_t t0, int TP, int CV, int64_t c0, int64_t width, float *y) {
    vd acc[IDFT_TPN][IDFT_CV];
    int64_t r[IDFT_TPN];
    for (int p = 0; p < TP; p++) {
        r[p] = 0;
        for (int v = 0; v < CV; v++) acc[p][v] = VZERO;
    }
    for (int64_t k = 0; k < modes; k++) {
        int edge = is_edge_bin(k, grid);
        int two = weighted && !edge;
        vd zr[IDFT_CV], zi[IDFT_CV];
        for (int v = 0; v < CV; v++) {
            zr[v] = VLD(Zr + k * wp + c0 + VD * v);
            zi[v] = VLD(Zi + k * wp + c0 + VD * v);
        }
        if (two) {
            for (int p = 0; p < TP; p++) {
                double c = tw[2 * r[p]], s = tw[2 * r[p] + 1];
                for (int v = 0; v < CV; v++) acc[p][v] += 2.0 * (zr[v] * c - zi[v] * s);
                r[p] += t0 + p;
                if (r[p] >= grid) r[p] -= grid;
            }
        } else {
            for (int p = 0; p < TP; p++) {
                double c = tw[2 * r[p]], s = edge ? 0.0 : tw[2 * r[p] + 1];
                for (int v = 0; v < CV; v++) acc[p][v] += zr[v] * c - zi[v] * s;
                r[p] += t0 + p;
                if (r[p] >= grid) r[p] -= grid;
            }
        }
    }
    for (int p = 0; p < TP; p++) {
        float *yt = y + (t0 + p) * width;
        for (int v = 0; v < CV; v++) {
            storev(yt, c0 + VD * v, width, __builtin_convertvector(acc[p][v] * scale, vf));
        }
    }
}

/* Rows t and grid - t in one pass. Their twiddles mirror each other: tw(grid - r) = (cos r,
 * -sin r) bit for bit for most r (mirror[r] = 0), so row grid - t takes Re Z cos + Im Z sin from
 * the same two products (a - b is a + (-b), and Im Z (-sin) is -(Im Z sin), exactly); r = 0 and
 * r = grid/2 are their own mirror (mirror[r] = 1: row grid - t gets row t's term, since its sin
 * is the same 0); where tlm_twiddle's table is not exactly mirrored (the odd multiples of
 * grid/8) row grid - t computes its own products (mirror[r] = 2). Each row's additions run in
 * the same order as in idft_tile.
 *
 * The weighted bins (w_k = 2) read twd = 2 tw, so that Re Z (2 cos) - Im Z (2 sin) stands for
 * 2 (Re Z cos - Im Z sin) with one multiply fewer per term, the same bits: scaling by 2 commutes
 * with rounding unless a product is subnormal (and a difference that lands among the subnormals
 * is exact either way), and no product here comes near: the data are float32, so x and W are
 * multiples of 2^-149, and the table and the scale w/grid (|value| >= 2^-62 where not 0) are
 * multiples of 2^-115; every spectrum is then a multiple of 2^-530 and every product here a
 * multiple of 2^-650, so at least that when not 0, far above 2^-1022. */
AI void idft_pair_tile(const double *Zr, const double *Zi, int64_t wp, int64_t grid, int64_t modes,
                       const double *tw, const double *twd, const unsigned char *mirror, double scale, int weighted, int64_t t0,
                       int TP, int CV, int64_t c0, int64_t width, float *y) {
    vd aa[PAIR_TPN][PAIR_CV], ab[PAIR_TPN][PAIR_CV];
    int64_t r[PAIR_TPN];
    for (int p = 0; p < TP; p++) {
        r[p] = 0;
        for (int v = 0; v < CV; v++) aa[p][v] = ab[p][v] = VZERO;
    }
    for (int64_t k = 0; k < modes; k++) {
        int edge = is_edge_bin(k, grid);
        int two = weighted && !edge;
        vd zr[PAIR_CV], zi[PAIR_CV];
        for (int v = 0; v < CV; v++) {
            zr[v] = VLD(Zr + k * wp + c0 + VD * v);
            zi[v] = VLD(Zi + k * wp + c0 + VD * v);
        }
        const double *t2 = two ? twd : tw;
        for (int p = 0; p < TP; p++) {
            double c = t2[2 * r[p]], s = edge ? 0.0 : t2[2 * r[p] + 1];
            int m = mirror[r[p]];
            for (int v = 0; v < CV; v++) {
                vd pc = zr[v] * c, qs = zi[v] * s;
                vd d1 = pc - qs, d2;
                if (__builtin_expect(m == 0, 1)) {
                    d2 = pc + qs;
                } else if (m == 1) {
                    d2 = d1;
                } else {
                    int64_t rb = grid - r[p];
                    double cb = t2[2 * rb], sb = edge ? 0.0 : t2[2 * rb + 1];
                    d2 = zr[v] * cb - zi[v] * sb;
                }
                aa[p][v] += d1;
                ab[p][v] += d2;
            }
            r[p] += t0 + p;
            if (r[p] >= grid) r[p] -= grid;
        }
    }
    for (int p = 0; p < TP; p++) {
        float *ya = y + (t0 + p) * width, *yb = y + (grid - t0 - p) * width;
        for (int v = 0; v < CV; v++) {
            storev(ya, c0 + VD * v, width, __builtin_convertvector(aa[p][v] * scale, vf));
            storev(yb, c0 + VD * v, width, __builtin_convertvector(ab[p][v] * scale, vf));
        }
    }
}

#define IDFT_TILE(TP, CV) idft_tile(Zr, Zi, wp, grid, modes, tw, scale, weighted, t0, TP, CV, c0, width, y)
#define IDFT_TP(TP)                                                                                \
    do {                                                                                           \
        int64_t c0 = 0;                                                                            \
        for (; c0 + IDFT_CV * VD <= wp; c0 += IDFT_CV * VD) IDFT_TILE(TP, IDFT_CV);                                           \
        if (c0 < wp) IDFT_TILE(TP, 1);                                                             \
    } while (0)
#define IDFT_PAIR_TILE(TP, CV)                                                                     \
    idft_pair_tile(Zr, Zi, wp, grid, modes, tw, twd, mirror, scale, weighted, t0, TP, CV, c0, width, y)
#define IDFT_PAIR_TP(TP)                                                                           \
    do {                                                                                           \
        int64_t c0 = 0;                                                                            \
        for (; c0 + PAIR_CV * VD <= wp; c0 += PAIR_CV * VD) IDFT_PAIR_TILE(TP, PAIR_CV);                                      \
        if (c0 < wp) IDFT_PAIR_TILE(TP, 1);                                                        \
    } while (0)

/* mirror[r] for idft_pair_tile: 0 where tw(grid - r) = (cos r, -sin r) bit for bit, 1 at r = 0
 * and r = grid/2, 2 elsewhere */
static void mirror_classes(const double *tw, int64_t grid, unsigned char *mirror) {
    for (int64_t r = 0; r < grid; r++) {
        if (r == 0 || 2 * r == grid) {
            mirror[r] = 1;
            continue;
        }
        double c = tw[2 * r], ns = -tw[2 * r + 1];
        mirror[r] = memcmp(&c, &tw[2 * (grid - r)], sizeof c) || memcmp(&ns, &tw[2 * (grid - r) + 1], sizeof ns)
                        ? 2 : 0;
    }
}

/* rows of y = scale * sum_k w_k (Re Z cos - Im Z sin): the rows t in [tlo, thi) of the first
 * half (t <= grid/2) and, for 0 < t < grid/2, their mirror rows grid - t; with mirror == NULL,
 * just the rows [tlo, thi) */
static void idft_trunc(const double *Zr, const double *Zi, int64_t grid, int64_t width, int64_t modes,
                       const double *tw, const double *twd, const unsigned char *mirror, double scale,
                       int weighted, int64_t tlo,
                       int64_t thi, float *y) {
    int64_t wp = pad8(width);
    int64_t t0 = tlo;
    if (!mirror) {
        for (; t0 + IDFT_TPN <= thi; t0 += IDFT_TPN) IDFT_TP(IDFT_TPN);
        for (; t0 < thi; t0++) IDFT_TP(1);
        return;
    }
    int64_t plo = tlo < 1 ? 1 : tlo, phi = min64(thi, (grid + 1) / 2);  /* paired rows: 0 < t < grid - t */
    if (tlo == 0) {
        t0 = 0;
        IDFT_TP(1);
    }
    for (t0 = plo; t0 + PAIR_TPN <= phi; t0 += PAIR_TPN) IDFT_PAIR_TP(PAIR_TPN);
    for (; t0 < phi; t0++) IDFT_PAIR_TP(1);
    if (grid % 2 == 0 && grid / 2 >= tlo && grid / 2 < thi && grid / 2 > 0) {
        t0 = grid / 2;
        IDFT_TP(1);
    }
}

/* the weights in double, padded: fwd[k][c][o] (out along the row), or, transposed, bwd[k][o][c] */
static void weights_to_double(const float *w, int64_t width, int64_t modes, int transpose, double *wd) {
    int64_t wp = pad8(width);
    for (int64_t k = 0; k < modes; k++)
        for (int64_t i = 0; i < width; i++) {
            double *row = wd + (k * width + i) * wp;
            for (int64_t j = 0; j < width; j++)
                row[j] = transpose ? (double)w[(k * width + j) * width + i] : (double)w[(k * width + i) * width + j];
            for (int64_t j = width; j < wp; j++) row[j] = 0.0;
        }
}

/* Forward mixing for SB samples from b0 at mode k, out vectors [o0, o0 + VD CV):
 * Z[b, k, o] = sum_c X[b, k, c] W[k, c, o] (re += xr wr - xi wi, im += xr wi + xi wr).
 * Backward (conj = 1), with wd transposed: dX[b, k, c] = sum_o dZ[b, k, o] conj(W[k, c, o])
 * (re += zr wr + zi wi, im += zi wr - zr wi). S: spectra, sample stride `per`, planes re at 0,
 * im at modes * wp. */
AI void mix_tile(const double *S, double *O, int64_t per, int64_t modes, int64_t width, int64_t wp,
                 const double *wdr, const double *wdi, int64_t k, int64_t b0, int SB, int CV, int64_t o0, int conj) {
    vd ar[MIX_SBN][MIX_CV], ai[MIX_SBN][MIX_CV];
    int64_t im_off = modes * wp;
    for (int b = 0; b < SB; b++)
        for (int v = 0; v < CV; v++) ar[b][v] = ai[b][v] = VZERO;
    const double *wr = wdr + k * width * wp + o0, *wi = wdi + k * width * wp + o0;
    const double *Sk = S + b0 * per + k * wp;
    for (int64_t c = 0; c < width; c++) {
        vd a[MIX_CV], bb[MIX_CV];
        for (int v = 0; v < CV; v++) {
            a[v] = VLD(wr + c * wp + VD * v);
            bb[v] = VLD(wi + c * wp + VD * v);
        }
        for (int b = 0; b < SB; b++) {
            double xr = Sk[b * per + c], xi = Sk[b * per + im_off + c];
            for (int v = 0; v < CV; v++) {
                if (!conj) {
                    ar[b][v] += xr * a[v] - xi * bb[v];
                    ai[b][v] += xr * bb[v] + xi * a[v];
                } else {
                    ar[b][v] += xr * a[v] + xi * bb[v];
                    ai[b][v] += xi * a[v] - xr * bb[v];
                }
            }
        }
    }
    for (int b = 0; b < SB; b++)
        for (int v = 0; v < CV; v++) {
            VST(O + (b0 + b) * per + k * wp + o0 + VD * v, ar[b][v]);
            VST(O + (b0 + b) * per + im_off + k * wp + o0 + VD * v, ai[b][v]);
        }
}

#define MIX_TILE(SB, CV) mix_tile(S, O, per, modes, width, wp, wdr, wdi, k, b0, SB, CV, o0, conj)
#define MIX_SB(SB)                                                                                 \
    do {                                                                                           \
        int64_t o0 = 0;                                                                            \
        for (; o0 + MIX_CV * VD <= wp; o0 += MIX_CV * VD) MIX_TILE(SB, MIX_CV);                                            \
        if (o0 < wp) MIX_TILE(SB, 1);                                                              \
    } while (0)

/* mixing of samples [blo, bhi) at mode k */
static void mix(const double *S, double *O, int64_t per, int64_t modes, int64_t width, const double *wdr,
                const double *wdi, int64_t k, int64_t blo, int64_t bhi, int conj) {
    int64_t wp = pad8(width);
    int64_t b0 = blo;
    for (; b0 + MIX_SBN <= bhi; b0 += MIX_SBN) MIX_SB(MIX_SBN);
    for (; b0 < bhi; b0++) MIX_SB(1);
}

/* dW[k, c, o] for CB inputs from c0 and CV out vectors from o0: sum over samples in increasing
 * order of conj(X[b, k, c]) dZ[b, k, o] (re += xr zr + xi zi, im += xr zi - xi zr) */
AI void dw_tile(const double *X, const double *dZ, int64_t per, int64_t batch, int64_t modes, int64_t width,
                int64_t wp, int64_t k, int64_t c0, int CB, int CV, int64_t o0, float *dWr, float *dWi) {
    vd ar[DW_CBN][DW_CV], ai[DW_CBN][DW_CV];
    int64_t im_off = modes * wp;
    for (int i = 0; i < CB; i++)
        for (int v = 0; v < CV; v++) ar[i][v] = ai[i][v] = VZERO;
    for (int64_t b = 0; b < batch; b++) {
        const double *Xk = X + b * per + k * wp, *Zk = dZ + b * per + k * wp;
        vd zr[DW_CV], zi[DW_CV];
        for (int v = 0; v < CV; v++) {
            zr[v] = VLD(Zk + o0 + VD * v);
            zi[v] = VLD(Zk + im_off + o0 + VD * v);
        }
        for (int i = 0; i < CB; i++) {
            double xr = Xk[c0 + i], xi = Xk[im_off + c0 + i];
            for (int v = 0; v < CV; v++) {
                ar[i][v] += xr * zr[v] + xi * zi[v];
                ai[i][v] += xr * zi[v] - xi * zr[v];
            }
        }
    }
    for (int i = 0; i < CB; i++) {
        float *outr = dWr + (k * width + c0 + i) * width, *outi = dWi + (k * width + c0 + i) * width;
        for (int v = 0; v < CV; v++) {
            storev(outr, o0 + VD * v, width, __builtin_convertvector(ar[i][v], vf));
            storev(outi, o0 + VD * v, width, __builtin_convertvector(ai[i][v], vf));
        }
    }
}

#define DW_TILE(CB, CV) dw_tile(X, dZ, per, batch, modes, width, wp, k, c0, CB, CV, o0, dWr, dWi)
#define DW_CB(CB)                                                                                  \
    do {                                                                                           \
        int64_t o0 = 0;                                                                            \
        for (; o0 + DW_CV * VD <= wp; o0 += DW_CV * VD) DW_TILE(CB, DW_CV);                                             \
        if (o0 < wp) DW_TILE(CB, 1);                                                               \
    } while (0)

/* dW rows for inputs [clo, chi) at mode k */
static void dweights(const double *X, const double *dZ, int64_t per, int64_t batch, int64_t modes, int64_t width,
                     int64_t k, int64_t clo, int64_t chi, float *dWr, float *dWi) {
    int64_t wp = pad8(width);
    int64_t c0 = clo;
    for (; c0 + DW_CBN <= chi; c0 += DW_CBN) DW_CB(DW_CBN);
    for (; c0 < chi; c0++) DW_CB(1);
}

/* Work split: mode groups of the DFT per sample (several when the batch is too small to keep
 * every thread busy) and row chunks of the inverse. Outputs never depend on the split. */
static int64_t mode_groups(int64_t batch, int64_t modes, int nthr) {
    int64_t blocks = (modes + 3) / 4, want = (4 * (int64_t)nthr + batch - 1) / batch;
    if (nthr <= 1 || batch >= 4 * nthr) return 1;
    return want < blocks ? want : blocks;
}

static inline void group_range(int64_t g, int64_t groups, int64_t modes, int64_t *lo, int64_t *hi) {
    int64_t blocks = (modes + 3) / 4;
    *lo = 4 * (g * blocks / groups);
    *hi = min64(modes, 4 * ((g + 1) * blocks / groups));
}

#define ROW_CHUNK 32 /* first-half rows (each with its mirror row) per unit of the inverse */

typedef struct {
    double *tw, *twd, *spec, *xd, *wdr, *wdi;
    unsigned char *mirror;
    int64_t per, wp, xdn;
    int nthr;
} spec_work;

static void spec_free(spec_work *s) {
    free(s->tw);
    free(s->twd);
    free(s->spec);
    free(s->xd);
    free(s->wdr);
    free(s->wdi);
    free(s->mirror);
}

/* twiddles, `planes` spectra per sample, per-thread row scratch, the weights in double */
static int spec_alloc(const char *op, spec_work *s, int64_t batch, int64_t grid, int64_t width, int64_t modes,
                      int planes, int par) {
    memset(s, 0, sizeof *s);
    s->wp = pad8(width);
    s->per = 2 * modes * s->wp;
    s->nthr = par ? omp_get_max_threads() : 1;
    if (s->nthr < 1) s->nthr = 1;
    s->xdn = dft_rows(s->wp) * s->wp;
    TL_TRY(twiddles(op, grid, &s->tw));
    size_t nwd = (size_t)(modes * width * s->wp);
    s->spec = malloc(sizeof(double) * (size_t)(planes * batch * s->per));
    s->xd = malloc(sizeof(double) * (size_t)(s->nthr * s->xdn));
    s->wdr = malloc(sizeof(double) * nwd);
    s->wdi = malloc(sizeof(double) * nwd);
    s->mirror = malloc((size_t)grid);
    s->twd = malloc(sizeof(double) * 2 * (size_t)grid);
    if (!s->twd || !s->spec || !s->xd || !s->wdr || !s->wdi || !s->mirror) {
        spec_free(s);
        return tl_fail(TL_E_OOM, "%s: cannot allocate spectra for batch %lld, width %lld, %lld modes", op,
                       (long long)batch, (long long)width, (long long)modes);
    }
    mirror_classes(s->tw, grid, s->mirror);
    for (int64_t i = 0; i < 2 * grid; i++) s->twd[i] = 2.0 * s->tw[i];
    return TL_OK;
}

static inline int thread_slot(int nthr) {
    int t = omp_get_thread_num();
    return t < nthr ? t : 0;
}

/* out[b] = idft_trunc of spectra S[b] for every sample, split over (sample, ROW_CHUNK first-half
 * rows) units */
static void idft_batch(const spec_work *s, const double *S, int64_t batch, int64_t grid, int64_t width,
                       int64_t modes, double scale, int weighted, int par, float *out) {
    int64_t half = grid / 2 + 1, chunks = (half + ROW_CHUNK - 1) / ROW_CHUNK;
#pragma omp parallel for schedule(static) if (par)
    for (int64_t u = 0; u < batch * chunks; u++) {
        int64_t b = u / chunks, t0 = (u % chunks) * ROW_CHUNK;
        const double *Sb = S + b * s->per;
        idft_trunc(Sb, Sb + modes * s->wp, grid, width, modes, s->tw, s->twd, s->mirror, scale, weighted, t0,
                   min64(half, t0 + ROW_CHUNK), out + b * grid * width);
    }
}

int tlk_spectral_conv1d_rfft(const char *op, tl_buf x, tl_buf w_re, tl_buf w_im, tl_buf y, int64_t batch, int64_t grid,
                            int64_t width, int64_t modes) {
    if (batch == 0) return TL_OK;
    int par = batch * grid * modes * width > TL_PAR_MIN;
    spec_work s;
    TL_TRY(spec_alloc(op, &s, batch, grid, width, modes, 2, par));
    const double *tw = s.tw;
    int64_t per = s.per, wp = s.wp;
    double *X = s.spec, *Z = X + batch * per;
    const float *xs = x->data;
    float *ys = y->data;
    int64_t groups = mode_groups(batch, modes, s.nthr);
    /* X = truncated rfft(x) per sample */
#pragma omp parallel for schedule(static) if (par)
    for (int64_t u = 0; u < batch * groups; u++) {
        int64_t b = u / groups, klo, khi;
        group_range(u % groups, groups, modes, &klo, &khi);
        double *Xb = X + b * per;
        dft_trunc(xs + b * grid * width, grid, width, klo, khi, tw, Xb, Xb + modes * wp,
                  s.xd + thread_slot(s.nthr) * s.xdn);
    }
    weights_to_double(w_re->data, width, modes, 0, s.wdr);
    weights_to_double(w_im->data, width, modes, 0, s.wdi);
    /* Z[b, k] = X[b, k] W[k] */
#pragma omp parallel for schedule(static) if (par)
    for (int64_t k = 0; k < modes; k++) mix(X, Z, per, modes, width, s.wdr, s.wdi, k, 0, batch, 0);
    /* y = irfft of the retained modes of Z */
    idft_batch(&s, Z, batch, grid, width, modes, 1.0 / (double)grid, 1, par, ys);
    spec_free(&s);
    return TL_OK;
}

int tlk_spectral_conv1d_rfft_backward(const char *op, tl_buf x, tl_buf w_re, tl_buf w_im, tl_buf g, tl_buf dx,
                                     tl_buf dw_re, tl_buf dw_im, int64_t batch, int64_t grid,
                                     int64_t width, int64_t modes) {
    int64_t nw = modes * width * width;
    float *dWr = dw_re->data, *dWi = dw_im->data;
    if (batch == 0) {
        memset(dWr, 0, sizeof(float) * (size_t)nw);
        memset(dWi, 0, sizeof(float) * (size_t)nw);
        return TL_OK;
    }
    int par = batch * grid * modes * width > TL_PAR_MIN;
    spec_work s;
    /* X, dZ and dX spectra per sample (X and dZ stay for the weights) */
    TL_TRY(spec_alloc(op, &s, batch, grid, width, modes, 3, par));
    const double *tw = s.tw;
    int64_t per = s.per, wp = s.wp;
    double *X = s.spec, *dZ = X + batch * per, *dX = dZ + batch * per;
    const float *xs = x->data, *gs = g->data;
    float *dxs = dx->data;
    int64_t groups = mode_groups(batch, modes, s.nthr);
#pragma omp parallel for schedule(static) if (par)
    for (int64_t u = 0; u < batch * groups; u++) {
        int64_t b = u / groups, klo, khi;
        group_range(u % groups, groups, modes, &klo, &khi);
        double *xd = s.xd + thread_slot(s.nthr) * s.xdn;
        double *Xb = X + b * per, *Zb = dZ + b * per;
        dft_trunc(xs + b * grid * width, grid, width, klo, khi, tw, Xb, Xb + modes * wp, xd);
        /* dZ = rfft(g) * w_k / grid; the imaginary DC/Nyquist parts do not reach y */
        dft_trunc(gs + b * grid * width, grid, width, klo, khi, tw, Zb, Zb + modes * wp, xd);
        for (int64_t k = klo; k < khi; k++) {
            double sc = bin_weight(k, grid) / (double)grid;
            int edge = is_edge_bin(k, grid);
            double *zr = Zb + k * wp, *zi = Zb + modes * wp + k * wp;
            for (int64_t o = 0; o < wp; o++) {
                zr[o] *= sc;
                zi[o] = edge ? 0.0 : zi[o] * sc;
            }
        }
    }
    /* dX[b, k, c] = sum_o dZ[b, k, o] conj(W[k, c, o]) */
    weights_to_double(w_re->data, width, modes, 1, s.wdr);
    weights_to_double(w_im->data, width, modes, 1, s.wdi);
#pragma omp parallel for schedule(static) if (par)
    for (int64_t k = 0; k < modes; k++) mix(dZ, dX, per, modes, width, s.wdr, s.wdi, k, 0, batch, 1);
    /* dx = adjoint of the truncated rfft (unweighted, unscaled) */
    idft_batch(&s, dX, batch, grid, width, modes, 1.0, 0, par, dxs);
    /* dW[k, c, o] = sum_b conj(X[b, k, c]) dZ[b, k, o], samples in increasing order */
    int64_t cchunks = (width + 15) / 16;
#pragma omp parallel for schedule(static) if (par)
    for (int64_t u = 0; u < modes * cchunks; u++) {
        int64_t k = u / cchunks, c0 = (u % cchunks) * 16;
        dweights(X, dZ, per, batch, modes, width, k, c0, min64(width, c0 + 16), dWr, dWi);
    }
    spec_free(&s);
    return TL_OK;
}
