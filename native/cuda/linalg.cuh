// linalg.cuh (CUDA): rule 4 of native/common/tl_math.h over many rows at once, for the sums
// linalg.cu and conv_pool.cu take in exact mode (column sums, MSE, the conv bias gradient).
//
// Row r's n values are V::at(r, j), j = 0..n-1. One thread per (row, chunk of TLM_CHUNK) sums
// its chunk in index order from its first value; one thread per row then runs tlm_tree_sum
// over the row's chunk partials. That is tlm_sum's order exactly, so the stub's sequential
// versions give the same bits.
//
// Rule4Stream sums vectors that arrive a batch at a time (the conv kernel gradient's per-sample
// gradients, summed over samples): tlm_sumacc run on nk outputs at once, one thread per output,
// with the counters (shared by all outputs) kept on the host. stub/conv_pool.c sample_sum runs
// the same steps.
#pragma once

#include "common.cuh"
#include "tl_math.h"

namespace {  // each including file gets its own copy of the kernels

template <class V>
__global__ void k_rule4_chunks(V v, int64_t rows, int64_t n, int64_t nchunks, float *part) {
    TL_GRID_STRIDE(i, rows * nchunks) {
        const int64_t r = i % rows, c = i / rows;  // neighbouring threads: neighbouring rows
        const int64_t j0 = c * TLM_CHUNK, len = n - j0 < TLM_CHUNK ? n - j0 : TLM_CHUNK;
        float s = v.at(r, j0);
        for (int64_t j = 1; j < len; j++) s = tlm_add(s, v.at(r, j0 + j));
        part[r * nchunks + c] = s;
    }
}

// out[r] = the tree over row r's partials, divided by `divisor` when it is nonzero (a mean)
__global__ void k_rule4_tree(float *part, int64_t rows, int64_t nchunks, float *out, float divisor) {
    TL_GRID_STRIDE(r, rows) {
        float s = tlm_tree_sum(part + r * nchunks, nchunks);
        out[r] = divisor != 0.0f ? tlm_div(s, divisor) : s;
    }
}

// out[r] = rule-4 sum of row r (0 when n == 0), or that sum / divisor
template <class V>
int rule4_rows(const char *op, V v, int64_t rows, int64_t n, float *out, float divisor) {
    if (rows == 0) return TL_OK;
    if (n == 0) {
        TL_CUDA_TRY(op, cudaMemsetAsync(out, 0, (size_t)rows * sizeof(float), tl_stream()));
        return TL_OK;
    }
    const int64_t nchunks = (n + TLM_CHUNK - 1) / TLM_CHUNK;
    float *part;
    TL_TRY(tl_scratch(op, (size_t)(rows * nchunks) * sizeof(float), (void **)&part));
    k_rule4_chunks<<<tl_blocks(rows * nchunks), TL_THREADS, 0, tl_stream()>>>(v, rows, n, nchunks, part);
    int st = tl_cuda_launched(op);
    if (!st) {
        k_rule4_tree<<<tl_blocks(rows), TL_THREADS, 0, tl_stream()>>>(part, rows, nchunks, out, divisor);
        st = tl_cuda_launched(op);
    }
    tl_scratch_free(part);
    return st;
}

// The stream's state: cur[i] is output i's open chunk, part[h * nk + i] its stack of closed
// chunk partials (capacity `depth`, the bit count of the number of chunks); len, chunks and top
// are tlm_sumacc's counters, identical for every output.
struct Rule4Stream {
    int64_t nk = 0, len = 0, chunks = 0;
    int top = 0, depth = 0;
    float *cur = nullptr, *part = nullptr;
};

// floats of state for nk outputs summed over n vectors; sets depth
inline int64_t rule4_stream_floats(Rule4Stream &s, int64_t nk, int64_t n) {
    const int64_t nchunks = (n + TLM_CHUNK - 1) / TLM_CHUNK;
    s.depth = 1;
    while (((int64_t)1 << s.depth) <= nchunks) s.depth++;
    s.nk = nk;
    return nk * (1 + s.depth);
}

// tlm_sumacc_close_chunk for output i: v (the open chunk) merged with the equal-height partials
__device__ __forceinline__ void rule4_stream_close(float v, float *part, int64_t nk, int64_t i,
                                                   int64_t &chunks, int &top, int64_t &len) {
    for (int64_t c = chunks; c & 1; c >>= 1) v = tlm_add(part[(int64_t)(--top) * nk + i], v);
    part[(int64_t)top * nk + i] = v;
    top++; chunks++; len = 0;
}

// push x[b * nk + i] for b = 0..m-1 into output i's state; with out, then finish: out[i] = the
// rule-4 sum of everything pushed (tlm_sumacc_finish)
__global__ void k_rule4_stream(const float *x, int64_t m, int64_t nk, float *cur, float *part,
                               int64_t len0, int64_t chunks0, int top0, float *out) {
    TL_GRID_STRIDE(i, nk) {
        int64_t len = len0, chunks = chunks0;
        int top = top0;
        float v = len > 0 ? cur[i] : 0.0f;
        for (int64_t b = 0; b < m; b++) {
            const float xv = x[b * nk + i];
            v = len == 0 ? xv : tlm_add(v, xv);
            if (++len == TLM_CHUNK) rule4_stream_close(v, part, nk, i, chunks, top, len);
        }
        if (!out) { cur[i] = v; continue; }
        if (chunks == 0) { out[i] = len > 0 ? v : 0.0f; continue; }
        if (len > 0) rule4_stream_close(v, part, nk, i, chunks, top, len);
        float s = part[(int64_t)(--top) * nk + i];
        while (top > 0) s = tlm_add(part[(int64_t)(--top) * nk + i], s);
        out[i] = s;
    }
}

// push m vectors x[b * nk .. (b + 1) * nk) into s (state in `state`, rule4_stream_floats of it);
// with out, finish into out
inline int rule4_stream_push(const char *op, Rule4Stream &s, float *state, const float *x,
                             int64_t m, float *out) {
    if (s.nk == 0) return TL_OK;
    s.cur = state; s.part = state + s.nk;
    k_rule4_stream<<<tl_blocks(s.nk), TL_THREADS, 0, tl_stream()>>>(x, m, s.nk, s.cur, s.part, s.len,
                                                                  s.chunks, s.top, out);
    TL_TRY(tl_cuda_launched(op));
    for (int64_t b = 0; b < m; b++)  // the counters, as every thread advanced them
        if (++s.len == TLM_CHUNK) {
            for (int64_t c = s.chunks; c & 1; c >>= 1) s.top--;
            s.top++; s.chunks++; s.len = 0;
        }
    return TL_OK;
}

}  // namespace
