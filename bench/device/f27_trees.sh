#!/bin/bash
# Default-mode CUDA bench tables of four trees in one run (bench/results/formula-refactor.md):
# export each with `git archive <commit> | tar -x -C devrun/<name>` (a0 ae0e0de, a1 44fe28d,
# b0 f9583b3, b1 f29208b; devrun/ is untracked, so it travels to the device), then run this
# from the repo root with $OUT set.
set -u
export TORCHLEAN_BACKEND=cuda TORCHLEAN_REQUIRE_CUDA=1 PYTHONUNBUFFERED=1
START=$(date +%s)
for t in a0 a1 b0 b1; do (cd devrun/$t && make -j4 stub cuda > /tmp/build-$t.log 2>&1; echo build $t rc=$?) & done
wait
echo "built after $(( $(date +%s) - START )) s"
mkdir -p $OUT/ab
for t in a0 a1 b0 b1; do
  echo "== $t $(( $(date +%s) - START )) s"
  (cd devrun/$t && PYTHONPATH=/tmp/site:$PWD BENCH_OUT=$OUT/ab/$t.md timeout 100 python3 bench/bench_cuda.py > $OUT/ab/$t.log 2>&1; echo rc=$?)
done
echo "done after $(( $(date +%s) - START )) s"
