// graph.cu: whole-step capture (torchlean.cuda.graph_step): one training step recorded on the
// library's stream as a CUDA graph, then replayed with one launch.
//
// Memory. While a step is captured (stream capture in relaxed mode, so cudaMalloc may run),
// every block the pool hands out comes from the graph's private arena (cudaMalloc), and every
// block freed during the capture, the pool's included, becomes the graph's: a replay writes the
// same addresses again, so none of them may go back to the pool while the graph lives. Inside
// the capture a freed block is reused by a later allocation of the same rounded size (the
// captured kernels run in stream order, as eagerly). After the capture a block a Tensor lets go
// stays reserved; when the graph is destroyed its free blocks go back (arena: cudaFree, pool
// blocks: the pool) and blocks still held by Tensors are freed with them.
//
// Randomness. The graph's device state holds the RNG base (seed + counter at the step's first
// draw) and the replay index. During capture the rng kernels read key = splitmix64(base + d)
// from device memory, d the draw's place within the step (rng.cu), and Adam reads its step
// as step0 + replay (optim.cu); the graph's last node advances base by the step's draws and
// the replay index by one. So every replay draws fresh masks, the very ones the eager step
// would draw.
//
// Inputs. A host range bound to the graph (an integer input of the step) has a device twin:
// an upload from it inside the capture becomes a device copy from the twin. The graph's first
// node (k_inputs) fills the twins and the float inputs' static buffers: from pinned staging
// the host writes before each launch (tl_graph_bind_input, staged), or from the device address
// the host writes into a pinned slot (a Tensor's buffer). Each input has a ring of `depth`
// stagings (slots); replay r reads entry r % depth; then k_inputs_read counts the replay in
// pinned memory, so the host rewrites an entry only after the replay that used it read it
// (tl_graph_wait_inputs): the host runs up to depth launches ahead and makes no upload call.
// Any other upload inside the capture is a constant of the graph: its bytes are copied to
// pinned memory the graph owns and re-sent by every replay (counted, so Python can tell
// whether the step read host data it did not bind).
//
// Host reads (downloads, synchronisation) inside a capture fail with a message naming the op.
#include <stdio.h>
#include <sched.h>
#include <string.h>

#include <mutex>
#include <unordered_map>
#include <vector>

#include "context.cuh"

namespace {

struct GraphState { uint64_t rng_base; int64_t replay; };

struct Block { size_t cap; bool in_use; bool from_pool; size_t pool_bytes; bool persistent; };

struct Binding { const char *host; size_t bytes; char *dev; int flags; };

// one input k_inputs copies, for replay r from entry r % depth of its ring: the staging at
// src + entry * stride, or the device address in slot[entry] (pinned)
struct GraphInput {
    char *dst; const char *src; const uint64_t *slot; int64_t bytes, stride, depth;
};

// Binding.flags: what the capture did with a bound range (tl_graph_bound_read)
enum { kHostRead = 1, kDeviceRead = 2, kCopied = 4 };

struct Graph {
    GraphState *state = nullptr;        // device
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    std::unordered_map<void *, Block> blocks;                 // every block the graph owns
    std::unordered_map<size_t, std::vector<void *>> free_;    // reusable inside the capture
    std::vector<Binding> bound;
    std::vector<GraphInput> inputs;     // what k_inputs copies, host copy of inputs_dev
    std::vector<void *> input_host;     // pinned staging and slots of the inputs
    GraphInput *inputs_dev = nullptr;
    int64_t *inputs_read = nullptr;     // pinned: replays whose inputs k_inputs has read
    int64_t launches = 0;
    int64_t depth = 1024;               // the shallowest input ring
    std::vector<char *> pinned;         // pinned chunks holding the constants
    size_t pinned_used = 0, pinned_cap = 0;
    int64_t constants = 0;
    char constant_op[96] = "";
};

const size_t kPinnedChunk = (size_t)1 << 20;

std::mutex g_mu;                                      // guards the maps below and g_capturing
Graph *g_capturing = nullptr;
std::unordered_map<void *, Graph *> g_owner;          // block -> its graph (nullptr: orphan)
std::unordered_map<void *, size_t> g_orphans;         // blocks of destroyed graphs, in use
std::unordered_map<void *, bool> g_orphan_pool;
volatile int g_any = 0;                               // any graph block exists
std::vector<Graph *> g_deferred;      // destroyed while another graph was being captured
int g_persistent = 0;          // state created inside a capture (tl_graph_persistent)
cudaStream_t g_side = nullptr; // where that state's contents are written, outside the graph

__global__ void k_state_set(GraphState *s, uint64_t base, int64_t replay, int set_replay) {
    s->rng_base = base;
    if (set_replay) s->replay = replay;
}

__global__ void k_state_advance(GraphState *s, uint64_t draws) {
    s->rng_base += draws;
    s->replay += 1;
}

// every input's bytes into its static buffer (blockIdx.y: the input), 16 bytes at a time where
// addresses and size allow
__global__ void k_inputs(const GraphInput *in, const GraphState *st) {
    const GraphInput e = in[blockIdx.y];
    __shared__ const char *from;   // one read of host memory per block
    if (threadIdx.x == 0) {
        const int64_t r = st->replay % e.depth;
        from = e.slot ? (const char *)(uintptr_t)((volatile const uint64_t *)e.slot)[r]
                      : e.src + r * e.stride;
    }
    __syncthreads();
    const char *src = from;
    if (!src) return;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    const int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if ((((uintptr_t)src | (uintptr_t)e.dst | (uintptr_t)e.bytes) & 15) == 0) {
        const uint4 *s = (const uint4 *)src;
        uint4 *d = (uint4 *)e.dst;
        for (int64_t i = t; i < e.bytes / 16; i += stride) d[i] = s[i];
    } else {
        for (int64_t i = t; i < e.bytes; i += stride) e.dst[i] = src[i];
    }
}

__global__ void k_inputs_read(const GraphState *s, int64_t *read) {
    *(volatile int64_t *)read = s->replay + 1;
    __threadfence_system();
}

// round like the pool does, so a freed pool block of a size fits a new request of that size
size_t round_cap(size_t bytes) {
    if (bytes <= 256) return 256;
    if (bytes <= ((size_t)1 << 20)) {
        size_t s = 256;
        while (s < bytes) s <<= 1;
        return s;
    }
    return (bytes + 4095) / 4096 * 4096;
}

void release_block(void *p, const Block &b) {
    if (b.from_pool) tl_ctx::pool_release_raw(p, b.pool_bytes);
    else if (cudaFree(p) != cudaSuccess) cudaGetLastError();
}

}  // namespace

namespace tl_ctx {

int graph_capturing(void) { return g_capturing != nullptr; }

// Inside a capture, state that outlives the step (a parameter's first mirror, optimizer
// moments) must be written once, now, not by every replay: its blocks are fresh and never
// reused inside the capture, and its uploads and fills run on a side stream, synchronously.
cudaStream_t graph_persistent_stream(void) {
    if (!g_capturing || !g_persistent) return nullptr;
    if (!g_side && cudaStreamCreateWithFlags(&g_side, cudaStreamNonBlocking) != cudaSuccess) {
        cudaGetLastError();
        g_side = nullptr;
    }
    return g_side;
}

// pool_alloc during a capture: the arena's free list, else a fresh cudaMalloc
int graph_alloc(const char *op, size_t bytes, void **out) {
    const size_t cap = round_cap(bytes);
    std::lock_guard<std::mutex> lk(g_mu);
    Graph *g = g_capturing;
    auto it = g->free_.find(cap);
    if (!g_persistent && it != g->free_.end() && !it->second.empty()) {
        void *p = it->second.back();
        it->second.pop_back();
        g->blocks[p].in_use = true;
        *out = p;
        return TL_OK;
    }
    void *p = nullptr;
    cudaError_t e = cudaMalloc(&p, cap);
    if (e != cudaSuccess) return tl_cuda_status(op, e);
    g->blocks[p] = Block{cap, true, false, 0, g_persistent != 0};
    g_owner[p] = g;
    g_any = 1;
    *out = p;
    return TL_OK;
}

// pool_free's first look: true when the graph machinery took the block
bool graph_free(void *p, size_t bytes) {
    std::lock_guard<std::mutex> lk(g_mu);
    auto o = g_owner.find(p);
    if (o == g_owner.end()) {
        if (!g_capturing || !bytes) return false;
        // a block from before the capture freed inside it: the graph may read it, keep it
        Graph *g = g_capturing;
        const size_t cap = round_cap(bytes);
        g->blocks[p] = Block{cap, false, true, bytes, false};
        g->free_[cap].push_back(p);
        g_owner[p] = g;
        g_any = 1;
        return true;
    }
    Graph *g = o->second;
    if (!g) {  // its graph is gone: free it now (inside a capture: the capturing graph's)
        auto ob = g_orphans.find(p);
        const bool pool = g_orphan_pool[p];
        Block b{pool ? round_cap(ob->second) : ob->second, false, pool, ob->second, false};
        g_orphans.erase(ob);
        g_orphan_pool.erase(p);
        if (g_capturing) {
            if (!pool) b.cap = b.pool_bytes;
            g_capturing->blocks[p] = b;
            g_capturing->free_[b.cap].push_back(p);
            o->second = g_capturing;
            return true;
        }
        g_owner.erase(o);
        release_block(p, b);
        return true;
    }
    Block &b = g->blocks[p];
    b.in_use = false;
    if (g == g_capturing && !b.persistent) g->free_[b.cap].push_back(p);
    return true;
}

bool graph_any(void) { return g_any; }

// an upload inside the capture: a bound range becomes a device copy, anything else a constant
int graph_upload(const char *op, void *dst, const void *src, size_t bytes) {
    Graph *g = g_capturing;
    if (g_persistent) {
        cudaStream_t side = graph_persistent_stream();
        if (!side) return tl_fail(TL_E_DEVICE, "%s: no side stream for state made in a capture", op);
        TL_CUDA_TRY(op, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, side));
        TL_CUDA_TRY(op, cudaStreamSynchronize(side));
        return TL_OK;
    }
    const char *s = (const char *)src;
    for (Binding &b : g->bound) {
        if (s >= b.host && s + bytes <= b.host + b.bytes) {
            b.flags |= kDeviceRead;
            TL_CUDA_TRY(op, cudaMemcpyAsync(dst, b.dev + (s - b.host), bytes,
                                            cudaMemcpyDeviceToDevice, g_stream));
            return TL_OK;
        }
    }
    const size_t need = (bytes + 255) / 256 * 256;
    if (g->pinned_used + need > g->pinned_cap) {
        size_t sz = need > kPinnedChunk ? need : kPinnedChunk;
        char *c = nullptr;
        TL_CUDA_TRY(op, cudaMallocHost((void **)&c, sz));
        g->pinned.push_back(c);
        g->pinned_used = 0;
        g->pinned_cap = sz;
    }
    // a constant that looks like a bound input (a copy of it, or mostly its values) may be
    // derived from it: Python then replays only on that input's captured values
    for (Binding &b : g->bound) {
        if (bytes != b.bytes) continue;
        if (memcmp(src, b.host, bytes) == 0) { b.flags |= kCopied; continue; }
        if (bytes % 8 == 0) {
            const int64_t *x = (const int64_t *)src, *y = (const int64_t *)b.host;
            size_t same = 0, n = bytes / 8;
            for (size_t i = 0; i < n; i++) same += x[i] == y[i];
            if (2 * same >= n) b.flags |= kCopied;
        }
    }
    char *h = g->pinned.back() + g->pinned_used;
    g->pinned_used += need;
    memcpy(h, src, bytes);
    if (g->constants++ == 0) snprintf(g->constant_op, sizeof g->constant_op, "%s", op);
    TL_CUDA_TRY(op, cudaMemcpyAsync(dst, h, bytes, cudaMemcpyHostToDevice, g_stream));
    return TL_OK;
}

// a kernel plans on the host from `bytes` host bytes at p (deterministic scatter's grouping):
// when they are a bound input's, the plan is a constant of the graph and Python pins the input
extern "C" TL_HIDDEN void tl_graph_host_reads(const void *p, size_t bytes) {
    Graph *g = g_capturing;
    if (!g) return;
    const char *s = (const char *)p;
    for (Binding &b : g->bound)
        if (s < b.host + b.bytes && s + bytes > b.host) b.flags |= kHostRead;
}

int graph_refuse(const char *op, const char *what) {
    return tl_fail(TL_E_UNSUPPORTED,
                   "%s: %s inside a captured step (torchlean.cuda.graph_step): a replay cannot "
                   "stop for the host; move it out of the step", op, what);
}

}  // namespace tl_ctx

using namespace tl_ctx;

namespace {

Graph *as_graph(void *g) { return (Graph *)g; }

void graph_free_all(Graph *g) {
    std::lock_guard<std::mutex> lk(g_mu);
    for (auto &kv : g->blocks) {
        if (kv.second.in_use) {  // a Tensor still holds it: freed when it lets go
            g_owner[kv.first] = nullptr;
            g_orphans[kv.first] = kv.second.from_pool ? kv.second.pool_bytes : kv.second.cap;
            g_orphan_pool[kv.first] = kv.second.from_pool;
        } else {
            g_owner.erase(kv.first);
            release_block(kv.first, kv.second);
        }
    }
    g->blocks.clear();
    g->free_.clear();
    g_any = !g_owner.empty();
}

}  // namespace

extern "C" {

TL_API void tl_graph_destroy(void *gp);

// destroy the graphs whose destruction waited for a capture to end
static void flush_deferred(void) {
    std::vector<Graph *> later;
    later.swap(g_deferred);
    for (Graph *d : later) tl_graph_destroy(d);
}

TL_API int tl_graph_new(void **out) {
    *out = nullptr;
    TL_TRY(poison_check("graph_step"));
    TL_TRY(ensure_init("graph_step"));
    cublasHandle_t h;
    TL_TRY(tl_cublas("graph_step", &h));  // created before any capture (it allocates)
    Graph *g = new Graph();
    cudaError_t e = cudaMalloc((void **)&g->state, sizeof(GraphState));
    if (e == cudaSuccess)
        e = cudaHostAlloc((void **)&g->inputs_read, sizeof(int64_t),
                          cudaHostAllocMapped | cudaHostAllocPortable);
    if (e != cudaSuccess) {
        if (g->state) cudaFree(g->state);
        cudaGetLastError();
        delete g;
        return tl_cuda_status("graph_step", e);
    }
    *g->inputs_read = 0;
    *out = g;
    return TL_OK;
}

// a device twin of `bytes` host bytes at `host` (an integer input of the step)
TL_API int tl_graph_bind_host(void *gp, const void *host, int64_t bytes, uint64_t *dev) {
    Graph *g = as_graph(gp);
    *dev = 0;
    if (bytes <= 0) return TL_OK;
    char *d = nullptr;
    TL_CUDA_TRY("graph_step", cudaMalloc((void **)&d, (size_t)bytes));
    g->bound.push_back(Binding{(const char *)host, (size_t)bytes, d, 0});
    *dev = (uint64_t)(uintptr_t)d;
    return TL_OK;
}

// an input every replay copies into device address dst first: staged, from a ring of `depth`
// pinned stagings of `bytes` bytes each, `stride` apart (*host: the first); else from the
// device address the host stores in a ring of `depth` pinned 8-byte slots (*host). Only
// before tl_graph_begin.
TL_API int tl_graph_bind_input(void *gp, uint64_t dst, int64_t bytes, int staged, int64_t depth,
                               void **host) {
    Graph *g = as_graph(gp);
    *host = nullptr;
    if (g->exec || g_capturing == g)
        return tl_fail(TL_E_ARG, "graph_step: inputs are bound before the capture");
    if (depth < 1 || depth > 1024)
        return tl_fail(TL_E_ARG, "graph_step: input ring depth %lld, expected 1..1024",
                       (long long)depth);
    if (bytes <= 0) return TL_OK;
    void *h = nullptr, *d = nullptr;
    const int64_t stride = staged ? (bytes + 255) / 256 * 256 : (int64_t)sizeof(uint64_t);
    const size_t n = (size_t)(stride * depth);
    TL_CUDA_TRY("graph_step", cudaHostAlloc(&h, n, cudaHostAllocMapped | cudaHostAllocPortable));
    g->input_host.push_back(h);
    memset(h, 0, n);
    TL_CUDA_TRY("graph_step", cudaHostGetDevicePointer(&d, h, 0));
    g->inputs.push_back(GraphInput{(char *)(uintptr_t)dst, staged ? (const char *)d : nullptr,
                                   staged ? nullptr : (const uint64_t *)d, bytes, stride, depth});
    if (depth < g->depth) g->depth = depth;
    *host = h;
    return TL_OK;
}

// wait until the ring entries the next launch uses are free: every replay but the last
// depth - 1 launched has read its inputs (the host then writes entry launches % depth)
TL_API int tl_graph_wait_inputs(void *gp) {
    Graph *g = as_graph(gp);
    if (g->inputs.empty()) return TL_OK;
    volatile int64_t *read = g->inputs_read;
    const int64_t need = g->launches - (g->depth - 1);
    while (*read < need) {
        TL_TRY(poison_check("graph_step"));
        cudaError_t e = cudaStreamQuery(g_stream);
        if (e == cudaSuccess) {
            if (*read < need)
                return tl_fail(TL_E_DEVICE, "graph_step: %lld replays launched, %lld read their "
                               "inputs", (long long)g->launches, (long long)*read);
            break;
        }
        if (e != cudaErrorNotReady) return tl_cuda_status("graph_step", e);
        sched_yield();
    }
    return TL_OK;
}

// device copy in stream order (captured when called inside a capture)
TL_API int tl_graph_copy(uint64_t dst, uint64_t src, int64_t bytes) {
    TL_TRY(poison_check("graph_step"));
    if (bytes <= 0 || dst == src) return TL_OK;
    TL_CUDA_TRY("graph_step", cudaMemcpyAsync((void *)(uintptr_t)dst, (const void *)(uintptr_t)src,
                                              (size_t)bytes, cudaMemcpyDeviceToDevice, g_stream));
    return TL_OK;
}

TL_API int tl_graph_begin(void *gp, uint64_t rng_base) {
    Graph *g = as_graph(gp);
    TL_TRY(poison_check("graph_step"));
    if (g_capturing) return tl_fail(TL_E_ARG, "graph_step: a step is already being captured");
    if (g->exec) return tl_fail(TL_E_ARG, "graph_step: this graph was captured already");
    k_state_set<<<1, 1, 0, g_stream>>>(g->state, rng_base, 0, 1);
    TL_LAUNCHED("graph_step");
    // the constants' first pinned chunk, before the capture
    if (g->pinned.empty()) {
        char *c = nullptr;
        TL_CUDA_TRY("graph_step", cudaMallocHost((void **)&c, kPinnedChunk));
        g->pinned.push_back(c);
        g->pinned_used = 0;
        g->pinned_cap = kPinnedChunk;
    }
    int64_t *read_dev = nullptr;
    const size_t table = g->inputs.size() * sizeof(GraphInput);
    if (!g->inputs.empty()) {
        TL_CUDA_TRY("graph_step", cudaMalloc((void **)&g->inputs_dev, table));
        TL_CUDA_TRY("graph_step", cudaMemcpy(g->inputs_dev, g->inputs.data(), table,
                                             cudaMemcpyHostToDevice));
        TL_CUDA_TRY("graph_step", cudaHostGetDevicePointer((void **)&read_dev, g->inputs_read, 0));
    }
    TL_CUDA_TRY("graph_step", cudaStreamBeginCapture(g_stream, cudaStreamCaptureModeRelaxed));
    if (!g->inputs.empty()) {   // the graph's first nodes: the inputs, then their read count
        int64_t most = 0;
        for (const GraphInput &in : g->inputs) most = in.bytes > most ? in.bytes : most;
        const int64_t blocks = (most / 16 + 255) / 256;
        dim3 grid((unsigned)(blocks < 1 ? 1 : blocks > 512 ? 512 : blocks),
                  (unsigned)g->inputs.size());
        k_inputs<<<grid, 256, 0, g_stream>>>(g->inputs_dev, g->state);
        k_inputs_read<<<1, 1, 0, g_stream>>>(g->state, read_dev);
        cudaError_t le = cudaGetLastError();
        if (le != cudaSuccess) {
            cudaGraph_t dropped = nullptr;
            if (cudaStreamEndCapture(g_stream, &dropped) == cudaSuccess && dropped)
                cudaGraphDestroy(dropped);
            cudaGetLastError();
            return tl_cuda_status("graph_step", le);
        }
    }
    std::lock_guard<std::mutex> lk(g_mu);
    g_capturing = g;
    return TL_OK;
}

TL_API int tl_graph_end(void *gp, int64_t draws) {
    Graph *g = as_graph(gp);
    if (g_capturing != g) return tl_fail(TL_E_ARG, "graph_step: this graph is not being captured");
    k_state_advance<<<1, 1, 0, g_stream>>>(g->state, (uint64_t)draws);
    cudaError_t le = cudaGetLastError();
    cudaGraph_t graph = nullptr;
    cudaError_t e = cudaStreamEndCapture(g_stream, &graph);
    {
        std::lock_guard<std::mutex> lk(g_mu);
        g_capturing = nullptr;
        g->free_.clear();
    }
    if (le != cudaSuccess) { if (graph) cudaGraphDestroy(graph); return tl_cuda_status("graph_step", le); }
    if (e != cudaSuccess) { if (graph) cudaGraphDestroy(graph); return tl_cuda_status("graph_step", e); }
    g->graph = graph;
    flush_deferred();
    TL_CUDA_TRY("graph_step", cudaGraphInstantiate(&g->exec, graph, 0));
    // the graph's work lands on the device now, not in the first launch
    TL_CUDA_TRY("graph_step", cudaGraphUpload(g->exec, g_stream));
    return TL_OK;
}

// end a capture that failed on the Python side; the graph is then only fit for destroy
TL_API int tl_graph_abort(void *gp) {
    Graph *g = as_graph(gp);
    if (g_capturing != g) return TL_OK;
    cudaGraph_t graph = nullptr;
    cudaError_t e = cudaStreamEndCapture(g_stream, &graph);
    if (e != cudaSuccess) cudaGetLastError();
    if (graph) cudaGraphDestroy(graph);
    {
        std::lock_guard<std::mutex> lk(g_mu);
        g_capturing = nullptr;
        g->free_.clear();
    }
    flush_deferred();
    return TL_OK;
}

TL_API int tl_graph_launch(void *gp) {
    Graph *g = as_graph(gp);
    TL_TRY(poison_check("graph_step"));
    if (!g->exec) return tl_fail(TL_E_ARG, "graph_step: the graph was not captured");
    TL_CUDA_TRY("graph_step", cudaGraphLaunch(g->exec, g_stream));
    g->launches++;
    return TL_OK;
}

// the RNG base of the next replay (seed + counter): the host stream moved outside the graph
TL_API int tl_graph_set_rng(void *gp, uint64_t rng_base) {
    Graph *g = as_graph(gp);
    TL_TRY(poison_check("graph_step"));
    k_state_set<<<1, 1, 0, g_stream>>>(g->state, rng_base, 0, 0);
    return tl_cuda_launched("graph_step");
}

// number of constant uploads captured, and the op of the first
TL_API int64_t tl_graph_constants(void *gp, char *op, int64_t cap) {
    Graph *g = as_graph(gp);
    if (cap > 0) snprintf(op, (size_t)cap, "%s", g->constant_op);
    return g->constants;
}

// on: what is allocated, uploaded or filled is state that outlives the step (see above)
TL_API int tl_graph_persistent(int on) {
    g_persistent = on ? 1 : 0;
    return TL_OK;
}

// what the capture did with bound range i: 1 read on the host (a plan made from its values),
// 2 uploaded from it (a replay reads its twin), 4 a constant looked derived from it
TL_API int tl_graph_bound_read(void *gp, int64_t i) {
    Graph *g = as_graph(gp);
    return i >= 0 && i < (int64_t)g->bound.size() ? g->bound[(size_t)i].flags : 0;
}

TL_API void tl_graph_destroy(void *gp) {
    Graph *g = as_graph(gp);
    if (!g) return;
    if (g_capturing && g_capturing != g) {  // it would synchronise the capturing stream
        g_deferred.push_back(g);
        return;
    }
    if (g_capturing == g) tl_graph_abort(gp);
    if (!g_poisoned && g_stream_ready && cudaStreamSynchronize(g_stream) != cudaSuccess)
        cudaGetLastError();
    if (g->exec) cudaGraphExecDestroy(g->exec);
    if (g->graph) cudaGraphDestroy(g->graph);
    graph_free_all(g);
    for (const Binding &b : g->bound) cudaFree(b.dev);
    for (char *c : g->pinned) cudaFreeHost(c);
    for (void *h : g->input_host) cudaFreeHost(h);
    if (g->inputs_read) cudaFreeHost(g->inputs_read);
    if (g->inputs_dev) cudaFree(g->inputs_dev);
    if (g->state) cudaFree(g->state);
    cudaGetLastError();
    delete g;
}

// the capturing graph's device state, for the rng and optimizer kernels (nullptr eagerly)
TL_HIDDEN const uint64_t *tl_graph_rng_base(void) {
    Graph *g = g_capturing;
    return g ? &g->state->rng_base : nullptr;
}

TL_HIDDEN const int64_t *tl_graph_replay(void) {
    Graph *g = g_capturing;
    return g ? &g->state->replay : nullptr;
}

}  // extern "C"
