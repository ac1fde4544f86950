// views.cu (CUDA): broadcast_to, its adjoint sum_to, and the permutation ops.
//
// Broadcasting is planned on the host: the input is right-aligned with the output, size-1 axes of
// the big shape are dropped and neighbouring axes of the same kind (kept or broadcast) merged, so
// kernels see at most a few groups. sum_to runs as a chain of axis reductions (tl_cuda_axis_sum in
// reduce.cu), one per summed group, innermost first: every pass is coalesced, and in
// deterministic mode every pass is fixed-order, so the chain is bit-reproducible. In exact mode
// each output is rule 4 over its sources instead (sum_to_exact), the stub's order.
// Every permutation op is a block swap y[o, b, a, i] = x[o, a, b, i] (geom from
// shapes.swap_geom): a 32 x 32 shared-memory tile transpose when inner == 1, a row copy otherwise.
#include "common.cuh"
#include "tl_math.h"
#include "generated/views_kernels.h"

namespace {

constexpr int MAXG = 16;

struct Plan {
    int g;                 // groups, outermost first
    int64_t size[MAXG];    // group extent in the big shape
    int64_t sstride[MAXG]; // stride in the small tensor (0 for broadcast groups)
    int kept[MAXG];
};

// big = broadcast shape, small = the other side (target of sum_to / input of broadcast_to); the
// entry has checked that small broadcasts to big
int make_plan(const char *op, tl_buf small, tl_buf big, const int64_t *sd, int64_t sr,
              const int64_t *bd, int64_t br, Plan *p, int64_t *nbig, int64_t *nsmall) {
    int64_t ns = 1, nb = 1;
    for (int64_t k = 0; k < sr; k++) ns *= sd[k];
    for (int64_t k = 0; k < br; k++) nb *= bd[k];
    int64_t tsz[64], tk[64];
    int ng = 0;
    for (int64_t k = br - 1; k >= 0; k--) {  // innermost first
        int64_t ik = k - (br - sr);
        int64_t s = ik < 0 ? 1 : sd[ik];
        if (bd[k] == 1) continue;
        int kept = s != 1;
        if (ng && tk[ng - 1] == kept) tsz[ng - 1] *= bd[k];
        else {
            if (ng == MAXG)
                return tl_fail(TL_E_UNSUPPORTED, "%s: more than %d alternating broadcast groups", op, MAXG);
            tsz[ng] = bd[k]; tk[ng] = kept; ng++;
        }
    }
    p->g = ng;
    int64_t ss = 1;
    for (int q = 0; q < ng; q++) {
        int lev = ng - 1 - q;
        p->size[lev] = tsz[q];
        p->kept[lev] = (int)tk[q];
        p->sstride[lev] = tk[q] ? ss : 0;
        if (tk[q]) ss *= tsz[q];
    }
    *nbig = nb;
    *nsmall = ns;
    return TL_OK;
}

// I: the index type, 32-bit when the output fits (64-bit division is several times slower)
template <class I>
__global__ void broadcast_kernel(const float *__restrict__ x, float *__restrict__ y, I n, Plan p) {
    for (I t = (I)blockIdx.x * blockDim.x + threadIdx.x; t < n; t += (I)gridDim.x * blockDim.x) {
        I r = t, off = 0;
        for (int q = p.g - 1; q >= 0; q--) {
            I size = (I)p.size[q], c = r % size;
            r /= size;
            off += c * (I)p.sstride[q];
        }
        y[t] = x[off];
    }
}

}  // namespace

extern "C" int tlk_broadcast_to(const char *op, tl_buf x, tl_buf y, const int64_t *in_dims, int64_t in_len,
                               const int64_t *out_dims, int64_t out_len) {
    Plan p;
    int64_t n, m;
    TL_TRY(make_plan(op, x, y, in_dims, in_len, out_dims, out_len, &p, &n, &m));
    if (n == 0) return TL_OK;
    cudaStream_t st = tl_stream();
    if (n == m) {
        TL_CUDA_TRY(op, cudaMemcpyAsync(y->data, x->data, (size_t)n * sizeof(float),
                                        cudaMemcpyDeviceToDevice, st));
        return TL_OK;
    }
    if (n < ((int64_t)1 << 31))
        broadcast_kernel<uint32_t><<<tl_blocks(n), TL_THREADS, 0, st>>>(x->data, y->data, (uint32_t)n, p);
    else
        broadcast_kernel<int64_t><<<tl_blocks(n), TL_THREADS, 0, st>>>(x->data, y->data, n, p);
    TL_LAUNCHED(op);
    return TL_OK;
}

// ---- exact mode: every output is rule 4 (tl_math.h) over its sources in increasing x index,
// as the stub's sumto_exact_*: stage 1, one thread per (output, chunk of TLM_CHUNK sources) sums
// sequentially from the chunk's first source; stage 2, one thread per output folds its chunk sums
// with tlm_sum's stack (the fixed binary tree).
namespace {

struct ExactPlan {
    int g;
    int64_t size[MAXG];
    int64_t xs[MAXG];   // x stride of each group
    int kept[MAXG];
    int64_t S;          // sources per output
};

__global__ void sumto_exact_chunks(const float *__restrict__ x, float *__restrict__ out, int64_t m,
                                   int64_t nc, ExactPlan p) {
    TL_GRID_STRIDE(t, m * nc) {
        int64_t j = t % m, c = t / m, base = 0, r = j;
        for (int lev = p.g - 1; lev >= 0; lev--)
            if (p.kept[lev]) { base += (r % p.size[lev]) * p.xs[lev]; r /= p.size[lev]; }
        // the chunk's first source: summed coordinates of s0, innermost group fastest
        int64_t s0 = c * TLM_CHUNK, coord[MAXG], off = 0;
        r = s0;
        for (int lev = p.g - 1; lev >= 0; lev--)
            if (!p.kept[lev]) { coord[lev] = r % p.size[lev]; r /= p.size[lev]; off += coord[lev] * p.xs[lev]; }
        int64_t len = p.S - s0 < TLM_CHUNK ? p.S - s0 : TLM_CHUNK;
        float acc = x[base + off];
        for (int64_t i = 1; i < len; i++) {
            for (int lev = p.g - 1; lev >= 0; lev--) {   // odometer step over the summed groups
                if (p.kept[lev]) continue;
                off += p.xs[lev];
                if (++coord[lev] < p.size[lev]) break;
                off -= coord[lev] * p.xs[lev];
                coord[lev] = 0;
            }
            acc = tlm_add(acc, x[base + off]);
        }
        out[t] = acc;
    }
}

// part[c * m + j] for c < nc: tlm_sum's merge order over the chunk sums of output j
__global__ void sumto_exact_tree(const float *__restrict__ part, float *__restrict__ y, int64_t m,
                                 int64_t nc) {
    TL_GRID_STRIDE(j, m) {
        float val[64];
        int height[64], top = 0;
        for (int64_t c = 0; c < nc; c++) {
            float s = part[c * m + j];
            int h = 0;
            while (top > 0 && height[top - 1] == h) { s = tlm_add(val[--top], s); h++; }
            val[top] = s; height[top] = h; top++;
        }
        float s = val[--top];
        while (top > 0) s = tlm_add(val[--top], s);
        y[j] = s;
    }
}

int sum_to_exact(const char *op, const float *x, float *y, int64_t n, int64_t m, const Plan &p) {
    ExactPlan e;
    e.g = p.g;
    int64_t xs = 1;
    for (int lev = p.g - 1; lev >= 0; lev--) {
        e.size[lev] = p.size[lev]; e.kept[lev] = p.kept[lev]; e.xs[lev] = xs; xs *= p.size[lev];
    }
    e.S = n / m;
    int64_t nc = (e.S + TLM_CHUNK - 1) / TLM_CHUNK;
    cudaStream_t st = tl_stream();
    if (nc == 1) {
        sumto_exact_chunks<<<tl_blocks(m), TL_THREADS, 0, st>>>(x, y, m, 1, e);
        TL_LAUNCHED(op);
        return TL_OK;
    }
    float *part = nullptr;
    TL_TRY(tl_scratch(op, (size_t)(m * nc) * sizeof(float), (void **)&part));
    sumto_exact_chunks<<<tl_blocks(m * nc), TL_THREADS, 0, st>>>(x, part, m, nc, e);
    int rs = tl_cuda_launched(op);
    if (!rs) {
        sumto_exact_tree<<<tl_blocks(m), TL_THREADS, 0, st>>>(part, y, m, nc);
        rs = tl_cuda_launched(op);
    }
    tl_scratch_free(part);
    return rs;
}

}  // namespace

extern "C" int tlk_sum_to(const char *op, tl_buf x, tl_buf y, const int64_t *in_dims, int64_t in_len,
                         const int64_t *out_dims, int64_t out_len) {
    Plan p;
    int64_t n, m;
    TL_TRY(make_plan(op, y, x, out_dims, out_len, in_dims, in_len, &p, &n, &m));
    if (m == 0) return TL_OK;
    cudaStream_t st = tl_stream();
    if (n == 0) {
        TL_CUDA_TRY(op, cudaMemsetAsync(y->data, 0, (size_t)m * sizeof(float), st));
        return TL_OK;
    }
    if (n == m) {
        TL_CUDA_TRY(op, cudaMemcpyAsync(y->data, x->data, (size_t)n * sizeof(float),
                                        cudaMemcpyDeviceToDevice, st));
        return TL_OK;
    }
    if (tl_exact()) return sum_to_exact(op, x->data, y->data, n, m, p);
    // groups as a working list; reduce summed groups innermost first
    int g = p.g;
    int64_t size[MAXG];
    int kept[MAXG];
    int summed = 0;
    for (int q = 0; q < g; q++) { size[q] = p.size[q]; kept[q] = p.kept[q]; summed += !kept[q]; }
    const float *cur = x->data;
    float *owned = nullptr;
    int64_t curn = n;
    for (int q = g - 1; q >= 0; q--) {
        if (kept[q]) continue;
        int64_t outer = 1, inner = 1;
        for (int k = 0; k < q; k++) outer *= size[k];
        for (int k = q + 1; k < g; k++) inner *= size[k];
        int64_t outn = curn / size[q];
        summed--;
        float *dst = y->data;
        if (summed > 0) {
            int st2 = tl_scratch(op, (size_t)outn * sizeof(float), (void **)&dst);
            if (st2) { if (owned) tl_scratch_free(owned); return st2; }
        }
        int rs = tl_cuda_axis_sum(op, cur, dst, outer, size[q], inner, 0);
        if (owned) tl_scratch_free(owned);
        owned = summed > 0 ? dst : nullptr;
        if (rs) { if (owned) tl_scratch_free(owned); return rs; }
        cur = dst;
        curn = outn;
        // drop group q from the list
        for (int k = q; k < g - 1; k++) { size[k] = size[k + 1]; kept[k] = kept[k + 1]; }
        g--;
    }
    return TL_OK;
}

// ------------------------------------------------------------------ permutations
namespace {

constexpr int TILE = 32;

// y[o, b, a] = x[o, a, b]: one 32 x 32 tile per block step (block 32 x 8), grid-stride over tiles
__global__ void transpose_tiles(const float *__restrict__ x, float *__restrict__ y, int64_t O,
                                int64_t A, int64_t B) {
    __shared__ float tile[TILE][TILE + 1];
    int64_t ta = (A + TILE - 1) / TILE, tb = (B + TILE - 1) / TILE, tiles = O * ta * tb;
    for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
        int64_t o = t / (ta * tb), r = t % (ta * tb), a0 = (r / tb) * TILE, b0 = (r % tb) * TILE;
        const float *xo = x + o * A * B;
        float *yo = y + o * A * B;
        for (int k = threadIdx.y; k < TILE; k += blockDim.y) {
            int64_t a = a0 + k, b = b0 + threadIdx.x;
            if (a < A && b < B) tile[k][threadIdx.x] = xo[a * B + b];
        }
        __syncthreads();
        for (int k = threadIdx.y; k < TILE; k += blockDim.y) {
            int64_t b = b0 + k, a = a0 + threadIdx.x;
            if (a < A && b < B) yo[b * A + a] = tile[threadIdx.x][k];
        }
        __syncthreads();
    }
}

// inner > 1: y[o, b, a, i] = x[o, a, b, i], one thread per output element
__global__ void swap_rows(const float *__restrict__ x, float *__restrict__ y, int64_t n, int64_t A,
                          int64_t B, int64_t I) {
    TL_GRID_STRIDE(t, n) {
        int64_t i = t % I, r = t / I;
        int64_t a = r % A; r /= A;
        int64_t b = r % B, o = r / B;
        y[t] = x[((o * A + a) * B + b) * I + i];
    }
}

}  // namespace

// one body for transpose2d, swap_adjacent, permute3d_bca, permute3d_cab and swap_last2
extern "C" int tlk_swap_blocks(const char *op, tl_buf x, tl_buf y, const int64_t *geom,
                               int64_t geom_len) {
    const int64_t O = geom[0], A = geom[1], B = geom[2], I = geom[3], n = O * A * B * I;
    if (n == 0) return TL_OK;
    cudaStream_t st = tl_stream();
    if (A == 1 || B == 1) {
        TL_CUDA_TRY(op, cudaMemcpyAsync(y->data, x->data, (size_t)n * sizeof(float),
                                        cudaMemcpyDeviceToDevice, st));
        return TL_OK;
    }
    if (I == 1) {
        int64_t tiles = O * ((A + TILE - 1) / TILE) * ((B + TILE - 1) / TILE);
        unsigned blocks = (unsigned)(tiles < 65535 * 16 ? tiles : 65535 * 16);
        transpose_tiles<<<blocks, dim3(TILE, 8), 0, st>>>(x->data, y->data, O, A, B);
    } else {
        swap_rows<<<tl_blocks(n), TL_THREADS, 0, st>>>(x->data, y->data, n, A, B, I);
    }
    TL_LAUNCHED(op);
    return TL_OK;
}
