// cuda_runtime.h for the CPU emulation of device code (tests/native/attention_tiled_emu.cpp):
// just enough CUDA (threadIdx/blockIdx, __syncthreads, warp shuffles and matches, float4, __fmaf_rn) for
// the attention kernels' source to run on the host, unchanged.
//
// The threads of a block run as cooperative coroutines (ucontext) in one OS thread. Each runs
// until it waits at a barrier (__syncthreads, or a warp's barrier inside a shuffle); the
// scheduler then resumes the first runnable thread in forward or reverse thread order, so one
// warp gets as far ahead of the others as the barriers allow. A missing barrier is not hidden
// by timing: a thread reading shared memory that another warp has yet to write (or has already
// overwritten) reads the wrong value, deterministically.
// Blocks run one after another. A deadlock (threads waiting at a barrier that no other thread
// can reach) aborts with a message.
#pragma once

#include <ucontext.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__
#define __grid_constant__
#define __align__(n) alignas(n)

struct dim3 {
    unsigned x, y, z;
    dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
struct alignas(16) float4 {
    float x, y, z, w;
};
inline float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }
inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
using std::max;
using std::min;

namespace emu {

struct Thread {
    ucontext_t ctx;
    unsigned tid = 0;
    bool done = false;
    int bar = -1;       // the barrier it waits at, -1 if runnable
    unsigned gen = 0;   // that barrier's generation when it arrived
    std::vector<char> stack;
};
struct Barrier {
    unsigned expected = 0, count = 0, gen = 0;
};

inline dim3 g_grid, g_block, g_bidx;
inline std::vector<Thread> g_threads;
inline std::vector<Barrier> g_bars;  // 0: the block; 1 + w: warp w
inline Thread *g_cur = nullptr;
inline ucontext_t g_sched;
inline std::vector<unsigned long long> g_slot;  // one exchange slot per thread (shuffles)
inline std::function<void()> g_body;
inline bool g_reverse = false;

inline dim3 thread_index() { return dim3(g_cur->tid); }

inline void wait(int b) {
    Barrier &B = g_bars[b];
    if (++B.count == B.expected) {  // the last to arrive releases the others and goes on
        B.count = 0;
        B.gen++;
        return;
    }
    g_cur->bar = b;
    g_cur->gen = B.gen;
    swapcontext(&g_cur->ctx, &g_sched);
}

inline void trampoline() {
    g_body();
    g_cur->done = true;
    swapcontext(&g_cur->ctx, &g_sched);
}

// run body once per thread of one block (blockIdx set by the caller)
inline void run_block(unsigned nthreads) {
    const size_t stack_bytes = 256 * 1024;
    g_threads.resize(nthreads);
    g_slot.assign(nthreads, 0ull);
    g_bars.assign(1 + (nthreads + 31) / 32, Barrier{});
    g_bars[0].expected = nthreads;
    for (unsigned w = 0; w < (nthreads + 31) / 32; w++)
        g_bars[1 + w].expected = std::min(32u, nthreads - 32 * w);
    for (unsigned t = 0; t < nthreads; t++) {
        Thread &th = g_threads[t];
        th.tid = t;
        th.done = false;
        th.bar = -1;
        th.stack.resize(stack_bytes);
        getcontext(&th.ctx);
        th.ctx.uc_stack.ss_sp = th.stack.data();
        th.ctx.uc_stack.ss_size = stack_bytes;
        th.ctx.uc_link = nullptr;
        makecontext(&th.ctx, trampoline, 0);
    }
    // Always resume the first runnable thread in scheduling order: a warp runs as far as it
    // can (through its shuffles, up to a __syncthreads) before the next warp starts, so warps
    // drift as far apart as the barriers allow.
    for (;;) {
        bool progress = false, all_done = true;
        for (unsigned k = 0; k < nthreads && !progress; k++) {
            Thread &th = g_threads[g_reverse ? nthreads - 1 - k : k];
            if (th.done) continue;
            all_done = false;
            if (th.bar >= 0 && g_bars[th.bar].gen == th.gen) continue;
            th.bar = -1;
            g_cur = &th;
            swapcontext(&g_sched, &th.ctx);
            progress = true;
        }
        if (all_done) return;
        if (!progress) {
            fprintf(stderr, "cuda_emu: deadlock in block (%u, %u): threads wait at a barrier "
                    "that the others never reach\n", g_bidx.x, g_bidx.y);
            abort();
        }
    }
}

// body() as a kernel launch over grid x block (blocks in order, x fastest)
inline void launch(dim3 grid, dim3 block, std::function<void()> body, bool reverse) {
    g_grid = grid;
    g_block = block;
    g_body = std::move(body);
    g_reverse = reverse;
    for (unsigned z = 0; z < grid.z; z++)
        for (unsigned y = 0; y < grid.y; y++)
            for (unsigned x = 0; x < grid.x; x++) {
                g_bidx = dim3(x, y, z);
                run_block(block.x * block.y * block.z);
            }
}

}  // namespace emu

#define threadIdx (emu::thread_index())
#define blockIdx (emu::g_bidx)
#define gridDim (emu::g_grid)
#define blockDim (emu::g_block)

inline void __syncthreads() { emu::wait(0); }
inline void __syncwarp(unsigned = 0xffffffffu) { emu::wait(1 + emu::g_cur->tid / 32); }

// Warp exchanges: every lane of the warp takes part (as in the kernels emulated here); masks are
// not checked. Each lane posts v's bits (V: at most 8 bytes, moved bit for bit), waits for the
// warp, reads what `pick` makes of the posted slots, and waits again before a slot is reused.
namespace emu {
template <class V, class Pick>
inline auto warp_exchange(V v, Pick pick) {
    static_assert(sizeof(V) <= sizeof(unsigned long long), "exchange of at most 8 bytes");
    const unsigned t = g_cur->tid;
    unsigned long long bits = 0;
    std::memcpy(&bits, &v, sizeof v);
    g_slot[t] = bits;
    wait(1 + t / 32);
    auto r = pick(t & ~31u, t & 31u, bits);   // (first thread of the warp, lane, own bits)
    wait(1 + t / 32);
    return r;
}
template <class V>
inline V from_bits(unsigned long long bits) {
    V r;
    std::memcpy(&r, &bits, sizeof r);
    return r;
}
}  // namespace emu

template <class V>
inline V __shfl_xor_sync(unsigned, V v, int o) {
    return emu::warp_exchange(v, [o](unsigned w, unsigned lane, unsigned long long) {
        return emu::from_bits<V>(emu::g_slot[w | (lane ^ (unsigned)o)]);
    });
}

template <class V>
inline V __shfl_sync(unsigned, V v, int src) {
    return emu::warp_exchange(v, [src](unsigned w, unsigned, unsigned long long) {
        return emu::from_bits<V>(emu::g_slot[w | ((unsigned)src & 31u)]);
    });
}

// the lanes of this lane's warp whose v equals its own, as a bit mask
template <class V>
inline unsigned __match_any_sync(unsigned, V v) {
    return emu::warp_exchange(v, [](unsigned w, unsigned, unsigned long long bits) {
        unsigned m = 0;
        for (unsigned l = 0; l < 32; l++)
            if (emu::g_slot[w | l] == bits) m |= 1u << l;
        return m;
    });
}

inline int __ffs(unsigned x) { return __builtin_ffs((int)x); }
inline int __popc(unsigned x) { return __builtin_popcount(x); }

// the lanes of this lane's warp whose predicate holds, as a bit mask
inline unsigned __ballot_sync(unsigned, int pred) {
    return emu::warp_exchange(pred ? 1 : 0, [](unsigned w, unsigned, unsigned long long) {
        unsigned m = 0;
        for (unsigned l = 0; l < 32; l++)
            if (emu::g_slot[w | l]) m |= 1u << l;
        return m;
    });
}

// threads switch only at barriers, so a plain update is atomic here
inline unsigned atomicAdd(unsigned *p, unsigned v) {
    unsigned old = *p;
    *p = old + v;
    return old;
}
