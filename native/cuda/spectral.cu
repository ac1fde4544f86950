// spectral.cu (CUDA): real DFTs over the last axis and the FNO spectral convolution.
//
// Direct transforms, mirroring native/stub/spectral.c bit for bit in every mode: one thread
// per output coefficient, twiddles from a float64 table of cos/sin(2 pi r / n) built per call
// in scratch memory by tlm_twiddle (tl_math.h, as on the stub: no cuFFT, no sincospi), float64
// sums sequential in index order (nvcc --fmad=false: no contraction). The spectral convolution only ever
// needs the `modes` retained bins, so a truncated DFT (O(grid * modes * width)) replaces a
// full cuFFT R2C/C2R pair; every sum runs in a fixed order (no atomics), so results are
// bit-reproducible run to run whatever the deterministic flag.
#include "common.cuh"
#include "tl_math.h"
#include "generated/spectral_kernels.h"

namespace {

// the stub's table (tlm_twiddle: IEEE double operations only), so both give the same bits
__global__ void k_twiddles(double2 *tw, int64_t n) {
    TL_GRID_STRIDE(r, n) {
        double c, s;
        tlm_twiddle(r, n, &c, &s);
        tw[r] = make_double2(c, s);
    }
}

__device__ __forceinline__ double bin_weight(int64_t k, int64_t n) {
    return (k == 0 || (n % 2 == 0 && k == n / 2)) ? 1.0 : 2.0;
}

__device__ __forceinline__ bool is_edge_bin(int64_t k, int64_t n) {
    return k == 0 || (n % 2 == 0 && k == n / 2);
}

// spec[b, k] = scale_k * sum_t x[b, t] exp(-2 pi i k t / n); adjoint_of_irfft: scale_k = w_k / n,
// edge imaginary parts 0
__global__ void k_analysis(const float *__restrict__ x, float *__restrict__ y, int64_t batch, int64_t n,
                           const double2 *__restrict__ tw, int adjoint_of_irfft) {
    int64_t bins = n / 2 + 1;
    TL_GRID_STRIDE(i, batch * bins) {
        int64_t b = i / bins, k = i % bins;
        const float *xr = x + b * n;
        double re = 0.0, im = 0.0;
        int64_t r = 0;
        for (int64_t t = 0; t < n; t++) {
            double2 w = tw[r];
            re += (double)xr[t] * w.x;
            im -= (double)xr[t] * w.y;
            r += k;
            if (r >= n) r -= n;
        }
        if (adjoint_of_irfft) {
            double s = bin_weight(k, n) / (double)n;
            re *= s;
            im = is_edge_bin(k, n) ? 0.0 : im * s;
        }
        y[2 * i] = (float)re;
        y[2 * i + 1] = (float)im;
    }
}

// y[b, t] = scale * sum_k w_k (re_k cos - im_k sin), edge imaginary parts ignored
__global__ void k_synthesis(const float *__restrict__ spec, float *__restrict__ y, int64_t batch, int64_t n,
                            const double2 *__restrict__ tw, int is_irfft) {
    int64_t bins = n / 2 + 1;
    double scale = is_irfft ? 1.0 / (double)n : 1.0;
    TL_GRID_STRIDE(i, batch * n) {
        int64_t b = i / n, t = i % n;
        const float *sr = spec + b * bins * 2;
        double acc = 0.0;
        int64_t r = 0;
        for (int64_t k = 0; k < bins; k++) {
            double2 w = tw[r];
            double wk = is_irfft ? bin_weight(k, n) : 1.0;
            double im = is_edge_bin(k, n) ? 0.0 : (double)sr[2 * k + 1];
            acc += wk * ((double)sr[2 * k] * w.x - im * w.y);
            r += t;
            if (r >= n) r -= n;
        }
        y[i] = (float)(acc * scale);
    }
}

int make_twiddles(const char *op, int64_t n, double2 **out) {
    TL_TRY(tl_scratch(op, sizeof(double2) * (size_t)n, (void **)out));
    k_twiddles<<<tl_blocks(n), TL_THREADS, 0, tl_stream()>>>(*out, n);
    int st = tl_cuda_launched(op);
    if (st) tl_scratch_free(*out);
    return st;
}

int transform(const char *op, tl_buf x, tl_buf y, int64_t batch, int64_t n, bool analysis, int flag) {
    int64_t bins = n / 2 + 1;
    if (batch == 0) return TL_OK;
    double2 *tw;
    TL_TRY(make_twiddles(op, n, &tw));
    if (analysis)
        k_analysis<<<tl_blocks(batch * bins), TL_THREADS, 0, tl_stream()>>>(x->data, y->data, batch, n, tw, flag);
    else
        k_synthesis<<<tl_blocks(batch * n), TL_THREADS, 0, tl_stream()>>>(x->data, y->data, batch, n, tw, flag);
    int st = tl_cuda_launched(op);
    tl_scratch_free(tw);
    return st;
}

// ------------------------------------------------------------------ spectral convolution
// Spectra are float64 (batch, modes, width, 2) in scratch memory.

// X[b, k, c] = sum_t x[b, t, c] exp(-2 pi i k t / grid); as_dz: times w_k / grid, edge imag 0.
// Each output is one sequential float64 chain over t (the stub's order). A block owns
// DFT_THREADS consecutive (k, c) outputs of one sample b and stages DFT_TC grid rows of that
// sample's x at a time in shared memory, so every chain step reads shared memory instead of
// waiting on a global load (the chains themselves cannot be split without changing bits).
constexpr int DFT_THREADS = 256;
constexpr int64_t DFT_SMEM_FLOATS = 8192;  // 32 KiB of staged x

__device__ __forceinline__ void dft_finish(double re, double im, int64_t k, int64_t grid, int as_dz,
                                           double *out) {
    if (as_dz) {
        double s = bin_weight(k, grid) / (double)grid;
        re *= s;
        im = is_edge_bin(k, grid) ? 0.0 : im * s;
    }
    out[0] = re;
    out[1] = im;
}

__global__ void __launch_bounds__(DFT_THREADS)
k_dft_trunc(const float *__restrict__ x, double *__restrict__ X, int64_t grid, int64_t width,
            int64_t modes, int64_t blocks_per_sample, int64_t tc, const double2 *__restrict__ tw,
            int as_dz) {
    extern __shared__ float xs[];  // xs[tt * width + c] = x[b, t0 + tt, c]
    const int64_t b = blockIdx.x / blocks_per_sample;
    const int64_t j = (blockIdx.x % blocks_per_sample) * DFT_THREADS + threadIdx.x;  // (k, c)
    const bool active = j < modes * width;
    const int64_t k = active ? j / width : 0, c = active ? j % width : 0;
    const float *xb = x + b * grid * width;
    double re = 0.0, im = 0.0;
    int64_t r = 0;
    for (int64_t t0 = 0; t0 < grid; t0 += tc) {
        const int64_t rows = grid - t0 < tc ? grid - t0 : tc;
        __syncthreads();  // the previous tile is consumed
        for (int64_t e = threadIdx.x; e < rows * width; e += DFT_THREADS) xs[e] = xb[t0 * width + e];
        __syncthreads();
        if (active)
            for (int64_t tt = 0; tt < rows; tt++) {
                double2 w = __ldg(&tw[r]);
                double v = (double)xs[tt * width + c];
                re += v * w.x;
                im -= v * w.y;
                r += k;
                if (r >= grid) r -= grid;
            }
    }
    if (active) dft_finish(re, im, k, grid, as_dz, X + 2 * (b * modes * width + j));
}

// the same outputs without staging, for very wide inputs (width > DFT_SMEM_FLOATS)
__global__ void k_dft_trunc_wide(const float *__restrict__ x, double *__restrict__ X, int64_t batch,
                                 int64_t grid, int64_t width, int64_t modes,
                                 const double2 *__restrict__ tw, int as_dz) {
    TL_GRID_STRIDE(i, batch * modes * width) {
        int64_t c = i % width, k = (i / width) % modes, b = i / (width * modes);
        const float *xc = x + b * grid * width + c;
        double re = 0.0, im = 0.0;
        int64_t r = 0;
        for (int64_t t = 0; t < grid; t++) {
            double2 w = tw[r];
            double v = (double)xc[t * width];
            re += v * w.x;
            im -= v * w.y;
            r += k;
            if (r >= grid) r -= grid;
        }
        dft_finish(re, im, k, grid, as_dz, X + 2 * i);
    }
}

// launch one of the two on the stream
int dft_trunc(const char *op, const float *x, double *X, int64_t batch, int64_t grid, int64_t width,
              int64_t modes, const double2 *tw, int as_dz) {
    if (batch * modes * width == 0) return TL_OK;
    cudaStream_t s = tl_stream();
    const int64_t per = (modes * width + DFT_THREADS - 1) / DFT_THREADS;
    if (width > DFT_SMEM_FLOATS || batch * per > TL_MAX_GRID_X) {
        k_dft_trunc_wide<<<tl_blocks(batch * modes * width), TL_THREADS, 0, s>>>(x, X, batch, grid, width,
                                                                                 modes, tw, as_dz);
    } else {
        int64_t tc = DFT_SMEM_FLOATS / width;
        if (tc > grid) tc = grid;
        k_dft_trunc<<<(unsigned)(batch * per), DFT_THREADS, (size_t)(tc * width) * sizeof(float), s>>>(
            x, X, grid, width, modes, per, tc, tw, as_dz);
    }
    return tl_cuda_launched(op);
}

// forward (conj_w = 0): Z[b, k, o] = sum_c X[b, k, c] W[k, c, o]
// backward (conj_w = 1): dX[b, k, c] = sum_o dZ[b, k, o] conj(W[k, c, o])
__global__ void k_mix(const double *__restrict__ S, const float *__restrict__ wr, const float *__restrict__ wi,
                      double *__restrict__ out, int64_t batch, int64_t width, int64_t modes, int conj_w) {
    TL_GRID_STRIDE(i, batch * modes * width) {
        int64_t j = i % width, k = (i / width) % modes, b = i / (width * modes);
        const double *Sk = S + (b * modes + k) * width * 2;
        double re = 0.0, im = 0.0;
        if (!conj_w) {
            for (int64_t c = 0; c < width; c++) {
                double xr = Sk[2 * c], xi = Sk[2 * c + 1];
                double a = (double)wr[(k * width + c) * width + j], bb = (double)wi[(k * width + c) * width + j];
                re += xr * a - xi * bb;
                im += xr * bb + xi * a;
            }
        } else {
            const float *wrr = wr + (k * width + j) * width, *wir = wi + (k * width + j) * width;
            for (int64_t o = 0; o < width; o++) {
                double zr = Sk[2 * o], zi = Sk[2 * o + 1];
                double a = (double)wrr[o], bb = (double)wir[o];
                re += zr * a + zi * bb;
                im += zi * a - zr * bb;
            }
        }
        out[2 * i] = re;
        out[2 * i + 1] = im;
    }
}

// y[b, t, c] = scale * sum_{k < modes} w_k (Re Z cos - Im Z sin), edge imaginary parts ignored
__global__ void k_idft_trunc(const double *__restrict__ Z, float *__restrict__ y, int64_t batch, int64_t grid,
                             int64_t width, int64_t modes, const double2 *__restrict__ tw, double scale,
                             int weighted) {
    TL_GRID_STRIDE(i, batch * grid * width) {
        int64_t c = i % width, t = (i / width) % grid, b = i / (width * grid);
        const double *Zb = Z + b * modes * width * 2 + 2 * c;
        double acc = 0.0;
        int64_t r = 0;
        for (int64_t k = 0; k < modes; k++) {
            double2 w = tw[r];
            double wk = weighted ? bin_weight(k, grid) : 1.0;
            double s = is_edge_bin(k, grid) ? 0.0 : w.y;
            acc += wk * (Zb[k * width * 2] * w.x - Zb[k * width * 2 + 1] * s);
            r += t;
            if (r >= grid) r -= grid;
        }
        y[i] = (float)(acc * scale);
    }
}

// dW[k, c, o] = sum_b conj(X[b, k, c]) dZ[b, k, o], samples in increasing order
__global__ void k_dweights(const double *__restrict__ X, const double *__restrict__ dZ, float *__restrict__ dwr,
                           float *__restrict__ dwi, int64_t batch, int64_t width, int64_t modes) {
    TL_GRID_STRIDE(i, modes * width * width) {
        int64_t o = i % width, c = (i / width) % width, k = i / (width * width);
        double re = 0.0, im = 0.0;
        for (int64_t b = 0; b < batch; b++) {
            const double *Xb = X + ((b * modes + k) * width + c) * 2;
            const double *Zb = dZ + ((b * modes + k) * width + o) * 2;
            re += Xb[0] * Zb[0] + Xb[1] * Zb[1];
            im += Xb[0] * Zb[1] - Xb[1] * Zb[0];
        }
        dwr[i] = (float)re;
        dwi[i] = (float)im;
    }
}

// A spectral convolution's scratch: the twiddle table of the grid, then `count` spectra of
// (batch, modes, width, 2) doubles in one allocation; both freed (spectra first) when the entry
// point returns, whichever way it returns.
struct Spectra {
    double2 *tw = nullptr;
    double *work = nullptr;
    ~Spectra() {
        tl_scratch_free(work);
        tl_scratch_free(tw);
    }
    int alloc(const char *op, int64_t batch, int64_t grid, int64_t modes, int64_t width, int count) {
        TL_TRY(make_twiddles(op, grid, &tw));
        size_t bytes = sizeof(double) * 2 * (size_t)(batch * modes * width) * (size_t)count;
        return tl_scratch(op, bytes, (void **)&work);
    }
};

}  // namespace

extern "C" {

// rfft (adjoint = 0) and irfft_backward (adjoint = 1)
int tlk_rfft(const char *op, tl_buf x, tl_buf y, int64_t batch, int64_t n, int64_t adjoint) {
    return transform(op, x, y, batch, n, true, (int)adjoint);
}

// irfft (adjoint = 0) and rfft_backward (adjoint = 1)
int tlk_irfft(const char *op, tl_buf x, tl_buf y, int64_t batch, int64_t n, int64_t adjoint) {
    return transform(op, x, y, batch, n, false, !adjoint);
}

int tlk_spectral_conv1d_rfft(const char *op, tl_buf x, tl_buf w_re, tl_buf w_im, tl_buf y, int64_t batch, int64_t grid,
                            int64_t width, int64_t modes) {
    int64_t nx = batch * grid * width, ns = batch * modes * width;
    if (batch == 0) return TL_OK;
    Spectra sp;
    TL_TRY(sp.alloc(op, batch, grid, modes, width, 2));
    double *X = sp.work, *Z = sp.work + 2 * ns;
    cudaStream_t s = tl_stream();
    TL_TRY(dft_trunc(op, x->data, X, batch, grid, width, modes, sp.tw, 0));
    k_mix<<<tl_blocks(ns), TL_THREADS, 0, s>>>(X, w_re->data, w_im->data, Z, batch, width, modes, 0);
    k_idft_trunc<<<tl_blocks(nx), TL_THREADS, 0, s>>>(Z, y->data, batch, grid, width, modes, sp.tw,
                                                        1.0 / (double)grid, 1);
    return tl_cuda_launched(op);
}

int tlk_spectral_conv1d_rfft_backward(const char *op, tl_buf x, tl_buf w_re, tl_buf w_im, tl_buf g, tl_buf dx,
                                     tl_buf dw_re, tl_buf dw_im, int64_t batch, int64_t grid,
                                     int64_t width, int64_t modes) {
    int64_t nw = modes * width * width, nx = batch * grid * width, ns = batch * modes * width;
    cudaStream_t s = tl_stream();
    if (batch == 0) {
        TL_CUDA_TRY(op, cudaMemsetAsync(dw_re->data, 0, sizeof(float) * (size_t)nw, s));
        TL_CUDA_TRY(op, cudaMemsetAsync(dw_im->data, 0, sizeof(float) * (size_t)nw, s));
        return TL_OK;
    }
    Spectra sp;
    TL_TRY(sp.alloc(op, batch, grid, modes, width, 3));
    double *X = sp.work, *dZ = sp.work + 2 * ns, *dX = sp.work + 4 * ns;
    TL_TRY(dft_trunc(op, x->data, X, batch, grid, width, modes, sp.tw, 0));
    TL_TRY(dft_trunc(op, g->data, dZ, batch, grid, width, modes, sp.tw, 1));
    k_dweights<<<tl_blocks(nw), TL_THREADS, 0, s>>>(X, dZ, dw_re->data, dw_im->data, batch, width, modes);
    k_mix<<<tl_blocks(ns), TL_THREADS, 0, s>>>(dZ, w_re->data, w_im->data, dX, batch, width, modes, 1);
    k_idft_trunc<<<tl_blocks(nx), TL_THREADS, 0, s>>>(dX, dx->data, batch, grid, width, modes, sp.tw,
                                                       1.0, 0);
    return tl_cuda_launched(op);
}

}  // extern "C"
