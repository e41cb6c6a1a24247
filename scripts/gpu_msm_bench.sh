#!/usr/bin/env bash
# Issue 3's GPU MSM figures in one device call (BUILD.md "Running on a GPU"), each step under its own timeout so a
# slow step cannot eat the rest; JSON per step lands in $1 (default bench/results/msm-run).
#   1. G1 2^20: the phase row "sort" (digits + keys + sort alone) and Pallas kernel-option variants (A/B);
#   2. G1 2^16..2^24 and G2 2^16..2^22: sort row and the Pallas MSM; the XLA step machine beside it at 2^16;
#   3. G2 checked against arkworks on the GPU (Pallas).
# Usage (repository root, package installed, py_arkworks_bls12381 importable): bash scripts/gpu_msm_bench.sh "$OUT"
set -u
out="${1:-bench/results/msm-run}"
mkdir -p "$out"
start=$(date +%s)
left() { local v=$(( $1 - ($(date +%s) - start) )); echo $(( v > 1 ? v : 1 )); }  # seconds to mark $1, >= 1
filter() { grep -v '^[IW][0-9]' || true; }
bench() { local name=$1 mark=$2; shift 2
  timeout "$(left "$mark")" python3 scripts/bench.py --op=msm --reps=5 --warmup=2 --out="$out/$name.json" "$@" 2>&1 \
    | filter | grep -v '^{' | tail -12
  echo "[msm-bench] $name done at $(( $(date +%s) - start )) s"; }
export XLA_PYTHON_CLIENT_MEM_FRACTION=0.9
bench g1-20-variants 120 --group=g1 --log_n=20 \
  --impl=sort,pallas,pallas:seg=32,pallas:seg=128,pallas:acc=32,pallas:acc=8,pallas:b=128:w=4,pallas:bl=limb
bench g1-sizes 220 --group=g1 --log_n=16,18,22,24 --impl=sort,pallas
bench g2-sizes 430 --group=g2 --log_n=16,18,20,22 --impl=sort,pallas
bench g2-xla 500 --group=g2 --log_n=16 --impl=pallas,xla --reps=3 --warmup=1
timeout "$(left 580)" python3 scripts/gpu_check_msm.py --group=g2 --check_log_n=10 --check_impl=pallas \
  --skip_bench --out="$out/check-g2.json" 2>&1 | filter | tail -3
echo "[msm-bench] all done at $(( $(date +%s) - start )) s"
