/* linalg.c (stub): GEMM and the ops built on it (matmul, bmm, linear, their VJPs), MSE loss.
 *
 * One GEMM routine serves everything: C = op(A) op(B) (+ C when accumulating), with op(.) an
 * optional transpose read through strides. It is blocked like GotoBLAS: for each KC-deep slice
 * of k, a block of B is packed into NR-wide column panels (zero-padded), then each MC-row block
 * of A, packed into MR-row panels, runs through a register-tiled MR x NR micro-kernel written
 * with GCC/Clang vector types (8 x 48: 24 accumulators. On a Sapphire Rapids core, with two
 * 512-bit FMA units, 8 x 32 (16 accumulators) fed them 80% of the time, 8 x 48 99.7%; on Zen 4
 * both 100%: bench/results/raw/sgemm-tiles-h200host.txt. More rows instead (12 x 32) left a
 * short tile over for few rows that ran at half speed). With AVX2's 16 registers the tile is
 * 6 x 16 (12 accumulators), in the build's native vectors (simd16.h's vn): a tile of 16-float
 * vectors lives on the stack there. A single row block (m <= MC) packs B a
 * few panels at a time just before their tiles instead. Threads take bands of C (tl_sgemm) and
 * never wait for each other inside a product, so a thread that another process delays holds
 * up only its own band.
 * Three shapes skip the blocking, where packing would cost more than the product: narrow ones
 * (p <= 16 columns, gemm_narrow; for p <= 12 and m >= 16 with 16 rows of A transposed into the
 * vector lanes, so that a classifier head's 10 outputs fill every lane), short ones
 * (k <= SHORTK_MAX, gemm_shortk) and short-and-wide ones (8 < m <= 12 rows, gemm_tall: one
 * tile over all the rows, B read once in place, a few outputs' weight gradient).
 *
 * Determinism: each C element is owned by one task per k slice, slices run in increasing k,
 * and the micro-kernel adds products one k at a time with a fused multiply-add (acc =
 * fma(a, b, acc), VFMA below). So every C element is one fma chain in increasing k order from
 * 0 (or from C when accumulating) whatever the blocking, tile position or thread count: batched
 * and single-row calls agree bit for bit, and the chain is rule 3 of tl_math.h, the exact GEMM's.
 *
 * Exact mode (tl_exact()) follows native/common/tl_math.h, as CUDA's exact mode does: GEMMs go
 * to the exact GEMM (gemm.c: rule 3, one FMA chain per output; linear starts it at the bias),
 * which stays the reference; the chain is the same, so both modes' products agree. The
 * column sums of linear's bias gradient and the MSE sum are rule 4 in every mode (chunked
 * sequential sums, then the pairwise tree: as fast as a sequential sum here). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "stub.h"
#include "sgemm.h"
#include "transpose16.h"
#include "formulas/normalize.h"
#include "simd16.h"
#include "generated/linalg_kernels.h"
#ifdef _OPENMP
#include <omp.h>
#else
static inline int omp_get_num_threads(void) { return 1; }
static inline int omp_get_thread_num(void) { return 0; }
#endif

#define MR TL_SGEMM_MR /* micro-tile rows (8, or 6 below AVX-512): accumulators live in NV * MR registers */
/* (TL_GEMM_* override the blocking for experiments: bench/device/gemm_variants.sh) */
#ifndef TL_GEMM_NV
#if VN == 16
#define TL_GEMM_NV 3
#else
#define TL_GEMM_NV 1
#endif
#endif
#ifndef TL_GEMM_KC
#define TL_GEMM_KC 384
#endif
#ifndef TL_GEMM_MC
#define TL_GEMM_MC 192
#endif
#ifndef TL_GEMM_NC
#define TL_GEMM_NC 1920
#endif
#define NV TL_GEMM_NV /* 16-float vectors per micro-tile row */
#define NR (16 * NV) /* micro-tile columns */
#define KC TL_GEMM_KC /* longest k slice (slices are equal): a KC x NR B panel is 72 KiB, in L2 */
#define MC TL_GEMM_MC /* rows per packed A block (288 KiB at KC, in L2 beside a B panel): all of
                       * B streams from L3 once per block, 3 times less often than at 64 rows */
#define NC TL_GEMM_NC /* columns of B packed per pass (KC x NC floats = 2.8 MiB), 40 panels */
#define DIRECT_B_ROWS 64 /* B read in place for at most this many rows, */
#define DIRECT_B_MAX (1 << 17) /* and at most this many floats of B (512 KiB: in L2) */
#ifndef TL_GEMM_JIT
#define TL_GEMM_JIT 6
#endif
#define JIT_PANELS TL_GEMM_JIT /* one row block: B packed this many panels at a time (KC x 288: in L2) */
#define SMALL_GEMM 512 /* m n p at most this: plain loops */
#define LOCAL_PACK 4096 /* packing buffers up to this many floats live on the stack */
#define BATCH_PAR_MAX (1 << 22) /* batched products below this size: threads over the batch */
#define NVC(x) ((x) < NV ? (x) : NV) /* x vectors, at most NV (cases a build's tile never has) */

/* dst[l ldd + r] = src[r ld + l] (0 for rows r >= rows) for l, r < 16: a 16 x 16 block
 * transposed in registers, as VN x VN squares (one with AVX-512, four 8 x 8 with AVX2) */
static inline __attribute__((always_inline)) void
block16_t(const float *src, int64_t ld, int rows, float *dst, int64_t ldd) {
    for (int rh = 0; rh < 16; rh += VN)
        for (int lh = 0; lh < 16; lh += VN) {
            vn t[VN];
            for (int r = 0; r < VN; r++) t[r] = rh + r < rows ? vnload(src + (rh + r) * ld + lh) : (vn){0};
            tl_transpose_vn(t);
            for (int l = 0; l < VN; l++) vnstore(dst + (lh + l) * ldd + rh, t[l]);
        }
}


/* C[0..mr, 0..nr) (row stride ldc) = (zero ? 0 : C) + Ap^T Bp over kc steps.
 * Ap: kc groups of MR floats (row r of step k at k*MR + r); Bp: kc rows of >= 16 * nv floats,
 * ldb apart (NR for a packed panel, the row stride when B is read in place).
 * mr and nv (vectors per row: nr / 16 rounded up) are constants at each call site after
 * inlining, so the accumulators become registers (native vectors, VPV per 16 floats). */
static inline __attribute__((always_inline)) void
ukernel(const int mr, const int nv, int64_t kc, const float *restrict Ap, const float *restrict Bp,
        int64_t ldb, float *C, int64_t ldc, int nr, int zero) {
    const int nw = nv * VPV;
    vn acc[MR][NV * VPV];
    float tmp[NR];
    for (int r = 0; r < mr; r++) {
        for (int w = 0; w < nw; w++) acc[r][w] = (vn){0};
        if (zero) continue;
        if (nr == 16 * nv) {
            for (int w = 0; w < nw; w++) acc[r][w] = vnload(C + r * ldc + VN * w);
        } else {
            memset(tmp, 0, sizeof tmp);
            memcpy(tmp, C + r * ldc, (size_t)nr * sizeof(float));
            for (int w = 0; w < nw; w++) acc[r][w] = vnload(tmp + VN * w);
        }
    }
    for (int64_t k = 0; k < kc; k++) {
        vn b[NV * VPV];
        for (int w = 0; w < nw; w++) b[w] = vnload(Bp + k * ldb + VN * w);
        for (int r = 0; r < mr; r++) {
            float a = Ap[k * MR + r];
            for (int w = 0; w < nw; w++) acc[r][w] = VNFMA(a, b[w], acc[r][w]);
        }
    }
    for (int r = 0; r < mr; r++) {
        if (nr == 16 * nv) {
            for (int w = 0; w < nw; w++) vnstore(C + r * ldc + VN * w, acc[r][w]);
        } else {
            for (int w = 0; w < nw; w++) vnstore(tmp + VN * w, acc[r][w]);
            memcpy(C + r * ldc, tmp, (size_t)nr * sizeof(float));
        }
    }
}

#define UK_CASE(R)                                                                      \
    case R:                                                                             \
        if (nr > 32) ukernel(R, NVC(3), kc, Ap, Bp, ldb, C, ldc, nr, zero);             \
        else if (nr > 16) ukernel(R, NVC(2), kc, Ap, Bp, ldb, C, ldc, nr, zero);        \
        else ukernel(R, 1, kc, Ap, Bp, ldb, C, ldc, nr, zero);                          \
        break;

/* one micro-tile of mr <= MR rows and nr <= NR columns */
static void micro_tile(int mr, int64_t kc, const float *Ap, const float *Bp, int64_t ldb, float *C,
                       int64_t ldc, int nr, int zero) {
    switch (mr) {
#if MR == 8
        UK_CASE(8) UK_CASE(7)
#endif
        UK_CASE(6) UK_CASE(5) UK_CASE(4) UK_CASE(3) UK_CASE(2) UK_CASE(1)
    }
}

/* pack rows [i0, i0+mc) x k [k0, k0+kc) of A (element (i, k) at A[i*ars + k*acs]) into
 * MR-row panels, rows past mc zero-filled */
static void pack_a(const float *A, int64_t ars, int64_t acs, int64_t i0, int64_t mc, int64_t k0,
                   int64_t kc, float *Ap) {
    if (ars == 1) {
        /* A stored transposed: each k's rows are contiguous. k by k, the block's whole row
         * segment is read once (the hardware prefetcher streams it) and its MR-row pieces
         * copied as vectors into their panels (one panel, k inner, read each cache line
         * twice, half of it per panel, and copied a float at a time) */
        const int64_t mw = mc / MR * MR;
        for (int64_t k = 0; k < kc; k++) {
            const float *a = A + i0 + (k0 + k) * acs;
            for (int64_t ip = 0; ip < mw; ip += MR) memcpy(Ap + ip * kc + k * MR, a + ip, MR * sizeof(float));
            if (mw < mc)
                for (int64_t r = 0; r < MR; r++) Ap[mw * kc + k * MR + r] = mw + r < mc ? a[mw + r] : 0.0f;
        }
        return;
    }
    for (int64_t ip = 0; ip < mc; ip += MR, Ap += MR * kc) {
        int64_t mr = mc - ip < MR ? mc - ip : MR;
        /* rows contiguous in k (the usual layout): 16 k's of the panel's rows go through a
         * register transpose (a float at a time, the strided stores cost about 6% of a large
         * product), the k's past the last 16 one at a time */
#if MR <= VN
        /* VN k's of the panel's MR rows a square (zero rows past mr) */
        const int64_t kv = acs == 1 ? kc / VN * VN : 0;
        for (int64_t kb = 0; kb < kv; kb += VN) {
            vn t[VN];
            for (int l = 0; l < VN; l++)
                t[l] = l < mr ? vnload(A + (i0 + ip + l) * ars + k0 + kb) : (vn){0};
            tl_transpose_vn(t);
            for (int l = 0; l < VN; l++) memcpy(Ap + (kb + l) * MR, &t[l], MR * sizeof(float));
        }
#else   /* (4-float vectors: a 16 x 16 transpose of v16s) */
        const int64_t kv = acs == 1 ? kc / 16 * 16 : 0;
        for (int64_t kb = 0; kb < kv; kb += 16) {
            tl_v16 t[16];
            for (int l = 0; l < 16; l++)
                t[l] = l < mr ? vload(A + (i0 + ip + l) * ars + k0 + kb) : (tl_v16){0};
            tl_transpose16(t);
            for (int l = 0; l < 16; l++) memcpy(Ap + (kb + l) * MR, &t[l], MR * sizeof(float));
        }
#endif
        for (int64_t r = 0; r < MR; r++) {
            if (r >= mr) {
                for (int64_t k = kv; k < kc; k++) Ap[k * MR + r] = 0.0f;
                continue;
            }
            const float *a = A + (i0 + ip + r) * ars + k0 * acs;
            for (int64_t k = kv; k < kc; k++) Ap[k * MR + r] = a[k * acs];
        }
    }
}

/* pack NR-column panel j0 (nr valid columns) x k [k0, k0+kc) of B (element (k, j) at
 * B[k*brs + j*bcs]), columns past nr zero-filled */
static void pack_b(const float *B, int64_t brs, int64_t bcs, int64_t k0, int64_t kc, int64_t j0,
                   int64_t nr, float *Bp) {
    if (bcs == 1) {
        if (nr == NR) /* whole panels: NV vector copies per k (a memcpy call costs more) */
            for (int64_t k = 0; k < kc; k++)
                for (int v = 0; v < NV; v++)
                    vstore(Bp + k * NR + 16 * v, vload(B + (k0 + k) * brs + j0 + 16 * v));
        else
            for (int64_t k = 0; k < kc; k++) {
                const float *b = B + (k0 + k) * brs + j0;
                float *d = Bp + k * NR;
                memcpy(d, b, (size_t)nr * sizeof(float));
                for (int64_t j = nr; j < NR; j++) d[j] = 0.0f;
            }
    } else {
        /* op(B)'s columns contiguous in k (a transposed B such as linear's weight): whole
         * 16 x 16 tiles go through a register transpose, the rest one float at a time */
        const int64_t jv = brs == 1 ? nr / 16 * 16 : 0, kv = kc / 16 * 16;
        for (int64_t jb = 0; jb < jv; jb += 16)
            for (int64_t kb = 0; kb < kv; kb += 16)
                block16_t(B + (j0 + jb) * bcs + k0 + kb, bcs, 16, Bp + kb * NR + jb, NR);
        for (int64_t j = 0; j < NR; j++) {
            if (j >= nr) {
                for (int64_t k = 0; k < kc; k++) Bp[k * NR + j] = 0.0f;
                continue;
            }
            const float *b = B + (j0 + j) * bcs + k0 * brs;
            for (int64_t k = j < jv ? kv : 0; k < kc; k++) Bp[k * NR + j] = b[k * brs];
        }
    }
}

/* pack columns [j0, j0+nc) (nc <= JIT_PANELS * NR) x k [k0, k0+kc) of B into consecutive
 * NR-column panels (kc * NR floats apart), the last zero-filled past nc. Rows of B contiguous
 * in j are read k by k across all the panels (up to 1 KiB in a row, which the hardware
 * prefetcher streams, rather than 128 bytes a row, panel after panel). */
static void pack_b_group(const float *B, int64_t brs, int64_t bcs, int64_t k0, int64_t kc,
                         int64_t j0, int64_t nc, float *Bp) {
    const int64_t whole = bcs == 1 ? nc / NR : 0;
    for (int64_t k = 0; k < kc; k++) {
        const float *b = B + (k0 + k) * brs + j0;
        for (int64_t g = 0; g < whole; g++)
            for (int v = 0; v < NV; v++)
                vstore(Bp + g * kc * NR + k * NR + 16 * v, vload(b + g * NR + 16 * v));
    }
    for (int64_t j = whole * NR; j < nc; j += NR)
        pack_b(B, brs, bcs, k0, kc, j0 + j, nc - j < NR ? nc - j : NR, Bp + j / NR * kc * NR);
}

/* k slice length: n split into equal slices of at most KC (no short tail slice) */
static int64_t kslice(int64_t n) {
    int64_t slices = (n + KC - 1) / KC;
    return (n + slices - 1) / slices;
}

/* floats of the packed A block (kc x mc rounded up to whole MR-row panels) and the room after
 * it, a multiple of 16 floats so that what follows (B's panels) starts on a 64-byte line: a
 * panel row's vector loads then never straddle two lines */
static int64_t a_region(int64_t kc, int64_t mc) {
    return (kc * ((mc + MR - 1) / MR * MR) + 15) / 16 * 16;
}

/* C (m, p) (+)= op(A) op(B) on one thread: for each NC-column pass and KC-deep k slice, B's
 * panels are packed (or, for few rows, read in place), then each MC-row block of A is packed
 * and multiplied into its C tiles. Bp: room for kslice(n) x NC (rounded to NR) floats, or NULL
 * when jit_b; Ap: room for kslice(n) x MC (rounded to MR), then for jit_b JIT_PANELS (or as
 * many as p has; one, for partial panels, when in_place) KC x NR panels of B. jit_b: one row
 * block, B packed a group of panels at a time before their tiles; in_place (with jit_b): B's
 * whole-vector panels read where they are. */
/* With Apre (tl_sgemm_pack_a's panels of the whole A, m_pad = m rounded up to MR rows; this
 * call's row 0 is the packed A's row row0) nothing of A is packed here. */
static void gemm_serial(const float *A, int64_t ars, int64_t acs, const float *B, int64_t brs,
                        int64_t bcs, float *C, int64_t ldc, int64_t m, int64_t n, int64_t p,
                        int accumulate, int jit_b, int in_place, float *Bp, float *Ap,
                        const float *Apre, int64_t m_pad, int64_t row0) {
    const int64_t kcmax = kslice(n), mcmax = m < MC ? m : MC;
    float *Bt = Ap + a_region(kcmax, Apre ? 0 : mcmax); /* B's panels packed just in time */
    for (int64_t jc = 0; jc < p; jc += NC) {
        const int64_t nc = p - jc < NC ? p - jc : NC;
        for (int64_t pc = 0; pc < n; pc += kcmax) {
            const int64_t kc = n - pc < kcmax ? n - pc : kcmax;
            const int zero = pc == 0 && !accumulate;
            if (!jit_b) /* JIT_PANELS at a time: B's rows read 1 KiB at a time */
                for (int64_t j = 0; j < nc; j += JIT_PANELS * NR)
                    pack_b_group(B, brs, bcs, pc, kc, jc + j,
                                 nc - j < JIT_PANELS * NR ? nc - j : JIT_PANELS * NR, Bp + (j / NR) * kc * NR);
            for (int64_t i0 = 0; i0 < m; i0 += MC) {
                const int64_t mc = m - i0 < MC ? m - i0 : MC;
                const float *Ab = Apre ? Apre + pc * m_pad + (row0 + i0) * kc : Ap;
                if (!Apre) pack_a(A, ars, acs, i0, mc, pc, kc, Ap);
                for (int64_t j = 0; j < nc; j += NR) {
                    const int nr = (int)(nc - j < NR ? nc - j : NR);
                    const float *bp;
                    int64_t ldb = NR;
                    if (!jit_b) {
                        bp = Bp + (j / NR) * kc * NR;
                    } else if (in_place && nr % 16 == 0) {
                        bp = B + pc * brs + jc + j; ldb = brs;
                    } else if (in_place) {
                        pack_b(B, brs, bcs, pc, kc, jc + j, nr, Bt); bp = Bt;
                    } else {
                        const int64_t g = (j / NR) % JIT_PANELS;
                        if (g == 0)
                            pack_b_group(B, brs, bcs, pc, kc, jc + j,
                                         nc - j < JIT_PANELS * NR ? nc - j : JIT_PANELS * NR, Bt);
                        bp = Bt + g * kc * NR;
                    }
                    for (int64_t ip = 0; ip < mc; ip += MR)
                        micro_tile((int)(mc - ip < MR ? mc - ip : MR), kc, Ab + ip * kc, bp, ldb,
                                   C + (i0 + ip) * ldc + jc + j, ldc, nr, zero);
                }
            }
        }
    }
}

/* Each thread's heap packing buffer, kept from product to product (grown when a product needs
 * more, freed when the thread ends): a fresh multi-MiB malloc per product came from mmap
 * whenever glibc's threshold said so, and each of its pages then faulted on first touch
 * (1024^3 on 2 threads: 333 faults a product). 64-byte aligned. */
static pthread_key_t pack_key;
static pthread_once_t pack_once = PTHREAD_ONCE_INIT;
static __thread float *pack_buf;
static __thread size_t pack_cap;   /* floats */

static void pack_key_make(void) { pthread_key_create(&pack_key, free); }

static float *pack_room(size_t floats) {
    if (floats <= pack_cap) return pack_buf;
    pthread_once(&pack_once, pack_key_make);
    float *p = (float *)aligned_alloc(64, (floats * sizeof(float) + 63) / 64 * 64);
    if (!p) return NULL;
    free(pack_buf);
    pack_buf = p;
    pack_cap = floats;
    pthread_setspecific(pack_key, p);
    return p;
}

/* gemm_serial with its packing buffers: on the stack when small (malloc would cost as much as
 * the product), else the thread's kept buffer. Returns nonzero when the heap ran out. */
static int gemm_packed(const float *A, int64_t ars, int64_t acs, const float *B, int64_t brs,
                       int64_t bcs, float *C, int64_t ldc, int64_t m, int64_t n, int64_t p,
                       int accumulate, const float *Apre, int64_t m_pad, int64_t row0) {
    /* one block of rows (m <= MC) uses each B panel once: JIT_PANELS panels at a time are
     * packed just before their tiles into a buffer that stays in L2 (or read in place,
     * gemm_serial), rather than all of B ahead to be read back from L3 */
    const int jit_b = m <= MC;
    /* B's whole-vector panels read in place, unpacked: with one tile row (each B value used
     * once), or a few (packing would cost as much as the product) when all of B fits in L2
     * (larger B rows p floats apart, p a power of two, fall in a few cache sets: a panel read
     * by 2 or more tiles then comes back from memory each time, 37% of peak at
     * 64 x 576 x 65536) */
    const int in_place = bcs == 1 && (m <= MR || (m <= DIRECT_B_ROWS && n * p <= DIRECT_B_MAX));
    const int64_t kcmax = kslice(n), mcmax = m < MC ? m : MC, ncmax = p < NC ? p : NC;
    /* A's panels (none when packed beforehand) and JIT_PANELS panels of B (fewer when p is;
     * one, for partial panels, when B is read in place) */
    const int64_t jitp = in_place ? 1 : (ncmax + NR - 1) / NR < JIT_PANELS ? (ncmax + NR - 1) / NR
                                                                          : JIT_PANELS;
    const int64_t na = a_region(kcmax, Apre ? 0 : mcmax) + (jit_b ? kcmax * NR * jitp : 0);
    const int64_t nb = jit_b ? 0 : kcmax * ((ncmax + NR - 1) / NR * NR);
    /* (na a multiple of 16 floats: B's panels start on a cache line, as the buffer does) */
    float local[LOCAL_PACK] __attribute__((aligned(64)));
    float *buf = na + nb <= LOCAL_PACK ? local : pack_room((size_t)(na + nb));
    if (!buf) return 1;
    gemm_serial(A, ars, acs, B, brs, bcs, C, ldc, m, n, p, accumulate, jit_b, jit_b && in_place,
                jit_b ? NULL : buf + na, buf, Apre, m_pad, row0);
    return 0;
}

/* ---- narrow products: p <= 16 output columns, A's rows contiguous in k ----
 * The blocked path packs A into MR-row panels (a transpose of all of A) and B into NR = 48
 * wide panels, so for a few outputs per row (a classifier head: p = 10, n = 8192) packing
 * costs more than the product. Here op(B) is packed once into rows of one 16-float vector
 * per k (zero past p), and each row's A value is broadcast straight from A: every output is
 * still one fma chain in increasing k from 0 (or from C), the same bits as the blocked path. */
#if VN == 16
#define NARROW_ROWS 8   /* rows per register tile: 8 accumulators beside the B vector */
#else
#define NARROW_ROWS 6   /* (6 x VPV accumulators beside B's VPV vectors: 16 registers) */
#endif
#define NARROW_KC 256   /* k per pass: a 16 KiB slice of packed B stays in L1 for all rows */

/* C rows [0, mr) (+)= A rows [0, mr) x the k slice [k0, k1) of the packed Bp */
static inline __attribute__((always_inline)) void
narrow_tile(const int mr, const float *A, int64_t ars, const float *Bp, int64_t k0, int64_t k1,
            float *C, int64_t ldc, int p, int zero) {
    vn acc[NARROW_ROWS][VPV];
    float tmp[16] = {0};
    for (int r = 0; r < mr; r++) {
        if (!zero) memcpy(tmp, C + r * ldc, (size_t)p * sizeof(float));
        for (int w = 0; w < VPV; w++) acc[r][w] = vnload(tmp + VN * w);
    }
    for (int64_t k = k0; k < k1; k++) {
        vn b[VPV];
        for (int w = 0; w < VPV; w++) b[w] = vnload(Bp + k * 16 + VN * w);
        for (int r = 0; r < mr; r++) {
            const float a = A[r * ars + k];
            for (int w = 0; w < VPV; w++) acc[r][w] = VNFMA(a, b[w], acc[r][w]);
        }
    }
    for (int r = 0; r < mr; r++) {
        for (int w = 0; w < VPV; w++) vnstore(tmp + VN * w, acc[r][w]);
        memcpy(C + r * ldc, tmp, (size_t)p * sizeof(float));
    }
}

#define NT_CASE(R) case R: narrow_tile(R, Ai, ars, Bp, k0, k1, Ci, ldc, p, zero); break;

/* rows [i0, i1) of the narrow product, k slice by k slice (C carries each chain between
 * slices, which leaves its bits alone) */
static void narrow_rows(const float *A, int64_t ars, const float *Bp, float *C, int64_t ldc,
                        int64_t i0, int64_t i1, int64_t n, int p, int accumulate) {
    for (int64_t k0 = 0; k0 < n; k0 += NARROW_KC) {
        const int64_t k1 = n - k0 < NARROW_KC ? n : k0 + NARROW_KC;
        const int zero = k0 == 0 && !accumulate;
        for (int64_t i = i0; i < i1; i += NARROW_ROWS) {
            const float *Ai = A + i * ars;
            float *Ci = C + i * ldc;
            switch (i1 - i < NARROW_ROWS ? (int)(i1 - i) : NARROW_ROWS) {
#if NARROW_ROWS == 8
            NT_CASE(8) NT_CASE(7)
#endif
            NT_CASE(6) NT_CASE(5) NT_CASE(4) NT_CASE(3) NT_CASE(2) NT_CASE(1)
            }
        }
    }
}

/* TORCHLEAN_STUB_GEMM_OLDER_PATHS=1 turns off the narrow-by-rows and short-and-wide paths
 * below (tests compare their bits with the paths those products took before them); read once */
static int older_paths_only(void) {
    static volatile int flag = -1;
    if (flag < 0) {
        const char *v = getenv("TORCHLEAN_STUB_GEMM_OLDER_PATHS");
        flag = v && strcmp(v, "1") == 0;
    }
    return flag;
}

/* ---- narrow products with the rows as the lanes: p <= NARROW_T_MAXP ----
 * With 16 rows per vector instead of 16 columns, a classifier head's p = 10 outputs fill every
 * lane (the row tiles above fill 10 of 16): a block of 16 rows of A is transposed, NARROW_T_KC
 * k's at a time, into k-major vectors (16 x 16 register transposes), and each k adds
 * broadcast(B[k][j]) x A[rows][k] into column j's accumulator, j < p. Each output is still the
 * same fma chain in increasing k from 0 (or from C): the product's bits are the row tiles'. */
#define NARROW_T_MAXP 12  /* more columns: the transposes cost more than the lanes they fill */
#define NARROW_T_MINM 16  /* fewer rows: lanes left empty */
#define NARROW_T_KC 128   /* k per transposed block: 8 KiB beside 8 KiB of packed B, in L1 */

/* acc (column j's 16 rows in Ct + 16 j) += At (kc x 16 rows) x Bp's k rows, j < p; below
 * AVX-512 the 16 rows go through in VN-row parts (p accumulators each) */
static inline __attribute__((always_inline)) void
narrow_t_tile(const int p, const float *restrict At, const float *restrict Bp, int64_t kc,
              float *restrict Ct) {
    for (int h = 0; h < 16; h += VN) {
        vn acc[16];
        for (int j = 0; j < p; j++) acc[j] = vnload(Ct + 16 * j + h);
        for (int64_t k = 0; k < kc; k++) {
            const vn a = vnload(At + 16 * k + h);
            const float *b = Bp + 16 * k;
            for (int j = 0; j < p; j++) acc[j] = VNFMA(b[j], a, acc[j]);
        }
        for (int j = 0; j < p; j++) vnstore(Ct + 16 * j + h, acc[j]);
    }
}

#define NTT_CASE(P) case P: narrow_t_tile(P, At, Bp + k0 * 16, kc, Ct); break;

/* rows [i0, i1) of the narrow product with rows as lanes, 16 rows at a time */
static void narrow_t_rows(const float *A, int64_t ars, const float *Bp, float *C, int64_t ldc,
                          int64_t i0, int64_t i1, int64_t n, int p, int accumulate) {
    float At[NARROW_T_KC * 16] __attribute__((aligned(64)));
    float Ct[16 * 16] __attribute__((aligned(64)));
    for (int64_t i = i0; i < i1; i += 16) {
        const int rows = i1 - i < 16 ? (int)(i1 - i) : 16;
        const float *Ai = A + i * ars;
        for (int j = 0; j < p; j++)
            for (int l = 0; l < 16; l++) Ct[16 * j + l] = accumulate && l < rows ? C[(i + l) * ldc + j] : 0.0f;
        for (int64_t k0 = 0; k0 < n; k0 += NARROW_T_KC) {
            const int64_t kc = n - k0 < NARROW_T_KC ? n - k0 : NARROW_T_KC, kv = kc / 16 * 16;
            if (rows == 16) /* (the full block without the row test: the common case) */
                for (int64_t kb = 0; kb < kv; kb += 16) block16_t(Ai + k0 + kb, ars, 16, At + kb * 16, 16);
            else
                for (int64_t kb = 0; kb < kv; kb += 16) block16_t(Ai + k0 + kb, ars, rows, At + kb * 16, 16);
            for (int64_t k = kv; k < kc; k++)
                for (int l = 0; l < 16; l++) At[k * 16 + l] = l < rows ? Ai[l * ars + k0 + k] : 0.0f;
            switch (p) {
            NTT_CASE(1) NTT_CASE(2) NTT_CASE(3) NTT_CASE(4) NTT_CASE(5) NTT_CASE(6)
            NTT_CASE(7) NTT_CASE(8) NTT_CASE(9) NTT_CASE(10) NTT_CASE(11) NTT_CASE(12)
            }
        }
        for (int l = 0; l < rows; l++)
            for (int j = 0; j < p; j++) C[(i + l) * ldc + j] = Ct[16 * j + l];
    }
}

/* C (m, p) (+)= A @ op(B) for p <= 16 and A's rows contiguous in k: op(B) packed once (the
 * threads share the packing, then take bands of rows) */
static int gemm_narrow(const float *A, int64_t ars, const float *B, int64_t brs, int64_t bcs,
                       float *C, int64_t ldc, int64_t m, int64_t n, int64_t p, int accumulate,
                       int may_thread) {
    float *Bp = (float *)malloc((size_t)n * 16 * sizeof(float));
    if (!Bp) return 1;
    const int by_rows = p <= NARROW_T_MAXP && m >= NARROW_T_MINM && !older_paths_only();
#pragma omp parallel if (may_thread && m * n * p > 8 * TL_PAR_MIN)
    {
        if (brs == 1) {
            /* op(B)'s columns contiguous in k (linear's weight): 16 k's at a time through a
             * register transpose, the k's past the last 16 one at a time */
            const int64_t kv = n / 16 * 16;
#pragma omp for schedule(static)
            for (int64_t kb = 0; kb < kv; kb += 16) block16_t(B + kb, bcs, (int)p, Bp + kb * 16, 16);
#pragma omp single
            for (int64_t k = kv; k < n; k++)
                for (int64_t j = 0; j < 16; j++) Bp[k * 16 + j] = j < p ? B[k + j * bcs] : 0.0f;
        } else {
#pragma omp for schedule(static)
            for (int64_t k = 0; k < n; k++)
                for (int64_t j = 0; j < 16; j++) Bp[k * 16 + j] = j < p ? B[k * brs + j * bcs] : 0.0f;
        }
        int64_t T = omp_get_num_threads(), me = omp_get_thread_num();
        const int64_t unit = by_rows ? 16 : NARROW_ROWS, units = (m + unit - 1) / unit;
        int64_t lo = units * me / T * unit, hi = units * (me + 1) / T * unit;
        if (hi > m) hi = m;
        if (lo < hi && by_rows) narrow_t_rows(A, ars, Bp, C, ldc, lo, hi, n, (int)p, accumulate);
        else if (lo < hi) narrow_rows(A, ars, Bp, C, ldc, lo, hi, n, (int)p, accumulate);
    }
    free(Bp);
    return 0;
}

/* ---- short products: k <= SHORTK_MAX, B's rows contiguous in j ----
 * With a few k's per output (a classifier head's input gradient: n = 10, p = 8192) the
 * blocked path's packing and its micro-tile's setup outweigh the few fmas per output. Here
 * nothing is packed: a tile of rows times 64 columns keeps its accumulators in registers for
 * all n k's, B's rows read in place; each output is the same fma chain in increasing k from 0
 * (or from C). */
#define SHORTK_MAX 16
#define SK_ROWS 4   /* rows per tile */
#if VN == 16
#define SK_VECS 4   /* 16-float vectors per tile row */
#else
#define SK_VECS 1   /* (4 x VPV accumulators: 16 registers hold no more) */
#endif

static inline __attribute__((always_inline)) void
shortk_tile(const int mr, const int nv, const float *A, int64_t ars, int64_t acs, const float *B,
            int64_t brs, float *C, int64_t ldc, int64_t n, int zero) {
    const int nw = nv * VPV;
    vn acc[SK_ROWS][SK_VECS * VPV];
    for (int r = 0; r < mr; r++)
        for (int w = 0; w < nw; w++) acc[r][w] = zero ? (vn){0} : vnload(C + r * ldc + VN * w);
    for (int64_t k = 0; k < n; k++) {
        vn b[SK_VECS * VPV];
        for (int w = 0; w < nw; w++) b[w] = vnload(B + k * brs + VN * w);
        for (int r = 0; r < mr; r++) {
            float a = A[r * ars + k * acs];
            for (int w = 0; w < nw; w++) acc[r][w] = VNFMA(a, b[w], acc[r][w]);
        }
    }
    for (int r = 0; r < mr; r++)
        for (int w = 0; w < nw; w++) vnstore(C + r * ldc + VN * w, acc[r][w]);
}

#define SK_CASE(R)                                                                              \
    case R:                                                                                     \
        if (nv == SK_VECS) shortk_tile(R, SK_VECS, Ai, ars, acs, Bj, brs, Cij, ldc, n, zero);   \
        else shortk_tile(R, 1, Ai, ars, acs, Bj, brs, Cij, ldc, n, zero);                       \
        break;

/* C rows [i0, i1) x columns [j0, j1), one scalar fma chain per output in increasing k from 0
 * (zero) or from C: the columns past a product's last whole vector */
static void chain_block(const float *A, int64_t ars, int64_t acs, const float *B, int64_t brs,
                        float *C, int64_t ldc, int64_t i0, int64_t i1, int64_t j0, int64_t j1,
                        int64_t n, int zero) {
    for (int64_t j = j0; j < j1; j++)
        for (int64_t i = i0; i < i1; i++) {
            float c = zero ? 0.0f : C[i * ldc + j];
            for (int64_t k = 0; k < n; k++) c = __builtin_fmaf(A[i * ars + k * acs], B[k * brs + j], c);
            C[i * ldc + j] = c;
        }
}

/* C rows [i0, i1) x columns [j0, j1) of the short product: 64 columns at a time, then single
 * vectors, then a scalar chain per column past the last whole vector */
static void shortk_block(const float *A, int64_t ars, int64_t acs, const float *B, int64_t brs,
                         float *C, int64_t ldc, int64_t i0, int64_t i1, int64_t j0, int64_t j1,
                         int64_t n, int zero) {
    int64_t j = j0;
    for (; j + 16 <= j1; j += 16 * (j + 16 * SK_VECS <= j1 ? SK_VECS : 1)) {
        const int nv = j + 16 * SK_VECS <= j1 ? SK_VECS : 1;
        const float *Bj = B + j;
        for (int64_t i = i0; i < i1; i += SK_ROWS) {
            const float *Ai = A + i * ars;
            float *Cij = C + i * ldc + j;
            switch (i1 - i < SK_ROWS ? (int)(i1 - i) : SK_ROWS) { SK_CASE(4) SK_CASE(3) SK_CASE(2) SK_CASE(1) }
        }
    }
    chain_block(A, ars, acs, B, brs, C, ldc, i0, i1, j, j1, n, zero);
}

/* C (m, p) (+)= op(A) (m, n) @ B (n, p) for n <= SHORTK_MAX and B's rows contiguous: threads
 * take bands of 64 columns when there are enough of them, else bands of rows */
static void gemm_shortk(const float *A, int64_t ars, int64_t acs, const float *B, int64_t brs,
                        float *C, int64_t ldc, int64_t m, int64_t n, int64_t p, int accumulate,
                        int may_thread) {
    const int64_t cw = 16 * SK_VECS;
#pragma omp parallel if (may_thread && m * n * p > 8 * TL_PAR_MIN)
    {
        int64_t T = omp_get_num_threads(), me = omp_get_thread_num();
        if (p / cw >= T) {
            int64_t units = (p + cw - 1) / cw, lo = units * me / T * cw, hi = units * (me + 1) / T * cw;
            if (hi > p) hi = p;
            if (lo < hi) shortk_block(A, ars, acs, B, brs, C, ldc, 0, m, lo, hi, n, !accumulate);
        } else {
            int64_t lo = m * me / T, hi = m * (me + 1) / T;
            if (lo < hi) shortk_block(A, ars, acs, B, brs, C, ldc, lo, hi, 0, p, n, !accumulate);
        }
    }
}

/* ---- short-and-wide products: MR < m <= TALL_MAX rows, B's rows contiguous in j ----
 * A linear layer's weight gradient for a few outputs (dW = dY^T X: m = 10, p = 8192) runs two
 * tiles over each panel of B in the blocked path (8 rows and 2), so B is packed first (a copy
 * of all of B). Here one tile holds all m rows for 32 columns over all of k, so each value of
 * B is read once, in place, and A is broadcast from where it is: each output is the same fma
 * chain in increasing k from 0 (or from C). */
#define TALL_MAX 12  /* rows x TALL_W vectors of accumulators: at most 24 registers */
#if VN == 16
#define TALL_W 2     /* native vectors per tile row (32 columns) */
#else
#define TALL_W 1     /* (12 accumulators of VN columns: 16 registers hold no more) */
#endif
#define TALL_MINP 64 /* fewer columns: the blocked path */

static inline __attribute__((always_inline)) void
tall_tile(const int mr, const int nv, const float *A, int64_t ars, int64_t acs, const float *B,
          int64_t brs, float *C, int64_t ldc, int64_t n, int zero) {
    vn acc[TALL_MAX][TALL_W];
    for (int r = 0; r < mr; r++)
        for (int v = 0; v < nv; v++) acc[r][v] = zero ? (vn){0} : vnload(C + r * ldc + VN * v);
    for (int64_t k = 0; k < n; k++) {
        vn b[TALL_W];
        for (int v = 0; v < nv; v++) b[v] = vnload(B + k * brs + VN * v);
        for (int r = 0; r < mr; r++) {
            const float a = A[r * ars + k * acs];
            for (int v = 0; v < nv; v++) acc[r][v] = VNFMA(a, b[v], acc[r][v]);
        }
    }
    for (int r = 0; r < mr; r++)
        for (int v = 0; v < nv; v++) vnstore(C + r * ldc + VN * v, acc[r][v]);
}

#define TT_CASE(R)                                                                         \
    case R:                                                                                \
        if (nv == TALL_W) tall_tile(R, TALL_W, A, ars, acs, B + j, brs, C + j, ldc, n, zero); \
        else tall_tile(R, 1, A, ars, acs, B + j, brs, C + j, ldc, n, zero);               \
        break;

/* columns [j0, j1) of the short-and-wide product: TALL_W native vectors at a time, then one,
 * then a scalar chain per output past the last whole vector */
static void tall_cols(const float *A, int64_t ars, int64_t acs, const float *B, int64_t brs,
                      float *C, int64_t ldc, int m, int64_t n, int64_t j0, int64_t j1, int zero) {
    int64_t j = j0;
    for (; j + VN <= j1; j += VN * (j + TALL_W * VN <= j1 ? TALL_W : 1)) {
        const int nv = j + TALL_W * VN <= j1 ? TALL_W : 1;
        switch (m) {
            TT_CASE(12) TT_CASE(11) TT_CASE(10) TT_CASE(9)
#if MR < 8
            TT_CASE(8) TT_CASE(7)   /* (every m from MR + 1 up) */
#endif
        }
    }
    chain_block(A, ars, acs, B, brs, C, ldc, 0, m, j, j1, n, zero);
}

/* C (m, p) (+)= op(A) (m, n) @ B (n, p), MR < m <= TALL_MAX, B's rows contiguous: threads take
 * bands of 16-column vectors */
static void gemm_tall(const float *A, int64_t ars, int64_t acs, const float *B, int64_t brs,
                      float *C, int64_t ldc, int64_t m, int64_t n, int64_t p, int accumulate,
                      int may_thread) {
#pragma omp parallel if (may_thread && m * n * p > 8 * TL_PAR_MIN)
    {
        int64_t T = omp_get_num_threads(), me = omp_get_thread_num();
        int64_t units = (p + 15) / 16, lo = units * me / T * 16, hi = units * (me + 1) / T * 16;
        if (hi > p) hi = p;
        if (lo < hi) tall_cols(A, ars, acs, B, brs, C, ldc, (int)m, n, lo, hi, !accumulate);
    }
}

/* C (m, p) = op(A) (m, n) @ op(B) (n, p) with element strides as in pack_a / pack_b; C is
 * row-major with row stride ldc and overwritten unless accumulate. Returns nonzero on
 * allocation failure. Threads split C without any barrier: into row bands when m >= p (each
 * packs all of B, n p floats, beside its m p n / T products), else into column bands (each
 * packs all of A); each band runs gemm_packed alone. A C element's chain is the same in any
 * band, so the split never changes a bit. */
static int sgemm_core(const float *A, int64_t ars, int64_t acs, const float *Apre,
                      int64_t m_pad, int64_t row0, const float *B, int64_t brs, int64_t bcs,
                      float *C, int64_t ldc, int64_t m, int64_t n, int64_t p, int accumulate,
                      int may_thread) {
    if (m == 0 || p == 0) return 0;
    if (n == 0) {
        if (!accumulate)
            for (int64_t i = 0; i < m; i++) memset(C + i * ldc, 0, (size_t)p * sizeof(float));
        return 0;
    }
    if (m * n * p <= SMALL_GEMM && !Apre) {
        /* tiny products: the same per-element chains (start, then fma in increasing k) without
         * packing buffers or OpenMP bookkeeping */
        for (int64_t i = 0; i < m; i++) {
            float *c = C + i * ldc;
            if (!accumulate) memset(c, 0, (size_t)p * sizeof(float));
            for (int64_t k = 0; k < n; k++) {
                float av = A[i * ars + k * acs];
                const float *b = B + k * brs;
                if (bcs == 1) {
#pragma omp simd
                    for (int64_t j = 0; j < p; j++) c[j] = __builtin_fmaf(av, b[j], c[j]);
                } else {
                    for (int64_t j = 0; j < p; j++) c[j] = __builtin_fmaf(av, b[j * bcs], c[j]);
                }
            }
        }
        return 0;
    }
    if (p <= 16 && acs == 1 && !Apre)
        return gemm_narrow(A, ars, B, brs, bcs, C, ldc, m, n, p, accumulate, may_thread);
    if (n <= SHORTK_MAX && bcs == 1 && !Apre) {
        gemm_shortk(A, ars, acs, B, brs, C, ldc, m, n, p, accumulate, may_thread);
        return 0;
    }
    if (m > MR && m <= TALL_MAX && p >= TALL_MINP && bcs == 1 && !Apre && !older_paths_only()) {
        gemm_tall(A, ars, acs, B, brs, C, ldc, m, n, p, accumulate, may_thread);
        return 0;
    }
    if (!may_thread || m * n * p <= 8 * TL_PAR_MIN)
        return gemm_packed(A, ars, acs, B, brs, bcs, C, ldc, m, n, p, accumulate, Apre, m_pad, row0);
    const int rows = m >= p;
    /* bands of whole micro-tile rows, or of 16-column vectors (whole NR panels would split
     * p = 128 into 48 | 80 columns over 2 threads) */
    const int64_t unit = rows ? MR : 16, units = ((rows ? m : p) + unit - 1) / unit;
    int failed = 0;
#pragma omp parallel reduction(| : failed)
    {
        int64_t T = omp_get_num_threads(), me = omp_get_thread_num();
        int64_t u0 = units * me / T, u1 = units * (me + 1) / T;
        int64_t lo = u0 * unit, hi = u1 * unit < (rows ? m : p) ? u1 * unit : (rows ? m : p);
        if (lo < hi) {
            if (rows)
                failed |= gemm_packed(A + lo * ars, ars, acs, B, brs, bcs, C + lo * ldc, ldc,
                                      hi - lo, n, p, accumulate, Apre, m_pad, row0 + lo);
            else
                failed |= gemm_packed(A, ars, acs, B + lo * bcs, brs, bcs, C + lo, ldc, m, n,
                                      hi - lo, accumulate, Apre, m_pad, row0);
        }
    }
    return failed;
}

int tl_sgemm(const float *A, int64_t ars, int64_t acs, const float *B, int64_t brs, int64_t bcs,
             float *C, int64_t ldc, int64_t m, int64_t n, int64_t p, int accumulate, int may_thread) {
    return sgemm_core(A, ars, acs, NULL, 0, 0, B, brs, bcs, C, ldc, m, n, p, accumulate, may_thread);
}

/* op(A) (m, n) packed once for many products with it (sgemm.h): for each k slice, its
 * MR-row panels, slice pc at pc * m_pad, row block i0 at i0 * kc within */
float *tl_sgemm_pack_a(const float *A, int64_t ars, int64_t acs, int64_t m, int64_t n) {
    const int64_t m_pad = (m + MR - 1) / MR * MR, kcmax = kslice(n > 0 ? n : 1);
    float *Ap = (float *)malloc((size_t)(m_pad * n > 0 ? m_pad * n : 1) * sizeof(float));
    if (!Ap) return NULL;
    for (int64_t pc = 0; pc < n; pc += kcmax) {
        const int64_t kc = n - pc < kcmax ? n - pc : kcmax;
        for (int64_t i0 = 0; i0 < m; i0 += MC)
            pack_a(A, ars, acs, i0, m - i0 < MC ? m - i0 : MC, pc, kc, Ap + pc * m_pad + i0 * kc);
    }
    return Ap;
}

int tl_sgemm_prepacked(const float *Ap, int64_t m_all, int64_t row0, const float *B, int64_t brs,
                       int64_t bcs, float *C, int64_t ldc, int64_t m, int64_t n, int64_t p,
                       int accumulate, int may_thread) {
    return sgemm_core(NULL, 0, 0, Ap, (m_all + MR - 1) / MR * MR, row0, B, brs, bcs, C, ldc, m,
                      n, p, accumulate, may_thread);
}

/* batched C = op(A) op(B) with the stored layouts described in ops.yaml (matmul_t). Exact mode
 * takes the exact GEMM (rule 3: one FMA chain per output, the bits CUDA computes); the default
 * keeps the blocked GEMM above (products and sums rounded separately). */
static int gemm(const char *op, const float *A, const float *B, float *C, int64_t batch, int64_t m,
                int64_t n, int64_t p, int ta, int tb, int accumulate) {
    /* op(A) (m, n): stored (m, n) or, transposed, (n, m); op(B) (n, p): stored (n, p) or (p, n) */
    if (tl_exact())
        return tl_gemm_exact_f32(op, ta, tb, batch, m, p, n, A, ta ? m : n, m * n, B, tb ? n : p,
                                 n * p, C, p, m * p, accumulate);
    int64_t ars = ta ? 1 : n, acs = ta ? m : 1, brs = tb ? 1 : p, bcs = tb ? n : 1;
    int failed = 0;
    if (batch > 1 && m * n * p < BATCH_PAR_MAX) {
        /* many small products: one whole product per thread at a time */
#pragma omp parallel for schedule(static) reduction(| : failed) if (batch * m * n * p > 8 * TL_PAR_MIN)
        for (int64_t s = 0; s < batch; s++)
            failed |= tl_sgemm(A + s * m * n, ars, acs, B + s * n * p, brs, bcs, C + s * m * p, p,
                               m, n, p, accumulate, 0);
    } else {
        for (int64_t s = 0; s < batch && !failed; s++)
            failed = tl_sgemm(A + s * m * n, ars, acs, B + s * n * p, brs, bcs, C + s * m * p, p,
                              m, n, p, accumulate, 1);
    }
    if (failed) return tl_fail(TL_E_OOM, "%s: out of host memory for packed GEMM panels", op);
    return TL_OK;
}

int tlk_matmul_t(const char *op, tl_buf a, tl_buf b, tl_buf y, int64_t batch, int64_t m, int64_t n, int64_t p,
                int64_t ta, int64_t tb) {
    return gemm(op, a->data, b->data, y->data, batch, m, n, p, (int)ta, (int)tb, 0);
}

int tlk_matmul(const char *op, tl_buf a, tl_buf b, tl_buf y, int64_t m, int64_t n, int64_t p) {
    return gemm(op, a->data, b->data, y->data, 1, m, n, p, 0, 0, 0);
}

int tlk_bmm(const char *op, tl_buf a, tl_buf b, tl_buf y, int64_t batch, int64_t m, int64_t n, int64_t p) {
    return gemm(op, a->data, b->data, y->data, batch, m, n, p, 0, 0, 0);
}

int tlk_linear(const char *op, tl_buf w, tl_buf b, tl_buf x, tl_buf y, int64_t rows, int64_t out_dim, int64_t in_dim) {
    /* y = b (broadcast over rows), then y += x @ W^T */
    for (int64_t r = 0; r < rows; r++) memcpy(y->data + r * out_dim, b->data, (size_t)out_dim * sizeof(float));
    return gemm(op, x->data, w->data, y->data, 1, rows, in_dim, out_dim, 0, 1, 1);
}

int tlk_linear_backward_w(const char *op, tl_buf g, tl_buf x, tl_buf dw, int64_t rows, int64_t out_dim, int64_t in_dim) {
    /* dW (out, in) = g^T (out, rows) @ x (rows, in) */
    return gemm(op, g->data, x->data, dw->data, 1, out_dim, rows, in_dim, 1, 0, 0);
}

/* db = the rule-4 column sums of g (rows, out_dim) */
int tlk_linear_backward_b(const char *op, tl_buf g, tl_buf db, int64_t rows, int64_t out_dim) {
    return tl_stub_axis_sum(op, g->data, db->data, 1, rows, out_dim);
}

int tlk_linear_backward_x(const char *op, tl_buf g, tl_buf w, tl_buf x, tl_buf dx, int64_t rows, int64_t out_dim, int64_t in_dim) {
    /* dx (rows, in) = g (rows, out) @ W (out, in) */
    return gemm(op, g->data, w->data, dx->data, 1, rows, out_dim, in_dim, 0, 0, 0);
}

/* mean((yhat - target)^2): d = yhat - target, d * d, rule 4 over the n squares, then / n */
int tlk_mse_loss(const char *op, tl_buf yhat, tl_buf target, tl_buf y, int64_t n) {
    const float *a = yhat->data, *t = target->data;
    int64_t nchunks = (n + TLM_CHUNK - 1) / TLM_CHUNK;
    float local[64], *part = nchunks <= 64 ? local : (float *)malloc((size_t)nchunks * sizeof(float));
    if (!part) return tl_fail(TL_E_OOM, "%s: out of host memory for chunk partials", op);
#pragma omp parallel for schedule(static) if (n > TL_PAR_MIN)
    for (int64_t c = 0; c < nchunks; c++) {
        int64_t i1 = (c + 1) * TLM_CHUNK < n ? (c + 1) * TLM_CHUNK : n;
        float s = tlf_sqdev(a[c * TLM_CHUNK], t[c * TLM_CHUNK]);
        for (int64_t i = c * TLM_CHUNK + 1; i < i1; i++) s = tlm_add(s, tlf_sqdev(a[i], t[i]));
        part[c] = s;
    }
    y->data[0] = tlm_div(tlm_tree_sum(part, nchunks), (float)n);
    if (part != local) free(part);
    return TL_OK;
}

/* 2 g (yhat - target) / n as scale = g * (2 / n), then (yhat - target) * scale */
int tlk_mse_loss_backward(const char *op, tl_buf yhat, tl_buf target, tl_buf g, tl_buf dyhat, int64_t n) {
    float scale = tlf_mse_scale(g->data[0], (float)n);
    const float *a = yhat->data, *t = target->data;
    float *d = dyhat->data;
#pragma omp parallel for simd schedule(static) if (n > TL_PAR_MIN)
    for (int64_t i = 0; i < n; i++) d[i] = tlf_mse_backward(a[i], t[i], scale);
    return TL_OK;
}
