/* views.c (stub): broadcasting and its adjoint. Shapes are right-aligned (NumPy rules). */
#include <string.h>
#include "stub.h"

/* Validate in/out dims for broadcast in -> out and fill the input stride (0 on broadcast axes)
 * for each output axis. */
static int bcast_strides(const char *op, tl_buf in, tl_buf out, const int64_t *id, int64_t ir,
                         const int64_t *od, int64_t orank, int64_t *stride, int64_t *on) {
    if (ir > orank || orank > 64)
        return tl_fail(TL_E_SHAPE, "%s: input rank %lld cannot broadcast to rank %lld", op,
                       (long long)ir, (long long)orank);
    int64_t ni = 1, no = 1;
    for (int64_t k = 0; k < ir; k++) ni *= id[k];
    for (int64_t k = 0; k < orank; k++) no *= od[k];
    TL_CHECK(op, in, ni);
    TL_CHECK(op, out, no);
    int64_t s = 1;
    for (int64_t k = orank - 1; k >= 0; k--) {
        int64_t ik = k - (orank - ir);
        if (ik < 0) { stride[k] = 0; continue; }
        if (id[ik] != od[k] && id[ik] != 1)
            return tl_fail(TL_E_SHAPE, "%s: axis %lld of size %lld cannot broadcast to %lld", op,
                           (long long)ik, (long long)id[ik], (long long)od[k]);
        stride[k] = (id[ik] == 1) ? 0 : s;
        s *= id[ik];
    }
    *on = no;
    return TL_OK;
}

/* input offset of output linear index o */
static inline int64_t src_offset(int64_t o, const int64_t *od, const int64_t *stride, int64_t r) {
    int64_t off = 0;
    for (int64_t k = r - 1; k >= 0; k--) {
        int64_t c = o % od[k];
        o /= od[k];
        off += c * stride[k];
    }
    return off;
}

int tl_broadcast_to(tl_buf x, tl_buf y, const int64_t *in_dims, int64_t in_len,
                    const int64_t *out_dims, int64_t out_len) {
    int64_t stride[64], n;
    TL_TRY(bcast_strides("broadcast_to", x, y, in_dims, in_len, out_dims, out_len, stride, &n));
    const float *X = x->data; float *Y = y->data;
    if (n == 0) return TL_OK;
    int64_t inner = out_len ? out_dims[out_len - 1] : 1;
    if (out_len && stride[out_len - 1] == 1) {
        /* contiguous innermost axis: copy rows */
#pragma omp parallel for schedule(static) if (n > TL_PAR_MIN)
        for (int64_t r = 0; r < n / inner; r++)
            memcpy(Y + r * inner, X + src_offset(r * inner, out_dims, stride, out_len),
                   (size_t)inner * sizeof(float));
        return TL_OK;
    }
#pragma omp parallel for schedule(static) if (n > TL_PAR_MIN)
    for (int64_t o = 0; o < n; o++) Y[o] = X[src_offset(o, out_dims, stride, out_len)];
    return TL_OK;
}

int tl_sum_to(tl_buf x, tl_buf y, const int64_t *in_dims, int64_t in_len,
              const int64_t *out_dims, int64_t out_len) {
    /* x has the broadcast (big) shape in_dims, y the target shape out_dims */
    int64_t stride[64], n;
    TL_TRY(bcast_strides("sum_to", y, x, out_dims, out_len, in_dims, in_len, stride, &n));
    int64_t m = tl_buf_size(y);
    float *Y = y->data; const float *X = x->data;
    for (int64_t i = 0; i < m; i++) Y[i] = 0.0f;
    /* sequential in x's row-major order: every y element sums its sources in index order */
    for (int64_t o = 0; o < n; o++) Y[src_offset(o, in_dims, stride, in_len)] += X[o];
    return TL_OK;
}
