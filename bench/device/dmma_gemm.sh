#!/usr/bin/env bash
# Issue 34: the exact GEMM on the FP64 tensor cores (bench/probes/dmma_gemm.cu) against cuBLAS SGEMM
# and DGEMM, on one GPU (nvidia-h200). Carry build/dmma_gemm, built on the host with
#   nvcc -O3 -arch=sm_90 -Xcompiler -ffp-contract=off -o build/dmma_gemm bench/probes/dmma_gemm.cu -lcublas
# (if it is missing here, this script builds it, about 30 s). Run from the repo root:
#   OUT=/tmp/o bash bench/device/dmma_gemm.sh
# Writes $OUT/dmma-gemm.txt (the tables, stderr's lines too, less the per-kernel "start" lines kept in
# $OUT/dmma-gemm.err) and $OUT/summary.txt. A device fault reruns without the faulting kernel's family.
# About 10-25 s in all (24 kernel variants per shape at most); the whole run is capped at 55 s.
set -u
OUT=${OUT:-/tmp/torchlean-gpu-out}; mkdir -p "$OUT"
BIN=build/dmma_gemm
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$OUT/summary.txt"
if [ ! -x "$BIN" ]; then
  mkdir -p build
  echo "no carried $BIN: building it" | tee -a "$OUT/summary.txt"
  nvcc -O3 -arch=sm_90 -Xcompiler -ffp-contract=off -o "$BIN" bench/probes/dmma_gemm.cu -lcublas \
    >"$OUT/build.log" 2>&1 || { echo "build failed" | tee -a "$OUT/summary.txt"; tail -20 "$OUT/build.log"; exit 2; }
fi
# libcublas.so.13: the CUDA install's, else the one of the nvidia-cublas wheel (PyTorch's)
if ldd "$BIN" | grep -q "not found"; then
  for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
           $(python3 - <<'EOF' 2>/dev/null
import glob, os, site
roots = site.getsitepackages() + [site.getusersitepackages()]
for r in roots:
    for p in glob.glob(os.path.join(r, "nvidia", "*", "lib")):
        if glob.glob(os.path.join(p, "libcublas.so*")):
            print(p)
EOF
); do
    [ -e "$d/libcublas.so.13" ] && export LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  done
fi
ldd "$BIN" | grep -E "cublas" | tee -a "$OUT/summary.txt"
s=$(date +%s)
timeout 55 "$BIN" "$@" >"$OUT/dmma-gemm.txt" 2>"$OUT/dmma-gemm.err"
rc=$?
# a device fault (exit 2: a CUDA error, the context is lost) kills the run: run it again without the
# family of the kernel that was running (the last "start" line), twice at most, within the 55 s
skip=""
for again in 1 2; do
  [ "$rc" = 2 ] || break
  fam=$(grep '^start ' "$OUT/dmma-gemm.err" | tail -1 | awk '{print $NF}')
  [ -n "$fam" ] || break
  echo "rc=2 while running: $(grep '^start ' "$OUT/dmma-gemm.err" | tail -1); again without family $fam" | tee -a "$OUT/summary.txt"
  tail -5 "$OUT/dmma-gemm.err" | tee -a "$OUT/summary.txt"
  cp "$OUT/dmma-gemm.txt" "$OUT/dmma-gemm-fault$again.txt"; cp "$OUT/dmma-gemm.err" "$OUT/dmma-gemm-fault$again.err"
  skip="${skip:+$skip,}$fam"
  left=$(( 55 - ($(date +%s) - s) )); [ "$left" -gt 5 ] || break
  timeout "$left" "$BIN" "$@" --skip-fam "$skip" >"$OUT/dmma-gemm.txt" 2>"$OUT/dmma-gemm.err"
  rc=$?
done
grep -v '^start ' "$OUT/dmma-gemm.err" >> "$OUT/dmma-gemm.txt"
echo "dmma_gemm rc=$rc in $(( $(date +%s) - s )) s (0: all bits equal; 1: an m8n8k4 kernel mismatch, see the tables; 3: only m16n8k4/m16n8k16 kernels differ; 2: a CUDA error; 124: timed out)${skip:+; families skipped after a fault: $skip}" \
  | tee -a "$OUT/summary.txt"
cat "$OUT/dmma-gemm.txt"
exit $rc
