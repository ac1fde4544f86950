/* error.c: the thread-local last-error message and the argument checks that use it. */
#include <stdarg.h>
#include <stdio.h>
#include "tl_internal.h"

static _Thread_local char tl_error_text[1024];

int tl_fail(int status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tl_error_text, sizeof tl_error_text, fmt, ap);
    va_end(ap);
    return status;
}

void tl_clear_error(void) { tl_error_text[0] = '\0'; }

const char *tl_last_error(void) { return tl_error_text; }

int tl_check_count(const char *op, const char *what, int64_t n) {
    if (n < 0) return tl_fail(TL_E_ARG, "%s: %s must be >= 0, got %lld", op, what, (long long)n);
    if (n > TL_MAX_ELEMENTS)
        return tl_fail(TL_E_TOO_LARGE, "%s: %s = %lld exceeds the uint32 element limit %lld", op,
                       what, (long long)n, (long long)TL_MAX_ELEMENTS);
    return TL_OK;
}

int tl_check_live(const char *op, const char *what, tl_buf b) {
    if (!b) return tl_fail(TL_E_ARG, "%s: %s is a null buffer", op, what);
    if (!b->live) return tl_fail(TL_E_RELEASED, "%s: %s was already released", op, what);
    return TL_OK;
}

int tl_check_buf(const char *op, const char *what, tl_buf b, int64_t n) {
    int st = tl_check_live(op, what, b);
    if (st) return st;
    if (b->n != n)
        return tl_fail(TL_E_SHAPE, "%s: %s must hold %lld elements, got %lld", op, what,
                       (long long)n, (long long)b->n);
    return TL_OK;
}
