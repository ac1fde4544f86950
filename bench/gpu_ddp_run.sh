#!/usr/bin/env bash
# The 2-GPU data-parallel run (device kind nvidia-h200-x2), from the repo root:
#     bash bench/gpu_ddp_run.sh
# 1. builds both libraries; 2. runs tests/test_distributed.py on CUDA (NCCL, one GPU per rank)
# and on the stub (MPI); 3. times bench/bench_ddp.py (torchlean, mpirun, default and exact) and
# bench/bench_ddp_torch.py (PyTorch DDP, torchrun) on 1 and 2 GPUs and writes the table.
# Every step has a timeout and keeps going past failures; everything lands in $OUT:
# run.log build.log test-dist-cuda.log test-dist-stub.log bench-ddp.log ddp.jsonl
# ddp-h200x2.md (commit it as bench/results/ddp-h200x2.md) summary.txt.
# NVLink multicast (NVLS) stays off in every process: NCCL_NVLS_ENABLE=0.
set -u
set -x
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/torchlean-ddp-out}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/run.log") 2>&1
BUDGET=${GPU_RUN_BUDGET_S:-560}
START=$(date +%s)
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1   # Open MPI as root
export TORCHLEAN_DIST_TIMEOUT_S=${TORCHLEAN_DIST_TIMEOUT_S:-120}
PY=${PY:-python3}
SUMMARY="$OUT/summary.txt"
: >"$SUMMARY"
. bench/gpu_steps.sh   # note and step (the script runs from the repo root)

{
  date -u
  nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader
  nvidia-smi topo -m
  $PY --version
  mpirun --version 2>&1 | head -n 2
  $PY -c "import mpi4py, torch; print('mpi4py', mpi4py.__version__, 'torch', torch.__version__)"
} >>"$SUMMARY" 2>&1

# cffi (and pycparser) come as carried wheels, as for bench/gpu_run.sh
if ls .whl/*.whl >/dev/null 2>&1; then
  $PY -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl >>"$OUT/build.log" 2>&1 \
    || note "wheel install failed (see build.log)"
fi
export PYTHONPATH="/tmp/site:$PWD${PYTHONPATH:+:$PYTHONPATH}"

step "build (make cuda stub)" "$OUT/build.log" 300 make -j16 cuda stub PY="$PY"
step "symbols-check" "$OUT/build.log" 30 make symbols-check PY="$PY"

# the distributed tests: CUDA ranks talk NCCL (TORCHLEAN_REQUIRE_CUDA: a CUDA skip fails)
step "test_distributed (cuda, NCCL)" "$OUT/test-dist-cuda.log" 200 \
  env TORCHLEAN_BACKEND=cuda TORCHLEAN_REQUIRE_CUDA=1 \
  $PY -m pytest -q -rfEs -p no:cacheprovider tests/test_distributed.py
note "cuda: $(grep -E '(passed|failed|error)' "$OUT/test-dist-cuda.log" | tail -n 1)"
step "test_distributed (stub, MPI)" "$OUT/test-dist-stub.log" 120 \
  env TORCHLEAN_BACKEND=stub $PY -m pytest -q -rfEs -p no:cacheprovider tests/test_distributed.py
note "stub: $(grep -E '(passed|failed|error)' "$OUT/test-dist-stub.log" | tail -n 1)"

# mpirun: Open MPI needs the variables named to forward them; MPICH forwards everything
if mpirun --version 2>&1 | grep -qi "open mpi"; then
  MPIRUN=(mpirun --bind-to none -x NCCL_NVLS_ENABLE -x PYTHONPATH -x TORCHLEAN_BACKEND
          -x TORCHLEAN_DIST_TIMEOUT_S -x LD_LIBRARY_PATH -x PATH)
else
  MPIRUN=(mpirun)
fi
export TORCHLEAN_BACKEND=cuda
: >"$OUT/ddp.jsonl"
for model in cnn lm; do
  for n in ${GPU_COUNTS:-1 2}; do
    for mode in default exact; do
      step "torchlean $model $mode ${n} GPU" "$OUT/bench-ddp.log" 150 \
        "${MPIRUN[@]}" -n "$n" $PY bench/bench_ddp.py run --model "$model" --mode "$mode" \
        --out "$OUT/ddp.jsonl"
    done
    step "pytorch $model ${n} GPU" "$OUT/bench-ddp.log" 150 \
      $PY -m torch.distributed.run --standalone --nproc_per_node "$n" bench/bench_ddp_torch.py \
      --model "$model" --out "$OUT/ddp.jsonl"
  done
done
step "table" "$OUT/bench-ddp.log" 30 \
  $PY bench/bench_ddp.py table "$OUT/ddp.jsonl" --out "$OUT/${DDP_TABLE:-ddp-h200x2.md}"
cat "$OUT/${DDP_TABLE:-ddp-h200x2.md}" >>"$SUMMARY" 2>/dev/null
note "total $(($(date +%s) - START)) s"
