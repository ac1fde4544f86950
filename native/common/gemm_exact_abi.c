/* gemm_exact_abi.c: tl_gemm_exact, the exported entry to the exact-mode GEMM. The argument
 * checks are written once here; each library supplies tl_gemm_exact_f32. */
#include "contract.h"

int tl_gemm_exact(tl_buf a, tl_buf b, tl_buf c, int64_t batch, int64_t m, int64_t k, int64_t n,
                  int64_t ta, int64_t tb, int64_t accumulate) {
    const char *op = "gemm_exact";
    if ((ta != 0 && ta != 1) || (tb != 0 && tb != 1) || (accumulate != 0 && accumulate != 1))
        return tl_fail(TL_E_ARG, "%s: ta, tb and accumulate must be 0 or 1, got %lld, %lld, %lld",
                       op, (long long)ta, (long long)tb, (long long)accumulate);
    if (batch < 0 || m < 0 || k < 0 || n < 0)
        return tl_fail(TL_E_ARG, "%s: batch, m, k, n must be >= 0, got %lld, %lld, %lld, %lld", op,
                       (long long)batch, (long long)m, (long long)k, (long long)n);
    if (m > INT32_MAX || k > INT32_MAX || n > INT32_MAX)
        return tl_fail(TL_E_TOO_LARGE, "%s: m, k, n must fit int32, got %lld, %lld, %lld", op,
                       (long long)m, (long long)k, (long long)n);
    tl_lens L = {op, "sizes", TL_OK};
    const int64_t mk = tl_lmul(&L, m, k), kn = tl_lmul(&L, k, n), mn = tl_lmul(&L, m, n);
    const int64_t na = tl_lmul(&L, batch, mk), nb = tl_lmul(&L, batch, kn), nc = tl_lmul(&L, batch, mn);
    if (L.status) return L.status;
    int st;
    if ((st = tl_check_buf(op, "a", a, na)) || (st = tl_check_buf(op, "b", b, nb)) ||
        (st = tl_check_buf(op, "c", c, nc)))
        return st;
    return tl_gemm_exact_f32(op, (int)ta, (int)tb, batch, m, n, k, a->data, ta ? m : k, mk,
                             b->data, tb ? k : n, kn, c->data, n, mn, (int)accumulate);
}
