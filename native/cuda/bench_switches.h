/* Benchmark switches: environment variables that choose between kernels of the same result
 * (a GEMM tile, a backward schedule), so a benchmark can time one against another.
 *
 * They are lab equipment, not product settings: the library `make cuda` builds reads none of them
 * (tl_bench_env is NULL, every choice its default, folded at compile time). `make cuda-bench`
 * builds the same sources with -DTL_BENCH_SWITCHES into build/cuda-bench/, where they are read;
 * point TORCHLEAN_LIB_DIR=build/cuda-bench at it to use them. The variables:
 *   TORCHLEAN_GEMM_EXACT_TILE     128x128, 96x128, 96x96 or 128x64: one tile for every exact GEMM
 *   TORCHLEAN_GEMM_EXACT_CHAIN    0: the exact GEMM runs no long-K chain kernel
 *   TORCHLEAN_GEMM_EXACT_SPLIT    0: the exact GEMM never splits K across blocks (in-kernel fold)
 *   TORCHLEAN_GEMM_EXACT_STAGE    0: the exact GEMM stages no operand; what the tiles cannot
 *                                 load (or store in pairs) as it lies runs the general kernel
 *   TORCHLEAN_ATTN_BWD            two (default), onepass, onepass64: attention's backward kernels
 *   TORCHLEAN_ATTN_FWD_KEYS       64 (default) or 32: keys per tile of attention's forward
 *   TORCHLEAN_CONV_GROUPED_LEGACY 1: grouped convolutions run the earlier per-value kernels
 *   TORCHLEAN_DW_ROWS             1, 2 or 4 (default): most rows per thread of a depthwise tile
 */
#ifndef TL_BENCH_SWITCHES_H
#define TL_BENCH_SWITCHES_H

#include <stdlib.h>

static inline const char *tl_bench_env(const char *name) {
#ifdef TL_BENCH_SWITCHES
    return getenv(name);
#else
    (void)name;
    return NULL;
#endif
}

/* whether switch `name` is set to "0" (a kernel that is on by default turned off) */
static inline int tl_bench_off(const char *name) {
    const char *v = tl_bench_env(name);
    return v && v[0] == '0' && !v[1];
}

#endif
