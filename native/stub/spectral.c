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

/* ------------------------------------------------------------------ spectral convolution */

/* X[k, c] = sum_t x[t, c] exp(-2 pi i k t / grid) for k < modes; X is (modes, width, 2) */
static void dft_trunc(const float *x, int64_t grid, int64_t width, int64_t modes, const double *tw,
                      double *X) {
    memset(X, 0, sizeof(double) * 2 * (size_t)(modes * width));
    for (int64_t k = 0; k < modes; k++) {
        double *Xk = X + k * width * 2;
        int64_t r = 0;
        for (int64_t t = 0; t < grid; t++) {
            double c = tw[2 * r], s = tw[2 * r + 1];
            const float *xt = x + t * width;
            for (int64_t ch = 0; ch < width; ch++) {
                Xk[2 * ch] += (double)xt[ch] * c;
                Xk[2 * ch + 1] -= (double)xt[ch] * s;
            }
            r += k;
            if (r >= grid) r -= grid;
        }
    }
}

/* y[t, c] = scale * sum_{k < modes} w_k (Re Z cos - Im Z sin), edge imaginary parts ignored;
 * w_k = bin_weight when `weighted`, else 1. acc is a width-long scratch row. */
static void idft_trunc(const double *Z, int64_t grid, int64_t width, int64_t modes, const double *tw,
                       double scale, int weighted, double *acc, float *y) {
    for (int64_t t = 0; t < grid; t++) {
        memset(acc, 0, sizeof(double) * (size_t)width);
        int64_t r = 0;
        for (int64_t k = 0; k < modes; k++) {
            double w = weighted ? bin_weight(k, grid) : 1.0;
            double c = tw[2 * r], s = is_edge_bin(k, grid) ? 0.0 : tw[2 * r + 1];
            const double *Zk = Z + k * width * 2;
            for (int64_t ch = 0; ch < width; ch++) acc[ch] += w * (Zk[2 * ch] * c - Zk[2 * ch + 1] * s);
            r += t;
            if (r >= grid) r -= grid;
        }
        for (int64_t ch = 0; ch < width; ch++) y[t * width + ch] = (float)(acc[ch] * scale);
    }
}

int tlk_spectral_conv1d_rfft(const char *op, tl_buf x, tl_buf w_re, tl_buf w_im, tl_buf y, int64_t batch, int64_t grid,
                            int64_t width, int64_t modes) {
    int64_t spec = modes * width * 2;
    if (batch == 0) return TL_OK;
    double *tw, *work;
    TL_TRY(twiddles(op, grid, &tw));
    /* per sample: X and Z spectra (modes, width, 2) and one accumulator row */
    int64_t per = 2 * spec + width;
    work = malloc(sizeof(double) * (size_t)(batch * per));
    if (!work) {
        free(tw);
        return tl_fail(TL_E_OOM, "%s: cannot allocate %lld doubles of spectra", op, (long long)(batch * per));
    }
    const float *Wr = w_re->data, *Wi = w_im->data;
#pragma omp parallel for schedule(static) if (batch > 1 && batch * grid * modes * width > TL_PAR_MIN)
    for (int64_t b = 0; b < batch; b++) {
        double *X = work + b * per, *Z = X + spec, *acc = Z + spec;
        dft_trunc(x->data + b * grid * width, grid, width, modes, tw, X);
        memset(Z, 0, sizeof(double) * (size_t)spec);
        for (int64_t k = 0; k < modes; k++)
            for (int64_t c = 0; c < width; c++) {
                double xr = X[(k * width + c) * 2], xi = X[(k * width + c) * 2 + 1];
                const float *wr = Wr + (k * width + c) * width, *wi = Wi + (k * width + c) * width;
                double *Zk = Z + k * width * 2;
                for (int64_t o = 0; o < width; o++) {
                    Zk[2 * o] += xr * wr[o] - xi * wi[o];
                    Zk[2 * o + 1] += xr * wi[o] + xi * wr[o];
                }
            }
        idft_trunc(Z, grid, width, modes, tw, 1.0 / (double)grid, 1, acc, y->data + b * grid * width);
    }
    free(work);
    free(tw);
    return TL_OK;
}

int tlk_spectral_conv1d_rfft_backward(const char *op, tl_buf x, tl_buf w_re, tl_buf w_im, tl_buf g, tl_buf dx,
                                     tl_buf dw_re, tl_buf dw_im, int64_t batch, int64_t grid,
                                     int64_t width, int64_t modes) {
    int64_t nw = modes * width * width, spec = modes * width * 2;
    float *dWr = dw_re->data, *dWi = dw_im->data;
    if (batch == 0) {
        memset(dWr, 0, sizeof(float) * (size_t)nw);
        memset(dWi, 0, sizeof(float) * (size_t)nw);
        return TL_OK;
    }
    double *tw, *work;
    TL_TRY(twiddles(op, grid, &tw));
    /* per sample: X, dZ, dX spectra and one accumulator row (X and dZ stay for the weights) */
    int64_t per = 3 * spec + width;
    work = malloc(sizeof(double) * (size_t)(batch * per));
    if (!work) {
        free(tw);
        return tl_fail(TL_E_OOM, "%s: cannot allocate %lld doubles of spectra", op, (long long)(batch * per));
    }
    const float *Wr = w_re->data, *Wi = w_im->data;
    int par = batch * grid * modes * width > TL_PAR_MIN;
#pragma omp parallel for schedule(static) if (batch > 1 && par)
    for (int64_t b = 0; b < batch; b++) {
        double *X = work + b * per, *dZ = X + spec, *dX = dZ + spec, *acc = dX + spec;
        dft_trunc(x->data + b * grid * width, grid, width, modes, tw, X);
        /* dZ = rfft(g) * w_k / grid; the imaginary DC/Nyquist parts do not reach y */
        dft_trunc(g->data + b * grid * width, grid, width, modes, tw, dZ);
        for (int64_t k = 0; k < modes; k++) {
            double s = bin_weight(k, grid) / (double)grid;
            int edge = is_edge_bin(k, grid);
            for (int64_t o = 0; o < width; o++) {
                dZ[(k * width + o) * 2] *= s;
                dZ[(k * width + o) * 2 + 1] = edge ? 0.0 : dZ[(k * width + o) * 2 + 1] * s;
            }
        }
        /* dX[k, c] = sum_o dZ[k, o] conj(W[k, c, o]) */
        for (int64_t k = 0; k < modes; k++)
            for (int64_t c = 0; c < width; c++) {
                const float *wr = Wr + (k * width + c) * width, *wi = Wi + (k * width + c) * width;
                const double *dZk = dZ + k * width * 2;
                double re = 0.0, im = 0.0;
                for (int64_t o = 0; o < width; o++) {
                    re += dZk[2 * o] * wr[o] + dZk[2 * o + 1] * wi[o];
                    im += dZk[2 * o + 1] * wr[o] - dZk[2 * o] * wi[o];
                }
                dX[(k * width + c) * 2] = re;
                dX[(k * width + c) * 2 + 1] = im;
            }
        /* dx = adjoint of the truncated rfft (unweighted, unscaled) */
        idft_trunc(dX, grid, width, modes, tw, 1.0, 0, acc, dx->data + b * grid * width);
    }
    /* dW[k, c, o] = sum_b conj(X[b, k, c]) dZ[b, k, o], samples in increasing order */
#pragma omp parallel for collapse(2) schedule(static) if (par)
    for (int64_t k = 0; k < modes; k++)
        for (int64_t c = 0; c < width; c++) {
            for (int64_t o = 0; o < width; o++) {
                double re = 0.0, im = 0.0;
                for (int64_t b = 0; b < batch; b++) {
                    const double *X = work + b * per, *dZ = X + spec;
                    double xr = X[(k * width + c) * 2], xi = X[(k * width + c) * 2 + 1];
                    double zr = dZ[(k * width + o) * 2], zi = dZ[(k * width + o) * 2 + 1];
                    re += xr * zr + xi * zi;
                    im += xr * zi - xi * zr;
                }
                dWr[(k * width + c) * width + o] = (float)re;
                dWi[(k * width + c) * width + o] = (float)im;
            }
        }
    free(work);
    free(tw);
    return TL_OK;
}
