/* memory.c (stub): the backend hooks over plain malloc/free; "device" memory is host memory. */
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include "tl_internal.h"

const char *tlb_name(void) { return "stub"; }
int tlb_ready(const char *op) { (void)op; return TL_OK; }

int tlb_alloc(size_t bytes, void **out) {
    void *p = malloc(bytes);
    if (!p) return tl_fail(TL_E_OOM, "alloc: out of host memory for %zu bytes", bytes);
    *out = p;
    return TL_OK;
}

void tlb_free(void *p, size_t bytes) { (void)bytes; free(p); }

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
int tlb_empty_cache(void) { return TL_OK; }
void tlb_fill_stats(tl_memory_stats *s) { (void)s; }

/* data parallel hooks: the stub has no devices and no streams */
TL_API int tl_set_device(int64_t device) {
    if (device < 0) return tl_fail(TL_E_ARG, "set_device: expected a device index >= 0, got %lld",
                                   (long long)device);
    return TL_OK;
}

TL_API void *tl_cuda_stream(void) { return NULL; }
