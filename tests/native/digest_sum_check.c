/* digest_sum_check.c: native/stub/digest_sum.h's sum (the vector path the build's ISA selects)
 * against the formula's loop (digest_sum_scalar) for every start 0..69 and length 0..139, and
 * for indices just below 2^31 and 2^32 (the index's low half wraps in the vectors' 32-bit
 * lanes). Prints "ok <path>" or the first difference; tests/test_audit_sum.py builds it for
 * each ISA the host runs. */
#include <stdio.h>
#include <stdlib.h>
#include "stub/digest_sum.h"

int main(void) {
    enum { N = 4096 };
    static float X[N];
    uint32_t r = 12345u;
    for (int i = 0; i < N; i++) {
        r = r * 1664525u + 1013904223u;
        uint32_t w = r ^ (r >> 13);
        if (i % 37 == 0) w = 0x80000000u;          /* -0 */
        if (i % 41 == 0) w = 0x7FC0DEADu;          /* a NaN */
        if (i % 43 == 0) w = 0xFF800000u;          /* -inf */
        memcpy(X + i, &w, sizeof w);
    }
    for (int64_t lo = 0; lo < 70; lo++)
        for (int64_t len = 0; len < 140; len++)
            if (digest_sum(X, lo, lo + len) != digest_sum_scalar(X, lo, lo + len)) {
                printf("differs: start %lld, length %lld\n", (long long)lo, (long long)len);
                return 1;
            }
    /* indices near 2^31 and 2^32: X[j] read as index base + j (the pointer moved back by base,
     * never read below X) */
    const int64_t bases[] = {(1LL << 31) - 77, (1LL << 32) - N - 5, (1LL << 32) - N};
    for (int k = 0; k < 3; k++) {
        const float *Y = (const float *)((uintptr_t)X - (uintptr_t)(bases[k] * 4));
        for (int64_t len = 0; len <= N; len += (len < 200 ? 1 : 509))
            if (digest_sum(Y, bases[k], bases[k] + len) != digest_sum_scalar(Y, bases[k], bases[k] + len)) {
                printf("differs: start %lld, length %lld\n", (long long)bases[k], (long long)len);
                return 1;
            }
    }
#if defined(__AVX512F__)
    puts("ok avx512");
#elif defined(__AVX2__)
    puts("ok avx2");
#else
    puts("ok scalar");
#endif
    return 0;
}
