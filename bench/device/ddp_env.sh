# ddp_env.sh: what the data-parallel GPU scripts (ddp_diag.sh, ddp_w4.sh, ddp_final.sh, ...) share, sourced
# from the repo root with OUT set: the log, NCCL/MPI variables, the carried wheels, the stub,
# the machine's GPUs and links, and MPIRUN (Open MPI forwarding the variables every rank needs).
mkdir -p "$OUT"
exec > >(tee -a "$OUT/run.log") 2>&1
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 TORCHLEAN_BACKEND=cuda
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 TORCHLEAN_DIST_TIMEOUT_S=60
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
export PYTHONPATH="/tmp/site:$PWD"
make -j"$(nproc)" stub >/dev/null 2>&1 || echo "stub build failed"
date -u; nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader; nvidia-smi topo -m | head -6
MPIRUN=(mpirun --bind-to none -x NCCL_NVLS_ENABLE -x NCCL_P2P_DISABLE -x NCCL_SHM_DISABLE
        -x PYTHONPATH -x TORCHLEAN_BACKEND -x TORCHLEAN_DIST_TIMEOUT_S -x LD_LIBRARY_PATH -x PATH)
# NCCL's socket transport (as between nodes), torchrun, and a filter keeping a run's last lines
SOCKET=(env NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1)
TR=(python3 -m torch.distributed.run --standalone --nproc_per_node)
q() { grep -v '^{' | grep -v "^\s*$" | grep -v "Warning\|warn" | tail -2; }
