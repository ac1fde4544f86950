// conv_igemm.cuh: the implicit-GEMM convolution of conv_igemm.cu, as conv_pool.cu calls it.
#pragma once

#include "tl_internal.h"
#include "contract.h"

// 1 when the implicit-GEMM kernels take this convolution (transpose 0) or transposed
// convolution (transpose 1): not exact mode, one or two spatial axes, no empty axis, at most 64
// kernel taps, 32-bit index arithmetic enough, TORCHLEAN_CONV_IGEMM not 0
TL_HIDDEN bool tl_conv_igemm_takes(const tl_geom &G, int transpose);

// Y = conv(X, W) + bias, or conv_transpose(X, W) + bias; every element of Y written
TL_HIDDEN int tl_conv_igemm_forward(const char *op, const tl_geom &G, int transpose,
                                    const float *W, const float *bias, const float *X, float *Y);

// dW and dX from the upstream gradient g, every element of both written; for a convolution
// (transpose 0) also the bias gradient db, in the same pass over g as dW; a transposed
// convolution's db stays with the caller
TL_HIDDEN int tl_conv_igemm_backward(const char *op, const tl_geom &G, int transpose,
                                     const float *W, const float *X, const float *g, float *dW,
                                     float *db, float *dX);
