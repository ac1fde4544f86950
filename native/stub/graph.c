/* graph.c (stub): whole-step capture needs CUDA graphs; torchlean.cuda.graph_step runs the step
 * eagerly on the stub and never calls these. */
#include "stub.h"

static int no_graphs(void) {
    return tl_fail(TL_E_UNSUPPORTED, "graph_step: capture needs the CUDA backend (the stub runs "
                   "the step eagerly)");
}

TL_API int tl_graph_new(void **out) { *out = NULL; return no_graphs(); }
TL_API int tl_graph_bind_host(void *g, const void *host, int64_t bytes, uint64_t *dev) {
    (void)g; (void)host; (void)bytes; *dev = 0; return no_graphs();
}
TL_API int tl_graph_bind_input(void *g, uint64_t dst, int64_t bytes, int staged, int64_t depth,
                               void **host) {
    (void)g; (void)dst; (void)bytes; (void)staged; (void)depth; *host = NULL; return no_graphs();
}
TL_API int tl_graph_wait_inputs(void *g) { (void)g; return no_graphs(); }
TL_API int tl_graph_copy(uint64_t dst, uint64_t src, int64_t bytes) {
    (void)dst; (void)src; (void)bytes; return no_graphs();
}
TL_API int tl_graph_begin(void *g, uint64_t rng_base) { (void)g; (void)rng_base; return no_graphs(); }
TL_API int tl_graph_end(void *g, int64_t draws) { (void)g; (void)draws; return no_graphs(); }
TL_API int tl_graph_abort(void *g) { (void)g; return TL_OK; }
TL_API int tl_graph_launch(void *g) { (void)g; return no_graphs(); }
TL_API int tl_graph_set_rng(void *g, uint64_t rng_base) { (void)g; (void)rng_base; return no_graphs(); }
TL_API int64_t tl_graph_constants(void *g, char *op, int64_t cap) {
    (void)g; if (cap > 0) op[0] = '\0'; return 0;
}
TL_API int tl_graph_bound_read(void *g, int64_t i) { (void)g; (void)i; return 0; }
TL_API int tl_graph_persistent(int on) { (void)on; return TL_OK; }
TL_API void tl_graph_destroy(void *g) { (void)g; }
