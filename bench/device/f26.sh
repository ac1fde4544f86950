#!/bin/bash
# f26 (issue 26): correctly rounded tl_math.h on the GPU machine.
#  0. make check-math: the current header against the glibc + quad-precision oracle, all 2^32
#     inputs per function, on all CPU cores (the direct proof).
#  1. build/check_math_same: the current header = the proven double-double version
#     (tests/native/tl_math_cr_ref.h), bit for bit on all 2^32 inputs, on all CPU cores.
#  2. make check-math-cuda: device = host bits on all 2^32 inputs per function (digests).
#  3. bench/bench_tl_math.sh: per-function cost, pre-CR polynomials vs double-double vs current,
#     CUDA kernel (2^26 elements) and host (stub loop form, one thread).
#  4. bench/bench_exact_math.py: the stub's exact-mode kernels (one thread, CPU time), this tree
#     against the same tree with the proven double-double header (and against 3919dfa, the
#     pre-CR polynomials, where git can check it out).
# F26_SKIP=oracle,same,sweep,bench,kernels skips parts.
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/f26-out}; mkdir -p "$OUT"
skip() { [[ ",$F26_SKIP," == *",$1,"* ]]; }
nproc; nvidia-smi --query-gpu=name --format=csv,noheader; git log --oneline -1 2>/dev/null
make -s -j16 build/check_math build/check_math_same build/tl_math_device_check || exit 1
status=0
if ! skip oracle; then
    echo "== 0. make check-math (oracle, all cores; hard-case lines in \$OUT/check_math.txt)"
    start=$(date +%s%N)
    build/check_math > "$OUT/check_math.txt" || status=1
    grep -v "^  hard" "$OUT/check_math.txt"
    echo "check-math wall time: $(( ($(date +%s%N) - start) / 1000000 )) ms"
fi
if ! skip same; then
    echo "== 1. check_math_same (host, all cores)"
    start=$(date +%s%N)
    build/check_math_same | tee "$OUT/check_math_same.txt" || status=1
    echo "check_math_same wall time: $(( ($(date +%s%N) - start) / 1000000 )) ms"
fi
if ! skip sweep; then
    echo "== 2. make check-math-cuda (device vs host, all 2^32 inputs)"
    start=$(date +%s%N)
    build/tl_math_device_check | tee "$OUT/device_check.txt" || status=1
    echo "check-math-cuda wall time: $(( ($(date +%s%N) - start) / 1000000 )) ms"
fi
if ! skip bench; then
    echo "== 3. bench_tl_math (cuda, host)"
    bench/bench_tl_math.sh cuda host | tee "$OUT/bench_tl_math.md"
fi
if ! skip kernels; then
    echo "== 4. stub exact-mode kernels (bench_exact_math.py, n = 262144, 1 thread)"
    D=/tmp/f26-crdd; rm -rf $D; mkdir -p $D
    tar --exclude=./build --exclude=./.git -cf - . | tar -xf - -C $D
    cp tests/native/tl_math_cr_ref.h $D/native/common/tl_math.h
    rm -f $D/torchlean/lib/*.so
    (cd $D && make -s -j16 stub >/dev/null) || echo "cr_dd stub build failed"
    TORCHLEAN_BACKEND=stub python3 bench/bench_exact_math.py --n 262144 --reps 11 --rounds 2 --other $D \
        | tee "$OUT/kernels_vs_crdd.md"
    P=/tmp/f26-poly; rm -rf $P
    if git worktree add -f $P 3919dfa >/dev/null 2>&1; then
        (cd $P && make -s -j16 stub >/dev/null) || echo "3919dfa stub build failed"
        TORCHLEAN_BACKEND=stub python3 bench/bench_exact_math.py --n 262144 --reps 11 --rounds 2 --other $P \
            | tee "$OUT/kernels_vs_poly.md"
        git worktree remove --force $P
    else
        echo "(no git checkout of 3919dfa here: pre-CR kernel times not measured)"
    fi
fi
exit $status
