// common.cuh: what every CUDA kernel file includes.
//
// The library owns one CUDA stream, one cuBLAS handle (with an explicit workspace) and a
// stream-ordered memory pool: native/cuda/context.cu and pool.cu implement them. Each kernel body
// (tlk_<kernel>) runs after its generated entry (native/generated/) has checked the sticky
// error state, the handles and every length; it launches on tl_stream(), then TL_LAUNCHED(op)
// checks the launch (and synchronises when TORCHLEAN_CUDA_SYNC=1). Nothing here aborts: failures become a
// TL_ status with a message naming the op and the CUDA error. A sticky error (illegal address,
// launch failure) poisons the library: every later call fails fast with the first message.
#pragma once

#include <cuda_runtime.h>
#include <cublas_v2.h>
#include <stdint.h>
#include "tl_internal.h"
#include "reduce_util.cuh"

#define TL_THREADS 256
// CUDA launch limits the kernels check themselves (the generated entry checks everything else)
#define TL_MAX_GRID_X 2147483647LL  // gridDim.x
#define TL_MAX_GRID_YZ 65535LL      // gridDim.y and gridDim.z

extern "C" {
// the library's stream (created on first use); 0 if creation failed (a status is then set)
TL_HIDDEN cudaStream_t tl_stream(void);
// the cuBLAS handle bound to tl_stream, strict FP32 unless tl_allow_tf32(); status on failure
TL_HIDDEN int tl_cublas(const char *op, cublasHandle_t *out);
// map a CUDA error to a status + message (OOM -> TL_E_OOM, sticky -> TL_E_STICKY and poison)
TL_HIDDEN int tl_cuda_status(const char *op, cudaError_t e);
TL_HIDDEN int tl_cublas_status(const char *op, cublasStatus_t s);
// after a launch: cudaGetLastError (+ stream sync when TORCHLEAN_CUDA_SYNC=1)
TL_HIDDEN int tl_cuda_launched(const char *op);
// nonzero once a sticky error happened; tl_cuda_poison_status() then sets the message again
TL_HIDDEN int tl_cuda_poisoned(void);
TL_HIDDEN int tl_cuda_poison_status(const char *op);
// stream-ordered scratch memory for a kernel's temporaries (freed in stream order)
TL_HIDDEN int tl_scratch(const char *op, size_t bytes, void **out);
TL_HIDDEN void tl_scratch_free(void *p);
// the current device's SM count (queried once; 132, an H100 SXM's, if the query fails)
TL_HIDDEN int tl_sm_count(void);
// host -> device copy on the stream; the caller may reuse src as soon as it returns (small
// uploads go through a pinned staging ring and do not wait for the stream)
TL_HIDDEN int tl_upload(const char *op, void *dst, const void *src, size_t bytes);
// the one GEMM entry of the kernels (gemm.cu): exact mode's rule-3 GEMM or cuBLAS; C_b =
// op(A_b) op(B_b) + beta C_b (beta 0 or 1), row-major, batch strides sa, sb, sc; `single`: one
// plain cuBLAS SGEMM instead of the strided-batched one (batch 1)
TL_HIDDEN int tl_gemm_f32(const char *op, int ta, int tb, int64_t batch, int64_t M, int64_t N, int64_t K,
                          const float *A, int64_t lda, int64_t sa, const float *B, int64_t ldb,
                          int64_t sb, float beta, float *C, int64_t ldc, int64_t sc, int single);
// y[o, i] = sum over k of x[o, k, i] (a mean when `mean`), coalesced and split over the GPU
// (reduce.cu); fixed order in deterministic mode, rule 4 in exact mode. Device pointers.
// inside a captured step (graph.cu): the graph's device RNG base and replay index (rng.cu,
// optim.cu read them); nullptr when no step is being captured
TL_HIDDEN const uint64_t *tl_graph_rng_base(void);
TL_HIDDEN const int64_t *tl_graph_replay(void);
// a kernel that plans on the host from index values tells the capture (graph.cu)
TL_HIDDEN void tl_graph_host_reads(const void *p, size_t bytes);
TL_HIDDEN int tl_cuda_axis_sum(const char *op, const float *x, float *y, int64_t outer, int64_t len,
                               int64_t inner, int mean);
}

#define TL_CUDA_TRY(op, call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) return tl_cuda_status(op, e_); } while (0)

// the opt-in to more than 48 KiB of dynamic shared memory for one kernel, once per process;
// `done` is the call site's own flag (kernels of one signature share a function-pointer type)
template <class Kernel>
int tl_allow_smem(const char *op, Kernel kernel, size_t bytes, bool &done) {
    if (!done) {
        TL_CUDA_TRY(op, cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
        done = true;
    }
    return TL_OK;
}
#define TL_CUBLAS_TRY(op, call) do { cublasStatus_t s_ = (call); if (s_ != CUBLAS_STATUS_SUCCESS) return tl_cublas_status(op, s_); } while (0)
#define TL_LAUNCHED(op) do { int st_ = tl_cuda_launched(op); if (st_) return st_; } while (0)

// 1-D launch geometry: enough blocks of TL_THREADS for n elements, capped for grid-stride loops.
// Kernels index by the global element index so results never depend on the grid size.
static inline unsigned tl_blocks(int64_t n) {
    int64_t b = (n + TL_THREADS - 1) / TL_THREADS;
    if (b < 1) b = 1;
    if (b > 65535 * 16) b = 65535 * 16;
    return (unsigned)b;
}

#define TL_GRID_STRIDE(i, n) \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

// Partials of an exact block-per-row launch (rule 4 by tl_exact_block_reduce, reduce_util.cuh):
// `blocks` reductions of n values each, in dynamic shared memory when they fit (smem bytes),
// else in a scratch slice per block (gpart); finish() checks the launch and frees the scratch.
struct TlExactParts {
    size_t smem = 0;
    float *gpart = nullptr;
    int setup(const char *op, int64_t blocks, int64_t n) {
        smem = tl_exact_smem(n);
        if (smem) return TL_OK;
        return tl_scratch(op, (size_t)(blocks * tl_exact_chunks(n)) * sizeof(float), (void **)&gpart);
    }
    int finish(const char *op) {
        int rc = tl_cuda_launched(op);
        if (gpart) tl_scratch_free(gpart);
        return rc;
    }
};
// in the kernel: this block's partials (smem is its dynamic shared memory)
__device__ __forceinline__ float *tl_exact_part(float *smem, float *gpart, int64_t n) {
    return gpart ? gpart + blockIdx.x * tl_exact_chunks(n) : smem;
}
