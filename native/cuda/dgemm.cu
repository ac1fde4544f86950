// dgemm.cu (CUDA): float64 row-major GEMM of host arrays, C = A (m, k) @ B (k, n).
//
// A and B are staged into scratch device memory on the library stream, one cublasDgemm runs
// with the operands swapped (column-major C^T = B^T A^T is row-major C), and C is copied back;
// the call synchronises the stream because the result is host memory. TF32 does not apply to
// double GEMMs.
#include <climits>
#include <cstring>
#include "common.cuh"
#include "entry/dgemm_kernels.h"

extern "C" int tlk_dgemm(const char *op, const double *a_data, int64_t a_data_len, const double *b_data, int64_t b_data_len,
                        double *c, int64_t c_len, int64_t m, int64_t k, int64_t n) {
    if (k == 0) {
        memset(c, 0, sizeof(double) * (size_t)c_len);
        return TL_OK;
    }
    if (m > INT_MAX || k > INT_MAX || n > INT_MAX)
        return tl_fail(TL_E_TOO_LARGE, "%s: cuBLAS needs every dimension <= %d, got m %lld, k %lld, n %lld",
                       op, INT_MAX, (long long)m, (long long)k, (long long)n);
    cublasHandle_t h;
    TL_TRY(tl_cublas(op, &h));
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
    if (!st) {
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
