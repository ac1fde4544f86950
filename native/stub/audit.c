/* audit.c (stub): the digest of a buffer's bits (formulas/audit.h): one pass, the terms summed
 * mod 2^64 across threads (any split gives the same sum), then the final mix into the ring. */
#include <string.h>
#include "stub.h"
#include "formulas/audit.h"
#include "entry/audit_kernels.h"

int tlk_digest(const char *op, tl_buf x, tl_buf ring, int64_t n, int64_t slots, int64_t slot) {
    const float *X = x->data;
    uint64_t s = 0;
    #pragma omp parallel for if(n > TL_PAR_MIN) schedule(static) reduction(+:s)
    for (int64_t i = 0; i < n; i++) {
        uint32_t w;
        memcpy(&w, X + i, sizeof w);
        s += tlf_digest_term(i, w);
    }
    tlf_digest_store(ring->data + 4 * slot, tlf_digest_final(s, n));
    return TL_OK;
}
