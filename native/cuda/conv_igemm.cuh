// conv_igemm.cuh: the implicit-GEMM convolution of conv_igemm.cu, as conv_pool.cu calls it.
#pragma once

#include "tl_internal.h"
#include "contract.h"

// 1 when the implicit-GEMM kernels take this convolution: not exact mode, not transposed, one or
// two spatial axes, no empty axis, 32-bit index arithmetic enough, TORCHLEAN_CONV_IGEMM not 0
TL_HIDDEN bool tl_conv_igemm_takes(const tl_geom &G, int transpose);

// Y = conv(X, W) + bias, every element of Y written
TL_HIDDEN int tl_conv_igemm_forward(const char *op, const tl_geom &G, const float *W,
                                    const float *bias, const float *X, float *Y);

// dW and dX of the convolution from the upstream gradient g, every element of both written
// (the bias gradient stays with the caller)
TL_HIDDEN int tl_conv_igemm_backward(const char *op, const tl_geom &G, const float *W,
                                     const float *X, const float *g, float *dW, float *dX);
