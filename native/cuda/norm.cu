// norm.cu (CUDA): layer_norm and batchnorm_channel_first, fused forward and backward kernels.
//
// The arithmetic around the sums is the stub's, from native/common/formulas/normalize.h: biased
// variance, eps inside the sqrt, mean/var via multiplication by float32(1/N), xhat = (x - mean) / std.
// (Plain float operators and sqrtf compile to the same IEEE round-to-nearest instructions as
// the formulas' named ones here: nvcc's default -prec-div/-prec-sqrt and --fmad=false.) Every reduction is a fixed-order block reduction
// (tl_block_sum, reduce_util.cuh) or an ordered loop, so results are bit-reproducible without atomics.
//
// Exact mode computes the stub's sums (native/stub/norm.c) by rule 4 of tl_math.h: a block per
// row reduces layer_norm's rows with tl_exact_block_reduce; batchnorm (its channel's elements
// sample by sample) sums every channel's chunks side by side, then each channel's tree, then
// maps the elements on a flat grid (bn_exact.cuh), in every mode: that parallel structure is
// faster than a block per channel (bench/results/bn-exact.md), so default batchnorm has the
// stub's bits too; layer_norm's dgamma and dbeta are exact
// column sums (tl_cuda_axis_sum over the rows) of g * xhat and g.
#include "common.cuh"
#include "formulas/normalize.h"
#include "bn_exact.cuh"
#include "generated/norm_kernels.h"

namespace {

constexpr int LN_THREADS = 256;
constexpr int COL_CHUNK = 128;  // rows per partial column sum (fixed: results never depend on the grid)

// One block per row: mean, biased variance, then xhat, y and inv_std.
__global__ void ln_fwd_kernel(const float *__restrict__ x, const float *__restrict__ gamma,
                              const float *__restrict__ beta, float *__restrict__ y,
                              float *__restrict__ xhat, float *__restrict__ inv_std, int64_t cols,
                              float inv_cols, float eps) {
    const int64_t r = blockIdx.x;
    const float *xr = x + r * cols;
    float s = 0.0f;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) s += xr[j];
    const float mean = tlf_mean(tl_block_sum(s), inv_cols);
    float v = 0.0f;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) v += tlf_sqdev(xr[j], mean);
    const float var = tlf_mean(tl_block_sum(v), inv_cols);
    const float sd = tlf_norm_std(var, eps);
    if (threadIdx.x == 0) inv_std[r] = tlf_norm_inv(sd);
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
        float xh = tlf_norm_xhat(xr[j], mean, sd);
        xhat[r * cols + j] = xh;
        y[r * cols + j] = tlf_affine(xh, gamma[j], beta[j]);
    }
}

// Rows of up to 256 * 4 * R columns with cols % 4 == 0: one 256-thread block per row holds
// the row in registers (float4), so x (forward) or g and xhat (backward) are read from memory
// once. Same formulas as the kernels above; the sums are tl_block_sum (fixed order).
__device__ __forceinline__ float hsum4(float4 a) { return (a.x + a.y) + (a.z + a.w); }

template <int R>
__global__ void __launch_bounds__(256) ln_fwd_rows(const float4 *__restrict__ x,
                                                    const float4 *__restrict__ gamma,
                                                    const float4 *__restrict__ beta,
                                                    float4 *__restrict__ y, float4 *__restrict__ xhat,
                                                    float *__restrict__ inv_std, int64_t cols4,
                                                    float inv_cols, float eps) {
    const int64_t r = blockIdx.x;
    float4 v[R];
    float s = 0.0f;
#pragma unroll
    for (int j = 0; j < R; j++) {
        int64_t k = threadIdx.x + (int64_t)j * 256;
        v[j] = k < cols4 ? x[r * cols4 + k] : make_float4(0.f, 0.f, 0.f, 0.f);
        s += hsum4(v[j]);
    }
    const float mean = tlf_mean(tl_block_sum(s), inv_cols);
    float q = 0.0f;
#pragma unroll
    for (int j = 0; j < R; j++) {
        int64_t k = threadIdx.x + (int64_t)j * 256;
        if (k < cols4)
            q += hsum4(make_float4(tlf_sqdev(v[j].x, mean), tlf_sqdev(v[j].y, mean),
                                   tlf_sqdev(v[j].z, mean), tlf_sqdev(v[j].w, mean)));
    }
    const float var = tlf_mean(tl_block_sum(q), inv_cols);
    const float sd = tlf_norm_std(var, eps);
    if (threadIdx.x == 0) inv_std[r] = tlf_norm_inv(sd);
#pragma unroll
    for (int j = 0; j < R; j++) {
        int64_t k = threadIdx.x + (int64_t)j * 256;
        if (k < cols4) {
            float4 h = make_float4(tlf_norm_xhat(v[j].x, mean, sd), tlf_norm_xhat(v[j].y, mean, sd),
                                   tlf_norm_xhat(v[j].z, mean, sd), tlf_norm_xhat(v[j].w, mean, sd));
            float4 ga = gamma[k], be = beta[k];
            xhat[r * cols4 + k] = h;
            y[r * cols4 + k] = make_float4(tlf_affine(h.x, ga.x, be.x), tlf_affine(h.y, ga.y, be.y),
                                           tlf_affine(h.z, ga.z, be.z), tlf_affine(h.w, ga.w, be.w));
        }
    }
}

template <int R>
__global__ void __launch_bounds__(256) ln_bwd_dx_rows(const float4 *__restrict__ g,
                                                       const float4 *__restrict__ xhat,
                                                       const float *__restrict__ inv_std,
                                                       const float4 *__restrict__ gamma,
                                                       float4 *__restrict__ dx, int64_t cols4,
                                                       float fcols, float inv_cols) {
    const int64_t r = blockIdx.x;
    float4 d[R], h[R];
    float s1 = 0.0f, s2 = 0.0f;
#pragma unroll
    for (int j = 0; j < R; j++) {
        int64_t k = threadIdx.x + (int64_t)j * 256;
        if (k < cols4) {
            float4 gv = g[r * cols4 + k], ga = gamma[k];
            h[j] = xhat[r * cols4 + k];
            d[j] = make_float4(gv.x * ga.x, gv.y * ga.y, gv.z * ga.z, gv.w * ga.w);
        } else {
            h[j] = d[j] = make_float4(0.f, 0.f, 0.f, 0.f);
        }
        s1 += hsum4(d[j]);
        s2 += hsum4(make_float4(d[j].x * h[j].x, d[j].y * h[j].y, d[j].z * h[j].z,
                                d[j].w * h[j].w));
    }
    const float S1 = tl_block_sum(s1), S2 = tl_block_sum(s2), is = inv_std[r];
#pragma unroll
    for (int j = 0; j < R; j++) {
        int64_t k = threadIdx.x + (int64_t)j * 256;
        if (k < cols4)
            dx[r * cols4 + k] = make_float4(tlf_norm_dx(d[j].x, h[j].x, S1, S2, fcols, is, inv_cols),
                                            tlf_norm_dx(d[j].y, h[j].y, S1, S2, fcols, is, inv_cols),
                                            tlf_norm_dx(d[j].z, h[j].z, S1, S2, fcols, is, inv_cols),
                                            tlf_norm_dx(d[j].w, h[j].w, S1, S2, fcols, is, inv_cols));
    }
}

// rows of this width take the register kernels: 4 or 8 float4 per thread
int ln_rows_r(int64_t cols) {
    if (cols % 4 || cols > 8192) return 0;
    return cols <= 4096 ? 4 : 8;
}

// One block per row: dx from the row sums S1 = sum(dxhat), S2 = sum(dxhat * xhat).
__global__ void ln_bwd_dx_kernel(const float *__restrict__ g, const float *__restrict__ xhat,
                                 const float *__restrict__ inv_std, const float *__restrict__ gamma,
                                 float *__restrict__ dx, int64_t cols, float fcols, float inv_cols) {
    const int64_t r = blockIdx.x;
    const float *gr = g + r * cols, *xr = xhat + r * cols;
    float s1 = 0.0f, s2 = 0.0f;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
        float d = gr[j] * gamma[j];
        s1 += d;
        s2 += d * xr[j];
    }
    const float S1 = tl_block_sum(s1), S2 = tl_block_sum(s2), is = inv_std[r];
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
        dx[r * cols + j] = tlf_norm_dx(gr[j] * gamma[j], xr[j], S1, S2, fcols, is, inv_cols);
    }
}

// Partial column sums of g*xhat and g over a chunk of COL_CHUNK rows; each thread owns a column
// and walks its rows in order (coalesced across the warp).
__global__ void col_partials_kernel(const float *__restrict__ g, const float *__restrict__ xhat,
                                    float *__restrict__ pg, float *__restrict__ pb, int64_t rows,
                                    int64_t cols) {
    const int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int64_t chunk = blockIdx.y;
    if (j >= cols) return;
    const int64_t r0 = chunk * COL_CHUNK;
    const int64_t r1 = min(rows, r0 + COL_CHUNK);
    float sg = 0.0f, sb = 0.0f;
    for (int64_t r = r0; r < r1; r++) {
        float gv = g[r * cols + j];
        sg += gv * xhat[r * cols + j];
        sb += gv;
    }
    pg[chunk * cols + j] = sg;
    pb[chunk * cols + j] = sb;
}

__global__ void col_finish_kernel(const float *__restrict__ pg, const float *__restrict__ pb,
                                  float *__restrict__ dgamma, float *__restrict__ dbeta,
                                  int64_t chunks, int64_t cols) {
    TL_GRID_STRIDE(j, cols) {
        float sg = 0.0f, sb = 0.0f;
        for (int64_t c = 0; c < chunks; c++) {
            sg += pg[c * cols + j];
            sb += pb[c * cols + j];
        }
        dgamma[j] = sg;
        dbeta[j] = sb;
    }
}

// ---- exact mode ----
__global__ void exact_ln_fwd(const float *__restrict__ x, const float *__restrict__ gamma,
                             const float *__restrict__ beta, float *__restrict__ y,
                             float *__restrict__ xhat, float *__restrict__ inv_std, int64_t cols,
                             float inv_cols, float eps, float *gpart) {
    extern __shared__ float smem[];
    float *part = tl_exact_part(smem, gpart, cols);
    const int64_t r = blockIdx.x;
    const float *xr = x + r * cols;
    const float mean = tlf_mean(tl_exact_block_reduce([=](int64_t j) { return xr[j]; }, cols, part,
                                                      TlExactSum{}), inv_cols);
    const float var = tlf_mean(tl_exact_block_reduce([=](int64_t j) { return tlf_sqdev(xr[j], mean); },
                                                     cols, part, TlExactSum{}), inv_cols);
    const float sd = tlf_norm_std(var, eps);
    if (threadIdx.x == 0) inv_std[r] = tlf_norm_inv(sd);
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
        float xh = tlf_norm_xhat(xr[j], mean, sd);
        xhat[r * cols + j] = xh;
        y[r * cols + j] = tlf_affine(xh, gamma[j], beta[j]);
    }
}

__global__ void exact_ln_bwd_dx(const float *__restrict__ g, const float *__restrict__ xhat,
                                const float *__restrict__ inv_std, const float *__restrict__ gamma,
                                float *__restrict__ dx, int64_t cols, float fcols, float inv_cols,
                                float *gpart) {
    extern __shared__ float smem[];
    float *part = tl_exact_part(smem, gpart, cols);
    const int64_t r = blockIdx.x;
    const float *gr = g + r * cols, *xr = xhat + r * cols;
    const float S1 = tl_exact_block_reduce([=](int64_t j) { return tlm_mul(gr[j], gamma[j]); },
                                           cols, part, TlExactSum{});
    const float S2 = tl_exact_block_reduce(
        [=](int64_t j) { return tlf_dxhat_xhat(gr[j], gamma[j], xr[j]); }, cols, part, TlExactSum{});
    const float is = inv_std[r];
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
        dx[r * cols + j] = tlf_norm_dx(tlm_mul(gr[j], gamma[j]), xr[j], S1, S2, fcols, is, inv_cols);
}

__global__ void exact_mul_kernel(const float *__restrict__ a, const float *__restrict__ b,
                                 float *__restrict__ out, int64_t n) {
    TL_GRID_STRIDE(i, n) out[i] = tlm_mul(a[i], b[i]);
}

}  // namespace

extern "C" int tlk_layer_norm(const char *op, tl_buf x, tl_buf gamma, tl_buf beta, tl_buf y, tl_buf xhat,
                             tl_buf inv_std, int64_t rows, int64_t cols, double eps) {
    if (rows == 0) return TL_OK;
    if (rows > TL_MAX_GRID_X)
        return tl_fail(TL_E_SHAPE, "%s: %lld rows exceed the CUDA grid limit %lld", op, (long long)rows,
                       (long long)TL_MAX_GRID_X);
    const float inv_cols = (float)(1.0 / (double)cols);
    if (tl_exact()) {
        TlExactParts ex;
        TL_TRY(ex.setup(op, rows, cols));
        exact_ln_fwd<<<(unsigned)rows, tl_exact_threads(cols), ex.smem, tl_stream()>>>(
            x->data, gamma->data, beta->data, y->data, xhat->data, inv_std->data, cols, inv_cols,
            (float)eps, ex.gpart);
        return ex.finish(op);
    }
    const int R = ln_rows_r(cols);
    if (R == 4)
        ln_fwd_rows<4><<<(unsigned)rows, 256, 0, tl_stream()>>>(
            (const float4 *)x->data, (const float4 *)gamma->data, (const float4 *)beta->data,
            (float4 *)y->data, (float4 *)xhat->data, inv_std->data, cols / 4, inv_cols, (float)eps);
    else if (R == 8)
        ln_fwd_rows<8><<<(unsigned)rows, 256, 0, tl_stream()>>>(
            (const float4 *)x->data, (const float4 *)gamma->data, (const float4 *)beta->data,
            (float4 *)y->data, (float4 *)xhat->data, inv_std->data, cols / 4, inv_cols, (float)eps);
    else
        ln_fwd_kernel<<<(unsigned)rows, LN_THREADS, 0, tl_stream()>>>(
            x->data, gamma->data, beta->data, y->data, xhat->data, inv_std->data, cols, inv_cols,
            (float)eps);
    TL_LAUNCHED(op);
    return TL_OK;
}

extern "C" int tlk_layer_norm_backward(const char *op, tl_buf g, tl_buf xhat, tl_buf inv_std, tl_buf gamma,
                                      tl_buf dx, tl_buf dgamma, tl_buf dbeta, int64_t rows,
                                      int64_t cols) {
    if (cols == 0) return TL_OK;
    cudaStream_t st = tl_stream();
    if (rows == 0) {
        TL_CUDA_TRY(op, cudaMemsetAsync(dgamma->data, 0, sizeof(float) * cols, st));
        TL_CUDA_TRY(op, cudaMemsetAsync(dbeta->data, 0, sizeof(float) * cols, st));
        return TL_OK;
    }
    const int R = ln_rows_r(cols);
    const float inv_cols = (float)(1.0 / (double)cols);
    if (tl_exact()) {
        if (rows > TL_MAX_GRID_X)
            return tl_fail(TL_E_SHAPE, "%s: %lld rows exceed the CUDA grid limit", op, (long long)rows);
        // dgamma, dbeta: column sums by rule 4 (dx holds the products g * xhat until the dx kernel)
        const int64_t n = rows * cols;
        exact_mul_kernel<<<tl_blocks(n), TL_THREADS, 0, st>>>(g->data, xhat->data, dx->data, n);
        TL_LAUNCHED(op);
        TL_TRY(tl_cuda_axis_sum(op, dx->data, dgamma->data, 1, rows, cols, 0));
        TL_TRY(tl_cuda_axis_sum(op, g->data, dbeta->data, 1, rows, cols, 0));
        TlExactParts ex;
        TL_TRY(ex.setup(op, rows, cols));
        exact_ln_bwd_dx<<<(unsigned)rows, tl_exact_threads(cols), ex.smem, st>>>(
            g->data, xhat->data, inv_std->data, gamma->data, dx->data, cols, (float)cols, inv_cols,
            ex.gpart);
        return ex.finish(op);
    }
    if (R == 4)
        ln_bwd_dx_rows<4><<<(unsigned)rows, 256, 0, st>>>(
            (const float4 *)g->data, (const float4 *)xhat->data, inv_std->data,
            (const float4 *)gamma->data, (float4 *)dx->data, cols / 4, (float)cols, inv_cols);
    else if (R == 8)
        ln_bwd_dx_rows<8><<<(unsigned)rows, 256, 0, st>>>(
            (const float4 *)g->data, (const float4 *)xhat->data, inv_std->data,
            (const float4 *)gamma->data, (float4 *)dx->data, cols / 4, (float)cols, inv_cols);
    else
        ln_bwd_dx_kernel<<<(unsigned)rows, LN_THREADS, 0, st>>>(
            g->data, xhat->data, inv_std->data, gamma->data, dx->data, cols, (float)cols, inv_cols);
    TL_LAUNCHED(op);
    const int64_t chunks = (rows + COL_CHUNK - 1) / COL_CHUNK;
    if (chunks > TL_MAX_GRID_YZ)
        return tl_fail(TL_E_SHAPE, "%s: %lld rows exceed the CUDA grid limit", op, (long long)rows);
    void *tmp = nullptr;
    TL_TRY(tl_scratch(op, sizeof(float) * 2 * chunks * cols, &tmp));
    float *pg = (float *)tmp, *pb = pg + chunks * cols;
    dim3 grid((unsigned)((cols + 127) / 128), (unsigned)chunks);
    col_partials_kernel<<<grid, 128, 0, st>>>(g->data, xhat->data, pg, pb, rows, cols);
    int s1 = tl_cuda_launched(op);
    if (!s1) {
        col_finish_kernel<<<tl_blocks(cols), TL_THREADS, 0, st>>>(pg, pb, dgamma->data, dbeta->data,
                                                                 chunks, cols);
        s1 = tl_cuda_launched(op);
    }
    tl_scratch_free(tmp);
    return s1;
}

namespace {

// exact batchnorm's kernels (bn_exact.cuh) on the library's stream
struct BnxLaunch {
    const char *op;
    int64_t c;
    int tree_threads;
    template <int KIND>
    int chunks(int64_t nc, const float *a, const float *b, const float *mean, int64_t n, int64_t cc,
               int64_t s, float *part, float *part2) {
        if (nc == 0) return TL_OK;
        bnx_chunks<KIND><<<(unsigned)(c * bnx_groups(nc)), BNX_CHUNK_THREADS, 0, tl_stream()>>>(
            a, b, mean, n, cc, s, part, part2);
        return tl_cuda_launched(op);
    }
    template <int KIND>
    int tree(int64_t nc, float *part, float *part2, float inv_cnt, float eps, float *o1, float *o2,
             float *o3) {
        bnx_tree<KIND><<<(unsigned)c, tree_threads, 0, tl_stream()>>>(part, part2, nc, inv_cnt, eps,
                                                                      o1, o2, o3);
        return tl_cuda_launched(op);
    }
    int fwd(const float *x, const float *gamma, const float *beta, const float *mean, const float *sd,
            float *y, float *xhat, int64_t total, int64_t cc, int64_t s) {
        if (total == 0) return TL_OK;
        if (total < (int64_t)UINT32_MAX / 2)
            bnx_apply_fwd<unsigned><<<tl_blocks(total), TL_THREADS, 0, tl_stream()>>>(
                x, gamma, beta, mean, sd, y, xhat, (unsigned)total, (unsigned)cc, (unsigned)s);
        else
            bnx_apply_fwd<int64_t><<<tl_blocks(total), TL_THREADS, 0, tl_stream()>>>(
                x, gamma, beta, mean, sd, y, xhat, total, cc, s);
        return tl_cuda_launched(op);
    }
    int bwd(const float *g, const float *xhat, const float *inv_std, const float *gamma,
            const float *dbeta, const float *dgamma, float *dx, int64_t total, int64_t cc, int64_t s,
            float fcnt, float inv_cnt) {
        if (total == 0) return TL_OK;
        if (total < (int64_t)UINT32_MAX / 2)
            bnx_apply_bwd<unsigned><<<tl_blocks(total), TL_THREADS, 0, tl_stream()>>>(
                g, xhat, inv_std, gamma, dbeta, dgamma, dx, (unsigned)total, (unsigned)cc,
                (unsigned)s, fcnt, inv_cnt);
        else
            bnx_apply_bwd<int64_t><<<tl_blocks(total), TL_THREADS, 0, tl_stream()>>>(
                g, xhat, inv_std, gamma, dbeta, dgamma, dx, total, cc, s, fcnt, inv_cnt);
        return tl_cuda_launched(op);
    }
};

}  // namespace

extern "C" int tlk_batchnorm_channel_first(const char *op, tl_buf x, tl_buf gamma, tl_buf beta, tl_buf y,
                                          tl_buf xhat, tl_buf mean, tl_buf var, tl_buf inv_std,
                                          int64_t n, int64_t c, int64_t s, double eps) {
    if (c == 0) return TL_OK;
    // every mode: the exact sums (all channels' chunks side by side) beat a block per channel
    const int64_t nc = bnx_chunks_of(n * s);
    BnxLaunch l{op, c, tl_exact_threads(n * s)};
    float *part = nullptr, *sd = nullptr;
    int st = tl_scratch(op, (size_t)(c * nc + c) * sizeof(float), (void **)&part);
    if (!st) {
        sd = part + c * nc;
        st = bnx_forward(l, x->data, gamma->data, beta->data, y->data, xhat->data, mean->data,
                         var->data, inv_std->data, n, c, s, (float)eps, part, sd);
    }
    tl_scratch_free(part);
    return st;
}

extern "C" int tlk_batchnorm_channel_first_backward(const char *op, tl_buf g, tl_buf xhat, tl_buf inv_std,
                                                   tl_buf gamma, tl_buf dx, tl_buf dgamma,
                                                   tl_buf dbeta, int64_t n, int64_t c, int64_t s) {
    if (c == 0) return TL_OK;
    const int64_t cnt = n * s;
    const int64_t nc = bnx_chunks_of(cnt);
    BnxLaunch l{op, c, tl_exact_threads(cnt)};
    float *part = nullptr;
    int st = tl_scratch(op, (size_t)(2 * c * nc) * sizeof(float), (void **)&part);
    if (!st)
        st = bnx_backward(l, g->data, xhat->data, inv_std->data, gamma->data, dx->data,
                          dgamma->data, dbeta->data, n, c, s, part, part + c * nc);
    tl_scratch_free(part);
    return st;
}
