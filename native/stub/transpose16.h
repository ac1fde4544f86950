/* transpose16.h (stub): a 16 x 16 float transpose in vector registers, for kernels that read
 * 16 rows of 16 contiguous floats and need them as 16 columns (batchnorm's chunk lanes, the
 * GEMM's packing of a transposed B). GCC/Clang vector types: 4 levels of 16 two-source
 * shuffles, a vpermt2ps or cheaper each with AVX-512, narrower vectors without it. Moves
 * values only, so it changes no bit. */
#ifndef TL_STUB_TRANSPOSE16_H
#define TL_STUB_TRANSPOSE16_H

#include "simd16.h"

typedef v16 tl_v16;   /* simd16.h's 16-float vector */

/* Level b: rows i and i + b (i & b == 0) trade the halves that swap bit b of the row index
 * with bit b of the column index. Levels 8, 4, 2, 1 in turn (in any order) transpose r. */
#define TL_T16_SWAP(r, i, b)                                                                    \
    do {                                                                                        \
        tl_v16 lo_ = __builtin_shufflevector(r[i], r[i + b], TL_T16_LO##b),                     \
               hi_ = __builtin_shufflevector(r[i], r[i + b], TL_T16_HI##b);                     \
        r[i] = lo_; r[i + b] = hi_;                                                             \
    } while (0)
#define TL_T16_LO8 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23
#define TL_T16_HI8 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31
#define TL_T16_LO4 0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27
#define TL_T16_HI4 4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31
#define TL_T16_LO2 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29
#define TL_T16_HI2 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31
#define TL_T16_LO1 0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30
#define TL_T16_HI1 1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31

/* r[i][j] becomes r[j][i] */
static inline __attribute__((always_inline)) void tl_transpose16(tl_v16 r[16]) {
    for (int i = 0; i < 16; i++)
        if (!(i & 8)) TL_T16_SWAP(r, i, 8);
    for (int i = 0; i < 16; i++)
        if (!(i & 4)) TL_T16_SWAP(r, i, 4);
    for (int i = 0; i < 16; i++)
        if (!(i & 2)) TL_T16_SWAP(r, i, 2);
    for (int i = 0; i < 16; i++)
        if (!(i & 1)) TL_T16_SWAP(r, i, 1);
}

#endif
