// scan.cu (CUDA): the diagonal selective scan h_t = a_t * h_{t-1} + b_t * x_t and its backward.
//
// Mirrors native/stub/scan.c bit for bit in every mode: one thread per (sample, channel) runs
// time sequentially (reads and writes are coalesced over channels). The recurrence is float32
// with rounded products and sums named by tl_math.h (tlm_mul, tlm_add: no FMA). The forward also
// writes the state entering each chunk of TL_SCAN_CHUNK steps (hc); the backward recomputes a
// chunk's states from it in registers, with the forward's very operations (so the same bits),
// instead of reading a saved copy of every state, and writes dx over its cotangent g.
// Coefficient gradients shared along the batch ((D,) and (T, D) forms) are written as
// per-sample float64 partials (a (D,) coefficient's summed over time in decreasing order) and
// then summed in increasing sample order by a second kernel: no atomics, the stub's order
// exactly. A per-sample (B, T, D) coefficient's gradient is its float64 product rounded once,
// written directly (no partials).
#include "common.cuh"
#include "formulas/scan.h"
#include "tl_math.h"
#include "generated/scan_kernels.h"

namespace {

__global__ void k_scan_fwd(const float *__restrict__ a, const float *__restrict__ b, const float *__restrict__ x,
                           const float *__restrict__ h0, float *__restrict__ y, float *__restrict__ hc,
                           int64_t batch, int64_t steps, int64_t width, int64_t a_mode, int64_t b_mode,
                           int64_t chunks) {
    TL_GRID_STRIDE(i, batch * width) {
        int64_t bi = i / width, j = i % width;
        float h = h0[i];
        for (int64_t t = 0; t < steps; t++) {
            int64_t row = (bi * steps + t) * width;
            if (t % TL_SCAN_CHUNK == 0) hc[(bi * chunks + t / TL_SCAN_CHUNK) * width + j] = h;
            h = tlf_scan_step(a[tlf_scan_coef_row(a_mode, bi, t, steps, width) + j], h,
                              b[tlf_scan_coef_row(b_mode, bi, t, steps, width) + j], x[row + j]);
            y[row + j] = h;
        }
    }
}

// Reverse time per (sample, channel), one chunk of TL_SCAN_CHUNK steps at a time: the chunk's
// states are recomputed from hc into registers (hs[k] = h_{t0 + k}), then walked backwards.
// `gdx` holds the cotangent g on entry and dx on exit (each element is read, then written, by
// the one thread that owns it). Coefficient gradient contributions go to `pa`/`pb` for the
// shared forms: mode 0: (batch, width) per-sample sums over time; mode 1: (batch, steps,
// width), all float64; mode 2 is written to da/db directly, rounded once.
__global__ void k_scan_bwd(const float *__restrict__ a, const float *__restrict__ b, const float *__restrict__ x,
                           const float *__restrict__ hc, float *gdx, double *__restrict__ pa,
                           double *__restrict__ pb, float *__restrict__ da, float *__restrict__ db,
                           float *__restrict__ dh0, int64_t batch, int64_t steps, int64_t width,
                           int64_t a_mode, int64_t b_mode, int64_t chunks) {
    TL_GRID_STRIDE(i, batch * width) {
        int64_t bi = i / width, j = i % width;
        float gnext = 0.0f;
        double sa = 0.0, sb = 0.0;
        for (int64_t q = chunks - 1; q >= 0; q--) {
            int64_t t0 = q * TL_SCAN_CHUNK;
            int64_t len = steps - t0 < TL_SCAN_CHUNK ? steps - t0 : TL_SCAN_CHUNK;
            float hstart = hc[(bi * chunks + q) * width + j];
            float hs[TL_SCAN_CHUNK];
            float h = hstart;
#pragma unroll
            for (int k = 0; k < TL_SCAN_CHUNK; k++) {
                if (k < len) {
                    int64_t t = t0 + k, row = (bi * steps + t) * width;
                    h = tlf_scan_step(a[tlf_scan_coef_row(a_mode, bi, t, steps, width) + j], h,
                                      b[tlf_scan_coef_row(b_mode, bi, t, steps, width) + j], x[row + j]);
                    hs[k] = h;
                }
            }
#pragma unroll
            for (int k = TL_SCAN_CHUNK - 1; k >= 0; k--) {
                if (k < len) {
                    int64_t t = t0 + k, row = (bi * steps + t) * width;
                    float gt = gdx[row + j];
                    if (t + 1 < steps)
                        gt = tlf_scan_carry(gt, a[tlf_scan_coef_row(a_mode, bi, t + 1, steps, width) + j], gnext);
                    gnext = gt;
                    float hp = k ? hs[k - 1] : hstart;
                    double ca = (double)gt * (double)hp, cb = (double)gt * (double)x[row + j];
                    if (a_mode == 0) sa += ca;
                    else if (a_mode == 1) pa[row + j] = ca;
                    else da[row + j] = (float)(0.0 + ca);
                    if (b_mode == 0) sb += cb;
                    else if (b_mode == 1) pb[row + j] = cb;
                    else db[row + j] = (float)(0.0 + cb);
                    gdx[row + j] = tlm_mul(gt, b[tlf_scan_coef_row(b_mode, bi, t, steps, width) + j]);
                }
            }
        }
        if (a_mode == 0) pa[i] = sa;
        if (b_mode == 0) pb[i] = sb;
        dh0[i] = tlm_mul(a[tlf_scan_coef_row(a_mode, bi, 0, steps, width) + j], gnext);
    }
}

// out[e] = sum over samples s of p[s * len + e] in increasing s (len = D or T * D); mode 2
// (per-sample coefficients) is the batch = 1 case of the same copy.
__global__ void k_sum_samples(const double *__restrict__ p, float *__restrict__ out, int64_t samples, int64_t len) {
    TL_GRID_STRIDE(e, len) {
        double acc = 0.0;
        for (int64_t s = 0; s < samples; s++) acc += p[s * len + e];
        out[e] = (float)acc;
    }
}

}  // namespace

extern "C" {

int tlk_selective_scan(const char *op, tl_buf a, tl_buf b, tl_buf x, tl_buf h0, tl_buf y, tl_buf hc, int64_t batch,
                      int64_t steps, int64_t width, int64_t a_mode, int64_t b_mode, int64_t chunks) {
    if (batch * steps * width == 0) return TL_OK;
    TL_TRY(tl_scan_check_chunks(op, steps, chunks));
    k_scan_fwd<<<tl_blocks(batch * width), TL_THREADS, 0, tl_stream()>>>(a->data, b->data, x->data, h0->data,
                                                                         y->data, hc->data, batch, steps, width,
                                                                         a_mode, b_mode, chunks);
    TL_LAUNCHED(op);
    return TL_OK;
}

int tlk_selective_scan_backward(const char *op, tl_buf a, tl_buf b, tl_buf x, tl_buf h0, tl_buf hc, tl_buf g,
                               tl_buf da, tl_buf db, tl_buf dh0, int64_t batch, int64_t steps, int64_t width,
                               int64_t a_mode, int64_t b_mode, int64_t chunks) {
    int64_t na = tlf_scan_coef_len(a_mode, batch, steps, width);
    int64_t nb = tlf_scan_coef_len(b_mode, batch, steps, width);
    int64_t nx = batch * steps * width;
    cudaStream_t s = tl_stream();
    if (batch == 0 || width == 0 || steps == 0) {
        // nothing flows: coefficient and state gradients are zero
        if (na) TL_CUDA_TRY(op, cudaMemsetAsync(da->data, 0, sizeof(float) * (size_t)na, s));
        if (nb) TL_CUDA_TRY(op, cudaMemsetAsync(db->data, 0, sizeof(float) * (size_t)nb, s));
        if (batch > 0 && width > 0)
            TL_CUDA_TRY(op, cudaMemsetAsync(dh0->data, 0, sizeof(float) * (size_t)(batch * width), s));
        return TL_OK;
    }
    TL_TRY(tl_scan_check_chunks(op, steps, chunks));
    // partial sizes: (batch, width) for mode 0, (batch, steps, width) for mode 1, none for mode 2
    int64_t pa_len = a_mode == 0 ? batch * width : a_mode == 1 ? nx : 0;
    int64_t pb_len = b_mode == 0 ? batch * width : b_mode == 1 ? nx : 0;
    double *part = nullptr;
    if (pa_len + pb_len > 0) TL_TRY(tl_scratch(op, sizeof(double) * (size_t)(pa_len + pb_len), (void **)&part));
    double *pa = part, *pb = part ? part + pa_len : nullptr;
    k_scan_bwd<<<tl_blocks(batch * width), TL_THREADS, 0, s>>>(a->data, b->data, x->data, hc->data, g->data, pa,
                                                               pb, da->data, db->data, dh0->data, batch, steps,
                                                               width, a_mode, b_mode, chunks);
    // fold the samples of the shared forms
    if (a_mode != 2) k_sum_samples<<<tl_blocks(na), TL_THREADS, 0, s>>>(pa, da->data, batch, na);
    if (b_mode != 2) k_sum_samples<<<tl_blocks(nb), TL_THREADS, 0, s>>>(pb, db->data, batch, nb);
    int st = tl_cuda_launched(op);
    tl_scratch_free(part);
    return st;
}

}  // extern "C"
