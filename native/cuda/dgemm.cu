// dgemm.cu (CUDA): float64 row-major GEMM of host arrays, C = A (m, k) @ B (k, n).
//
// A and B are staged into scratch device memory on the library stream, one cublasDgemm runs
// with the operands swapped (column-major C^T = B^T A^T is row-major C), and C is copied back;
// the call synchronises the stream because the result is host memory. TF32 does not apply to
// double GEMMs.
#include <climits>
#include <cstring>
#include "common.cuh"

extern "C" int tl_dgemm(const double *a_data, int64_t a_data_len, const double *b_data, int64_t b_data_len,
                        double *c, int64_t c_len, int64_t m, int64_t k, int64_t n) {
    const char *op = "dgemm";
    if (m < 0 || k < 0 || n < 0)
        return tl_fail(TL_E_ARG, "dgemm: expected non-negative m, k, n, got %lld, %lld, %lld", (long long)m,
                       (long long)k, (long long)n);
    if (a_data_len != m * k || b_data_len != k * n || c_len != m * n)
        return tl_fail(TL_E_SHAPE, "dgemm: expected a of %lld, b of %lld and c of %lld elements for "
                       "(%lld x %lld) @ (%lld x %lld), got %lld, %lld, %lld", (long long)(m * k),
                       (long long)(k * n), (long long)(m * n), (long long)m, (long long)k, (long long)k,
                       (long long)n, (long long)a_data_len, (long long)b_data_len, (long long)c_len);
    if (c_len == 0) return TL_OK;
    if ((a_data_len && !a_data) || (b_data_len && !b_data) || !c)
        return tl_fail(TL_E_ARG, "dgemm: a host array pointer is NULL");
    if (k == 0) {
        memset(c, 0, sizeof(double) * (size_t)c_len);
        return TL_OK;
    }
    if (m > INT_MAX || k > INT_MAX || n > INT_MAX)
        return tl_fail(TL_E_TOO_LARGE, "dgemm: cuBLAS needs every dimension <= %d, got m %lld, k %lld, n %lld",
                       INT_MAX, (long long)m, (long long)k, (long long)n);
    if (tl_cuda_poisoned()) return tl_cuda_poison_status(op);
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
