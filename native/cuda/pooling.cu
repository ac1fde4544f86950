// pooling.cu (CUDA): max, average and smooth-max pooling over one to eight spatial axes, with
// an optional batch axis; the 2-D entry points are the N-D kernels with two spatial axes.
// Mirrors native/stub/pooling.c; the window geometry is conv_geom.cuh's, shared with
// convolution (conv_pool.cu).
//
// The forward is one thread per output cell. The backward scatters with atomicAdd by default;
// with tl_deterministic() and overlapping windows one thread per input cell gathers from the
// windows covering it in row-major window order instead (the registry's deterministic_path),
// the order in which the stub scatters. Non-overlapping windows (stride >= window, the common
// 2x2/2) scatter in every mode: one share per cell, nothing to order. In every mode window sums
// are rule 4 and smooth-max uses tlm_exp / tlm_log (native/common/tl_math.h): the stub's bits.
#include <float.h>
#include "common.cuh"
#include "conv_geom.cuh"
#include "generated/conv_pool_kernels.h"

namespace {

enum { POOL_MAX, POOL_AVG, POOL_SMOOTH };

// Statistics of window o of one plane, exactly as the stub computes them: for max the first
// row-major strict maximum, a NaN winning for good (padding is -inf and never wins; -FLT_MAX
// when nothing does); for avg the rule-4 sum of the window (padding counts as 0); for smooth
// max the pivot (first value, then max/min by the sign of beta; padding counts as 0) and the
// rule-4 sum of exp(beta (v - pivot)).
struct Window {
    float best;     // max: the maximum; smooth: the pivot
    int64_t arg;    // max: winning kernel offset or -1
    float sum;      // smooth: sum of exp(beta (v - pivot)); avg: sum of values
};

__device__ __forceinline__ float smooth_term(float beta, float v, float pivot) {
    return tlm_exp(tlm_mul(beta, tlm_sub(v, pivot)));
}

// kernel offset j of the window at output position oo: the image offset it reads (-1 in the
// padding), and its value (pad in the padding)
__device__ __forceinline__ int64_t window_tap(const Geom &G, const int64_t *oo, int64_t j) {
    int64_t ko[8];
    unravel(j, G.k, G.r, ko);
    return tap(G, ko, oo);
}

__device__ __forceinline__ float window_value(const Geom &G, const float *plane, const int64_t *oo,
                                             int64_t j, float pad) {
    const int64_t t = window_tap(G, oo, j);
    return t < 0 ? pad : plane[t];
}

__device__ Window window_stats(const Geom &G, int kind, const float *plane, int64_t o, float beta) {
    int64_t oo[8];
    unravel(o, G.out, G.r, oo);
    Window w{-FLT_MAX, -1, 0.0f};
    const int64_t KN = G.k_n;
    if (kind == POOL_MAX) {
        for (int64_t j = 0; j < KN; j++) {
            float v = window_value(G, plane, oo, j, -INFINITY);
            if (v > w.best || (v != v && w.best == w.best)) { w.best = v; w.arg = j; }  // NaN wins
        }
        return w;
    }
    tlm_sumacc acc;
    tlm_sumacc_init(&acc);
    if (kind == POOL_AVG) {
        for (int64_t j = 0; j < KN; j++) tlm_sumacc_push(&acc, window_value(G, plane, oo, j, 0.0f));
    } else {
        for (int64_t j = 0; j < KN; j++) {
            float v = window_value(G, plane, oo, j, 0.0f);
            if (j == 0) w.best = v;
            else w.best = beta > 0 ? (v > w.best ? v : w.best) : (v < w.best ? v : w.best);
        }
        for (int64_t j = 0; j < KN; j++)
            tlm_sumacc_push(&acc, smooth_term(beta, window_value(G, plane, oo, j, 0.0f), w.best));
    }
    w.sum = tlm_sumacc_finish(&acc);
    return w;
}

__global__ void k_pool_fwd(Geom G, int kind, const float *x, float *y, float beta, int64_t planes) {
    const int64_t total = planes * G.out_n;
    TL_GRID_STRIDE(i, total) {
        const int64_t pl = i / G.out_n, o = i % G.out_n;
        Window w = window_stats(G, kind, x + pl * G.in_n, o, beta);
        if (kind == POOL_MAX) y[i] = w.best;
        else if (kind == POOL_AVG) y[i] = tlm_div(w.sum, (float)G.k_n);
        else y[i] = tlm_add(w.best, tlm_div(tlm_log(w.sum), beta));
    }
}

// share of window o's gradient that goes to kernel offset j of that window (cell value v)
__device__ __forceinline__ float pool_share(const Geom &G, int kind, const Window &w, int64_t j,
                                            float v, float go, float beta) {
    if (kind == POOL_MAX) return w.arg == j ? go : 0.0f;
    if (kind == POOL_AVG) return tlm_div(go, (float)G.k_n);
    return tlm_mul(go, tlm_div(smooth_term(beta, v, w.best), w.sum));
}

// default path: one thread per window scatters its shares with atomicAdd
__global__ void k_pool_bwd_scatter(Geom G, int kind, const float *x, const float *g, float *dx,
                                   float beta, int64_t planes) {
    const int64_t total = planes * G.out_n;
    TL_GRID_STRIDE(i, total) {
        const int64_t pl = i / G.out_n, o = i % G.out_n;
        const float *plane = x + pl * G.in_n;
        float *dplane = dx + pl * G.in_n;
        Window w = window_stats(G, kind, plane, o, beta);
        int64_t oo[8];
        unravel(o, G.out, G.r, oo);
        if (kind == POOL_MAX) {
            const int64_t t = w.arg >= 0 ? window_tap(G, oo, w.arg) : -1;
            if (t >= 0) atomicAdd(dplane + t, g[i]);
            continue;
        }
        for (int64_t j = 0; j < G.k_n; j++) {
            const int64_t t = window_tap(G, oo, j);
            if (t >= 0) atomicAdd(dplane + t, pool_share(G, kind, w, j, plane[t], g[i], beta));
        }
    }
}

// deterministic path: one thread per input cell gathers from the windows covering it in
// row-major window order (kernel offsets descending), from 0: the stub's scatter order
__global__ void k_pool_bwd_gather(Geom G, int kind, const float *x, const float *g, float *dx,
                                  float beta, int64_t planes) {
    const int64_t total = planes * G.in_n;
    TL_GRID_STRIDE(i, total) {
        const int64_t pl = i / G.in_n, cell = i % G.in_n;
        const float *plane = x + pl * G.in_n;
        int64_t ii[8], ko[8];
        unravel(cell, G.in, G.r, ii);
        float s = 0.0f;
        for (int64_t j = G.k_n - 1; j >= 0; j--) {
            unravel(j, G.k, G.r, ko);
            int64_t o;
            if (!reader(G, ii, ko, &o)) continue;
            Window w = window_stats(G, kind, plane, o, beta);
            s = tlm_add(s, pool_share(G, kind, w, j, plane[cell], g[pl * G.out_n + o], beta));
        }
        dx[i] = s;
    }
}

// The 1-D/2-D fast path of k_pool_bwd_gather for max and avg pooling: 32-bit indices, the
// same windows in the same order (kernel offsets descending), the same shares (zero shares of
// max included), so the same bits.
__global__ void k_pool_bwd_gather_2d(Geom2 q, int kind, const float *x, const float *g, float *dx,
                                     int planes) {
    const int HW = q.H * q.W, P = q.OH * q.OW, KN = q.KH * q.KW, total = planes * HW;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
        const int pl = i / HW, cell = i % HW, iy = cell / q.W, ix = cell % q.W;
        const float *plane = x + (size_t)pl * HW, *gp = g + (size_t)pl * P;
        float s = 0.0f;
        for (int ky = min(q.KH, iy + q.PH + 1) - 1; ky >= 0; ky--) {
            const int oy = reading_output(iy, q.PH, ky, q.SH, q.OH);
            if (oy < 0) continue;
            for (int kx = min(q.KW, ix + q.PW + 1) - 1; kx >= 0; kx--) {
                const int ox = reading_output(ix, q.PW, kx, q.SW, q.OW);
                if (ox < 0) continue;
                const float go = gp[oy * q.OW + ox];
                if (kind == POOL_AVG) { s = tlm_add(s, tlm_div(go, (float)KN)); continue; }
                float best = -FLT_MAX;  // window_stats' max: the first strict maximum, NaN wins
                int arg = -1;
                for (int wy = 0; wy < q.KH; wy++) {
                    const int y = oy * q.SH + wy - q.PH;
                    for (int wx = 0; wx < q.KW; wx++) {
                        const int xx = ox * q.SW + wx - q.PW;
                        float v = (y >= 0 && y < q.H && xx >= 0 && xx < q.W) ? plane[y * q.W + xx]
                                                                              : -INFINITY;
                        if (v > best || (v != v && best == best)) { best = v; arg = wy * q.KW + wx; }
                    }
                }
                s = tlm_add(s, arg == ky * q.KW + kx ? go : 0.0f);
            }
        }
        dx[i] = s;
    }
}

// Windows overlap when some stride is below its window extent. Otherwise every input cell gets
// at most one share, which the scatter adds onto 0 exactly as the gather would (0 + share): the
// scatter is then deterministic, bit for bit the gather's result, and serves every mode.
bool windows_overlap(const Geom &G) {
    for (int a = 0; a < G.r; a++)
        if (G.s[a] < G.k[a]) return true;
    return false;
}

int pool(const char *op, int kind, tl_buf input, tl_buf g, tl_buf out, const Geom &G,
         double beta_d, int backward) {
    const int64_t planes = G.n * G.cin;
    const float beta = (float)beta_d;
    cudaStream_t st = tl_stream();
    if (!st) return TL_E_DEVICE;
    if (!backward) {
        if (planes * G.out_n == 0) return TL_OK;
        k_pool_fwd<<<tl_blocks(planes * G.out_n), TL_THREADS, 0, st>>>(G, kind, input->data,
                                                                       out->data, beta, planes);
        TL_LAUNCHED(op);
        return TL_OK;
    }
    if (tl_deterministic() && windows_overlap(G)) {
        if (planes * G.in_n == 0) return TL_OK;
        const int64_t lim = INT32_MAX / 2;
        if (kind != POOL_SMOOTH && G.r <= 2 && planes * G.in_n < lim && planes * G.out_n < lim) {
            k_pool_bwd_gather_2d<<<tl_blocks(planes * G.in_n), TL_THREADS, 0, st>>>(
                to_2d(G, 1), kind, input->data, g->data, out->data, (int)planes);
            TL_LAUNCHED(op);
            return TL_OK;
        }
        k_pool_bwd_gather<<<tl_blocks(planes * G.in_n), TL_THREADS, 0, st>>>(
            G, kind, input->data, g->data, out->data, beta, planes);
        TL_LAUNCHED(op);
        return TL_OK;
    }
    if (planes * G.in_n > 0)
        TL_CUDA_TRY(op, cudaMemsetAsync(out->data, 0, (size_t)(planes * G.in_n) * sizeof(float), st));
    if (planes * G.out_n == 0) return TL_OK;
    k_pool_bwd_scatter<<<tl_blocks(planes * G.out_n), TL_THREADS, 0, st>>>(
        G, kind, input->data, g->data, out->data, beta, planes);
    TL_LAUNCHED(op);
    return TL_OK;
}
}  // namespace

extern "C" {

// max (kind 0), average (1) and smooth-max (2, with b = beta) pooling, N-D and 2-D alike
int tlk_pool_forward(const char *op, tl_buf input, tl_buf y, const tl_geom *geom, double b,
                     int64_t kind) {
    return pool(op, (int)kind, input, nullptr, y, *geom, b, 0);
}

int tlk_pool_backward(const char *op, tl_buf input, tl_buf grad_out, tl_buf dinput,
                      const tl_geom *geom, double b, int64_t kind) {
    return pool(op, (int)kind, input, grad_out, dinput, *geom, b, 1);
}
}  // extern "C"
