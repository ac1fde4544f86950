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

/* tl_transpose_vn(r): r[i][j] becomes r[j][i] for VN rows of the build's native vectors (simd16.h's
 * vn), a square that stays in registers where a 16 x 16 of v16 cannot (32 of AVX2's 16 ymm
 * registers: GCC moved its lanes through the stack). The AVX2 8 x 8 is the usual unpack,
 * shuffle and 128-bit permute, 24 single instructions; with AVX-512 it is tl_transpose16. */
#if VN == 16
#define tl_transpose_vn(r) tl_transpose16(r)
#elif VN == 8
static inline __attribute__((always_inline)) void tl_transpose_vn(vn r[8]) {
    vn t[8], u[8];
    for (int i = 0; i < 8; i += 2) {
        t[i] = __builtin_shufflevector(r[i], r[i + 1], 0, 8, 1, 9, 4, 12, 5, 13);
        t[i + 1] = __builtin_shufflevector(r[i], r[i + 1], 2, 10, 3, 11, 6, 14, 7, 15);
    }
    for (int i = 0; i < 8; i += 4)
        for (int k = 0; k < 2; k++) {
            u[i + 2 * k] = __builtin_shufflevector(t[i + k], t[i + k + 2], 0, 1, 8, 9, 4, 5, 12, 13);
            u[i + 2 * k + 1] = __builtin_shufflevector(t[i + k], t[i + k + 2], 2, 3, 10, 11, 6, 7, 14, 15);
        }
    for (int j = 0; j < 4; j++) {
        r[j] = __builtin_shufflevector(u[j], u[j + 4], 0, 1, 2, 3, 8, 9, 10, 11);
        r[j + 4] = __builtin_shufflevector(u[j], u[j + 4], 4, 5, 6, 7, 12, 13, 14, 15);
    }
}
#else
static inline __attribute__((always_inline)) void tl_transpose_vn(vn r[4]) {
    const vn t0 = __builtin_shufflevector(r[0], r[1], 0, 4, 1, 5),
             t1 = __builtin_shufflevector(r[0], r[1], 2, 6, 3, 7),
             t2 = __builtin_shufflevector(r[2], r[3], 0, 4, 1, 5),
             t3 = __builtin_shufflevector(r[2], r[3], 2, 6, 3, 7);
    r[0] = __builtin_shufflevector(t0, t2, 0, 1, 4, 5);
    r[1] = __builtin_shufflevector(t0, t2, 2, 3, 6, 7);
    r[2] = __builtin_shufflevector(t1, t3, 0, 1, 4, 5);
    r[3] = __builtin_shufflevector(t1, t3, 2, 3, 6, 7);
}
#endif

#endif
