/* audit.c (stub): the digest of a buffer's bits (formulas/audit.h): one pass, the terms summed
 * mod 2^64 across threads (any split gives the same sum), then the final mix into the ring.
 * digest_batch splits the elements of all its buffers, laid end to end, evenly over the
 * threads in one parallel region (a batch of many small buffers used one thread for each
 * buffer below TL_PAR_MIN, and a parallel region for each larger one); each thread adds the
 * sum of its piece of a buffer into that buffer's sum, and the sums are the same for any split.
 */
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "stub.h"
#include "formulas/audit.h"
#include "digest_sum.h"
#include "generated/audit_kernels.h"

/* one buffer (`digest`: recording digests each value as it is made) splits over threads only
 * from TL_DIGEST_PAR_MIN elements: a term costs a fraction of a nanosecond, so below that a
 * parallel region (waking and then spinning the other threads) costs more than it saves, and
 * no region is entered at all */
#define TL_DIGEST_PAR_MIN (1 << 18)

static uint64_t digest_of(const float *X, int64_t n) {
    if (n <= TL_DIGEST_PAR_MIN) return tlf_digest_final(digest_sum(X, 0, n), n);
    uint64_t s = 0;
    #pragma omp parallel
    {
        int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
        int64_t lo = n / nt * t + (n % nt) * t / nt;          /* this thread's piece */
        int64_t hi = n / nt * (t + 1) + (n % nt) * (t + 1) / nt;
        uint64_t part = digest_sum(X, lo, hi);
        #pragma omp atomic
        s += part;
    }
    return tlf_digest_final(s, n);
}

int tlk_digest(const char *op, tl_buf x, tl_buf ring, int64_t n, int64_t slots, int64_t slot) {
    tlf_digest_store(ring->data + 4 * slot, digest_of(x->data, n));
    return TL_OK;
}

/* every handle is checked before any row is written: a refused batch leaves the ring alone */
int tlk_digest_batch(const char *op, tl_buf ring, const int64_t *handles, int64_t handles_len,
                     int64_t count, int64_t slots, int64_t first) {
    for (int64_t k = 0; k < count; k++) {
        tl_buf b = (tl_buf)(intptr_t)handles[k];
        if (!b) return tl_fail(TL_E_ARG, "%s: handles[%lld] is a null buffer", op, (long long)k);
        if (!b->live)
            return tl_fail(TL_E_RELEASED, "%s: handles[%lld] (a buffer of %lld elements) was "
                           "already released", op, (long long)k, (long long)b->n);
    }
    int64_t total = 0;
    for (int64_t k = 0; k < count; k++) total += ((tl_buf)(intptr_t)handles[k])->n;
    uint64_t *sums = calloc((size_t)(count > 0 ? count : 1), sizeof *sums);
    if (!sums) return tl_fail(TL_E_OOM, "%s: out of host memory for %lld sums", op, (long long)count);
    #pragma omp parallel if(total > TL_PAR_MIN)
    {
        int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
        int64_t lo = total / nt * t + (total % nt) * t / nt;          /* this thread's piece */
        int64_t hi = total / nt * (t + 1) + (total % nt) * (t + 1) / nt;
        int64_t base = 0;                                              /* buffer k's first element */
        for (int64_t k = 0; k < count && base < hi; k++) {
            tl_buf b = (tl_buf)(intptr_t)handles[k];
            int64_t s0 = lo > base ? lo - base : 0, s1 = hi - base < b->n ? hi - base : b->n;
            if (s0 < s1) {
                uint64_t part = digest_sum(b->data, s0, s1);
                #pragma omp atomic
                sums[k] += part;
            }
            base += b->n;
        }
    }
    for (int64_t k = 0; k < count; k++)
        tlf_digest_store(ring->data + 4 * (first + k),
                         tlf_digest_final(sums[k], ((tl_buf)(intptr_t)handles[k])->n));
    free(sums);
    return TL_OK;
}
