/* memory.c (stub): the backend hooks over aligned_alloc/free; "device" memory is host memory.
 *
 * Freed payloads of BLOCK_MIN bytes or more are kept (up to BLOCK_SLOTS of them, CACHE_CAP
 * bytes in all, the oldest dropped first) and handed out again for an allocation of exactly
 * their size: a training step allocates the same sizes step after step, and a fresh large
 * malloc comes from mmap, whose first touch of every page faults (a batchnorm's two 16 MiB
 * outputs: 8,000 faults, as long as the kernel's arithmetic). Payloads from 64 KiB up are kept,
 * not only those past malloc's mmap threshold: a payload malloc takes from the top of its heap
 * goes back to the system when freed there, and which payload ends on top depends on the order
 * of frees, so a step that frees in a different order (recording digests and frees values
 * earlier) page-faulted on every step (a ResNet step: 1,200 faults). empty_cache frees them;
 * stats report them as cached_bytes. Builds with AddressSanitizer keep nothing (use after free
 * stays visible). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include "tl_internal.h"

#if defined(__SANITIZE_ADDRESS__)
#define BLOCK_SLOTS 0
#else
#define BLOCK_SLOTS 256
#endif
#define BLOCK_MIN ((size_t)1 << 16)
#define CACHE_CAP ((size_t)1 << 30)

static struct { void *p; size_t bytes; } g_blocks[BLOCK_SLOTS + 1];   /* oldest first */
static int g_nblocks;
static size_t g_cached;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;

/* a kept block of exactly `bytes`, the newest first; NULL when none */
static void *cache_take(size_t bytes) {
    void *p = NULL;
    pthread_mutex_lock(&g_mu);
    for (int i = g_nblocks - 1; i >= 0; i--)
        if (g_blocks[i].bytes == bytes) {
            p = g_blocks[i].p;
            g_cached -= bytes;
            memmove(&g_blocks[i], &g_blocks[i + 1], (size_t)(g_nblocks - 1 - i) * sizeof g_blocks[0]);
            g_nblocks--;
            break;
        }
    pthread_mutex_unlock(&g_mu);
    return p;
}

/* keep p, dropping the oldest blocks past the caps; 0 when p is not kept */
static int cache_keep(void *p, size_t bytes) {
    if (BLOCK_SLOTS == 0 || bytes < BLOCK_MIN || bytes > CACHE_CAP) return 0;
    void *drop[BLOCK_SLOTS + 1];
    int ndrop = 0;
    pthread_mutex_lock(&g_mu);
    g_blocks[g_nblocks].p = p;
    g_blocks[g_nblocks].bytes = bytes;
    g_nblocks++;
    g_cached += bytes;
    while (g_nblocks > BLOCK_SLOTS || g_cached > CACHE_CAP) {
        drop[ndrop++] = g_blocks[0].p;
        g_cached -= g_blocks[0].bytes;
        memmove(&g_blocks[0], &g_blocks[1], (size_t)(g_nblocks - 1) * sizeof g_blocks[0]);
        g_nblocks--;
    }
    pthread_mutex_unlock(&g_mu);
    for (int i = 0; i < ndrop; i++) free(drop[i]);
    return 1;
}

const char *tlb_name(void) { return "stub"; }
int tlb_ready(const char *op) { (void)op; return TL_OK; }

/* Payloads start on a cache line (malloc gives 16 bytes past one for large blocks): a 64-byte
 * vector load from a payload then never straddles two lines, which halves a load's throughput
 * on cores with 512-bit load paths */
#define PAYLOAD_ALIGN ((size_t)64)

static void *payload_alloc(size_t bytes) {
    return aligned_alloc(PAYLOAD_ALIGN, (bytes + PAYLOAD_ALIGN - 1) / PAYLOAD_ALIGN * PAYLOAD_ALIGN
                                            + (bytes == 0) * PAYLOAD_ALIGN);
}

int tlb_alloc(size_t bytes, void **out) {
    void *p = bytes >= BLOCK_MIN ? cache_take(bytes) : NULL;
    if (!p) p = payload_alloc(bytes);
    if (!p && __atomic_load_n(&g_nblocks, __ATOMIC_RELAXED) > 0) {   /* the kept blocks may be what the allocation lacks */
        tlb_empty_cache();
        p = payload_alloc(bytes);
    }
    if (!p) return tl_fail(TL_E_OOM, "alloc: out of host memory for %zu bytes", bytes);
    *out = p;
    return TL_OK;
}

void tlb_free(void *p, size_t bytes) {
    if (!cache_keep(p, bytes)) free(p);
}

int tlb_fill(float *p, int64_t n, float v) {
    if (v == 0.0f && !signbit(v)) { memset(p, 0, (size_t)n * sizeof(float)); return TL_OK; }
    for (int64_t i = 0; i < n; i++) p[i] = v;
    return TL_OK;
}

int tlb_copy(void *dst, const void *src, size_t bytes) { memcpy(dst, src, bytes); return TL_OK; }
int tlb_h2d(void *dst, const void *src, size_t bytes) { memcpy(dst, src, bytes); return TL_OK; }
int tlb_d2h(void *dst, const void *src, size_t bytes) { memcpy(dst, src, bytes); return TL_OK; }
int tlb_sync(void) { return TL_OK; }
int tlb_device_count(int64_t *out) { *out = 0; return TL_OK; }
int tlb_empty_cache(void) {
    pthread_mutex_lock(&g_mu);
    int n = g_nblocks;
    void *drop[BLOCK_SLOTS + 1];
    for (int i = 0; i < n; i++) drop[i] = g_blocks[i].p;
    g_nblocks = 0;
    g_cached = 0;
    pthread_mutex_unlock(&g_mu);
    for (int i = 0; i < n; i++) free(drop[i]);
    return TL_OK;
}

void tlb_fill_stats(tl_memory_stats *s) {
    pthread_mutex_lock(&g_mu);
    s->cached_bytes = (int64_t)g_cached;
    pthread_mutex_unlock(&g_mu);
}

/* data parallel hooks: the stub has no devices and no streams */
TL_API int tl_set_device(int64_t device) {
    if (device < 0) return tl_fail(TL_E_ARG, "set_device: expected a device index >= 0, got %lld",
                                   (long long)device);
    return TL_OK;
}

TL_API void *tl_cuda_stream(void) { return NULL; }
