// audit_emu.cpp: the small digest batch's kernel (native/cuda/audit_small.cuh) compiled for the
// CPU with the emulation in cuda_emu/cuda_runtime.h, behind a C API that
// tests/test_audit_kernels.py loads. The launch is audit.cu's: one block of TL_THREADS threads per
// buffer, the table passed by value.
#include <cuda_runtime.h>  // the emulation (tests/native/cuda_emu)

#define TL_THREADS 256  // native/cuda/common.cuh's block size
#include "audit_small.cuh"

extern "C" {

// rows[4k..4k+3] = the digest of the n[k] float32 words at ptr[k], for k < count; 1 when the
// batch is not a small one (audit.cu sends it to the chunked kernel)
int emu_digest_small(const unsigned long long *ptr, const long long *n, long long count,
                     float *rows, int reverse) {
    if (count > tl_audit::kSmallItems) return 1;
    tl_audit::SmallBatch b{};
    for (long long k = 0; k < count; k++) {
        if (n[k] > tl_audit::kSmallElements) return 1;
        b.ptr[k] = ptr[k];
        b.n[k] = n[k];
    }
    emu::launch(dim3((unsigned)count), dim3(TL_THREADS),
                [=] { tl_audit::digest_small_kernel(b, rows); }, reverse);
    return 0;
}

}  // extern "C"
