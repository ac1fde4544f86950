// rng.cu (CUDA): the schedule of the counter-based random kernels (grid-stride loops); the
// transforms are native/common/formulas/rng.h, shared with the stub, so the output is the
// stub's whatever the grid shape, in every mode.
//
// Inside a captured step (graph.cu) the key argument is the draw's place d within the step and
// the kernels read key = splitmix64(base + d) from the graph's device state, base = seed +
// counter at the step's first draw: key_of(seed, counter + d), the eager key, whatever replay.
#include "common.cuh"
#include "formulas/rng.h"
#include "generated/rng_kernels.h"

namespace {

// the key of a launch: the host's, or the captured step's base + d read on the device
struct HostKey {
    uint64_t k;
    __device__ uint64_t get() const { return k; }
};
struct GraphKey {
    const uint64_t *base;
    uint64_t d;
    __device__ uint64_t get() const { return tl_sm64(*base + d); }
};

template <class K>
__global__ void k_uniform(float *y, int64_t n, K kk) {
    const uint64_t key = kk.get();
    TL_GRID_STRIDE(i, n) y[i] = tlf_uniform(key, i);
}

template <class K>
__global__ void k_bernoulli(float *y, int64_t n, K kk, float p) {
    const uint64_t key = kk.get();
    TL_GRID_STRIDE(i, n) y[i] = tlf_bernoulli(key, i, p);
}

template <class K>
__global__ void k_normal(float *y, int64_t n, K kk, float mean, float std) {
    const uint64_t key = kk.get();
    TL_GRID_STRIDE(i, n) y[i] = tlf_normal(key, i, mean, std);
}

// launch kernel `launch` with the host key, or the graph's key inside a capture
template <class F>
void with_key(uint64_t key, F launch) {
    const uint64_t *base = tl_graph_rng_base();
    if (base) launch(GraphKey{base, key});
    else launch(HostKey{key});
}

}  // namespace

extern "C" {

int tlk_rand_uniform(const char *op, tl_buf y, int64_t n, uint64_t key) {
    if (n == 0) return TL_OK;
    with_key(key, [&](auto k) { k_uniform<<<tl_blocks(n), TL_THREADS, 0, tl_stream()>>>(y->data, n, k); });
    TL_LAUNCHED(op);
    return TL_OK;
}

int tlk_bernoulli_mask(const char *op, tl_buf y, int64_t n, uint64_t key, double p) {
    if (n == 0) return TL_OK;
    with_key(key, [&](auto k) { k_bernoulli<<<tl_blocks(n), TL_THREADS, 0, tl_stream()>>>(y->data, n, k, (float)p); });
    TL_LAUNCHED(op);
    return TL_OK;
}

int tlk_rand_normal(const char *op, tl_buf y, int64_t n, uint64_t key, double mean, double std) {
    if (n == 0) return TL_OK;
    with_key(key, [&](auto k) { k_normal<<<tl_blocks(n), TL_THREADS, 0, tl_stream()>>>(y->data, n, k, (float)mean, (float)std); });
    TL_LAUNCHED(op);
    return TL_OK;
}

}  // extern "C"
