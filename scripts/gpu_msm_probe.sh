#!/usr/bin/env bash
# One GPU call that answers the open MSM questions (BUILD.md "Next GPU runs" 1-3), each step under its own
# timeout so a slow compile cannot eat the rest; JSON lands in $1 (default bench/results/probe).
#   1. compile time of the six compile-lean Pallas kernels (G1/G2 x accumulate / general ACC / general WROW),
#      in parallel processes (compilation is CPU-bound; no GPU memory preallocated);
#   2. the Pallas MSM checked against arkworks at 2^12 and timed at 2^16 / 2^20 beside the XLA path;
#   3. the XLA path with its while loops as CUDA-graph conditionals, and with the unrolled multiplication.
# Usage (repository root, package installed): bash scripts/gpu_msm_probe.sh "$OUT"
set -u
out="${1:-bench/results/probe}"
mkdir -p "$out"
start=$(date +%s)
left() { local v=$(( $1 - ($(date +%s) - start) )); echo $(( v > 1 ? v : 1 )); }  # seconds to mark $1, >= 1
filter() { grep -v '^[IW][0-9]' || true; }

for g in g1 g2; do
  for k in acc general_acc general_wrow; do
    XLA_PYTHON_CLIENT_PREALLOCATE=false timeout 240 python3 scripts/msm_kernel_compile.py --kernel=$k --group=$g \
      --ms=rolled_loop --out="$out/kernel-$k-$g.json" 2>&1 | filter | tail -1 &
  done
done
wait
echo "[probe] kernels done at $(( $(date +%s) - start )) s"

export XLA_PYTHON_CLIENT_MEM_FRACTION=0.8
timeout "$(left 420)" python3 scripts/gpu_check_msm.py --group=g1 --check_log_n=12 --check_batch=false \
  --check_impl=pallas --bench_log_n=16,20 --impl=pallas,xla --reps=3 --warmup=1 --out="$out/msm-pallas-g1.json" \
  2>&1 | filter | tail -8
echo "[probe] pallas g1 done at $(( $(date +%s) - start )) s"

XLA_FLAGS=--xla_gpu_enable_command_buffer=+WHILE,+CONDITIONAL timeout "$(left 540)" python3 scripts/bench.py \
  --op=msm --group=g1 --log_n=16 --impl=xla --reps=3 --warmup=1 --out="$out/msm-xla-cmdbuf.json" 2>&1 | filter | tail -3
timeout "$(left 590)" python3 scripts/bench.py --op=msm --group=g1 --log_n=16 --impl=xla:ms=unrolled --reps=3 \
  --warmup=1 --out="$out/msm-xla-unrolled.json" 2>&1 | filter | tail -3
echo "[probe] all done at $(( $(date +%s) - start )) s"
cat "$out"/kernel-*.json 2>/dev/null | grep -E '"(kernel|group|compile_s|triton_ir_lines)"' | paste - - - - || true
