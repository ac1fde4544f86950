// dgemm.cu (CUDA): float64 row-major GEMM of host arrays, C = A (m, k) @ B (k, n).
//
// A and B are staged into scratch device memory on the library stream, one cublasDgemm runs
// with the operands swapped (column-major C^T = B^T A^T is row-major C), and C is copied back;
// the call synchronises the stream because the result is host memory. TF32 does not apply to
// double GEMMs. In exact mode cuBLAS is replaced by k_dgemm_exact: every C[i, j] is one fused
// multiply-add chain c = fma(a[i, k], b[k, j], c) in increasing k from 0, as the stub computes
// it (stub/dgemm.c), so both give the same bits.
#include <climits>
#include <cstring>
#include "common.cuh"
#include "generated/dgemm_kernels.h"

namespace {

constexpr int DT = 16;  // output tile DT x DT, one thread per output; k staged DT at a time

__global__ void k_dgemm_exact(int m, int n, int k, const double *A, const double *B, double *C) {
    __shared__ double As[DT][DT + 1], Bs[DT][DT + 1];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int i = blockIdx.y * DT + ty, j = blockIdx.x * DT + tx;
    double acc = 0.0;
    for (int k0 = 0; k0 < k; k0 += DT) {
        As[ty][tx] = (i < m && k0 + tx < k) ? A[(size_t)i * k + k0 + tx] : 0.0;
        Bs[ty][tx] = (k0 + ty < k && j < n) ? B[(size_t)(k0 + ty) * n + j] : 0.0;
        __syncthreads();
        const int kn = k - k0 < DT ? k - k0 : DT;  // no padded fma after the last k
        for (int kk = 0; kk < kn; kk++) acc = __fma_rn(As[ty][kk], Bs[kk][tx], acc);
        __syncthreads();
    }
    if (i < m && j < n) C[(size_t)i * n + j] = acc;
}

}  // namespace

extern "C" int tlk_dgemm(const char *op, const double *a_data, int64_t a_data_len, const double *b_data, int64_t b_data_len,
                        double *c, int64_t c_len, int64_t m, int64_t k, int64_t n) {
    if (k == 0) {
        memset(c, 0, sizeof(double) * (size_t)c_len);
        return TL_OK;
    }
    if (m == 0 || n == 0) return TL_OK;  // nothing to compute (c is empty)
    if (m > INT_MAX || k > INT_MAX || n > INT_MAX)
        return tl_fail(TL_E_TOO_LARGE, "%s: cuBLAS needs every dimension <= %d, got m %lld, k %lld, n %lld",
                       op, INT_MAX, (long long)m, (long long)k, (long long)n);
    const bool exact = tl_exact();
    if (exact && (m + DT - 1) / DT > TL_MAX_GRID_YZ)
        return tl_fail(TL_E_TOO_LARGE, "%s: exact mode needs m <= %lld rows, got %lld", op,
                       (long long)(TL_MAX_GRID_YZ * DT), (long long)m);
    cublasHandle_t h = nullptr;
    if (!exact) TL_TRY(tl_cublas(op, &h));
    cudaStream_t s = tl_stream();
    size_t sa = sizeof(double) * (size_t)a_data_len, sb = sizeof(double) * (size_t)b_data_len,
           sc = sizeof(double) * (size_t)c_len;
    char *dev;
    TL_TRY(tl_scratch(op, sa + sb + sc, (void **)&dev));
    double *dA = (double *)dev, *dB = (double *)(dev + sa), *dC = (double *)(dev + sa + sb);
    int st = TL_OK;
    cudaError_t e = cudaMemcpyAsync(dA, a_data, sa, cudaMemcpyHostToDevice, s);
    if (e == cudaSuccess) e = cudaMemcpyAsync(dB, b_data, sb, cudaMemcpyHostToDevice, s);
    if (e != cudaSuccess) st = tl_cuda_status(op, e);
    if (!st && exact) {
        dim3 grid((unsigned)((n + DT - 1) / DT), (unsigned)((m + DT - 1) / DT));
        k_dgemm_exact<<<grid, dim3(DT, DT), 0, s>>>((int)m, (int)n, (int)k, dA, dB, dC);
        st = tl_cuda_launched(op);
    } else if (!st) {
        const double one = 1.0, zero = 0.0;
        cublasStatus_t cs = cublasDgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, (int)n, (int)m, (int)k, &one, dB, (int)n,
                                        dA, (int)k, &zero, dC, (int)n);
        if (cs != CUBLAS_STATUS_SUCCESS) st = tl_cublas_status(op, cs);
    }
    if (!st) {
        e = cudaMemcpyAsync(c, dC, sc, cudaMemcpyDeviceToHost, s);
        if (e == cudaSuccess) e = cudaStreamSynchronize(s);
        if (e != cudaSuccess) st = tl_cuda_status(op, e);
    }
    tl_scratch_free(dev);
    return st;
}
