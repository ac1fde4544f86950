#!/usr/bin/env bash
# The data-parallel run (device kind nvidia-h200-x2 or -x4), from the repo root, in 8 minutes:
#     bash bench/gpu_ddp_run.sh                # everything, W = 1, 2 (and 4 where 4 GPUs are seen)
#     PART=1 bash bench/gpu_ddp_run.sh; PART=2 bash bench/gpu_ddp_run.sh
#                                              # the same in two calls of under 10 minutes each
#                                              # (same $OUT: part 2 appends and writes the table)
# WS="1 2 4" picks the widths; DIAG=1 adds the --diag/--timeline variants at the largest W.
# 1. builds both libraries; 2. exact and default DistributedDataParallel on CUDA at W=2 under
# mpirun and under torchrun's variables (NCCL, TCP rendezvous); 3. times bench/bench_ddp.py
# (torchlean, default and exact) against bench/bench_ddp_torch.py (PyTorch DDP, torchrun) at
# W=1,2 for the three models, over NVLink and over the emulated network (NCCL_P2P_DISABLE=1
# NCCL_SHM_DISABLE=1: NCCL's socket transport), plus one torchlean run launched by torchrun;
# 4. all-reduce cost per size on both transports and the scaling model; 5. the rest of the
# distributed tests on CUDA (mpirun, TCP rendezvous, emulated network).
# Every step has a timeout and keeps going past failures; everything lands in $OUT (8 files):
# run.log tests.log bench.log (build too) ddp.jsonl socket.jsonl allreduce.jsonl ddp-h200x2.md
# summary.txt
# (ddp-h200x2.md holds both tables and the scaling model: commit it as
# bench/results/ddp-h200x2.md).
# NVLink multicast (NVLS) stays off in every process: NCCL_NVLS_ENABLE=0.
set -u
set -x
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/torchlean-ddp-out}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/run.log") 2>&1
BUDGET=${GPU_RUN_BUDGET_S:-470}
START=$(date +%s)
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1   # Open MPI as root
export TORCHLEAN_DIST_TIMEOUT_S=${TORCHLEAN_DIST_TIMEOUT_S:-120}
PY=${PY:-python3}
DATA=${DDP_DATA:-build/ddp-run}   # kept on the machine between PART=1 and PART=2
mkdir -p "$DATA"
SUMMARY="$DATA/summary.txt"
PART=${PART:-all}
NGPU=$(nvidia-smi -L 2>/dev/null | wc -l)
if [ -z "${WS:-}" ]; then WS="1 2"; [ "$NGPU" -ge 4 ] && WS="1 2 4"; fi
WMAX=${WS##* }
[ "$PART" = 2 ] || : >"$SUMMARY"
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
  $PY -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl >>"$DATA/bench.log" 2>&1 \
    || note "wheel install failed (see bench.log)"
fi
export PYTHONPATH="/tmp/site:$PWD${PYTHONPATH:+:$PYTHONPATH}"

[ "$PART" = 2 ] || step "build (make cuda stub)" "$DATA/bench.log" 300 make -j16 cuda stub PY="$PY"
[ "$PART" = 2 ] || step "symbols-check" "$DATA/bench.log" 30 make symbols-check PY="$PY"

# mpirun: Open MPI needs the variables named to forward them; MPICH forwards everything
if mpirun --version 2>&1 | grep -qi "open mpi"; then
  MPIRUN=(mpirun --bind-to none -x NCCL_NVLS_ENABLE -x PYTHONPATH -x TORCHLEAN_BACKEND
          -x TORCHLEAN_DIST_TIMEOUT_S -x LD_LIBRARY_PATH -x PATH -x NCCL_P2P_DISABLE
          -x NCCL_SHM_DISABLE -x TORCHLEAN_DDP_FLAT_BYTES)
else
  MPIRUN=(mpirun)
fi
export TORCHLEAN_BACKEND=cuda
TORCHRUN=($PY -m torch.distributed.run --standalone --nproc_per_node)
SOCKET=(env NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1)
T="$DATA/tests.log"
B="$DATA/bench.log"
J="$DATA/ddp.jsonl"
S="$DATA/socket.jsonl"        # the emulated network's steps (and, at the end, W=1's from $J)
A="$DATA/allreduce.jsonl"
[ "$PART" = 2 ] || { : >"$J"; : >"$S"; : >"$A"; : >"$T"; }
PYTEST=($PY -m pytest -q -rfEs -p no:cacheprovider)
passline() { note "$1: $(grep -E '[0-9]+ (passed|failed|error)' "$T" | tail -n 1)"; }

if [ "$PART" != 2 ]; then
# 2. correctness first (the flat buckets and the folded step check are new): W=2 on NCCL
step "exact+default DDP, NCCL, mpirun" "$T" 90 env TORCHLEAN_REQUIRE_CUDA=1 "${PYTEST[@]}" \
  tests/test_distributed.py -k "exact_equals or default_mode or cuda_run_equals"
passline "NCCL under mpirun"
step "exact+default DDP, NCCL, torchrun variables" "$T" 60 env TORCHLEAN_REQUIRE_CUDA=1 \
  "${PYTEST[@]}" "tests/test_distributed_tcp.py::test_ddp_exact_equals_accumulation_bitwise[2-torchrun]" \
  tests/test_distributed_tcp.py::test_ddp_default_mode_over_the_store
passline "NCCL under torchrun variables"

# 3. step times, NVLink: one process per (W, mode) runs the three models
for n in $WS; do
  for mode in default exact; do
    step "torchlean $mode W=$n" "$B" 75 "${MPIRUN[@]}" -n "$n" $PY bench/bench_ddp.py run \
      --model cnn,lm,gpt --mode "$mode" --steps 20 --out "$J"
  done
  step "pytorch W=$n" "$B" 75 "${TORCHRUN[@]}" "$n" bench/bench_ddp_torch.py \
    --model cnn,lm,gpt --steps 20 --out "$J"
done
step "exact DDP at W=$WMAX equals accumulation (CUDA)" "$T" 120 env TORCHLEAN_REQUIRE_CUDA=1 \
  "${PYTEST[@]}" tests/test_distributed.py -k "four_gpus or four_ranks or three_ranks"
passline "exact W=3/4 on CUDA"
fi
if [ "$PART" != 1 ]; then
# the emulated network (W=1 does not communicate: its NVLink numbers serve)
for n in ${WS#1 }; do
  for mode in default exact; do
    step "torchlean $mode W=$n socket" "$B" 75 "${SOCKET[@]}" "${MPIRUN[@]}" -n $n $PY \
      bench/bench_ddp.py run --model cnn,lm,gpt --mode "$mode" --steps 20 --out "$S"
  done
  step "pytorch W=$n socket" "$B" 75 "${SOCKET[@]}" "${TORCHRUN[@]}" $n bench/bench_ddp_torch.py \
    --model cnn,lm,gpt --steps 20 --out "$S"
done
# launched by torchrun (TCP rendezvous, no MPI), and without the flat buckets (A/B)
if [ "${DIAG:-0}" = 1 ]; then   # where the short steps' time goes, at the largest W
  for d in solo after nocheck highprio hostwait; do
    step "torchlean default W=$WMAX diag $d" "$B" 40 "${MPIRUN[@]}" -n $WMAX $PY bench/bench_ddp.py \
      run --model cnn,lm --diag $d --timeline --steps 20 --out "$J"
  done
  step "torchlean default W=$WMAX timeline" "$B" 40 "${MPIRUN[@]}" -n $WMAX $PY bench/bench_ddp.py \
    run --model cnn,lm --timeline --tag timeline --steps 20 --out "$J"
  step "torchlean default W=1 timeline" "$B" 40 $PY bench/bench_ddp.py \
    run --model cnn,lm --timeline --tag timeline --steps 20 --out "$J"
fi
step "torchlean default W=2 torchrun" "$B" 45 "${TORCHRUN[@]}" 2 bench/bench_ddp.py run \
  --model cnn,lm --tag torchrun --steps 20 --out "$J"
step "torchlean default W=2 no flat buckets" "$B" 45 env TORCHLEAN_DDP_FLAT_BYTES=0 \
  "${MPIRUN[@]}" -n 2 $PY bench/bench_ddp.py run --model cnn,lm --tag flat=0 --steps 20 --out "$J"

# 4. all-reduce cost per size, both transports
for n in ${WS#1 }; do
  step "all-reduce sizes W=$n nvlink" "$B" 30 "${MPIRUN[@]}" -n $n $PY bench/bench_ddp_model.py \
    allreduce --tag nvlink --out "$A"
  step "all-reduce sizes W=$n socket" "$B" 40 "${SOCKET[@]}" "${MPIRUN[@]}" -n $n $PY \
    bench/bench_ddp_model.py allreduce --tag socket --out "$A"
done

# 5. the rest of the tests on CUDA (W=3 and W=4 fall back to the stub on 2 GPUs)
step "test_distributed (cuda, mpirun)" "$T" 120 env TORCHLEAN_REQUIRE_CUDA=1 "${PYTEST[@]}" \
  tests/test_distributed.py -k "not example"
passline "test_distributed.py on CUDA"
step "test_distributed_tcp (cuda, torchrun variables)" "$T" 90 "${PYTEST[@]}" \
  tests/test_distributed_tcp.py
passline "test_distributed_tcp.py on CUDA"
step "exact DDP over the emulated network" "$T" 60 "${SOCKET[@]}" env TORCHLEAN_REQUIRE_CUDA=1 \
  "${PYTEST[@]}" tests/test_distributed.py -k "exact_equals or default_mode"
passline "NCCL socket transport"

# tables: always written (no budget check), each under its own short timeout
grep '"world": 1' "$J" >>"$S" 2>/dev/null
MD="$OUT/${DDP_TABLE:-ddp-h200x$NGPU.md}"
{
  timeout 20 $PY bench/bench_ddp.py table "$J"
  echo; echo "## Emulated network (NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1: socket transport)"
  echo; timeout 20 $PY bench/bench_ddp.py table "$S" | tail -n +2
  echo; timeout 60 $PY bench/bench_ddp_model.py predict --allreduce "$A" --steps "$J" \
    --socket-steps "$S"
  echo; echo "Command: bash bench/gpu_ddp_run.sh (device nvidia-h200-x2); summary:"; echo
  sed 's/^/    /' "$SUMMARY"
} >"$MD" 2>>"$B"
note "total $(($(date +%s) - START)) s"
fi
cp "$DATA"/* "$OUT"/ 2>/dev/null
