#!/usr/bin/env bash
# Issue 17's H200 measurements, one device command each (each ends inside 10 minutes; partial
# results land in $OUT as they fall). Run in the repository root on the GPU machine:
#
#   KB=path/to/kernelbench/problems.jsonl OUT=dir bash benchmarks/profiling_costs_h200.sh agreement
#   OLD=path/to/older/package/parent OUT=dir bash benchmarks/profiling_costs_h200.sh main
#
# agreement: CUPTI with user replay on 24 KernelBench problems, kernel replay on the first 6
#   (the same problems, the same run), one live ncu run over all 24, ncu --set full on 6, and
#   the expert tree under tight budgets (kernel replay) on two problems whose deep steps outrun
#   the catalogue's estimate. Then, on any machine:
#     python benchmarks/cupti_agreement.py table --recordings \
#         docs/results/data/kernelbench_h200.jsonl.gz --rows OUT/rows.jsonl
# main: the main job (optimize examples/problems --tree examples/trees/expert.json), after
#   (this checkout, CUPTI with user replay), when OLD is given before (that package: the code
#   before these changes), and with MAIN_KERNEL=1 this checkout with kernel replay, each cut
#   at MAIN_LIMIT_S seconds; rows are logged as problems finish (OUT/main-LABEL.jsonl), wall
#   seconds in OUT/main-times.txt.
set -u
mode=${1:?agreement or main}
OUT=${OUT:?the output folder}
export PYTHONUNBUFFERED=1
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import torch; print('torch', torch.__version__)"
  ncu --version | tail -1; nproc; } > "$OUT/env.txt" 2>&1

if [ "$mode" = agreement ]; then
  PYTHONPATH=$PWD timeout 575 python3 benchmarks/cupti_agreement.py collect "${KB:?KernelBench}" \
    --recordings docs/results/data/kernelbench_h200.jsonl.gz --rows "$OUT/rows.jsonl" \
    --count 24 --replay user kernel:6 --deadline-s 545 --cupti-share 0.40 --full 6 --steps 2 \
    --budgets 6 9 --budget-keys L1/25_Swish L2/23_Conv3d_GroupNorm_Mean --budget-replay kernel \
    > "$OUT/agreement.log" 2>&1
  echo "exit $?" >> "$OUT/agreement.log"
elif [ "$mode" = main ]; then
  limit=${MAIN_LIMIT_S:-180}
  run() {  # label, package parent, replay
    local start=$SECONDS
    # each run starts with cold torch.compile and Triton caches of its own: no run warms the next
    PYTHONPATH=$2 AUTOPROFILER_CUPTI_REPLAY=$3 TORCHINDUCTOR_CACHE_DIR="/tmp/inductor-$1" \
      TRITON_CACHE_DIR="/tmp/triton-$1" timeout "$limit" python3 -m autoprofiler \
      optimize examples/problems --tree examples/trees/expert.json \
      --store "/tmp/main-$1.sqlite" --candidates-dir "/tmp/main-$1" \
      -o "$OUT/main-$1.jsonl" > "/tmp/main-$1.log" 2>&1
    local code=$?
    echo "$1 exit $code wall $((SECONDS - start)) s" >> "$OUT/main-times.txt"
    tail -40 "/tmp/main-$1.log" >> "$OUT/main-logs.txt"
  }
  run after-user "$PWD" user
  if [ -n "${OLD:-}" ]; then run before "$OLD" kernel; fi
  if [ "${MAIN_KERNEL:-0}" = 1 ]; then run after-kernel "$PWD" kernel; fi
else
  echo "unknown mode $mode: agreement or main" >&2
  exit 2
fi
