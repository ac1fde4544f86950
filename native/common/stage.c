/* stage.c: a replayed step's integer input written into the graph's pinned staging (host code,
 * the same in both libraries): one pass copies the values and checks the range the capture
 * relied on, where numpy would take a copy and a reduction. */
#include "tl_internal.h"

int64_t tl_graph_stage_int64(int64_t *dst, const int64_t *src, int64_t n, int64_t lo, int64_t hi,
                             int64_t exclude) {
    const uint64_t span = hi > lo ? (uint64_t)hi - (uint64_t)lo : 0;
    int ok = 1;
    for (int64_t i = 0; i < n; i++) {
        const int64_t v = src[i];
        dst[i] = v;
        ok &= ((uint64_t)v - (uint64_t)lo < span) & (v != exclude);
    }
    if (ok) return -1;
    for (int64_t i = 0; i < n; i++)
        if (!((uint64_t)src[i] - (uint64_t)lo < span) || src[i] == exclude) return i;
    return -1;
}
