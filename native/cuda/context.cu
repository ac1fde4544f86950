// context.cu: the CUDA runtime under every kernel file: the stream, the error mapping, the
// cuBLAS handle, uploads and the backend hooks (tlb_*) that move data. pool.cu holds the memory
// pool and its caches.
//
// Stream. One library-owned non-blocking stream, created on first use. Every kernel, copy,
// allocation and free is queued on it, so stream order alone makes buffer reuse safe. The only
// host synchronisations are tlb_d2h (a download must see its data), tlb_sync (tl_synchronize),
// tlb_empty_cache, an upload from page-locked user memory or too large for the staging ring
// (see tl_upload), and every launch when TORCHLEAN_CUDA_SYNC=1 (a debugging aid: an error then
// surfaces at the op that caused it).
//
// Errors. Every CUDA status becomes a TL_ status with a message naming the op and the CUDA
// error. A sticky error (illegal address, launch failure, ...) corrupts the context: the first
// message is kept, the library is marked poisoned, and every later call fails fast with
// TL_E_STICKY (Python raises torchlean.DeviceError) instead of cascading.
//
// cuBLAS. One handle bound to the stream with an explicit workspace (so no hidden allocation
// happens inside a GEMM and results do not depend on workspace availability). FP32 GEMMs run
// with CUBLAS_DEFAULT_MATH, which never uses TF32 for FP32 data (strict FP32); when
// tl_allow_tf32() is set the handle switches to CUBLAS_TF32_TENSOR_OP_MATH. The mode is
// re-applied whenever the flag changes.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <deque>
#include <mutex>
#include <vector>

#include "context.cuh"

namespace tl_ctx {

cudaStream_t g_stream = nullptr;
volatile int g_stream_ready = 0;     // 1 once g_stream (and the pool) exist
cudaMemPool_t g_pool = nullptr;
volatile int g_poisoned = 0;

}  // namespace tl_ctx

using namespace tl_ctx;

namespace {

std::mutex g_init_mu;                // guards the lazy creation below
std::mutex g_poison_mu;              // guards the first sticky message (separate: errors raised
                                     // while g_init_mu is held poison too)
int g_device = 0;
int g_sync_each_launch = -1;         // TORCHLEAN_CUDA_SYNC, read once

char g_poison_msg[768];

cublasHandle_t g_cublas = nullptr;
void *g_cublas_ws = nullptr;
const size_t kCublasWorkspaceBytes = (size_t)32 << 20;  // the size cuBLAS recommends on Hopper
int g_cublas_tf32 = -1;              // math mode applied to the handle (-1: none yet)

bool is_sticky(cudaError_t e) {
    switch (e) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorMisalignedAddress:
    case cudaErrorIllegalInstruction:
    case cudaErrorAssert:
    case cudaErrorHardwareStackError:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorLaunchTimeout:
    case cudaErrorECCUncorrectable:
    case cudaErrorContextIsDestroyed:
        return true;
    default:
        return false;
    }
}

// Keep the first sticky message; later ones are consequences of it.
void poison(const char *msg) {
    std::lock_guard<std::mutex> lk(g_poison_mu);
    if (g_poisoned) return;
    strncpy(g_poison_msg, msg, sizeof g_poison_msg - 1);
    g_poison_msg[sizeof g_poison_msg - 1] = '\0';
    __atomic_store_n(&g_poisoned, 1, __ATOMIC_RELEASE);
}

}  // namespace

namespace tl_ctx {

// Create the stream and the pool (called under g_init_mu).
int init_locked(const char *op) {
    if (g_stream_ready) return TL_OK;
    cudaError_t e = cudaGetDevice(&g_device);
    if (e != cudaSuccess) return tl_cuda_status(op, e);
    cudaStream_t s = nullptr;
    e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    if (e != cudaSuccess) return tl_cuda_status(op, e);

    cudaMemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = cudaMemAllocationTypePinned;
    props.handleTypes = cudaMemHandleTypeNone;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = g_device;
    cudaMemPool_t pool = nullptr;
    e = cudaMemPoolCreate(&pool, &props);
    if (e != cudaSuccess) { cudaStreamDestroy(s); return tl_cuda_status(op, e); }
    // never hand cached memory back on its own: the cap and empty_cache decide that
    uint64_t threshold = UINT64_MAX;
    e = cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold);
    if (e != cudaSuccess) {
        cudaMemPoolDestroy(pool);
        cudaStreamDestroy(s);
        return tl_cuda_status(op, e);
    }
    g_cap = parse_cap(getenv("TORCHLEAN_CUDA_CACHE_CAP_BYTES"));
    g_pool = pool;
    g_stream = s;
    __atomic_store_n(&g_stream_ready, 1, __ATOMIC_RELEASE);
    return TL_OK;
}

int ensure_init(const char *op) {
    if (__atomic_load_n(&g_stream_ready, __ATOMIC_ACQUIRE)) return TL_OK;
    std::lock_guard<std::mutex> lk(g_init_mu);
    return init_locked(op);
}

int poison_check(const char *op) {
    return g_poisoned ? tl_cuda_poison_status(op) : TL_OK;
}

}  // namespace tl_ctx

namespace {

__global__ void fill_kernel(float *p, int64_t n, float v) {
    TL_GRID_STRIDE(i, n) p[i] = v;
}

// Uploads. A cudaMemcpyAsync from pageable memory first waits for the whole stream, so every
// batch, label or index upload would stall the host until the GPU caught up, and the next
// launches could not queue behind running work. Uploads up to kStageMax bytes are copied into a
// pinned staging ring instead and sent from there asynchronously: the host returns at once and
// the caller may reuse its array. A region of the ring is reused only after the event recorded
// behind its copy has completed (the host waits only when kStageBytes of uploads are in flight).
const size_t kStageBytes = (size_t)32 << 20, kStageMax = (size_t)8 << 20, kStageAlign = 256;
struct StagedCopy { size_t lo, hi; cudaEvent_t done; };
std::mutex g_stage_mu;
char *g_stage = nullptr;                 // pinned, kStageBytes, allocated on first use
bool g_stage_failed = false;             // cudaMallocHost failed once: upload directly
size_t g_stage_head = 0;                 // where the next region starts
std::deque<StagedCopy> g_stage_busy;     // copies in flight, oldest first (ring order)
std::vector<cudaEvent_t> g_stage_events; // recycled events

// wait for the oldest staged copy and recycle its event (under g_stage_mu)
int stage_retire_oldest(const char *op) {
    StagedCopy c = g_stage_busy.front();
    g_stage_busy.pop_front();
    cudaError_t e = cudaEventSynchronize(c.done);
    g_stage_events.push_back(c.done);
    return e == cudaSuccess ? TL_OK : tl_cuda_status(op, e);
}

// staged upload; *staged false when the ring cannot take it (too large, no pinned memory)
int stage_upload(const char *op, void *dst, const void *src, size_t bytes, bool *staged) {
    *staged = false;
    const size_t need = (bytes + kStageAlign - 1) / kStageAlign * kStageAlign;
    if (need > kStageMax) return TL_OK;
    std::lock_guard<std::mutex> lk(g_stage_mu);
    if (g_stage_failed) return TL_OK;
    if (!g_stage) {
        if (cudaMallocHost((void **)&g_stage, kStageBytes) != cudaSuccess) {
            cudaGetLastError();
            g_stage = nullptr;
            g_stage_failed = true;
            return TL_OK;
        }
    }
    if (g_stage_head + need > kStageBytes) g_stage_head = 0;  // wrap: the tail stays unused
    const size_t lo = g_stage_head, hi = lo + need;
    while (!g_stage_busy.empty() &&
           ((g_stage_busy.front().lo < hi && g_stage_busy.front().hi > lo) ||
            g_stage_busy.size() >= 4096))
        TL_TRY(stage_retire_oldest(op));
    cudaEvent_t ev;
    if (!g_stage_events.empty()) {
        ev = g_stage_events.back();
        g_stage_events.pop_back();
    } else {
        TL_CUDA_TRY(op, cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    }
    memcpy(g_stage + lo, src, bytes);
    cudaError_t e = cudaMemcpyAsync(dst, g_stage + lo, bytes, cudaMemcpyHostToDevice, g_stream);
    if (e == cudaSuccess) e = cudaEventRecord(ev, g_stream);
    if (e != cudaSuccess) {
        g_stage_events.push_back(ev);
        return tl_cuda_status(op, e);
    }
    g_stage_busy.push_back(StagedCopy{lo, hi, ev});
    g_stage_head = hi;
    *staged = true;
    return TL_OK;
}
}  // namespace

extern "C" {

// ------------------------------------------------------------------ errors

int tl_cuda_status(const char *op, cudaError_t e) {
    if (e == cudaSuccess) return TL_OK;
    if (e == cudaErrorStreamCaptureUnsupported || e == cudaErrorStreamCaptureInvalidated ||
        e == cudaErrorStreamCaptureImplicit || e == cudaErrorCapturedEvent ||
        e == cudaErrorStreamCaptureWrongThread) {
        cudaGetLastError();
        return tl_fail(TL_E_UNSUPPORTED, "%s: cannot run inside a captured step "
                       "(torchlean.cuda.graph_step): %s (%s)", op, cudaGetErrorName(e),
                       cudaGetErrorString(e));
    }
    // clear the runtime's last-error slot so the next check does not see this one again
    // (a sticky error stays in the context whatever we do)
    cudaGetLastError();
    if (e == cudaErrorMemoryAllocation)
        return tl_fail(TL_E_OOM, "%s: out of device memory (%s: %s)", op, cudaGetErrorName(e),
                       cudaGetErrorString(e));
    if (is_sticky(e)) {
        char msg[768];
        snprintf(msg, sizeof msg, "%s: unrecoverable CUDA error %s (%s)", op, cudaGetErrorName(e),
                 cudaGetErrorString(e));
        // the call that meets the error reports it plainly; later calls say the context is gone
        poison(msg);
        return tl_fail(TL_E_STICKY, "%s", msg);
    }
    return tl_fail(TL_E_DEVICE, "%s: CUDA error %s (%s)", op, cudaGetErrorName(e),
                   cudaGetErrorString(e));
}

int tl_cuda_poisoned(void) { return g_poisoned; }

int tl_cuda_poison_status(const char *op) {
    if (!g_poisoned) return TL_OK;
    return tl_fail(TL_E_STICKY, "%s: the CUDA context is unusable after an earlier error: %s",
                   op, g_poison_msg);
}

int tl_cublas_status(const char *op, cublasStatus_t s) {
    if (s == CUBLAS_STATUS_SUCCESS) return TL_OK;
    if (s == CUBLAS_STATUS_ALLOC_FAILED)
        return tl_fail(TL_E_OOM, "%s: cuBLAS could not allocate device memory", op);
    if (s == CUBLAS_STATUS_EXECUTION_FAILED) {
        // a failed GEMM launch may be a sticky context error underneath
        cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess && is_sticky(e)) return tl_cuda_status(op, e);
    }
    return tl_fail(TL_E_DEVICE, "%s: cuBLAS error %s (%s)", op, cublasGetStatusName(s),
                   cublasGetStatusString(s));
}

int tl_cuda_launched(const char *op) {
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return tl_cuda_status(op, e);
    if (g_sync_each_launch < 0) {
        const char *v = getenv("TORCHLEAN_CUDA_SYNC");
        g_sync_each_launch = (v && strcmp(v, "1") == 0) ? 1 : 0;
    }
    if (g_sync_each_launch && g_stream_ready && !graph_capturing()) {
        e = cudaStreamSynchronize(g_stream);
        if (e != cudaSuccess) return tl_cuda_status(op, e);
    }
    return TL_OK;
}

cudaStream_t tl_stream(void) {
    if (g_poisoned) { tl_cuda_poison_status("stream"); return nullptr; }
    if (ensure_init("stream")) return nullptr;
    return g_stream;
}

// Data parallel: one device per process, chosen before the stream, pool and cuBLAS handle
// exist (they belong to the device current at creation). The calling thread is the one that
// runs the ops afterwards (torchlean.distributed.init() on the main thread).
TL_API int tl_set_device(int64_t device) {
    TL_TRY(poison_check("set_device"));
    std::lock_guard<std::mutex> lk(g_init_mu);
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) return tl_cuda_status("set_device", e);
    if (device < 0 || device >= n)
        return tl_fail(TL_E_ARG, "set_device: expected a device index in [0, %d), got %lld", n,
                       (long long)device);
    if (g_stream_ready) {
        if ((int)device == g_device) return TL_OK;
        return tl_fail(TL_E_ARG, "set_device: the library already runs on device %d (its stream "
                       "and memory pool exist); cannot move to device %lld: call "
                       "torchlean.distributed.init() before any CUDA work", g_device,
                       (long long)device);
    }
    e = cudaSetDevice((int)device);
    if (e != cudaSuccess) return tl_cuda_status("set_device", e);
    g_device = (int)device;
    return TL_OK;
}

TL_API void *tl_cuda_stream(void) { return (void *)tl_stream(); }

int tl_cublas(const char *op, cublasHandle_t *out) {
    TL_TRY(poison_check(op));
    TL_TRY(ensure_init(op));
    {
        std::lock_guard<std::mutex> lk(g_init_mu);
        if (!g_cublas) {
            cublasHandle_t h = nullptr;
            cublasStatus_t s = cublasCreate(&h);
            if (s != CUBLAS_STATUS_SUCCESS) return tl_cublas_status(op, s);
            void *ws = nullptr;
            cudaError_t e = cudaMalloc(&ws, kCublasWorkspaceBytes);  // once per process
            if (e != cudaSuccess) { cublasDestroy(h); return tl_cuda_status(op, e); }
            s = cublasSetStream(h, g_stream);
            if (s == CUBLAS_STATUS_SUCCESS) s = cublasSetWorkspace(h, ws, kCublasWorkspaceBytes);
            if (s == CUBLAS_STATUS_SUCCESS) s = cublasSetPointerMode(h, CUBLAS_POINTER_MODE_HOST);
            if (s == CUBLAS_STATUS_SUCCESS) s = cublasSetAtomicsMode(h, CUBLAS_ATOMICS_NOT_ALLOWED);
            if (s != CUBLAS_STATUS_SUCCESS) {
                cublasDestroy(h);
                cudaFree(ws);
                return tl_cublas_status(op, s);
            }
            g_cublas = h;
            g_cublas_ws = ws;
            g_cublas_tf32 = -1;
        }
        int want = tl_allow_tf32() ? 1 : 0;
        if (want != g_cublas_tf32) {
            cublasStatus_t s = cublasSetMathMode(
                g_cublas, want ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH);
            if (s != CUBLAS_STATUS_SUCCESS) return tl_cublas_status(op, s);
            g_cublas_tf32 = want;
        }
    }
    *out = g_cublas;
    return TL_OK;
}

int tl_sm_count(void) {
    static int sms = 0;
    if (!sms) {
        int dev = 0, v = 0;
        if (cudaGetDevice(&dev) == cudaSuccess &&
            cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, dev) == cudaSuccess && v > 0)
            sms = v;
        else
            sms = 132;
    }
    return sms;
}

int tl_upload(const char *op, void *dst, const void *src, size_t bytes) {
    if (bytes == 0) return TL_OK;
    if (graph_capturing()) return graph_upload(op, dst, src, bytes);
    cudaStream_t s = tl_stream();
    if (!s) return g_poisoned ? tl_cuda_poison_status(op) : TL_E_DEVICE;
    cudaPointerAttributes a;
    bool pinned = false;
    if (cudaPointerGetAttributes(&a, src) != cudaSuccess) cudaGetLastError();
    else pinned = a.type == cudaMemoryTypeHost;
    if (!pinned) {
        bool staged = false;
        TL_TRY(stage_upload(op, dst, src, bytes, &staged));
        if (staged) return TL_OK;
    }
    TL_CUDA_TRY(op, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, s));
    // From pageable memory the copy is staged before cudaMemcpyAsync returns, so the caller may
    // free its array at once. From page-locked memory it is truly asynchronous: wait for it.
    if (pinned) TL_CUDA_TRY(op, cudaStreamSynchronize(s));
    return TL_OK;
}

// ------------------------------------------------------------------ backend hooks

const char *tlb_name(void) { return "cuda"; }

int tlb_ready(const char *op) { return tl_cuda_poison_status(op); }

int tlb_fill(float *p, int64_t n, float v) {
    TL_TRY(poison_check("full"));
    cudaStream_t s = tl_stream();
    if (!s) return g_poisoned ? tl_cuda_poison_status("full") : TL_E_DEVICE;
    if (n <= 0) return TL_OK;
    if (graph_capturing()) {
        if (cudaStream_t side = graph_persistent_stream()) {  // state made inside a capture
            fill_kernel<<<tl_blocks(n), TL_THREADS, 0, side>>>(p, n, v);
            TL_CUDA_TRY("full", cudaGetLastError());
            TL_CUDA_TRY("full", cudaStreamSynchronize(side));
            return TL_OK;
        }
    }
    if (v == 0.0f && !signbit(v)) {  // +0.0 is all-zero bits; -0.0 is not
        TL_CUDA_TRY("full", cudaMemsetAsync(p, 0, (size_t)n * sizeof(float), s));
        return TL_OK;
    }
    fill_kernel<<<tl_blocks(n), TL_THREADS, 0, s>>>(p, n, v);
    return tl_cuda_launched("full");
}

int tlb_copy(void *dst, const void *src, size_t bytes) {
    TL_TRY(poison_check("copy"));
    cudaStream_t s = tl_stream();
    if (!s) return TL_E_DEVICE;
    TL_CUDA_TRY("copy", cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s));
    return TL_OK;
}

int tlb_h2d(void *dst, const void *src, size_t bytes) {
    TL_TRY(poison_check("upload"));
    return tl_upload("upload", dst, src, bytes);
}

int tlb_d2h(void *dst, const void *src, size_t bytes) {
    TL_TRY(poison_check("download"));
    if (graph_capturing()) return graph_refuse("download", "a host read (download)");
    cudaStream_t s = tl_stream();
    if (!s) return TL_E_DEVICE;
    TL_CUDA_TRY("download", cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, s));
    TL_CUDA_TRY("download", cudaStreamSynchronize(s));
    return TL_OK;
}

int tlb_device_count(int64_t *out) {
    *out = 0;
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e == cudaErrorNoDevice) {
        cudaGetLastError();
        return TL_OK;
    }
    if (e != cudaSuccess) {
        cudaGetLastError();  // not sticky: a later call may still succeed
        return tl_fail(TL_E_DEVICE, "device_count: cudaGetDeviceCount failed: %s (%s)",
                       cudaGetErrorName(e), cudaGetErrorString(e));
    }
    *out = n;
    return TL_OK;
}

}  // extern "C"
