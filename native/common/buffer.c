/* buffer.c: buffer handles, host transfers and memory statistics, written once over the
 * backend hooks (tlb_*) so both libraries count and check exactly alike. */
#include <stdlib.h>
#include <string.h>
#include "tl_internal.h"

/* counters are updated from whichever thread calls in (cffi drops the GIL) */
static int64_t st_live_buffers, st_live_bytes, st_peak_bytes, st_allocs, st_frees;

/* bytes held outside buffers (CUDA kernel scratch): live and peak bytes, not buffer counts */
void tl_stats_note_bytes(int64_t bytes) {
    int64_t live = __atomic_add_fetch(&st_live_bytes, bytes, __ATOMIC_RELAXED);
    int64_t peak = __atomic_load_n(&st_peak_bytes, __ATOMIC_RELAXED);
    while (live > peak &&
           !__atomic_compare_exchange_n(&st_peak_bytes, &peak, live, 0, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED)) {
    }
}

void tl_stats_note_alloc(int64_t bytes) {
    __atomic_add_fetch(&st_allocs, 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&st_live_buffers, 1, __ATOMIC_RELAXED);
    tl_stats_note_bytes(bytes);
}

void tl_stats_note_free(int64_t bytes) {
    __atomic_add_fetch(&st_frees, 1, __ATOMIC_RELAXED);
    __atomic_sub_fetch(&st_live_buffers, 1, __ATOMIC_RELAXED);
    __atomic_sub_fetch(&st_live_bytes, bytes, __ATOMIC_RELAXED);
}

int tl_memory_stats_get(tl_memory_stats *out) {
    if (!out) return tl_fail(TL_E_ARG, "memory_stats: null output");
    memset(out, 0, sizeof *out);
    out->live_buffers = __atomic_load_n(&st_live_buffers, __ATOMIC_RELAXED);
    out->live_bytes = __atomic_load_n(&st_live_bytes, __ATOMIC_RELAXED);
    out->peak_bytes = __atomic_load_n(&st_peak_bytes, __ATOMIC_RELAXED);
    out->allocations = __atomic_load_n(&st_allocs, __ATOMIC_RELAXED);
    out->frees = __atomic_load_n(&st_frees, __ATOMIC_RELAXED);
    tlb_fill_stats(out);
    return TL_OK;
}

int tl_memory_reset_peak(void) {
    __atomic_store_n(&st_peak_bytes, __atomic_load_n(&st_live_bytes, __ATOMIC_RELAXED),
                     __ATOMIC_RELAXED);
    return TL_OK;
}

int tl_new_buffer(const char *op, int64_t n, tl_buf *out) {
    int st = tl_check_count(op, "element count", n);
    if (st) return st;
    if (!out) return tl_fail(TL_E_ARG, "%s: null output handle", op);
    tl_buf b = (tl_buf)malloc(sizeof *b);
    if (!b) return tl_fail(TL_E_OOM, "%s: out of host memory for a buffer handle", op);
    b->data = NULL;
    b->n = n;
    b->live = 1;
    b->owned = 1;
    if (n > 0) {
        void *p = NULL;
        st = tlb_alloc((size_t)n * sizeof(float), &p);
        if (st) { free(b); return st; }
        b->data = (float *)p;
    }
    tl_stats_note_alloc(n * (int64_t)sizeof(float));
    *out = b;
    return TL_OK;
}

int tl_buf_alloc(int64_t n, tl_buf *out) { return tl_new_buffer("alloc", n, out); }

tl_buf tl_buf_new(int64_t n) {
    tl_buf b = NULL;
    return tl_new_buffer("alloc", n, &b) ? NULL : b;
}

int tl_buf_full(int64_t n, double value, tl_buf *out) {
    int st = tl_new_buffer("full", n, out);
    if (st || n == 0) return st;
    st = tlb_fill((*out)->data, n, (float)value);
    if (st) { tl_buf_destroy(*out); *out = NULL; }
    return st;
}

int tl_buf_zeros(int64_t n, tl_buf *out) { return tl_buf_full(n, 0.0, out); }

int tl_buf_copy(tl_buf src, tl_buf *out) {
    int st = tl_check_live("copy", "source", src);
    if (st) return st;
    st = tl_new_buffer("copy", src->n, out);
    if (st || src->n == 0) return st;
    st = tlb_copy((*out)->data, src->data, (size_t)src->n * sizeof(float));
    if (st) { tl_buf_destroy(*out); *out = NULL; }
    return st;
}

int tl_buf_upload_f32(const float *src, int64_t n, tl_buf *out) {
    int st = tl_new_buffer("upload", n, out);
    if (st || n == 0) return st;
    st = tlb_h2d((*out)->data, src, (size_t)n * sizeof(float));
    if (st) { tl_buf_destroy(*out); *out = NULL; }
    return st;
}

int tl_buf_upload_f64(const double *src, int64_t n, tl_buf *out) {
    int st = tl_check_count("upload", "element count", n);
    if (st) return st;
    float *tmp = (float *)malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    if (!tmp) return tl_fail(TL_E_OOM, "upload: out of host memory for %lld floats", (long long)n);
    for (int64_t i = 0; i < n; i++) tmp[i] = (float)src[i]; /* round to nearest even */
    st = tl_buf_upload_f32(tmp, n, out);
    free(tmp);
    return st;
}

int tl_buf_download_f32(tl_buf b, float *dst, int64_t n) {
    int st = tl_check_buf("download", "buffer", b, n);
    if (st || n == 0) return st;
    return tlb_d2h(dst, b->data, (size_t)n * sizeof(float));
}

int tl_buf_download_f64(tl_buf b, double *dst, int64_t n) {
    int st = tl_check_buf("download", "buffer", b, n);
    if (st || n == 0) return st;
    float *tmp = (float *)malloc((size_t)n * sizeof(float));
    if (!tmp) return tl_fail(TL_E_OOM, "download: out of host memory for %lld floats", (long long)n);
    st = tlb_d2h(tmp, b->data, (size_t)n * sizeof(float));
    if (!st)
        for (int64_t i = 0; i < n; i++) dst[i] = (double)tmp[i];
    free(tmp);
    return st;
}

int tl_buf_data_ptr(tl_buf b, uint64_t *out) {
    int st = tl_check_live("data_ptr", "buffer", b);
    if (st) return st;
    *out = (uint64_t)(uintptr_t)b->data;
    return TL_OK;
}

int tl_buf_wrap(uint64_t ptr, int64_t n, tl_buf *out) {
    int st = tl_check_count("wrap", "element count", n);
    if (st) return st;
    if (n > 0 && ptr == 0) return tl_fail(TL_E_ARG, "wrap: null data pointer for %lld elements", (long long)n);
    tl_buf b = (tl_buf)malloc(sizeof *b);
    if (!b) return tl_fail(TL_E_OOM, "wrap: out of host memory for a buffer handle");
    b->data = (float *)(uintptr_t)ptr;
    b->n = n;
    b->live = 1;
    b->owned = 0;
    *out = b;
    return TL_OK;
}

int64_t tl_buf_size(tl_buf b) {
    return (b && __atomic_load_n(&b->live, __ATOMIC_ACQUIRE)) ? b->n : -1;
}

/* Threads may race to release one buffer (cffi drops the GIL; finalizers run anywhere): the
 * atomic exchange on `live` lets exactly one caller free the payload, every other one sees 0. */
int tl_buf_release(tl_buf b) {
    if (!b || !__atomic_exchange_n(&b->live, 0, __ATOMIC_ACQ_REL)) return 0;
    if (b->owned) {
        if (b->data) tlb_free(b->data, (size_t)b->n * sizeof(float));
        tl_stats_note_free(b->n * (int64_t)sizeof(float));
    }
    b->data = NULL;
    return 1;
}

void tl_buf_destroy(tl_buf b) {
    if (!b) return;
    tl_buf_release(b);
    free(b);
}
