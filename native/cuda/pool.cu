// pool.cu: device memory: buffers and scratch from a stream-ordered pool, with small- and
// large-block reuse caches in front of it, the cache cap, empty_cache and the memory statistics.
// The stream and the pool itself are created by context.cu.
//
// Memory. Buffers and scratch come from a library-owned stream-ordered pool
// (cudaMallocFromPoolAsync / cudaFreeAsync on the stream). Its release threshold is "never", so
// freed memory stays cached for the next allocation instead of going back to the driver.
// TORCHLEAN_CUDA_CACHE_CAP_BYTES caps the cached (reserved but unused) bytes: plain decimal
// digits only; anything else (sign, spaces, suffixes, overflow) is ignored and means no cap, as
// does 0. The cap is enforced by trimming the pool after frees and at synchronisation points.
// tl_empty_cache returns every cached byte. An allocation that fails is retried once after
// synchronising and trimming the pool; a second failure is TL_E_OOM naming the requested,
// live and free bytes.
#include <stdlib.h>

#include <mutex>
#include <unordered_map>
#include <vector>

#include "context.cuh"

namespace tl_ctx {

int64_t g_cap = 0;                   // TORCHLEAN_CUDA_CACHE_CAP_BYTES, 0 = no cap

// Plain decimal digits that fit int64; anything else is ignored (0 = no cap).
int64_t parse_cap(const char *v) {
    if (!v || !*v) return 0;
    int64_t r = 0;
    for (const char *p = v; *p; p++) {
        if (*p < '0' || *p > '9') return 0;
        int d = *p - '0';
        if (r > (INT64_MAX - d) / 10) return 0;
        r = r * 10 + d;
    }
    return r;
}

}  // namespace tl_ctx

using namespace tl_ctx;

namespace {

int64_t pool_attr(cudaMemPoolAttr a) {
    uint64_t v = 0;
    if (!g_pool || cudaMemPoolGetAttribute(g_pool, a, &v) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return (int64_t)v;
}

// Cached = reserved by the pool but not handed out.
int64_t pool_cached(void) {
    int64_t r = pool_attr(cudaMemPoolAttrReservedMemCurrent);
    int64_t u = pool_attr(cudaMemPoolAttrUsedMemCurrent);
    return r > u ? r - u : 0;
}

int64_t listed_bytes(void);  // bytes waiting on the reuse lists (below)

// Keep at most g_cap cached bytes (no-op without a cap), counting what waits on the reuse lists
// below. Trimming only releases memory whose frees the stream has already passed, so this is
// safe at any time.
void enforce_cap(void) {
    if (g_cap <= 0 || !g_pool) return;
    int64_t budget = g_cap - listed_bytes();
    if (budget < 0) budget = 0;
    int64_t used = pool_attr(cudaMemPoolAttrUsedMemCurrent);
    int64_t reserved = pool_attr(cudaMemPoolAttrReservedMemCurrent);
    if (reserved - used <= budget) return;
    if (cudaMemPoolTrimTo(g_pool, (size_t)(used + budget)) != cudaSuccess) cudaGetLastError();
    // The pool releases whole physical chunks (tens of MiB) and keeps at least the bytes asked
    // for, so trimming to used + budget can leave a chunk larger than that cached. The cap is a
    // promise: trim to what is in use when the gentle trim was not enough.
    if (pool_cached() > budget && cudaMemPoolTrimTo(g_pool, (size_t)used) != cudaSuccess)
        cudaGetLastError();
}

// Small-block cache. A stream-ordered pool call costs a few microseconds of host time, which
// dominates a tape op on a tiny tensor. Buffers up to kSmallMax bytes are rounded up to a power
// of two and, when released, kept on a per-class free list instead of going back to the pool.
// Reuse is safe for the same reason the pool's is: one stream orders every use before the
// next owner's. The lists hold at most kSmallCacheMax bytes (and never more than the cache
// cap); empty_cache, an OOM retry and the cap hand them back.
const size_t kSmallMin = 256, kSmallMax = (size_t)1 << 20;
const int kClasses = 13;                       // 256 B .. 1 MiB
const int kPerClass = 256;                     // free-list depth per class
const int64_t kSmallCacheMax = (int64_t)64 << 20;
std::mutex g_small_mu;
void *g_small[kClasses][kPerClass];
int g_small_n[kClasses];
int64_t g_small_bytes = 0;                     // bytes held on the free lists

int small_class(size_t bytes) {
    if (bytes > kSmallMax) return -1;
    int c = 0;
    size_t sz = kSmallMin;
    while (sz < bytes) { sz <<= 1; c++; }
    return c;
}

size_t class_bytes(int c) { return kSmallMin << c; }

int64_t small_limit(void) { return g_cap > 0 && g_cap < kSmallCacheMax ? g_cap : kSmallCacheMax; }

// Larger blocks are reused the same way, keyed by their size rounded up to kLargeRound: a
// training step allocates the same sizes every iteration, so an exact-size list hits almost
// always and wastes nothing, and each hit saves a pool allocation and a stream-ordered free
// (a few microseconds of host time each). At most kLargeCacheMax bytes (and the cap) wait there.
const size_t kLargeRound = 4096;
const int64_t kLargeCacheMax = (int64_t)1 << 30;
std::unordered_map<size_t, std::vector<void *>> g_large;  // guarded by g_small_mu
int64_t g_large_bytes = 0;

size_t large_bytes(size_t bytes) { return (bytes + kLargeRound - 1) / kLargeRound * kLargeRound; }
int64_t large_limit(void) {
    const int64_t room = g_cap > 0 ? g_cap - g_small_bytes : kLargeCacheMax;  // under g_small_mu
    return room < kLargeCacheMax ? room : kLargeCacheMax;
}

int64_t listed_bytes(void) {
    std::lock_guard<std::mutex> lk(g_small_mu);
    return g_small_bytes + g_large_bytes;
}

// hand every cached small block back to the pool (stream-ordered frees)
void small_flush(void) {
    std::lock_guard<std::mutex> lk(g_small_mu);
    for (int c = 0; c < kClasses; c++) {
        for (int i = 0; i < g_small_n[c]; i++)
            if (cudaFreeAsync(g_small[c][i], g_stream) != cudaSuccess) cudaGetLastError();
        g_small_n[c] = 0;
    }
    g_small_bytes = 0;
    for (auto &kv : g_large)
        for (void *p : kv.second)
            if (cudaFreeAsync(p, g_stream) != cudaSuccess) cudaGetLastError();
    g_large.clear();
    g_large_bytes = 0;
}

// Allocate from the pool in stream order; on failure synchronise, trim, retry once.
int pool_alloc(const char *op, size_t bytes, void **out) {
    TL_TRY(poison_check(op));
    TL_TRY(ensure_init(op));
    if (graph_capturing()) return graph_alloc(op, bytes, out);
    void *p = nullptr;
    const size_t asked = bytes;  // the message names what the caller asked for, not the rounding
    const int c = small_class(bytes);
    if (c >= 0) {
        {
            std::lock_guard<std::mutex> lk(g_small_mu);
            if (g_small_n[c] > 0) {
                *out = g_small[c][--g_small_n[c]];
                g_small_bytes -= (int64_t)class_bytes(c);
                return TL_OK;
            }
        }
        bytes = class_bytes(c);
    } else {
        bytes = large_bytes(bytes);
        std::lock_guard<std::mutex> lk(g_small_mu);
        auto it = g_large.find(bytes);
        if (it != g_large.end() && !it->second.empty()) {
            *out = it->second.back();
            it->second.pop_back();
            g_large_bytes -= (int64_t)bytes;
            return TL_OK;
        }
    }
    cudaError_t e = cudaMallocFromPoolAsync(&p, bytes, g_pool, g_stream);
    if (e == cudaErrorMemoryAllocation) {
        cudaGetLastError();
        small_flush();
        cudaError_t se = cudaStreamSynchronize(g_stream);
        if (se != cudaSuccess) return tl_cuda_status(op, se);
        if (cudaMemPoolTrimTo(g_pool, 0) != cudaSuccess) cudaGetLastError();
        e = cudaMallocFromPoolAsync(&p, bytes, g_pool, g_stream);
    }
    if (e == cudaErrorMemoryAllocation) {
        cudaGetLastError();
        size_t free_b = 0, total_b = 0;
        if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) cudaGetLastError();
        tl_memory_stats st;
        tl_memory_stats_get(&st);
        return tl_fail(TL_E_OOM,
                       "%s: out of device memory: requested %zu bytes; torchlean holds %lld "
                       "bytes in %lld live buffers; the device has %zu bytes free of %zu",
                       op, asked, (long long)st.live_bytes, (long long)st.live_buffers, free_b,
                       total_b);
    }
    if (e != cudaSuccess) return tl_cuda_status(op, e);
    *out = p;
    return TL_OK;
}

}  // namespace

namespace tl_ctx {

// bytes: the size asked of pool_alloc (0 when unknown: the block goes straight to the pool)
void pool_release_raw(void *p, size_t bytes) {
    if (!p || g_poisoned || !g_stream_ready) return;  // a poisoned context cannot free safely
    const int c = bytes ? small_class(bytes) : -1;
    if (c >= 0) {
        std::lock_guard<std::mutex> lk(g_small_mu);
        if (g_small_n[c] < kPerClass &&
            g_small_bytes + (int64_t)class_bytes(c) <= small_limit()) {
            g_small[c][g_small_n[c]++] = p;
            g_small_bytes += (int64_t)class_bytes(c);
            return;
        }
    } else if (bytes) {
        const size_t lb = large_bytes(bytes);
        std::lock_guard<std::mutex> lk(g_small_mu);
        if (g_large_bytes + (int64_t)lb <= large_limit()) {
            g_large[lb].push_back(p);
            g_large_bytes += (int64_t)lb;
            return;
        }
    }
    if (cudaFreeAsync(p, g_stream) != cudaSuccess) {
        cudaGetLastError();
        return;
    }
    enforce_cap();
}

}  // namespace tl_ctx

namespace {

// a block a captured graph owns (or one freed inside a capture) goes to the graph instead
void pool_free(void *p, size_t bytes) {
    if (!p || g_poisoned || !g_stream_ready) return;
    if ((graph_capturing() || graph_any()) && graph_free(p, bytes)) return;
    pool_release_raw(p, bytes);
}

int sync_stream(const char *op) {
    TL_TRY(poison_check(op));
    if (!g_stream_ready) return TL_OK;
    if (graph_capturing()) return graph_refuse(op, "a synchronisation");
    cudaError_t e = cudaStreamSynchronize(g_stream);
    if (e != cudaSuccess) return tl_cuda_status(op, e);
    enforce_cap();
    return TL_OK;
}

}  // namespace

extern "C" {

// Scratch counts toward live and peak bytes (not buffers), so memory_stats()' peak is what a
// step really held, im2col columns and attention tiles included.
std::mutex g_scratch_mu;
std::unordered_map<void *, size_t> g_scratch_sizes;

int tl_scratch(const char *op, size_t bytes, void **out) {
    *out = nullptr;
    if (bytes == 0) return TL_OK;
    TL_TRY(pool_alloc(op, bytes, out));
    {
        std::lock_guard<std::mutex> lk(g_scratch_mu);
        g_scratch_sizes[*out] = bytes;
    }
    tl_stats_note_bytes((int64_t)bytes);
    return TL_OK;
}

void tl_scratch_free(void *p) {
    if (!p) return;
    size_t bytes = 0;
    {
        std::lock_guard<std::mutex> lk(g_scratch_mu);
        auto it = g_scratch_sizes.find(p);
        if (it != g_scratch_sizes.end()) {
            bytes = it->second;
            g_scratch_sizes.erase(it);
        }
    }
    tl_stats_note_bytes(-(int64_t)bytes);
    pool_free(p, bytes);
}

// ------------------------------------------------------------------ backend hooks

int tlb_alloc(size_t bytes, void **out) { return pool_alloc("alloc", bytes, out); }

void tlb_free(void *p, size_t bytes) {
    pool_free(p, bytes);
}

int tlb_sync(void) { return sync_stream("synchronize"); }

int tlb_empty_cache(void) {
    TL_TRY(poison_check("empty_cache"));
    if (!g_stream_ready) return TL_OK;
    if (graph_capturing()) return graph_refuse("empty_cache", "empty_cache");
    small_flush();
    TL_CUDA_TRY("empty_cache", cudaStreamSynchronize(g_stream));
    TL_CUDA_TRY("empty_cache", cudaMemPoolTrimTo(g_pool, 0));
    return TL_OK;
}

void tlb_fill_stats(tl_memory_stats *s) {
    s->cache_cap_bytes = g_stream_ready ? g_cap
                                        : parse_cap(getenv("TORCHLEAN_CUDA_CACHE_CAP_BYTES"));
    if (g_poisoned) return;
    int64_t small_bytes;
    {
        std::lock_guard<std::mutex> lk(g_small_mu);
        small_bytes = g_small_bytes + g_large_bytes;
    }
    s->cached_bytes = g_stream_ready ? pool_cached() + small_bytes : 0;
    size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess) {
        s->device_free_bytes = (int64_t)free_b;
        s->device_total_bytes = (int64_t)total_b;
    } else {
        cudaGetLastError();
    }
}

}  // extern "C"
