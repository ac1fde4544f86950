#!/usr/bin/env bash
# GPU calls of this round (nvidia-h200). Carry .whl, torchlean/lib/libtorchlean_cuda.so and
# build/cuda-bench/libtorchlean_cuda.so; the stub is built there; logs and tables in $OUT.
#   OUT=/tmp/o STEPS="subset catalog" bash bench/device/round43.sh     # the sort family only
#   OUT=/tmp/o STEPS="suite" bash bench/device/round43.sh              # the whole CUDA suite
#   OUT=/tmp/o STEPS="special models audit stub" bash bench/device/round43.sh
#   OUT=/tmp/o STEPS="ddp gemm" bash bench/device/round43.sh          # on nvidia-h200-x2
# subset: the CUDA tests of the sort family (sort, topk, running sums) and the exact parity
# cases; probes: GPU time per kernel of catalog calls, and the FP64 MMA's rounding (carry
# build/dmma_order); suite: the whole CUDA suite; catalog: the heavy catalog ops against PyTorch; special:
# exhaustive correct-rounding runs on the host's threads (SPECIAL_FNS); devcheck: device = host
# bits of the special functions (DEVCHECK_FNS); models: issue 34's
# table; replay: a captured step's host time per replay, split; audit: recording on CUDA against
# the stub, and its cost; auditstub: its cost on the
# stub (2 pinned cores); stub: the stub against
# PyTorch CPU on 2 pinned cores of the host (issue 35's tables); ddp: bench/gpu_ddp_run.sh's
# first part (NCCL tests under mpirun and torchrun variables, 1 and 2 GPUs against PyTorch DDP);
# gemm: the stub's default GEMM against the FMA peak and PyTorch CPU on 2 pinned cores;
# opover: a 1-element op's host time against PyTorch eager; dmma: bench/device/dmma_gemm.sh;
# gemmab: the stub's GEMM against a build with BEFORE_OVERLAY's files (say, an earlier
# native/stub/linalg.c) laid over this tree (bench_gemm_ab.py), 2 pinned cores; isa: this
# host's build (AVX-512 on the H200 hosts) against one with BEFORE_OVERLAY's files: the GEMM's,
# the convolutions' and the pointwise kernels' bits at 1 and 2 threads (0 differ expected), then
# the examples' steps side by side (bench/stub_ab.sh, 2 pinned cores).
set -u
OUT=${OUT:-/tmp/torchlean-gpu-out}; mkdir -p "$OUT"
STEPS=${STEPS:-suite}
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl >"$OUT/build.log" 2>&1
export PYTHONPATH="/tmp/site:$PWD"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/summary.txt"
make -j16 stub >>"$OUT/build.log" 2>&1 && make symbols-check 2>&1 | tail -1 | tee -a "$OUT/summary.txt"
has() { case " $STEPS " in *" $1 "*) return 0;; esac; return 1; }
cuda_tests() {  # name, timeout, pytest arguments...
  local name=$1 limit=$2; shift 2
  local s; s=$(date +%s)
  TORCHLEAN_BACKEND=cuda TORCHLEAN_REQUIRE_CUDA=1 timeout "$limit" python3 -m pytest -q \
    -p no:cacheprovider -rfE -n 14 "$@" >"$OUT/$name.log" 2>&1
  echo "$name rc=$? in $(( $(date +%s) - s )) s: $(tail -1 "$OUT/$name.log")" | tee -a "$OUT/summary.txt"
  grep -E "^(FAILED|ERROR)" "$OUT/$name.log" | head -40 | tee -a "$OUT/summary.txt"
}
if has subset; then
  cuda_tests subset 200 tests/test_catalog_sorting.py tests/test_device_indices.py \
    tests/test_catalog_math.py tests/test_exact_parity.py tests/test_registry_ops.py \
    tests/test_catalog_scatter.py tests/test_index.py tests/test_determinism.py
fi
if has suite; then cuda_tests suite "${SUITE_S:-330}" tests; fi
if has catalog; then
  TORCHLEAN_BACKEND=cuda timeout 150 python3 bench/bench_catalog_cuda.py --out "$OUT/catalog-cuda.md" \
    ${CATALOG_ONLY:+--only $CATALOG_ONLY} \
    >"$OUT/catalog.log" 2>&1
  echo "catalog rc=$?" | tee -a "$OUT/summary.txt"; grep "^|" "$OUT/catalog-cuda.md" | tee -a "$OUT/summary.txt"
fi
if has probes; then
  TORCHLEAN_BACKEND=cuda timeout 120 python3 bench/probes/kernel_times.py 2>&1 | tee "$OUT/kernel-times.txt" | tail -80
  if [ -x build/dmma_order ]; then timeout 60 build/dmma_order 400000 2>&1 | tee "$OUT/dmma-order.txt"; fi
fi
if has devcheck; then
  make build/tl_math_device_check >>"$OUT/build.log" 2>&1
  timeout "${DEVCHECK_S:-120}" build/tl_math_device_check ${DEVCHECK_FNS:-airy_ai modified_bessel_k0 \
    modified_bessel_k1 scaled_modified_bessel_k0 scaled_modified_bessel_k1 spherical_bessel_j0} 2>&1 \
    | tee "$OUT/devcheck.txt" | tail -10 | tee -a "$OUT/summary.txt"
fi
if has special; then
  make build/check_special >>"$OUT/build.log" 2>&1
  OMP_NUM_THREADS=$(nproc) timeout "${SPECIAL_S:-200}" build/check_special ${SPECIAL_FNS:-ndtri} 2>&1 \
    | tee "$OUT/check-special.txt" | tail -12 | tee -a "$OUT/summary.txt"
fi
if has models; then
  TORCHLEAN_BACKEND=cuda timeout $(( ${MODELS_S:-200} + 40 )) python3 bench/bench_models_cuda.py \
    --sections "${MODEL_SECTIONS:-gemm,models}" --out "$OUT/models-exact.md" --budget-s "${MODELS_S:-200}" \
    >"$OUT/models.log" 2>&1
  echo "models rc=$?" | tee -a "$OUT/summary.txt"; grep "^|" "$OUT/models-exact.md" | head -40
fi
if has audit; then
  timeout "${AUDIT_S:-150}" python3 bench/bench_audit.py --backend cuda \
    --model ${AUDIT_MODELS:-digits_cnn mlp_digits} ${AUDIT_ARGS:-} \
    --out "$OUT/audit-cost-cuda.md" >"$OUT/audit.log" 2>&1
  echo "audit rc=$?" | tee -a "$OUT/summary.txt"; cat "$OUT/audit-cost-cuda.md" | tail -20
fi
if has replay; then   # where a captured step's host time per replay goes
  TORCHLEAN_BACKEND=cuda timeout 120 python3 bench/probes/replay_host.py 2>&1 | tee "$OUT/replay-host.txt" | tee -a "$OUT/summary.txt"
  TORCHLEAN_BACKEND=cuda timeout 60 python3 bench/bench_graph_step.py --python-only 2>&1 | tail -4 | tee -a "$OUT/summary.txt"
fi
if has auditstub; then   # recording's cost on the stub, 2 pinned cores of the host
  TORCHLEAN_BACKEND=stub timeout "${AUDIT_STUB_S:-200}" taskset -c 2,3 python3 bench/bench_audit.py \
    --backend stub --threads 2 --model ${AUDIT_MODELS:-digits_cnn mlp_digits} ${AUDIT_ARGS:-} \
    --out "$OUT/audit-cost-stub.md" >"$OUT/audit-stub.log" 2>&1
  echo "audit stub rc=$?" | tee -a "$OUT/summary.txt"; tail -20 "$OUT/audit-cost-stub.md"
fi
if has stub; then
  TORCHLEAN_BACKEND=stub timeout "${STUB_S:-240}" taskset -c 2,3 python3 bench/bench_stub_torch.py \
    --threads 2 --rounds 3 --steps 10 --cifar-steps 3 ${STUB_MODELS:+--models $STUB_MODELS} \
    --out "$OUT/stub-torch.md" >"$OUT/stub.log" 2>&1
  echo "stub rc=$?" | tee -a "$OUT/summary.txt"; grep "^|" "$OUT/stub-torch.md" | tee -a "$OUT/summary.txt"
  [ "${STUB_LAYERS:-1}" = 1 ] && TORCHLEAN_BACKEND=stub timeout "${LAYERS_S:-150}" taskset -c 2,3 python3 bench/bench_stub_layers.py \
    --threads 2 --rounds 3 --reps 2 --clock wall --out "$OUT/stub-layers.md" >"$OUT/layers.log" 2>&1
  echo "layers rc=$?" | tee -a "$OUT/summary.txt"; grep "^|" "$OUT/stub-layers.md" | tee -a "$OUT/summary.txt"
fi
if has ddp; then   # correctness on NCCL, then 1 and 2 GPUs against PyTorch DDP, the table
  export NCCL_NVLS_ENABLE=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  MPI=(mpirun --bind-to none -x NCCL_NVLS_ENABLE -x PYTHONPATH -x TORCHLEAN_BACKEND)
  J="$OUT/ddp.jsonl"; : >"$J"
  TORCHLEAN_BACKEND=cuda TORCHLEAN_REQUIRE_CUDA=1 timeout 150 python3 -m pytest -q -p no:cacheprovider \
    tests/test_distributed.py -k "exact_equals or default_mode or cuda_run_equals" \
    "tests/test_distributed_tcp.py::test_ddp_exact_equals_accumulation_bitwise[2-torchrun]" \
    >"$OUT/ddp-tests.log" 2>&1
  echo "ddp tests rc=$?: $(tail -1 "$OUT/ddp-tests.log")" | tee -a "$OUT/summary.txt"
  for n in 1 2; do
    for mode in default exact; do
      TORCHLEAN_BACKEND=cuda timeout 75 "${MPI[@]}" -n $n python3 bench/bench_ddp.py run \
        --model cnn,lm,gpt --mode $mode --steps 20 --out "$J" >>"$OUT/ddp.log" 2>&1
    done
    timeout 75 python3 -m torch.distributed.run --standalone --nproc_per_node $n \
      bench/bench_ddp_torch.py --model cnn,lm,gpt --steps 20 --out "$J" >>"$OUT/ddp.log" 2>&1
  done
  python3 bench/bench_ddp.py table "$J" >"$OUT/ddp-h200x2.md" 2>>"$OUT/ddp.log"
  grep "^|" "$OUT/ddp-h200x2.md" | tee -a "$OUT/summary.txt"
fi
if has opover; then   # per-op host time against PyTorch eager, one pinned core each
  TORCHLEAN_BACKEND=stub timeout "${OPOVER_S:-120}" taskset -c 2 python3 bench/bench_op_overhead.py \
    --n 3000 --rounds 9 --out "$OUT/op-overhead.md" >"$OUT/opover.log" 2>&1
  echo "opover rc=$?" | tee -a "$OUT/summary.txt"; grep "^|" "$OUT/op-overhead.md" | tee -a "$OUT/summary.txt"
fi
if has dmma && [ -x build/dmma_gemm ]; then   # an FP64 tensor-core GEMM against cuBLAS (carry build/dmma_gemm)
  OUT="$OUT/dmma" timeout 90 bash bench/device/dmma_gemm.sh 2>&1 | tail -40 | tee -a "$OUT/summary.txt"
fi
if has gemmab; then   # the stub's GEMM against this tree with BEFORE_OVERLAY's files over it, pinned
  rm -rf /tmp/before && mkdir -p /tmp/before
  tar --exclude=./build --exclude=./.whl -cf - . | tar -xf - -C /tmp/before
  cp -r "${BEFORE_OVERLAY:-.before}"/. /tmp/before/ && rm -rf /tmp/before/build
  (cd /tmp/before && make -j16 stub >/dev/null 2>&1)
  timeout "${GEMMAB_S:-150}" taskset -c 2,3 python3 bench/bench_gemm_ab.py --before /tmp/before/torchlean/lib \
    --threads 2 --rounds 3 ${GEMMAB_SHAPES:+--shapes $GEMMAB_SHAPES} --out "$OUT/gemm-ab.md" >"$OUT/gemmab.log" 2>&1
  echo "gemmab rc=$?" | tee -a "$OUT/summary.txt"; grep "^|" "$OUT/gemm-ab.md" | tee -a "$OUT/summary.txt"
fi
if has isa; then   # bits and steps against BEFORE_OVERLAY's build on this host's ISA
  rm -rf /tmp/before && mkdir -p /tmp/before
  tar --exclude=./build --exclude=./.whl -cf - . | tar -xf - -C /tmp/before
  cp -r "${BEFORE_OVERLAY:-.before}"/. /tmp/before/ && rm -rf /tmp/before/build
  (cd /tmp/before && make -j16 stub >/dev/null 2>&1)
  if grep -q -m1 avx512f /proc/cpuinfo; then echo "isa: avx512f"; else echo "isa: no avx512f"; fi | tee -a "$OUT/summary.txt"
  grep -m1 "model name" /proc/cpuinfo | tee -a "$OUT/summary.txt"
  for t in 1 2; do
    for side in before after; do
      if [ $side = before ]; then lib=(env TORCHLEAN_LIB_DIR=/tmp/before/torchlean/lib); else lib=(env); fi
      "${lib[@]}" OMP_NUM_THREADS=$t TORCHLEAN_BACKEND=stub taskset -c 2,3 python3 bench/gemm_bits_check.py dump "$OUT/g-$side$t.npz" >/dev/null 2>&1
      "${lib[@]}" OMP_NUM_THREADS=$t TORCHLEAN_BACKEND=stub taskset -c 2,3 python3 bench/bits_conv_snapshot.py "$OUT/c-$side$t.npz" >/dev/null 2>&1
      "${lib[@]}" OMP_NUM_THREADS=$t TORCHLEAN_BACKEND=stub TORCHLEAN_EXACT=1 taskset -c 2,3 python3 bench/bits_conv_snapshot.py "$OUT/ce-$side$t.npz" >/dev/null 2>&1
      "${lib[@]}" OMP_NUM_THREADS=$t TORCHLEAN_BACKEND=stub taskset -c 2,3 python3 bench/bits_snapshot.py "$OUT/b-$side$t.npz" >/dev/null 2>&1
    done
    echo "threads $t: gemm $(python3 bench/gemm_bits_check.py compare "$OUT/g-before$t.npz" "$OUT/g-after$t.npz" 2>&1 | tail -1 | cut -c1-200);" \
      "conv $(python3 bench/bits_snapshot.py --compare "$OUT/c-before$t.npz" "$OUT/c-after$t.npz" 2>&1 | tail -1);" \
      "conv exact $(python3 bench/bits_snapshot.py --compare "$OUT/ce-before$t.npz" "$OUT/ce-after$t.npz" 2>&1 | tail -1);" \
      "pointwise $(python3 bench/bits_snapshot.py --compare "$OUT/b-before$t.npz" "$OUT/b-after$t.npz" 2>&1 | tail -1)" | tee -a "$OUT/summary.txt"
  done
  rm -f "$OUT"/*.npz
  timeout "${ISAAB_S:-200}" taskset -c 2,3 bash bench/stub_ab.sh /tmp/before/torchlean/lib "${ISAAB_N:-2}" \
    "${ISAAB_MODELS:-digits_cnn,cnn_classifier,gpt_char,mlp,transformer,fno}" >"$OUT/isa-ab.log" 2>&1
  echo "isa ab rc=$?" | tee -a "$OUT/summary.txt"; grep -E "torchlean|===" "$OUT/isa-ab.log" | tee -a "$OUT/summary.txt"
fi
if has gemm; then
  timeout "${GEMM_S:-90}" taskset -c 2,3 python3 bench/bench_gemm_peak.py --threads 2 \
    --sizes "${GEMM_SIZES:-1024,2048,4096}" --rounds 3 --out "$OUT/gemm-peak.md" >"$OUT/gemm.log" 2>&1
  echo "gemm rc=$?" | tee -a "$OUT/summary.txt"; grep "^|" "$OUT/gemm-peak.md" | tee -a "$OUT/summary.txt"
fi
exit 0
