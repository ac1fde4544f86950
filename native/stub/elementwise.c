/* elementwise.c (stub): the schedules of the pointwise kernels; their arithmetic is
 * native/common/formulas/elementwise.h, shared with CUDA.
 *
 * The maps ops.yaml gives a `formula:` are generated (generated/elementwise_maps_stub.inc) into the
 * vectorised loop defined here. What stays by hand is schedule, the same in every mode:
 * binary_broadcast's strided rows, affine_rows, the log and the sigmoid over blocks (so their
 * loops vectorise), softplus_backward as that sigmoid then a product, and safe_log as
 * softplus + eps then the blocked log.
 */
#include "stub.h"
#include "generated/elementwise_kernels.h"

#define LOOP(n) _Pragma("omp parallel for simd if(n > TL_PAR_MIN) schedule(static)") \
    for (int64_t i = 0; i < n; i++)

/* the schedule of the generated map bodies (generated/elementwise_maps_stub.inc): one vectorised
 * loop per op, split across threads above TL_PAR_MIN elements */
#define TL_MAP_LOOP(n) LOOP(n)
#define TL_MAP_ATTR TL_VEC512
#include "generated/elementwise_maps_stub.inc"

/* tlf_sigmoid (tlm_sigmoid) over a block: its main formula in a loop that vectorises, then
 * its series on the inputs below 2^-12 in magnitude, if the block has any (the same bits as
 * tlm_sigmoid's select, without evaluating the series for every input) */
#define SIG_BLOCK 512
static TL_VEC512 void sigmoid_exact_block(const float *X, float *Y, int64_t len) {
    int32_t small = 0;
    for (int64_t i = 0; i < len; i++) {
        Y[i] = tlm_sigmoid_main(X[i]);
        small |= tlm_sigmoid_is_small(X[i]);
    }
    if (small)
        for (int64_t i = 0; i < len; i++)
            if (tlm_sigmoid_is_small(X[i])) Y[i] = tlm_sigmoid_small(X[i]);
}

/* BLOCK(x, y, len) over x[0..n) into y, blocks split across threads */
static void by_blocks(void (*block)(const float *, float *, int64_t), const float *X, float *Y, int64_t n) {
    const int64_t nb = (n + SIG_BLOCK - 1) / SIG_BLOCK;
    #pragma omp parallel for schedule(static) if(n > TL_PAR_MIN)
    for (int64_t b = 0; b < nb; b++) {
        int64_t i0 = b * SIG_BLOCK, len = n - i0 < SIG_BLOCK ? n - i0 : SIG_BLOCK;
        block(X + i0, Y + i0, len);
    }
}

/* tlm_log over a block (branch-free, so the loop vectorises) */
static TL_VEC512 void log_exact_block(const float *X, float *Y, int64_t len) {
    for (int64_t i = 0; i < len; i++) Y[i] = tlf_log(X[i]);
}

/* binary_broadcast: one output row (the last coalesced axis) of fn(a, b), a and b read through
 * strides (0 along the axes they are broadcast on). */
#define BCAST_ROW(NAME, EXPR)                                                                 \
    static void NAME##_row(const float *A, int64_t sa, const float *B, int64_t sb, float *Y,  \
                           int64_t len) {                                                      \
        for (int64_t k = 0; k < len; k++) { float av = A[k * sa], bv = B[k * sb]; Y[k] = (EXPR); } \
    }
BCAST_ROW(add, tlf_add(av, bv))
BCAST_ROW(sub, tlf_sub(av, bv))
BCAST_ROW(mul, tlf_mul(av, bv))
BCAST_ROW(div, tlf_div(av, bv))
BCAST_ROW(maximum, tlf_maximum(av, bv))
BCAST_ROW(minimum, tlf_minimum(av, bv))

typedef void (*bcast_row_fn)(const float *, int64_t, const float *, int64_t, float *, int64_t);

/* The broadcasting form of add, sub, mul, div, maximum and minimum (fn 0..5): the op's own
 * expression per element, so the bits of the op on expanded copies, without the copies. */
int tlk_binary_broadcast(const char *op, tl_buf a, tl_buf b, tl_buf y, const int64_t *y_dims, int64_t y_dims_len,
                        const int64_t *a_dims, int64_t a_dims_len, const int64_t *b_dims, int64_t b_dims_len,
                        int64_t fn) {
    static const bcast_row_fn rows_of[6] = {add_row, sub_row, mul_row, div_row, maximum_row, minimum_row};
    int64_t r = y_dims_len;
    if (r < 1 || r > TL_MAX_RANK || a_dims_len != r || b_dims_len != r)
        return tl_fail(TL_E_ARG, "%s: expected 1 to %d coalesced axes, the same number for a, b and y; got %lld, "
                       "%lld and %lld", op, TL_MAX_RANK, (long long)a_dims_len, (long long)b_dims_len,
                       (long long)r);
    int64_t sa[TL_MAX_RANK], sb[TL_MAX_RANK];
    for (int64_t k = r - 1, ea = 1, eb = 1; k >= 0; k--) { /* row-major strides, 0 where broadcast */
        sa[k] = a_dims[k] == 1 ? 0 : ea;
        sb[k] = b_dims[k] == 1 ? 0 : eb;
        ea *= a_dims[k];
        eb *= b_dims[k];
    }
    const float *A = a->data, *B = b->data;
    float *Y = y->data;
    bcast_row_fn row = rows_of[fn];
    int64_t len = y_dims[r - 1], nrows = 1;
    for (int64_t k = 0; k < r - 1; k++) nrows *= y_dims[k];
#pragma omp parallel for schedule(static) if (nrows * len > TL_PAR_MIN && nrows > 1)
    for (int64_t i = 0; i < nrows; i++) {
        int64_t ao = 0, bo = 0, rest = i;
        for (int64_t k = r - 2; k >= 0; k--) {
            int64_t idx = rest % y_dims[k];
            rest /= y_dims[k];
            ao += idx * sa[k];
            bo += idx * sb[k];
        }
        row(A + ao, sa[r - 1], B + bo, sb[r - 1], Y + i * len, len);
    }
    return TL_OK;
}

/* layer_norm's y from xhat: the same two rounded operations as norm.c's forward */
int tlk_affine_rows(const char *op, tl_buf x, tl_buf gamma, tl_buf beta, tl_buf y, int64_t rows, int64_t cols) {
    const float *X = x->data, *G = gamma->data, *B = beta->data;
    float *Y = y->data;
#pragma omp parallel for schedule(static) if (rows * cols > TL_PAR_MIN && rows > 1)
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < cols; j++) Y[r * cols + j] = tlf_affine(X[r * cols + j], G[j], B[j]);
    return TL_OK;
}

/* over blocks: faster than a plain loop of tlf_log */
int tlk_log(const char *op, tl_buf x, tl_buf y, int64_t n) {
    by_blocks(log_exact_block, x->data, y->data, n);
    return TL_OK;
}
int tlk_sigmoid(const char *op, tl_buf x, tl_buf y, int64_t n) {
    by_blocks(sigmoid_exact_block, x->data, y->data, n);
    return TL_OK;
}
/* g sigmoid(x) (tlf_softplus_backward): sigmoid(x) into dx over blocks, then the product in place */
int tlk_softplus_backward(const char *op, tl_buf x, tl_buf g, tl_buf dx, int64_t n) {
    const float *G = g->data; float *D = dx->data;
    by_blocks(sigmoid_exact_block, x->data, D, n);
    LOOP(n) D[i] = tlm_mul(G[i], D[i]);
    return TL_OK;
}

/* log(softplus(x) + eps), canonical in every mode: softplus + eps over a block, then the blocked log */
TL_VEC512 int tlk_safe_log(const char *op, tl_buf x, tl_buf y, int64_t n, double eps) {
    const float *X = x->data; float *Y = y->data; const float e = (float)eps;
    const int64_t nb = (n + SIG_BLOCK - 1) / SIG_BLOCK;
    #pragma omp parallel for schedule(static) if(n > TL_PAR_MIN)
    for (int64_t b = 0; b < nb; b++) {
        int64_t i0 = b * SIG_BLOCK, len = n - i0 < SIG_BLOCK ? n - i0 : SIG_BLOCK;
        float t[SIG_BLOCK];
        for (int64_t i = 0; i < len; i++) t[i] = tlm_add(tlf_softplus(X[i0 + i]), e);
        log_exact_block(t, Y + i0, len);
    }
    return TL_OK;
}
