// linalg.cuh (CUDA): rule 4 of native/common/tl_math.h over many rows at once, for the sums
// linalg.cu and conv_pool.cu take in exact mode (column sums, MSE, the conv bias gradient).
//
// Row r's n values are V::at(r, j), j = 0..n-1. One thread per (row, chunk of TLM_CHUNK) sums
// its chunk in index order from its first value; one thread per row then runs tlm_tree_sum
// over the row's chunk partials. That is tlm_sum's order exactly, so the stub's sequential
// versions give the same bits.
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

}  // namespace
