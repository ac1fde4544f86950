// conv_pool.cu: the convolution and pooling family on CUDA.
//
// Not yet implemented on the GPU: every entry point returns TL_E_UNSUPPORTED with a message
// naming the op, so Python raises torchlean.BackendError instead of crashing, and the exported
// symbol set stays identical to the stub's (native/stub/conv_pool.c holds the reference).
#include "common.cuh"

extern "C" {

int tl_conv2d(tl_buf kernel, tl_buf bias, tl_buf input, tl_buf y, const int64_t *geom, int64_t geom_len) {
    return tl_fail(TL_E_UNSUPPORTED, "conv2d: not implemented on the CUDA backend yet (use TORCHLEAN_BACKEND=stub)");
}

int tl_conv(tl_buf kernel, tl_buf bias, tl_buf input, tl_buf y, const int64_t *geom, int64_t geom_len) {
    return tl_fail(TL_E_UNSUPPORTED, "conv: not implemented on the CUDA backend yet (use TORCHLEAN_BACKEND=stub)");
}

int tl_conv_backward(tl_buf kernel, tl_buf input, tl_buf grad_out, tl_buf dkernel, tl_buf dbias, tl_buf dinput, const int64_t *geom, int64_t geom_len) {
    return tl_fail(TL_E_UNSUPPORTED, "conv_backward: not implemented on the CUDA backend yet (use TORCHLEAN_BACKEND=stub)");
}

int tl_conv_transpose2d(tl_buf kernel, tl_buf bias, tl_buf input, tl_buf y, const int64_t *geom, int64_t geom_len) {
    return tl_fail(TL_E_UNSUPPORTED, "conv_transpose2d: not implemented on the CUDA backend yet (use TORCHLEAN_BACKEND=stub)");
}

int tl_conv_transpose(tl_buf kernel, tl_buf bias, tl_buf input, tl_buf y, const int64_t *geom, int64_t geom_len) {
    return tl_fail(TL_E_UNSUPPORTED, "conv_transpose: not implemented on the CUDA backend yet (use TORCHLEAN_BACKEND=stub)");
}

int tl_conv_transpose_backward(tl_buf kernel, tl_buf input, tl_buf grad_out, tl_buf dkernel, tl_buf dbias, tl_buf dinput, const int64_t *geom, int64_t geom_len) {
    return tl_fail(TL_E_UNSUPPORTED, "conv_transpose_backward: not implemented on the CUDA backend yet (use TORCHLEAN_BACKEND=stub)");
}

int tl_max_pool2d(tl_buf input, tl_buf y, const int64_t *geom, int64_t geom_len) {
    return tl_fail(TL_E_UNSUPPORTED, "max_pool2d: not implemented on the CUDA backend yet (use TORCHLEAN_BACKEND=stub)");
}

int tl_max_pool(tl_buf input, tl_buf y, const int64_t *geom, int64_t geom_len) {
    return tl_fail(TL_E_UNSUPPORTED, "max_pool: not implemented on the CUDA backend yet (use TORCHLEAN_BACKEND=stub)");
}

int tl_max_pool_backward(tl_buf input, tl_buf grad_out, tl_buf dinput, const int64_t *geom, int64_t geom_len) {
    return tl_fail(TL_E_UNSUPPORTED, "max_pool_backward: not implemented on the CUDA backend yet (use TORCHLEAN_BACKEND=stub)");
}

int tl_avg_pool2d(tl_buf input, tl_buf y, const int64_t *geom, int64_t geom_len) {
    return tl_fail(TL_E_UNSUPPORTED, "avg_pool2d: not implemented on the CUDA backend yet (use TORCHLEAN_BACKEND=stub)");
}

int tl_avg_pool(tl_buf input, tl_buf y, const int64_t *geom, int64_t geom_len) {
    return tl_fail(TL_E_UNSUPPORTED, "avg_pool: not implemented on the CUDA backend yet (use TORCHLEAN_BACKEND=stub)");
}

int tl_avg_pool_backward(tl_buf input, tl_buf grad_out, tl_buf dinput, const int64_t *geom, int64_t geom_len) {
    return tl_fail(TL_E_UNSUPPORTED, "avg_pool_backward: not implemented on the CUDA backend yet (use TORCHLEAN_BACKEND=stub)");
}

int tl_smooth_max_pool2d(tl_buf input, tl_buf y, const int64_t *geom, int64_t geom_len, double b) {
    return tl_fail(TL_E_UNSUPPORTED, "smooth_max_pool2d: not implemented on the CUDA backend yet (use TORCHLEAN_BACKEND=stub)");
}

int tl_smooth_max_pool(tl_buf input, tl_buf y, const int64_t *geom, int64_t geom_len, double b) {
    return tl_fail(TL_E_UNSUPPORTED, "smooth_max_pool: not implemented on the CUDA backend yet (use TORCHLEAN_BACKEND=stub)");
}

int tl_smooth_max_pool_backward(tl_buf input, tl_buf grad_out, tl_buf dinput, const int64_t *geom, int64_t geom_len, double b) {
    return tl_fail(TL_E_UNSUPPORTED, "smooth_max_pool_backward: not implemented on the CUDA backend yet (use TORCHLEAN_BACKEND=stub)");
}

}
