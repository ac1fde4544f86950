/* tl_internal.h: what both native libraries share but do not export.
 *
 * The buffer handle, the thread-local error setter, argument checks that name the op, and the
 * small "backend hooks" each library implements for its memory (malloc on the stub, the
 * stream-ordered pool on CUDA). Everything else in native/common is written once against them.
 */
#ifndef TL_INTERNAL_H
#define TL_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include "torchlean_abi.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TL_HIDDEN __attribute__((visibility("hidden")))

/* return a non-zero status at once */
#define TL_TRY(expr) do { int st_ = (expr); if (st_) return st_; } while (0)

struct tl_buffer {
    float *data;     /* host (stub) or device (CUDA) payload; NULL once released or when n == 0 */
    int64_t n;       /* float32 elements */
    int live;        /* 1 until released */
    int owned;       /* 0 for wrapped external memory: never freed by us */
};

/* errors: set the thread-local message, return the status */
TL_HIDDEN int tl_fail(int status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
TL_HIDDEN void tl_clear_error(void);

/* argument checks; each returns TL_OK or sets a message naming op and returns the status */
TL_HIDDEN int tl_check_count(const char *op, const char *what, int64_t n);
TL_HIDDEN int tl_check_buf(const char *op, const char *what, tl_buf b, int64_t n);
TL_HIDDEN int tl_check_live(const char *op, const char *what, tl_buf b);

/* flags (read from the environment on first use). tl_exact(): follow the canonical arithmetic
 * of tl_math.h so the stub and CUDA give the same bits; it implies tl_deterministic(). */
TL_HIDDEN int tl_deterministic(void);
TL_HIDDEN int tl_exact(void);
TL_HIDDEN int tl_allow_tf32(void);

/* SplitMix64 RNG shared by both libraries (also compiled as CUDA device code) */
#if defined(__CUDACC__)
#define TL_HD __host__ __device__ __forceinline__
#else
#define TL_HD static inline
#endif
TL_HD uint64_t tl_sm64(uint64_t x) {
    uint64_t z = x + 0x9E3779B97F4A7C15ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}
/* u_i in [0, 1): 24 high bits of the low 32 bits of splitmix64(key + i), exact in float32 */
TL_HD float tl_uniform_at(uint64_t key, uint64_t i) {
    uint32_t d = (uint32_t)tl_sm64(key + i);
    return (float)(d >> 8) * (1.0f / 16777216.0f);
}

/* selective_scan keeps the state entering each chunk of TL_SCAN_CHUNK steps (its residual hc);
 * its backward recomputes a chunk's states from there instead of reading every saved state
 * (torchlean/shapes/spectral_scan.py SCAN_CHUNK is the same number) */
#define TL_SCAN_CHUNK 16
/* the chunk count the registry passed must be the one the libraries recompute with */
static inline int tl_scan_check_chunks(const char *op, int64_t steps, int64_t chunks) {
    if (chunks != (steps + TL_SCAN_CHUNK - 1) / TL_SCAN_CHUNK)
        return tl_fail(TL_E_ARG, "%s: %lld checkpoint chunks for %lld steps; expected chunks of %d steps",
                       op, (long long)chunks, (long long)steps, TL_SCAN_CHUNK);
    return TL_OK;
}
/* The exact-mode GEMM (README "Reproducibility levels", rule 3), one per library
 * (stub/gemm.c, cuda/gemm.cu; ops.yaml gemm_exact exports it). Row-major; for b < batch, C + b sc (m, n) gets
 * op(A) op(B): op(A)[i][kk] is A[i lda + kk], or A[kk lda + i] when ta; op(B)[kk][j] is
 * B[kk ldb + j], or B[j ldb + kk] when tb; batch strides sa, sb, sc. Each output is rule 3's
 * chunked float64 chain (exact_version 7): acc = fma((double)op(A)[i][kk], (double)op(B)[kk][j],
 * acc) for kk in order within each chunk of TL_EXACT_KCHUNK (tl_math.h), the first chunk's acc
 * starting at 0, or at C's prior value (as double) when accumulate (how a bias enters), the
 * others at 0; the chunk partials added left to right in float64, then rounded to float32 once.
 * Dimensions must fit int32. */
TL_HIDDEN int tl_gemm_exact_f32(const char *op, int ta, int tb, int64_t batch, int64_t m,
                                int64_t n, int64_t k, const float *A, int64_t lda, int64_t sa,
                                const float *B, int64_t ldb, int64_t sb, float *C, int64_t ldc,
                                int64_t sc, int accumulate);
/* CUDA only (cuda/gemm.cu): the same product as one chain over all of k (no chunks), the order
 * of exact convolutions' GEMMs, whose stub (stub/conv_pool.c) runs tl_sgemm's single chain */
TL_HIDDEN int tl_gemm_exact_chain_f32(const char *op, int ta, int tb, int64_t batch, int64_t m,
                                      int64_t n, int64_t k, const float *A, int64_t lda,
                                      int64_t sa, const float *B, int64_t ldb, int64_t sb,
                                      float *C, int64_t ldc, int64_t sc, int accumulate);

/* statistics kept by native/common/buffer.c */
TL_HIDDEN void tl_stats_note_alloc(int64_t bytes);
TL_HIDDEN void tl_stats_note_free(int64_t bytes);
TL_HIDDEN void tl_stats_note_bytes(int64_t bytes);  /* +/- scratch bytes (live and peak only) */

/* allocate a fresh live buffer of n floats (payload uninitialised); common/buffer.c */
TL_HIDDEN int tl_new_buffer(const char *op, int64_t n, tl_buf *out);

/* ---- backend hooks: implemented once per library (stub/memory.c; cuda/context.cu and pool.cu) */
TL_HIDDEN int tlb_alloc(size_t bytes, void **out);
TL_HIDDEN void tlb_free(void *p, size_t bytes);
TL_HIDDEN int tlb_fill(float *p, int64_t n, float v);          /* v == 0 gives all-zero bits */
TL_HIDDEN int tlb_copy(void *dst, const void *src, size_t bytes); /* device to device */
TL_HIDDEN int tlb_h2d(void *dst, const void *src, size_t bytes);
TL_HIDDEN int tlb_d2h(void *dst, const void *src, size_t bytes); /* synchronises */
TL_HIDDEN int tlb_sync(void);
TL_HIDDEN int tlb_device_count(int64_t *out);
TL_HIDDEN int tlb_empty_cache(void);
TL_HIDDEN void tlb_fill_stats(tl_memory_stats *s); /* cached/cap/device bytes */
TL_HIDDEN const char *tlb_name(void);
/* TL_OK when kernels may run; CUDA: the sticky-error status (message naming op) once poisoned */
TL_HIDDEN int tlb_ready(const char *op);

#ifdef __cplusplus
}
#endif

#endif
