#!/usr/bin/env bash
# The GPU figures of BUILD.md, as named steps of one device call. Each step runs under its own deadline (seconds
# from the start, "step@deadline"; default deadlines below) so a slow step cannot eat the ones after it; every
# step writes its JSON under $OUT as it goes.
# Usage (repository root, package and py_arkworks_bls12381 installed):
#   bash scripts/gpu_runs.sh "$OUT" kernels msm-g1@200 prove-sha_min@400 ...
# Steps:
#   kernels        compile time of the eight Pallas bucket kernels (G1/G2 x acc / general ACC / WROW / SHIFT)
#   ntt-kernels    compile time of the radix-4 NTT kernel, unrolled / rolled / rolled_loop products
#   ntt            NTT 2^16..2^24 (XLA r4 and the three Pallas r4 forms), 10 x 2^20 batched, and H 10 x 2^20
#                  ($NTT_IMPLS and $NTT_LOG_N narrow it)
#   msm-variants   G1 2^20: the "sort" phase row and Pallas kernel-option variants (A/B)
#   msm-g2-variants  the same for G2 2^20 (its kernels are twice G1's: fewer lanes per program may spill less)
#   msm-stages     G1 and G2 (or $STAGES_GROUPS) 2^16: kernel 1 plus the first k later stages (k = 0..5): where the time goes
#   msm-pre        Pallas MSM vs precomputed window tables (ops/msm_precomputed.py) at 2^16 and 2^20, G1 and G2
#                  ($PRE_GROUPS, $PRE_LOG_N, $PRE_IMPLS); the table build is timed apart (precompute_s)
#   msm-g1 msm-g2  sort row + Pallas MSM at 2^16..2^24 (G2 to 2^22); XLA beside it at 2^16
#   check-g1 check-g2  the Pallas MSM against arkworks on the device
#   prove-<preset> scripts/prove.py, porep_like/<preset>, 10 partitions, 2 sectors (setup, then a cold and a warm one)
#                  ($MSM_IMPL, e.g. pre:pallas, goes to --msm_impl of prove and engine)
#   keyload-<preset>  scripts/key_bench.py: load the cached porep_like/<preset> key with / without the subgroup test
#   engine[-<preset>]  scripts/engine_gpu.py, porep_like/<preset> (tiny), $ENGINE_SECTORS (4) sectors, sequential vs
#                  engine with max_batch $ENGINE_MAX_BATCH (20,40)
#   snarkjs        scripts/snarkjs_bench.py on the device at 2^12 and 2^16 (needs bench/snarkjs_artifacts carried)
set -u
out="${1:?usage: gpu_runs.sh OUT step[@deadline] ...}"; shift
mkdir -p "$out"
start=$(date +%s)
filter() { grep -v -E '^[IW][0-9]|^\{' || true; }
export PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_MEM_FRACTION=${XLA_PYTHON_CLIENT_MEM_FRACTION:-0.9}
bench="python3 scripts/bench.py --op=msm --reps=5 --warmup=2"
for arg in "$@"; do
  step=${arg%@*}; mark=${arg#*@}; [ "$mark" = "$arg" ] && mark=590
  t=$(( mark - ($(date +%s) - start) )); [ $t -lt 5 ] && { echo "[gpu_runs] $step skipped (no time left)"; continue; }
  echo "[gpu_runs] $step (deadline $mark s)"
  case $step in
    kernels)
      for g in g1 g2; do for k in acc general_acc general_wrow general_shift; do
        XLA_PYTHON_CLIENT_PREALLOCATE=false timeout $t python3 scripts/kernel_compile.py --kernel=$k --group=$g \
          --ms=rolled_loop --out="$out/kernel-$k-$g.json" 2>&1 | tail -1 &
      done; done; wait ;;
    ntt-kernels)
      for ms in unrolled rolled rolled_loop; do
        XLA_PYTHON_CLIENT_PREALLOCATE=false timeout $t python3 scripts/kernel_compile.py --kernel=ntt_r4 --ms=$ms \
          --ntt_log_n=20 --out="$out/kernel-ntt_r4-$ms.json" 2>&1 | tail -1 &
      done; wait ;;
    ntt)
      impls=${NTT_IMPLS:-xla-r4,pallas-r4,pallas-r4:ms=rolled,pallas-r4:ms=rolled_loop} b="python3 scripts/bench.py"
      timeout $t bash -c "$b --op=ntt --log_n=${NTT_LOG_N:-16,20,22,24} --impl=$impls --out=$out/ntt.json;
        $b --op=ntt --log_n=20 --batch=10 --impl=$impls --out=$out/ntt-b10.json;
        $b --op=h --log_n=20 --batch=10 --out=$out/h-b10.json" ;;
    msm-variants)
      timeout $t $bench --group=g1 --log_n=20 --out="$out/msm-g1-20-variants.json" \
        --impl=sort,pallas,pallas:seg=32,pallas:seg=128,pallas:acc=32,pallas:acc=8,pallas:b=128:w=4,pallas:bl=limb ;;
    msm-g2-variants)
      timeout $t $bench --group=g2 --log_n=20 --out="$out/msm-g2-20-variants.json" \
        --impl=pallas,pallas:b=32:w=1,pallas:b=128:w=4,pallas:seg=64,pallas:seg=256,pallas:acc=8,pallas:bl=limb ;;
    msm-stages)
      timeout $t $bench --group=${STAGES_GROUPS:-g1,g2} --log_n=16 --reps=3 --warmup=1 --out="$out/msm-stages.json" \
        --impl=sort,pallas:st=0,pallas:st=1,pallas:st=2,pallas:st=3,pallas:st=4,pallas ;;
    msm-pre)
      timeout $t $bench --group=${PRE_GROUPS:-g1,g2} --log_n=${PRE_LOG_N:-16,20} --out="$out/msm-pre.json" \
        --impl=${PRE_IMPLS:-pallas,pre:pallas,pre:pallas:c=16} ;;
    msm-g1) timeout $t $bench --group=g1 --log_n=16,18,20,22,24 --impl=sort,pallas --out="$out/msm-g1.json" ;;
    msm-g2) timeout $t $bench --group=g2 --log_n=16,18,20,22 --impl=sort,pallas --out="$out/msm-g2.json" ;;
    check-g1|check-g2)
      timeout $t python3 scripts/gpu_check_msm.py --group=${step#check-} --check_log_n=12 --check_impl=pallas \
        --skip_bench --out="$out/$step.json" ;;
    prove-*)
      tag=${MSM_IMPL:+-${MSM_IMPL//[:=]/_}}  # file names without ':' or '=' (they may not come back from the device)
      timeout $t python3 scripts/prove.py --circuit=porep_like --preset=${step#prove-} --partitions=10 --sectors=2 \
        --mode=sequential --out="$out/proofs-${step#prove-}" --timings_json="$out/$step$tag.json" \
        --msm_impl="${MSM_IMPL:-}" ;;
    keyload-*)
      timeout $t python3 scripts/key_bench.py --preset=${step#keyload-} --out="$out/$step.json" ;;
    engine|engine-*)
      preset=${step#engine}; preset=${preset#-}
      timeout $t python3 scripts/engine_gpu.py --preset=${preset:-tiny} --sectors=${ENGINE_SECTORS:-4} --partitions=10 \
        --max_batch=${ENGINE_MAX_BATCH:-20,40} --synth_compare=false --out_dir="$out" --msm_impl="${MSM_IMPL:-}" ;;
    snarkjs)
      timeout $t python3 scripts/snarkjs_bench.py --log_n=12,16 --impl=device \
        --artifacts_dir=bench/snarkjs_artifacts --baseline=bench/results/snarkjs-cpu-12.json,bench/results/snarkjs-cpu-16.json \
        --out="$out/snarkjs.json" ;;
    *) echo "[gpu_runs] unknown step $step" ;;
  esac 2>&1 | filter | tail -25
  echo "[gpu_runs] $step ended at $(( $(date +%s) - start )) s"
done
