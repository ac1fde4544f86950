#!/bin/bash
# Issue 20 on the GPU: register-row softmax, measured against a baseline build of the tree
# before it (BASE_LIB: the folder holding its libtorchlean_cuda.so) in the same run, then the
# whole CUDA suite. Repo root, after `make -j16 stub cuda`; $OUT: output folder.
set -u
export TORCHLEAN_BACKEND=cuda TORCHLEAN_REQUIRE_CUDA=1 PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/f27-out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for round in 1 2; do
    for lib in base new; do
        if [ $lib = base ]; then export TORCHLEAN_LIB_DIR=$BASE_LIB; else unset TORCHLEAN_LIB_DIR; fi
        echo "== round $round, $lib: softmax rows"
        BENCH_ONLY=softmax BENCH_OUT="$OUT/softmax-$lib-$round.md" timeout 120 python3 bench/bench_cuda.py 2>&1 | grep "^  softmax\|^  log_softmax\|^  masked\|^  cross_entropy\|rror"
    done
done
unset TORCHLEAN_LIB_DIR
echo "== whole CUDA suite (new)"
timeout 300 python3 -m pytest -q -p no:cacheprovider -rfE -n 8 tests 2>&1 | tail -4
