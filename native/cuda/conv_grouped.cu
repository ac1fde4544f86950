// conv_grouped.cu: grouped and dilated convolution on the GPU, one thread per value around the
// formulas of native/common/conv_grouped.h (the stub runs the same functions in loops), so every
// mode gives the stub's bits. The kernel gradient runs in two passes: one thread per (weight,
// sample) computes the sample's chain into scratch, then one thread per weight sums the samples
// by rule 4; the bias gradient likewise by chunks of TLM_CHUNK values, then the tree.
#include "common.cuh"
#include "conv_grouped.h"
#include "entry/conv_grouped_kernels.h"

namespace {

// grid-stride over n values; indices never depend on the grid size
#define TL_GRID_LOOP(i, n) \
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n); \
         i += (int64_t)gridDim.x * blockDim.x)

// (plane, position) of value i; 32-bit division (every count is under the uint32 limit)
__device__ __forceinline__ void unravel(uint32_t i, uint32_t planes_of, const int64_t *dims,
                                        uint32_t *pl, int64_t *a0, int64_t *a1, int64_t *a2) {
    const uint32_t d1 = (uint32_t)dims[1], d2 = (uint32_t)dims[2];
    const uint32_t q = i % planes_of;
    *pl = i / planes_of;
    *a2 = q % d2;
    *a1 = (q / d2) % d1;
    *a0 = q / d2 / d1;
}

__global__ void k_forward(tl_gconv C, const float *w, const float *b, const float *x, float *y,
                          int64_t total) {
    const uint32_t ctot = (uint32_t)(C.cout * C.groups);
    TL_GRID_LOOP(i, total) {
        uint32_t pl;
        int64_t o0, o1, o2;
        unravel((uint32_t)i, (uint32_t)C.out_n, C.out, &pl, &o0, &o1, &o2);
        y[i] = tl_gconv_forward(&C, w, b, x, pl / ctot, pl % ctot, o0, o1, o2);
    }
}

__global__ void k_dinput(tl_gconv C, const float *w, const float *g, float *dx, int64_t total) {
    const uint32_t ctot = (uint32_t)(C.cin * C.groups);
    TL_GRID_LOOP(i, total) {
        uint32_t pl;
        int64_t q0, q1, q2;
        unravel((uint32_t)i, (uint32_t)C.in_n, C.in, &pl, &q0, &q1, &q2);
        dx[i] = tl_gconv_dinput(&C, w, g, pl / ctot, pl % ctot, q0, q1, q2);
    }
}

// part[j * N + n]: sample n's share of weight j; threads of a warp take neighbouring weights
__global__ void k_dkernel_samples(tl_gconv C, const float *x, const float *g, float *part,
                                  int64_t nw) {
    TL_GRID_LOOP(t, nw * C.n) {
        const uint32_t j = (uint32_t)(t % nw), n = (uint32_t)(t / nw);
        const uint32_t kn = (uint32_t)C.k_n, cin = (uint32_t)C.cin;
        const uint32_t kk = j % kn, cl = (j / kn) % cin, co = j / kn / cin;
        const uint32_t k2 = kk % (uint32_t)C.k[2], k1 = (kk / (uint32_t)C.k[2]) % (uint32_t)C.k[1];
        const uint32_t k0 = kk / (uint32_t)C.k[2] / (uint32_t)C.k[1];
        part[(int64_t)j * C.n + n] = tl_gconv_dkernel_sample(&C, x, g, co, cl, k0, k1, k2, n);
    }
}

// rule 4 over `len` partials per row (samples of a weight, chunks of a bias gradient): pushing
// whole-chunk partials (chunked = 1) or single values (chunked = 0) in order
__global__ void k_rows_rule4(const float *part, int64_t len, int64_t rows, int chunked,
                             float *out) {
    TL_GRID_LOOP(r, rows) {
        tlm_sum4 acc;
        tlm_sum4_init(&acc);
        const float *p = part + r * len;
        for (int64_t i = 0; i < len; i++) {
            if (chunked) tlm_sum4_push(&acc, p[i]);
            else tlm_sum4_add(&acc, p[i]);
        }
        out[r] = tlm_sum4_result(&acc);
    }
}

__global__ void k_dbias_chunks(tl_gconv C, const float *g, float *part, int64_t chunks) {
    const int64_t ctot = C.cout * C.groups;
    TL_GRID_LOOP(t, ctot * chunks) part[t] = tl_gconv_dbias_chunk(&C, g, t / chunks, t % chunks);
}

}  // namespace

extern "C" {

int tlk_conv_grouped_forward(const char *op, tl_buf kernel, tl_buf bias, tl_buf input, tl_buf y,
                             const tl_geom *geom, const int64_t *dilation, int64_t dilation_len,
                             int64_t groups) {
    tl_gconv C;
    TL_TRY(tl_gconv_make(op, geom, dilation, groups, &C));
    const int64_t total = C.n * C.cout * C.groups * C.out_n;
    k_forward<<<tl_blocks(total), TL_THREADS, 0, tl_stream()>>>(C, kernel->data, bias->data,
                                                               input->data, y->data, total);
    TL_LAUNCHED(op);
    return TL_OK;
}

int tlk_conv_grouped_backward(const char *op, tl_buf kernel, tl_buf input, tl_buf grad_out,
                              tl_buf dkernel, tl_buf dbias, tl_buf dinput, const tl_geom *geom,
                              const int64_t *dilation, int64_t dilation_len, int64_t groups) {
    tl_gconv C;
    TL_TRY(tl_gconv_make(op, geom, dilation, groups, &C));
    const int64_t ctot = C.cout * C.groups, nin = C.n * C.cin * C.groups * C.in_n;
    const int64_t nw = ctot * C.cin * C.k_n, chunks = (C.n * C.out_n + TLM_CHUNK - 1) / TLM_CHUNK;
    if (nin > 0) {
        k_dinput<<<tl_blocks(nin), TL_THREADS, 0, tl_stream()>>>(C, kernel->data, grad_out->data,
                                                                dinput->data, nin);
        TL_LAUNCHED(op);
    }
    if (nw > 0 && C.n > 0) {
        float *part;
        TL_TRY(tl_scratch(op, (size_t)(nw * C.n) * sizeof(float), (void **)&part));
        k_dkernel_samples<<<tl_blocks(nw * C.n), TL_THREADS, 0, tl_stream()>>>(
            C, input->data, grad_out->data, part, nw);
        int st = tl_cuda_launched(op);
        if (!st) {
            k_rows_rule4<<<tl_blocks(nw), TL_THREADS, 0, tl_stream()>>>(part, C.n, nw, 0,
                                                                       dkernel->data);
            st = tl_cuda_launched(op);
        }
        tl_scratch_free(part);
        if (st) return st;
    } else if (nw > 0) {
        TL_CUDA_TRY(op, cudaMemsetAsync(dkernel->data, 0, (size_t)nw * sizeof(float), tl_stream()));
    }
    if (ctot > 0 && chunks > 0) {
        float *part;
        TL_TRY(tl_scratch(op, (size_t)(ctot * chunks) * sizeof(float), (void **)&part));
        k_dbias_chunks<<<tl_blocks(ctot * chunks), TL_THREADS, 0, tl_stream()>>>(
            C, grad_out->data, part, chunks);
        int st = tl_cuda_launched(op);
        if (!st) {
            k_rows_rule4<<<tl_blocks(ctot), TL_THREADS, 0, tl_stream()>>>(part, chunks, ctot, 1,
                                                                         dbias->data);
            st = tl_cuda_launched(op);
        }
        tl_scratch_free(part);
        if (st) return st;
    } else if (ctot > 0) {
        TL_CUDA_TRY(op, cudaMemsetAsync(dbias->data, 0, (size_t)ctot * sizeof(float), tl_stream()));
    }
    return TL_OK;
}

}  // extern "C"
