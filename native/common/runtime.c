/* runtime.c: identity symbols, the determinism, exact and TF32 flags, SplitMix64 export. */
#include <stdlib.h>
#include <string.h>
#include "tl_internal.h"
#include "generated/registry_hash.h"

int tl_abi_version(void) { return TL_ABI_VERSION; }
const char *tl_registry_hash(void) { return TL_REGISTRY_HASH; }
const char *tl_backend_name(void) { return tlb_name(); }
uint64_t tl_splitmix64(uint64_t x) { return tl_sm64(x); }

/* -1: not yet read from the environment. Reads are racy-benign: every reader computes the same
 * value from the same environment. */
static volatile int det_flag = -1;
static volatile int tf32_flag = -1;
static volatile int exact_flag = -1;

static int env_flag(const char *name, const char *alt, int *out) {
    const char *v = getenv(name);
    if ((!v || !*v) && alt && getenv(alt)) {
        name = alt;   /* the message names the variable that was read */
        v = getenv(alt);
    }
    if (!v || !*v || strcmp(v, "0") == 0) { *out = 0; return TL_OK; }
    if (strcmp(v, "1") == 0) { *out = 1; return TL_OK; }
    *out = 0;
    return tl_fail(TL_E_ARG, "%s must be unset, empty, 0 or 1, got '%s'", name, v);
}

int tl_exact(void) {
    if (exact_flag < 0) {
        int f = 0;
        env_flag("TORCHLEAN_EXACT", NULL, &f);
        exact_flag = f;
    }
    return exact_flag;
}

/* exact implies deterministic: the flag reads on whenever exact mode is on */
int tl_deterministic(void) {
    if (det_flag < 0) {
        int f = 0;
        env_flag("TORCHLEAN_DETERMINISTIC", "TORCHLEAN_CUDA_DETERMINISTIC_REDUCTIONS", &f);
        det_flag = f;
    }
    return det_flag || tl_exact();
}

int tl_allow_tf32(void) {
    if (tf32_flag < 0) {
        int f = 0;
        env_flag("TORCHLEAN_ALLOW_TF32", NULL, &f);
        tf32_flag = f;
    }
    return tf32_flag;
}

/* Turning determinism off also leaves exact mode (exact without fixed orders would be a lie);
 * turning exact on also turns determinism on, turning it off leaves determinism as it was. */
int tl_set_deterministic(int flag) {
    det_flag = flag ? 1 : 0;
    if (!flag) exact_flag = 0;
    return tl_deterministic();
}
int tl_is_deterministic(void) { return tl_deterministic(); }
int tl_set_exact(int flag) {
    exact_flag = flag ? 1 : 0;
    if (flag) det_flag = 1;
    return tl_exact();
}
int tl_is_exact(void) { return tl_exact(); }
int tl_set_allow_tf32(int flag) { tf32_flag = flag ? 1 : 0; return tl_allow_tf32(); }

int tl_device_count(int64_t *out) { return tlb_device_count(out); }
int tl_synchronize(void) { return tlb_sync(); }
int tl_empty_cache(void) { return tlb_empty_cache(); }
