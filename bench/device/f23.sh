#!/usr/bin/env bash
# Grouped/depthwise convolution on the GPU (issue 23): conv_grouped.cu's kernels and the earlier
# ones (TORCHLEAN_CONV_GROUPED_LEGACY=1), in each reproducibility mode, side by side with cuDNN
# (bench/bench_depthwise.py, one process per variant); the grouped convolution and torch-API
# tests on CUDA; the three torch programs of examples/ trained on CUDA with their default
# options (README's torch-programs table states what each trains to).
# Run from the repository root after `make -j16 stub cuda`; $OUT receives the tables.
set -u
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
[ -d /tmp/site ] && export PYTHONPATH="/tmp/site:$PYTHONPATH"   # carried cffi (bench/gpu_run.sh)
export TORCHLEAN_BACKEND=cuda
OUT="${OUT:-/tmp/f23}"
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
git log -1 --format='commit %H'

bench() {   # label, then env assignments for the variant
    local label="$1"; shift
    echo "=== bench: $label"
    env "$@" timeout 120 python3 bench/bench_depthwise.py --reps "${REPS:-15}" \
        --out "$OUT/depthwise.md" || echo "bench $label failed: $?"
}
bench "earlier kernels (TORCHLEAN_CONV_GROUPED_LEGACY)" TORCHLEAN_CONV_GROUPED_LEGACY=1
bench "default" TORCHLEAN_DW_ROWS=4
bench "default, 2 rows a thread" TORCHLEAN_DW_ROWS=2
bench "deterministic mode" TORCHLEAN_DETERMINISTIC=1
REPS=5 bench "exact mode" TORCHLEAN_EXACT=1
REPS=5 bench "exact mode, earlier kernels" TORCHLEAN_EXACT=1 TORCHLEAN_CONV_GROUPED_LEGACY=1

echo "=== tests on CUDA"
TORCHLEAN_REQUIRE_CUDA=1 timeout 300 python3 -m pytest -q -x -p no:cacheprovider \
    tests/test_conv_grouped_kernels.py tests/test_conv_groups.py tests/test_conv_grouped_tiles.py \
    tests/test_torch_api.py \
    "tests/test_cuda_runtime.py::test_kernel_scratch_counts_in_peak_and_is_returned" 2>&1 | tail -15
TORCHLEAN_REQUIRE_CUDA=1 TORCHLEAN_CONV_GROUPED_LEGACY=1 timeout 120 python3 -m pytest -q -x \
    -p no:cacheprovider tests/test_conv_grouped_kernels.py tests/test_conv_groups.py 2>&1 | tail -3

echo "=== torch programs on CUDA (default options)"
python3 -c "import sklearn" 2>/dev/null || echo "sklearn missing: torch_resnet and torch_vae (digits) cannot load their data"
for prog in torch_cifar_classifier torch_resnet torch_vae; do
    echo "--- examples/$prog.py"
    SECONDS=0
    timeout 240 python3 "examples/$prog.py" > "$OUT/$prog.log" 2>&1
    rc=$?
    tail -4 "$OUT/$prog.log"
    echo "rc $rc, ${SECONDS} s"
done
