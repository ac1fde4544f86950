/* torchlean_abi.h: the hand-written core of the torchlean C ABI.
 *
 * Both native libraries (libtorchlean_stub.so, libtorchlean_cuda.so) implement every function
 * declared here plus every kernel declared in the generated torchlean_ops.h.
 *
 * Rules (see README "C ABI"):
 *  - every symbol starts with tl_; every call returns an int status (TL_OK = 0) except the few
 *    documented query functions; on failure tl_last_error() holds a thread-local message
 *    "<op>: <what was expected>, got <what>";
 *  - nothing aborts, exits or asserts: errors are returned;
 *  - buffers are opaque float32 handles owned by the native side; release is explicit and
 *    idempotent (1 the first time, 0 afterwards); tl_buf_destroy frees the handle itself;
 *  - element counts are int64 at the ABI and must fit the uint32 element limit.
 *
 * This header is also fed to cffi (the generator strips the preprocessor lines), so it uses
 * only plain declarations between the CDEF markers.
 */
#ifndef TORCHLEAN_ABI_H
#define TORCHLEAN_ABI_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define TL_API __declspec(dllexport)
#else
#define TL_API __attribute__((visibility("default")))
#endif

#define TL_ABI_VERSION 1
#define TL_MAX_ELEMENTS 4294967295LL /* uint32 element limit */
#define TL_MAX_RANK 8

/* CDEF-BEGIN */
enum {
    TL_OK = 0,
    TL_E_ARG = 1,         /* bad argument value or type */
    TL_E_SHAPE = 2,       /* sizes or shapes do not match */
    TL_E_TOO_LARGE = 3,   /* over the uint32 element limit */
    TL_E_OOM = 4,         /* allocation failed */
    TL_E_RELEASED = 5,    /* buffer already released */
    TL_E_UNSUPPORTED = 6, /* not available in this backend / build */
    TL_E_DEVICE = 7,      /* device error (CUDA, cuBLAS, cuFFT) */
    TL_E_STICKY = 8,      /* unrecoverable device error: the process must restart */
    TL_E_INTERNAL = 9
};

typedef struct tl_buffer *tl_buf;

typedef struct tl_memory_stats {
    int64_t live_buffers;   /* buffers with a live payload */
    int64_t live_bytes;     /* bytes held by live payloads */
    int64_t peak_bytes;     /* max live_bytes since load (or last reset) */
    int64_t allocations;    /* payload allocations */
    int64_t frees;          /* payload releases */
    int64_t cached_bytes;   /* device pool bytes kept for reuse (0 on the stub) */
    int64_t cache_cap_bytes;/* TORCHLEAN_CUDA_CACHE_CAP_BYTES (0 = no cap) */
    int64_t device_free_bytes;
    int64_t device_total_bytes;
} tl_memory_stats;

/* identity */
TL_API int tl_abi_version(void);
TL_API const char *tl_registry_hash(void);
TL_API const char *tl_backend_name(void);
/* number of usable devices (stub: 0); status != 0 when the driver failed, message says why */
TL_API int tl_device_count(int64_t *out);
TL_API const char *tl_last_error(void);

/* buffers */
TL_API int tl_buf_alloc(int64_t n, tl_buf *out);            /* uninitialised payload */
/* the same, returning the handle (NULL on failure, message in tl_last_error): the hot path */
TL_API tl_buf tl_buf_new(int64_t n);
TL_API int tl_buf_zeros(int64_t n, tl_buf *out);
TL_API int tl_buf_full(int64_t n, double value, tl_buf *out);
TL_API int tl_buf_copy(tl_buf src, tl_buf *out);
TL_API int tl_buf_upload_f32(const float *src, int64_t n, tl_buf *out);
TL_API int tl_buf_upload_f64(const double *src, int64_t n, tl_buf *out);
TL_API int tl_buf_download_f32(tl_buf b, float *dst, int64_t n);
TL_API int tl_buf_download_f64(tl_buf b, double *dst, int64_t n);
/* device pointer of a live payload (stub: host pointer); for zero-copy interop */
TL_API int tl_buf_data_ptr(tl_buf b, uint64_t *out);
/* wrap external memory (DLPack import): the buffer does not free it */
TL_API int tl_buf_wrap(uint64_t ptr, int64_t n, tl_buf *out);
TL_API int64_t tl_buf_size(tl_buf b);                       /* -1 when released */
TL_API int tl_buf_release(tl_buf b);                        /* 1 first time, 0 afterwards */
TL_API void tl_buf_destroy(tl_buf b);                       /* finalizer: release + free handle */

/* memory */
TL_API int tl_memory_stats_get(tl_memory_stats *out);
TL_API int tl_memory_reset_peak(void);
TL_API int tl_empty_cache(void);
TL_API int tl_synchronize(void);

/* determinism: set returns the observed flag */
TL_API int tl_set_deterministic(int flag);
TL_API int tl_is_deterministic(void);
/* exact mode (the stub and CUDA compute the same bits): set returns the observed flag; on
 * implies deterministic, and tl_set_deterministic(0) also turns exact mode off */
TL_API int tl_set_exact(int flag);
TL_API int tl_is_exact(void);
/* TF32 for GEMMs (CUDA only; the stub records the flag) */
TL_API int tl_set_allow_tf32(int flag);

/* data parallel (torchlean.distributed). tl_set_device binds this process to one device before
 * any CUDA state exists (stub: accepts any device >= 0 and does nothing); binding again to the
 * same device is ok, to another one once the library has created its stream is an error.
 * tl_cuda_stream returns the library's cudaStream_t (created on first use) so NCCL work can be
 * ordered against it; NULL on the stub or when creation failed (message in tl_last_error). */
TL_API int tl_set_device(int64_t device);
TL_API void *tl_cuda_stream(void);

/* whole-step capture (torchlean.cuda.graph_step; native/cuda/graph.cu). A graph handle from
 * tl_graph_new; tl_graph_bind_host gives a host range (an integer input) a device twin that
 * uploads from it become copies of inside the capture; tl_graph_bind_input (before the
 * capture) adds an input the graph's first node copies into a static buffer, replay r from
 * entry r % depth of a ring of pinned stagings (*host, staged; 256-byte aligned strides) or of
 * pinned slots holding a device address; the host writes entry (launches % depth) only after
 * tl_graph_wait_inputs (the replay that used it last has read it);
 * tl_graph_copy is a device copy in stream order; tl_graph_begin..end captures the step
 * (rng_base: seed + counter at its first draw; draws: how many keys it takes), tl_graph_abort
 * ends a failed capture; tl_graph_launch replays; tl_graph_set_rng moves the next replay's RNG
 * base; tl_graph_constants counts the host constants captured (and names the first op). The
 * stub answers TL_E_UNSUPPORTED. tl_graph_stage_int64 (host code, both libraries) copies n
 * values into a staging and returns the index of the first outside [lo, hi) or equal to
 * exclude, -1 when none is. */
TL_API int tl_graph_new(void **out);
TL_API int tl_graph_bind_host(void *g, const void *host, int64_t bytes, uint64_t *dev);
TL_API int tl_graph_bind_input(void *g, uint64_t dst, int64_t bytes, int staged, int64_t depth,
                               void **host);
TL_API int tl_graph_wait_inputs(void *g);
TL_API int64_t tl_graph_stage_int64(int64_t *dst, const int64_t *src, int64_t n, int64_t lo,
                                    int64_t hi, int64_t exclude);
TL_API int tl_graph_copy(uint64_t dst, uint64_t src, int64_t bytes);
TL_API int tl_graph_begin(void *g, uint64_t rng_base);
TL_API int tl_graph_end(void *g, int64_t draws);
TL_API int tl_graph_abort(void *g);
TL_API int tl_graph_launch(void *g);
TL_API int tl_graph_set_rng(void *g, uint64_t rng_base);
TL_API int64_t tl_graph_constants(void *g, char *op, int64_t cap);
TL_API int tl_graph_bound_read(void *g, int64_t i);
TL_API int tl_graph_persistent(int on);
TL_API void tl_graph_destroy(void *g);

/* SplitMix64 as exported for the Python reference tests */
TL_API uint64_t tl_splitmix64(uint64_t x);
/* CDEF-END */

#ifdef __cplusplus
}
#endif

#endif /* TORCHLEAN_ABI_H */
