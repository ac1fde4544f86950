#!/usr/bin/env bash
# f22 (issue 22): data parallel on 2 GPUs (nvidia-h200-x2). From the repo root, after
# `make -j16 stub cuda`; every step under a timeout within F22_BUDGET_S (default 110 s: the
# weak-scaling table, then the hostwait and solo variants); F22_FULL=1 F22_BUDGET_S=330 adds
# items 1 and the rest of 3 (about 5 minutes).
#  1. the data-parallel tests on CUDA (NCCL, one GPU per rank): bit-exact accumulation with
#     K = 1, 2, 3 micro-batches and resume, default mode against one process, and lost,
#     stalled or skipping ranks failing within the deadline (the NCCL watchdog);
#  2. weak scaling, 1 vs 2 GPUs at the same batch per GPU: torchlean (mpirun) and PyTorch DDP
#     (torchrun) for the VGG-style CNN, the d=256 LM and the GPT-2-width LM (d=768, 6 layers,
#     T=512); efficiency = 1-GPU step / 2-GPU step;
#  3. where the time goes on 2 GPUs: --diag variants (solo: no communication; after: no
#     overlap; hostwait: the host, not the compute stream, waits for NCCL at the end of
#     backward, as before),
#     NCCL kernels on 2 SMs for the CNN (NCCL_MAX_CTAS / NCCL_MAX_NCHANNELS), exact mode,
#     and rank 0's kernel profile of the CNN and GPT steps on 1 and 2 GPUs.
# NVLink multicast stays off: NCCL_NVLS_ENABLE=0. Output (few files: the device tool returns at
# most 8): $OUT/ddp-f22.md (the table) and $OUT/logs.txt (every log); stdout ends with the
# summary, the table, rank 0's host time by phase, the kernel profiles and the test results.
set -u
OUT=${OUT:-/tmp/f22-out}
mkdir -p "$OUT"
BUDGET=${F22_BUDGET_S:-110}
START=$(date +%s)
L="$OUT/logs.txt"      # every step's output
SUMMARY=/tmp/f22-summary.txt
: >"$SUMMARY"
. bench/gpu_steps.sh
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export TORCHLEAN_DIST_TIMEOUT_S=${TORCHLEAN_DIST_TIMEOUT_S:-60}
PY=${PY:-python3}
if ls .whl/*.whl >/dev/null 2>&1; then
  $PY -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl >>"$L" 2>&1 \
    || note "wheel install failed (see tests.log)"
fi
export PYTHONPATH="/tmp/site:$PWD${PYTHONPATH:+:$PYTHONPATH}"
{
  date -u
  git log --oneline -1 2>/dev/null
  nvidia-smi --query-gpu=index,name,clocks.max.sm --format=csv,noheader
  mpirun --version 2>&1 | head -n 1
  $PY -c "import torch, mpi4py; print('torch', torch.__version__, 'nccl', torch.cuda.nccl.version(), 'mpi4py', mpi4py.__version__)"
} >>"$SUMMARY" 2>&1

# 1. tests on CUDA (F22_FULL=1 only: 80 s on 2 H100s; they passed at 11:24 UTC, 20 of 20)
if [ "${F22_FULL:-0}" = 1 ]; then
  step "tests: data parallel on CUDA (NCCL)" "$L" 150 \
    env TORCHLEAN_BACKEND=cuda TORCHLEAN_REQUIRE_CUDA=1 $PY -m pytest -q -rfEs -p no:cacheprovider \
    tests/test_distributed_dp.py tests/test_distributed.py \
    -k "bitwise or default_mode_matches or rank_order or exact_cuda_run or collectives or syncbatchnorm or lost_rank or stalled or killed or skipped"
  note "tests: $(grep -E '(passed|failed|error)' "$L" | tail -n 1)"
fi

# 2./3. benchmarks (Open MPI forwards only the variables named with -x)
if mpirun --version 2>&1 | grep -qi "open mpi"; then
  MPIRUN=(mpirun --bind-to none -x NCCL_NVLS_ENABLE -x PYTHONPATH -x TORCHLEAN_BACKEND
          -x TORCHLEAN_DIST_TIMEOUT_S -x LD_LIBRARY_PATH -x PATH)
  fwd() { for kv in "$@"; do printf -- '-x\n%s\n' "$kv"; done; }
else
  MPIRUN=(mpirun)
  fwd() { for kv in "$@"; do printf -- '-genv\n%s\n%s\n' "${kv%%=*}" "${kv#*=}"; done; }
fi
export TORCHLEAN_BACKEND=cuda
J=/tmp/f22-ddp.jsonl
: >"$J"
M=cnn,lm,gpt
RUN=(--warmup 5 --steps 30 --timeline --out "$J")
# tl NAME N [VAR=VALUE ...] -- ARGS: torchlean on N GPUs with the NCCL variables given
tl() {
  local name=$1 n=$2; shift 2
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
  local extra=()
  [ ${#envs[@]} -gt 0 ] && mapfile -t extra < <(fwd "${envs[@]}")
  step "torchlean $name, $n GPU" "$L" 70 \
    "${MPIRUN[@]}" "${extra[@]}" -n "$n" $PY bench/bench_ddp.py run "${RUN[@]}" "$@"
}
pt() {
  step "pytorch, $1 GPU" "$L" 70 $PY -m torch.distributed.run --standalone \
    --nproc_per_node "$1" bench/bench_ddp_torch.py --model $M --warmup 5 --steps 30 --out "$J"
}
tl "default" 1 -- --model $M
tl "default" 2 -- --model $M
pt 1
pt 2
step "table" "$L" 20 $PY bench/bench_ddp.py table "$J" --out "$OUT/ddp-f22.md"
# while budget remains: the host waiting at the end of backward (as before), no communication
for d in hostwait solo; do tl "diag $d" 2 -- --model $M --diag $d; done
step "table" "$L" 20 $PY bench/bench_ddp.py table "$J" --out "$OUT/ddp-f22.md"
if [ "${F22_FULL:-0}" = 1 ]; then
  # (NCCL on fewer SMs, NCCL_MAX_CTAS=2 or 8, a normal-priority NCCL stream and no step check
  # changed nothing or lost time in the 10:35 run: bench/results/ddp-f22-h200x2.md)
  tl "diag after" 2 -- --model $M --diag after
  tl "NCCL on 2 CTAs" 2 NCCL_MAX_CTAS=2 NCCL_MAX_NCHANNELS=2 -- --model cnn --tag ctas2
  tl "exact" 1 -- --model $M --mode exact
  tl "exact" 2 -- --model $M --mode exact
  step "table" "$L" 20 $PY bench/bench_ddp.py table "$J" --out "$OUT/ddp-f22.md"
  # kernel profiles last (the runs they time are tagged, not the table's main rows)
  for n in 1 2; do
    step "profile cnn,gpt $n GPU" "$L" 60 \
      "${MPIRUN[@]}" -n "$n" $PY bench/bench_ddp.py run --model cnn,gpt --warmup 3 --steps 5 \
      --profile 4 --tag profiled --out /tmp/f22-profiled.jsonl
  done
fi
note "total $(($(date +%s) - START)) s"
echo "================ summary"
cat "$SUMMARY"
echo "================ table"
cat "$OUT/ddp-f22.md" 2>/dev/null
echo "================ host time by phase, ms per step (rank 0)"
grep "^## timeline" "$L"
echo "================ kernel profiles (rank 0)"
grep -E "^## profile|^  +[0-9.]+ ms " "$L"
echo "================ failures (tail of the logs)"
grep -E "passed|failed|FAILED|Error|Traceback" "$L" | head -n 40
