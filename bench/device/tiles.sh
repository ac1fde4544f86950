#!/usr/bin/env bash
# The GPU host's CPU (Intel Xeon): which GEMM register tile feeds its FMA units
# (bench/probes/sgemm_tiles.c), its core topology and GCC's tuning for it, and the stub's GEMM
# against PyTorch's on the same cores. OUT=/tmp/o bash bench/device/tiles.sh
set -u
OUT=${OUT:-/tmp/torchlean-tiles}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl >"$OUT/build.log" 2>&1
export PYTHONPATH="/tmp/site:$PWD"
{ lscpu | grep -E "Model name|Thread|Core|Socket|MHz|L1d|L2|L3|Flags" | cut -c1-300
  lscpu -e | head -8
  gcc --version | head -1
  gcc -O3 -march=native -Q --help=target 2>/dev/null | grep -E "^ +-march=|prefer-vector-width=|-mtune=" ; } >"$OUT/cpu.txt" 2>&1
mkdir -p build
gcc -O3 -march=native -fopenmp -ffp-contract=off bench/probes/sgemm_tiles.c -o build/sgemm_tiles >>"$OUT/build.log" 2>&1
{ taskset -c 2 build/sgemm_tiles 1; taskset -c 2,3 build/sgemm_tiles 2; taskset -c 2,3 build/sgemm_tiles 2; } >"$OUT/tiles.txt" 2>&1
make -j16 stub >>"$OUT/build.log" 2>&1
for t in 1 2; do
  cores=$([ $t = 1 ] && echo 2 || echo 2,3)
  OMP_NUM_THREADS=$t taskset -c $cores timeout 120 python3 bench/bench_gemm_peak.py --threads $t \
    --sizes 512,1024,2048 --rounds 3 --out "$OUT/gemm-peak.md" >"$OUT/gemm-peak-$t.log" 2>&1
done
cat "$OUT/cpu.txt" "$OUT/tiles.txt" "$OUT/gemm-peak.md"
