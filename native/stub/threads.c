/* threads.c (stub): the stub's own OpenMP runtime, a small thread pool behind the few GOMP entry
 * points that GCC emits for the stub's `#pragma omp` constructs. libgomp is never loaded, so
 * torchlean sets no OpenMP variable and another library's OpenMP (PyTorch's) keeps its own.
 *
 * Why not libgomp: its wait policy is one process-wide choice. Workers that spin (ACTIVE) are
 * fast on an idle machine but steal the cores a busy neighbour needs, and a parallel region then
 * waits for a descheduled worker; workers that sleep (PASSIVE) are slow to wake on an idle
 * virtual machine. This pool does both halves well:
 *  - a worker spins for SPIN_NS after its last job (the gap between two kernels of a training
 *    step is about that), then sleeps on a futex; a worker preempted since its last job (other
 *    processes want the cores) does not spin until CALM_JOBS jobs ran without a preemption;
 *  - a region's thread slots are claimed, not assigned: the calling thread runs slot 0, then
 *    any slot no worker has claimed yet. A late worker (asleep, or descheduled by another
 *    process) costs nothing but the parallelism; the region never waits for it to start.
 * Slot s computes what OpenMP thread s would (omp_get_thread_num() is the slot), so results are
 * those of a team of nslots threads: the stub's kernels give the same bits for any count.
 *
 * Threads: OMP_NUM_THREADS when set (its first number), else the CPUs this process may run on.
 * A region entered from inside a region, or while another application thread's region holds the
 * pool, runs on the calling thread alone. A child process after fork() starts a new pool.
 * Supported: parallel (with if / num_threads), static and dynamic/guided loops, barrier,
 * critical, atomic, single; anything else fails the link (-Wl,--no-undefined). */
#define _GNU_SOURCE
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define MAX_THREADS 256
#define MAX_LOOPS 16           /* dynamic loops and singles per region with a shared record */
#ifndef SPIN_NS
#define SPIN_NS 20000          /* how long an idle thread spins before it sleeps */
#endif
#define CALM_JOBS 64           /* jobs without a preemption before a worker spins again */

typedef struct {
    _Atomic long next;
    long end, incr, chunk;
    uint32_t gen;               /* the region that initialised it */
} loop_t;

static struct {
    /* the job: written by the region's caller before it publishes `claim` */
    void (*fn)(void *);
    void *data;
    /* gen (32 bits) | nslots (16) | next unclaimed slot (16): one word, so a claim is one CAS
     * that names its region */
    _Atomic uint64_t claim;
    _Atomic int done;           /* slots finished (futex word of the caller's join) */
    _Atomic int caller_sleeps;
    _Atomic int contended;      /* a worker was preempted lately: the caller's join spins less */
    _Atomic int bar_count, bar_gen, bar_sleepers;
    atomic_flag loop_lock;
    loop_t loops[MAX_LOOPS];
    /* idle workers */
    _Atomic int wake_seq, sleepers;
    /* the pool */
    atomic_flag busy;           /* held by the application thread running a region */
    int nthreads, started;      /* team size; workers started (nthreads - 1 once up) */
    pthread_mutex_t start_lock;
} P = {.loop_lock = ATOMIC_FLAG_INIT, .busy = ATOMIC_FLAG_INIT,
       .start_lock = PTHREAD_MUTEX_INITIALIZER};

/* the OpenMP identity of the running code: its slot, its team's size, its loop count */
static __thread int t_slot = 0, t_team = 1, t_loops = 0, t_in_region = 0, t_static_loop = 0;
static __thread uint32_t t_gen = 0;

static inline uint64_t pack(uint32_t gen, int nslots, int next) {
    return ((uint64_t)gen << 32) | ((uint64_t)(unsigned)nslots << 16) | (unsigned)next;
}
static inline uint32_t c_gen(uint64_t c) { return (uint32_t)(c >> 32); }
static inline int c_nslots(uint64_t c) { return (int)((c >> 16) & 0xffff); }
static inline int c_next(uint64_t c) { return (int)(c & 0xffff); }

/* involuntary context switches of the calling thread */
static long preemptions(void) {
    struct rusage ru;
    return getrusage(RUSAGE_THREAD, &ru) == 0 ? ru.ru_nivcsw : 0;
}

static void futex_wait(_Atomic int *addr, int val) {
    syscall(SYS_futex, (int *)addr, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}
static void futex_wake(_Atomic int *addr, int n) {
    syscall(SYS_futex, (int *)addr, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
}
static inline int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}
static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* Wait until *addr != val: spin for SPIN_NS, then sleep (counted in *sleepers, so the waker
 * makes the system call only when someone sleeps). */
static void wait_change(_Atomic int *addr, int val, _Atomic int *sleepers) {
    int64_t t0 = 0;
    for (unsigned i = 1; atomic_load_explicit(addr, memory_order_acquire) == val; i++) {
        cpu_relax();
        if ((i & 63) == 0) {
            int64_t t = now_ns();
            if (!t0) t0 = t;
            else if (t - t0 > SPIN_NS) break;
        }
    }
    while (atomic_load(addr) == val) {
        atomic_fetch_add(sleepers, 1);
        if (atomic_load(addr) == val) futex_wait(addr, val);
        atomic_fetch_sub(sleepers, 1);
    }
}

/* run slot `slot` of the current region as OpenMP thread `slot` of `nslots` */
static void run_slot(uint32_t gen, int slot, int nslots) {
    int so = t_slot, te = t_team, lo = t_loops, in = t_in_region;
    uint32_t ge = t_gen;
    t_slot = slot; t_team = nslots; t_loops = 0; t_in_region = 1; t_gen = gen;
    P.fn(P.data);
    t_slot = so; t_team = te; t_loops = lo; t_in_region = in; t_gen = ge;
    if (atomic_fetch_add(&P.done, 1) + 1 == nslots && atomic_load(&P.caller_sleeps))
        futex_wake(&P.done, 1);
}

/* claim and run unclaimed slots of region `gen` until none is left */
static void run_unclaimed(uint32_t gen) {
    uint64_t c = atomic_load(&P.claim);
    while (c_gen(c) == gen && c_next(c) < c_nslots(c)) {
        if (atomic_compare_exchange_weak(&P.claim, &c, c + 1)) {
            run_slot(gen, c_next(c), c_nslots(c));
            c = atomic_load(&P.claim);
        }
    }
}

/* arg: the last region started before this worker (it takes slots from the next one on) */
static void *worker(void *arg) {
    uint32_t seen = (uint32_t)(uintptr_t)arg;
    long preempted = preemptions();
    int calm = 0;
    for (;;) {
        /* spin only while this worker keeps its core: a preemption since the last job means
         * other processes want the cores, and spinning would take them away (sleep at once
         * until CALM_JOBS jobs in a row ran without one) */
        long p = preemptions();
        if (p != preempted) { calm = 0; preempted = p; }
        else if (calm < CALM_JOBS) calm++;
        int64_t spin_ns = calm >= CALM_JOBS ? SPIN_NS : 0;
        atomic_store_explicit(&P.contended, spin_ns == 0, memory_order_relaxed);
        int64_t t0 = 0;
        for (unsigned i = 1;; i++) {           /* spin for a new region with a free slot */
            uint64_t c = atomic_load_explicit(&P.claim, memory_order_acquire);
            if (c_gen(c) != seen) {
                seen = c_gen(c);
                if (c_next(c) < c_nslots(c)) break;
            }
            cpu_relax();
            if ((i & 63) == 0) {
                int64_t t = now_ns();
                if (!t0) t0 = t;
                else if (t - t0 > spin_ns) {   /* then sleep until the next region starts */
                    int seq = atomic_load(&P.wake_seq);
                    atomic_fetch_add(&P.sleepers, 1);
                    if (c_gen(atomic_load(&P.claim)) == seen) futex_wait(&P.wake_seq, seq);
                    atomic_fetch_sub(&P.sleepers, 1);
                    t0 = 0;
                }
            }
        }
        run_unclaimed(seen);
    }
    return NULL;
}

static int threads_wanted(void) {
    const char *e = getenv("OMP_NUM_THREADS");
    if (e && *e) {
        char *end;
        long n = strtol(e, &end, 10);
        if (end != e && n >= 1) return n > MAX_THREADS ? MAX_THREADS : (int)n;
    }
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int n = CPU_COUNT(&set);
        if (n >= 1) return n > MAX_THREADS ? MAX_THREADS : n;
    }
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : (n > MAX_THREADS ? MAX_THREADS : (int)n);
}

/* a forked child has none of the parent's workers: it starts its own pool when it needs one */
static void after_fork_child(void) {
    P.started = 0;
    P.nthreads = 0;
    atomic_store(&P.sleepers, 0);
    atomic_flag_clear(&P.busy);
    pthread_mutex_init(&P.start_lock, NULL);
}

static void start_pool(void) {
    pthread_mutex_lock(&P.start_lock);
    if (!P.nthreads) {
        static int atfork;
        if (!atfork) { pthread_atfork(NULL, NULL, after_fork_child); atfork = 1; }
        int n = threads_wanted();
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setstacksize(&attr, 8 << 20);
        int started = 0;
        for (int i = 1; i < n; i++) {
            pthread_t t;
            void *seen = (void *)(uintptr_t)c_gen(atomic_load(&P.claim));
            if (pthread_create(&t, &attr, worker, seen) != 0) break;
            pthread_detach(t);
            started++;
        }
        pthread_attr_destroy(&attr);
        P.started = started;
        P.nthreads = started + 1;
    }
    pthread_mutex_unlock(&P.start_lock);
}

/* a team of one; like OpenMP's inactive region, it does not stop a region nested in it from
 * using the pool (t_in_region is left as it is) */
static void run_alone(void (*fn)(void *), void *data) {
    int so = t_slot, te = t_team, lo = t_loops;
    t_slot = 0; t_team = 1; t_loops = 0;
    fn(data);
    t_slot = so; t_team = te; t_loops = lo;
}

void GOMP_parallel(void (*fn)(void *), void *data, unsigned num_threads, unsigned int flags) {
    (void)flags;
    if (num_threads == 1 || t_in_region) { run_alone(fn, data); return; }
    if (!P.nthreads) start_pool();
    int n = P.nthreads;
    if (num_threads && (int)num_threads < n) n = (int)num_threads;
    if (n <= 1 || atomic_flag_test_and_set_explicit(&P.busy, memory_order_acquire)) {
        run_alone(fn, data);
        return;
    }
    P.fn = fn;
    P.data = data;
    atomic_store(&P.done, 0);
    uint32_t gen = c_gen(atomic_load(&P.claim)) + 1;
    atomic_store(&P.claim, pack(gen, n, 1));        /* slot 0 is the caller's */
    if (atomic_load(&P.sleepers) > 0) {
        atomic_fetch_add(&P.wake_seq, 1);
        futex_wake(&P.wake_seq, n - 1);
    }
    run_slot(gen, 0, n);
    run_unclaimed(gen);
    int d = atomic_load(&P.done);
    if (d != n) {                                    /* a worker is still on its slot */
        int64_t t0 = now_ns(), spin = atomic_load_explicit(&P.contended, memory_order_relaxed)
                                     ? SPIN_NS / 50 : SPIN_NS;
        while ((d = atomic_load_explicit(&P.done, memory_order_acquire)) != n
               && now_ns() - t0 < spin)
            for (int i = 0; i < 32; i++) cpu_relax();
        while ((d = atomic_load(&P.done)) != n) {
            atomic_store(&P.caller_sleeps, 1);
            if (atomic_load(&P.done) == d) futex_wait(&P.done, d);
            atomic_store(&P.caller_sleeps, 0);
        }
    }
    atomic_flag_clear_explicit(&P.busy, memory_order_release);
}

void GOMP_barrier(void) {
    if (t_team <= 1) return;
    int g = atomic_load(&P.bar_gen);
    if (atomic_fetch_add(&P.bar_count, 1) + 1 == t_team) {
        atomic_store(&P.bar_count, 0);
        atomic_fetch_add(&P.bar_gen, 1);
        if (atomic_load(&P.bar_sleepers)) futex_wake(&P.bar_gen, INT_MAX);
    } else {
        wait_change(&P.bar_gen, g, &P.bar_sleepers);
    }
}

int omp_get_thread_num(void) { return t_slot; }
int omp_get_num_threads(void) { return t_team; }
int omp_in_parallel(void) { return t_team > 1; }
int omp_get_max_threads(void) {
    if (t_in_region) return 1;
    if (!P.nthreads) start_pool();
    return P.nthreads;
}
int omp_get_num_procs(void) { return threads_wanted(); }

/* ---- dynamic (and guided, run as dynamic) loops: a region's k-th loop is loops[k] */
static bool loop_claim(loop_t *L, long *istart, long *iend) {
    long step = L->chunk * L->incr;
    long s = atomic_fetch_add(&L->next, step);
    if (L->incr > 0 ? s >= L->end : s <= L->end) return false;
    long e = s + step;
    if (L->incr > 0 ? e > L->end : e < L->end) e = L->end;
    *istart = s;
    *iend = e;
    return true;
}

bool GOMP_loop_nonmonotonic_dynamic_start(long start, long end, long incr, long chunk,
                                          long *istart, long *iend) {
    if (chunk < 1) chunk = 1;
    if (t_team <= 1) {                               /* alone: the whole range at once */
        if (incr > 0 ? start >= end : start <= end) return false;
        *istart = start; *iend = end;
        t_loops++;
        return true;
    }
    int k = t_loops++;
    t_static_loop = k >= MAX_LOOPS;
    if (t_static_loop) {                             /* past the region's loop records: */
        long n = incr > 0 ? (end - start + incr - 1) / incr : (start - end - incr - 1) / -incr;
        if (n <= 0) return false;                    /* each slot its static share */
        long per = n / t_team, rem = n % t_team;
        long first = t_slot * per + (t_slot < rem ? t_slot : rem);
        long cnt = per + (t_slot < rem);
        if (cnt == 0) return false;
        *istart = start + first * incr;
        *iend = *istart + cnt * incr;
        return true;
    }
    loop_t *L = &P.loops[k];
    while (atomic_flag_test_and_set_explicit(&P.loop_lock, memory_order_acquire)) cpu_relax();
    if (L->gen != t_gen) {
        L->gen = t_gen;
        L->end = end; L->incr = incr; L->chunk = chunk;
        atomic_store(&L->next, start);
    }
    atomic_flag_clear_explicit(&P.loop_lock, memory_order_release);
    return loop_claim(L, istart, iend);
}

bool GOMP_loop_nonmonotonic_dynamic_next(long *istart, long *iend) {
    if (t_team <= 1 || t_static_loop) return false;
    return loop_claim(&P.loops[t_loops - 1], istart, iend);
}

bool GOMP_loop_dynamic_start(long s, long e, long i, long c, long *a, long *b) {
    return GOMP_loop_nonmonotonic_dynamic_start(s, e, i, c, a, b);
}
bool GOMP_loop_dynamic_next(long *a, long *b) { return GOMP_loop_nonmonotonic_dynamic_next(a, b); }
bool GOMP_loop_nonmonotonic_guided_start(long s, long e, long i, long c, long *a, long *b) {
    return GOMP_loop_nonmonotonic_dynamic_start(s, e, i, c, a, b);
}
bool GOMP_loop_nonmonotonic_guided_next(long *a, long *b) {
    return GOMP_loop_nonmonotonic_dynamic_next(a, b);
}
bool GOMP_loop_guided_start(long s, long e, long i, long c, long *a, long *b) {
    return GOMP_loop_nonmonotonic_dynamic_start(s, e, i, c, a, b);
}
bool GOMP_loop_guided_next(long *a, long *b) { return GOMP_loop_nonmonotonic_dynamic_next(a, b); }
void GOMP_loop_end_nowait(void) {}
void GOMP_loop_end(void) { GOMP_barrier(); }

/* ---- single: the first slot to arrive at the region's k-th single runs it */
bool GOMP_single_start(void) {
    if (t_team <= 1) return true;
    int k = t_loops++;
    if (k >= MAX_LOOPS) return t_slot == 0;          /* past the records: slot 0 runs it */
    loop_t *L = &P.loops[k];
    bool first = false;
    while (atomic_flag_test_and_set_explicit(&P.loop_lock, memory_order_acquire)) cpu_relax();
    if (L->gen != t_gen) { L->gen = t_gen; first = true; }
    atomic_flag_clear_explicit(&P.loop_lock, memory_order_release);
    return first;
}

/* ---- critical and atomic sections: one process-wide lock each */
static pthread_mutex_t critical_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t atomic_lock = PTHREAD_MUTEX_INITIALIZER;
void GOMP_critical_start(void) { pthread_mutex_lock(&critical_lock); }
void GOMP_critical_end(void) { pthread_mutex_unlock(&critical_lock); }
void GOMP_critical_name_start(void **p) { (void)p; pthread_mutex_lock(&critical_lock); }
void GOMP_critical_name_end(void **p) { (void)p; pthread_mutex_unlock(&critical_lock); }
void GOMP_atomic_start(void) { pthread_mutex_lock(&atomic_lock); }
void GOMP_atomic_end(void) { pthread_mutex_unlock(&atomic_lock); }
