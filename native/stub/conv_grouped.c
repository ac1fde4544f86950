/* conv_grouped.c (stub): grouped and dilated convolution, one loop over the values of each
 * output around the formulas of native/common/conv_grouped.h (orders stated there). OpenMP
 * splits independent values only, so the thread count never changes a bit. */
#include <stdlib.h>
#include "stub.h"
#include "conv_grouped.h"
#include "generated/conv_grouped_kernels.h"

int tlk_conv_grouped_forward(const char *op, tl_buf kernel, tl_buf bias, tl_buf input, tl_buf y,
                             const tl_geom *geom, const int64_t *dilation, int64_t dilation_len,
                             int64_t groups) {
    tl_gconv C;
    TL_TRY(tl_gconv_make(op, geom, dilation, groups, &C));
    const float *w = kernel->data, *b = bias->data, *x = input->data;
    float *out = y->data;
    const int64_t planes = C.n * C.cout * C.groups, ctot = C.cout * C.groups;
#pragma omp parallel for schedule(static) if (planes * C.out_n * C.cin * C.k_n > TL_PAR_MIN)
    for (int64_t pl = 0; pl < planes; pl++) {
        float *yp = out + pl * C.out_n;
        for (int64_t o0 = 0; o0 < C.out[0]; o0++)
            for (int64_t o1 = 0; o1 < C.out[1]; o1++)
                for (int64_t o2 = 0; o2 < C.out[2]; o2++)
                    *yp++ = tl_gconv_forward(&C, w, b, x, pl / ctot, pl % ctot, o0, o1, o2);
    }
    return TL_OK;
}

int tlk_conv_grouped_backward(const char *op, tl_buf kernel, tl_buf input, tl_buf grad_out,
                              tl_buf dkernel, tl_buf dbias, tl_buf dinput, const tl_geom *geom,
                              const int64_t *dilation, int64_t dilation_len, int64_t groups) {
    tl_gconv C;
    TL_TRY(tl_gconv_make(op, geom, dilation, groups, &C));
    const float *w = kernel->data, *x = input->data, *g = grad_out->data;
    const int64_t ctot = C.cout * C.groups, nin = C.n * C.cin * C.groups * C.in_n;
    const int64_t nw = ctot * C.cin * C.k_n, chunks = (C.n * C.out_n + TLM_CHUNK - 1) / TLM_CHUNK;
    float *dx = dinput->data, *dw = dkernel->data, *db = dbias->data;
    const int64_t cin_tot = C.cin * C.groups;
#pragma omp parallel for schedule(static) if (nin * C.cout * C.k_n > TL_PAR_MIN)
    for (int64_t pl = 0; pl < nin / (C.in_n ? C.in_n : 1); pl++) {
        float *xp = dx + pl * C.in_n;
        for (int64_t q0 = 0; q0 < C.in[0]; q0++)
            for (int64_t q1 = 0; q1 < C.in[1]; q1++)
                for (int64_t q2 = 0; q2 < C.in[2]; q2++)
                    *xp++ = tl_gconv_dinput(&C, w, g, pl / cin_tot, pl % cin_tot, q0, q1, q2);
    }
#pragma omp parallel for schedule(static) if (nw * C.n * C.out_n > TL_PAR_MIN)
    for (int64_t j = 0; j < nw; j++) {
        tlm_sum4 acc;
        tlm_sum4_init(&acc);
        const int64_t kk = j % C.k_n, cl = (j / C.k_n) % C.cin, co = j / C.k_n / C.cin;
        const int64_t k2 = kk % C.k[2], k1 = (kk / C.k[2]) % C.k[1], k0 = kk / C.k[2] / C.k[1];
        for (int64_t n = 0; n < C.n; n++)
            tlm_sum4_add(&acc, tl_gconv_dkernel_sample(&C, x, g, co, cl, k0, k1, k2, n));
        dw[j] = tlm_sum4_result(&acc);
    }
#pragma omp parallel for schedule(static) if (ctot * C.n * C.out_n > TL_PAR_MIN)
    for (int64_t co = 0; co < ctot; co++) {
        tlm_sum4 acc;
        tlm_sum4_init(&acc);
        for (int64_t c = 0; c < chunks; c++) tlm_sum4_push(&acc, tl_gconv_dbias_chunk(&C, g, co, c));
        db[co] = tlm_sum4_result(&acc);
    }
    return TL_OK;
}
