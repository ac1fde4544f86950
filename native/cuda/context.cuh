// context.cuh: the state context.cu (stream, errors, cuBLAS, uploads) shares with pool.cu (the
// caching allocator). Internal to those two files; kernel files use common.cuh.
#pragma once
#include "common.cuh"

namespace tl_ctx {

extern cudaStream_t g_stream;
extern volatile int g_stream_ready;    // 1 once g_stream (and the pool) exist
extern cudaMemPool_t g_pool;
extern int64_t g_cap;                  // TORCHLEAN_CUDA_CACHE_CAP_BYTES, 0 = no cap
extern volatile int g_poisoned;

// create the stream and the pool on first use (context.cu)
int ensure_init(const char *op);
// TL_OK, or the sticky error's status once the context is poisoned (context.cu)
int poison_check(const char *op);
// TORCHLEAN_CUDA_CACHE_CAP_BYTES' value: plain decimal digits, else 0 = no cap (pool.cu)
int64_t parse_cap(const char *v);

// whole-step capture (graph.cu): while a step is captured the pool allocates from the graph's
// arena and hands freed blocks to it; uploads become device copies or graph constants; host
// reads are refused with a message naming the op
int graph_capturing(void);
bool graph_any(void);
int graph_alloc(const char *op, size_t bytes, void **out);
bool graph_free(void *p, size_t bytes);
int graph_upload(const char *op, void *dst, const void *src, size_t bytes);
int graph_refuse(const char *op, const char *what);
// the side stream of state made inside a capture, or nullptr (not capturing, not persistent)
cudaStream_t graph_persistent_stream(void);
// pool_free without the graph's look (a graph hands its blocks back through it) (pool.cu)
void pool_release_raw(void *p, size_t bytes);

}  // namespace tl_ctx
