/* contract.c: the checks the generated entries (native/generated/) are written in. */
#include <stdio.h>
#include "contract.h"

static int64_t lens_fail(tl_lens *L, int status, const char *fmt, long long a, long long b) {
    if (!L->status) {
        char what[160];
        snprintf(what, sizeof what, fmt, a, b);
        L->status = tl_fail(status, "%s: %s: %s", L->op, L->what, what);
    }
    return 0;
}

int64_t tl_lname(tl_lens *L, const char *name, int64_t v) {
    if (v >= 0) return v;
    if (!L->status)
        L->status = tl_fail(TL_E_ARG, "%s: %s must be >= 0, got %lld", L->op, name, (long long)v);
    return 0;
}

int64_t tl_lmul(tl_lens *L, int64_t a, int64_t b) {
    if (L->status) return 0;
    if (a == 0 || b == 0) return 0;
    if (b > TL_MAX_ELEMENTS / a)
        return lens_fail(L, TL_E_TOO_LARGE, "%lld x %lld exceeds the uint32 element limit", a, b);
    return a * b;
}

int64_t tl_ladd(tl_lens *L, int64_t a, int64_t b) {
    if (L->status) return 0;
    if (a > TL_MAX_ELEMENTS - b)
        return lens_fail(L, TL_E_TOO_LARGE, "%lld + %lld exceeds the uint32 element limit", a, b);
    return a + b;
}

int64_t tl_lprod(tl_lens *L, const char *name, const int64_t *v, int64_t n) {
    int64_t p = 1;
    for (int64_t i = 0; i < n; i++) p = tl_lmul(L, p, tl_lname(L, name, v[i]));
    return L->status ? 0 : p;
}

int tl_check_len(const char *op, const char *what, tl_buf b, int64_t n) {
    if (b->n != n)
        return tl_fail(TL_E_SHAPE, "%s: %s must hold %lld elements, got %lld", op, what,
                       (long long)n, (long long)b->n);
    return TL_OK;
}

int tl_check_array(const char *op, const char *what, const void *p, int64_t n) {
    if (n < 0) return tl_fail(TL_E_ARG, "%s: %s has a negative length %lld", op, what, (long long)n);
    if (n > 0 && !p) return tl_fail(TL_E_ARG, "%s: %s is a null array of length %lld", op, what,
                                    (long long)n);
    return TL_OK;
}

int tl_broadcastable(const int64_t *in, int64_t ir, const int64_t *out, int64_t orank) {
    if (ir > orank || orank > 64) return 0;
    for (int64_t k = 0; k < ir; k++) {
        int64_t d = in[k], o = out[orank - ir + k];
        if (d != o && d != 1) return 0;
    }
    return 1;
}

int tl_check_array_len(const char *op, const char *what, int64_t got, int64_t want) {
    if (got != want)
        return tl_fail(TL_E_SHAPE, "%s: %s must hold %lld elements, got %lld", op, what,
                       (long long)want, (long long)got);
    return TL_OK;
}

int tl_geom_parse(const char *op, const char *what, const int64_t *g, int64_t len, tl_geom *G) {
    if (!g || len < 4 || g[0] < 1 || g[0] > TL_MAX_RANK || len != 4 + 5 * g[0])
        return tl_fail(TL_E_ARG, "%s: malformed %s array (length %lld)", op, what, (long long)len);
    G->r = (int)g[0]; G->n = g[1]; G->cin = g[2]; G->cout = g[3];
    if (G->n < 0 || G->cin < 0 || G->cout < 0)
        return tl_fail(TL_E_ARG, "%s: negative size in the %s (N %lld, C_in %lld, C_out %lld)", op,
                       what, (long long)G->n, (long long)G->cin, (long long)G->cout);
    tl_lens L = {op, what, TL_OK};
    G->in_n = G->k_n = G->out_n = 1;
    for (int a = 0; a < TL_MAX_RANK; a++) {
        if (a >= G->r) { G->in[a] = G->k[a] = G->out[a] = G->s[a] = 1; G->p[a] = 0; continue; }
        G->in[a] = g[4 + a]; G->k[a] = g[4 + G->r + a]; G->out[a] = g[4 + 2 * G->r + a];
        G->s[a] = g[4 + 3 * G->r + a]; G->p[a] = g[4 + 4 * G->r + a];
        if (G->s[a] < 1)
            return tl_fail(TL_E_ARG, "%s: stride must be >= 1 on every axis, got %lld on axis %d",
                           op, (long long)G->s[a], a);
        if (G->in[a] < 0 || G->k[a] < 0 || G->out[a] < 0 || G->p[a] < 0)
            return tl_fail(TL_E_ARG, "%s: negative size in the %s on axis %d (in %lld, kernel %lld, "
                           "out %lld, padding %lld)", op, what, a, (long long)G->in[a],
                           (long long)G->k[a], (long long)G->out[a], (long long)G->p[a]);
        if (G->p[a] > TL_MAX_ELEMENTS || G->s[a] > TL_MAX_ELEMENTS)
            return tl_fail(TL_E_TOO_LARGE, "%s: stride %lld or padding %lld on axis %d exceeds the "
                           "uint32 element limit", op, (long long)G->s[a], (long long)G->p[a], a);
        L.what = "the spatial input size"; G->in_n = tl_lmul(&L, G->in_n, G->in[a]);
        L.what = "the kernel window size"; G->k_n = tl_lmul(&L, G->k_n, G->k[a]);
        L.what = "the spatial output size"; G->out_n = tl_lmul(&L, G->out_n, G->out[a]);
        if (L.status) return L.status;
    }
    L.what = "the im2col buffer size";
    int64_t a = tl_lmul(&L, tl_lmul(&L, G->cin, G->k_n), G->out_n);
    L.what = "the col2im buffer size";
    int64_t b = tl_lmul(&L, tl_lmul(&L, G->cout, G->k_n), G->in_n);
    if (L.status) return L.status;
    G->col_n = a > b ? a : b;
    return TL_OK;
}
