/* audit.c (stub): the digest of a buffer's bits (formulas/audit.h): one pass, the terms summed
 * mod 2^64 across threads (any split gives the same sum), then the final mix into the ring.
 * digest_batch runs the same pass over each buffer of a batch: the same digests, one call. */
#include <stdint.h>
#include <string.h>
#include "stub.h"
#include "formulas/audit.h"
#include "generated/audit_kernels.h"

static uint64_t digest_of(const float *X, int64_t n) {
    uint64_t s = 0;
    #pragma omp parallel for if(n > TL_PAR_MIN) schedule(static) reduction(+:s)
    for (int64_t i = 0; i < n; i++) {
        uint32_t w;
        memcpy(&w, X + i, sizeof w);
        s += tlf_digest_term(i, w);
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
    for (int64_t k = 0; k < count; k++) {
        tl_buf b = (tl_buf)(intptr_t)handles[k];
        tlf_digest_store(ring->data + 4 * (first + k), digest_of(b->data, b->n));
    }
    return TL_OK;
}
