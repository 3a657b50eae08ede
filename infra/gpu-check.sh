#!/bin/bash
# azbench's prepared GPU check (issue 30, point 7): on one GPU machine, in under 8 minutes,
#   env       the GPU, CUDA, NCCL and torch the machine has
#   health    templates/health_check.py's GPU checks (GPU count, ECC, XID, IB ports, NCCL all-reduce)
#   gemm      dense BF16 (and FP8 through torch._scaled_mm) GEMM TFLOP/s against the catalog's
#             dense peak for the detected GPU (orchestrator/hardware/catalog.py)
#   smoke-1   the smoke recipe (recipes/smoke/train.py) under torchrun, 1 process, NCCL
#   smoke-2   the same with 2 processes sharing the one GPU (NCCL refuses two ranks on one
#             device; the line records what this machine's NCCL says)
#   smoke-big a larger smoke model for 60 s (the target is not the point: its step times are)
#   smoke-mfu that run's MFU by the report's own code
# Each step has a hard timeout and prints one summary line, failed or not:
#   gpu-check: STEP ok|fail|skipped (SECONDS s): DETAIL
# and appends one JSON line to benchmarks/results/gpu_check.jsonl (AZBENCH_GPU_CHECK_RESULTS
# overrides the file), copied to $OUT/gpu_check.jsonl when OUT is set.
#
# Usage (repository root):  bash infra/gpu-check.sh            on a GPU machine
#                           bash infra/gpu-check.sh --cpu-dry-run   anywhere: GPU-only steps skipped,
#                                                    the smoke run on CPU with gloo (CI runs this)
#
# Needs python3 with torch (the GPU machine: Python 3.12, PyTorch 2.11+cu130, no network). What
# else it imports (mlperf-logging for the smoke recipe; pydantic for azbench's catalog and
# metrics; sqlalchemy for the report module's MFU function) it takes from the machine, else from
# a wheel folder .whl/ at the repository root, installed with
#   python3 -m pip install -q --no-index --no-deps --target /tmp/azbench-site .whl/*.whl
# Make that folder (on a machine with network) with:
#   pip download --no-deps --only-binary=:all: --python-version 3.12 --platform manylinux2014_x86_64 \
#     --implementation cp -d .whl mlperf-logging==4.1.68 pydantic==2.12.5 pydantic-core==2.41.5 \
#     annotated-types==0.7.0 typing-extensions==4.15.0 typing-inspection==0.4.2 sqlalchemy==2.0.44 PyYAML==6.0.3
set -uo pipefail
cd "$(dirname "$0")/.."
DRY=0
[ "${1:-}" = "--cpu-dry-run" ] && DRY=1
PY=${AZBENCH_GPU_CHECK_PYTHON:-python3}
RESULTS=${AZBENCH_GPU_CHECK_RESULTS:-benchmarks/results/gpu_check.jsonl}
WORK=$(mktemp -d /tmp/azbench-gpu-check.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
# Wheels only for what the machine cannot import (its own packages stay in charge): pydantic
# with its pydantic-core and helpers as one set, mlperf-logging, sqlalchemy, PyYAML.
need=()
"$PY" -c 'import pydantic' 2>/dev/null || need+=(pydantic pydantic_core annotated_types typing_extensions typing_inspection)
"$PY" -c 'import mlperf_logging' 2>/dev/null || need+=(mlperf_logging)
"$PY" -c 'import sqlalchemy' 2>/dev/null || need+=(sqlalchemy)
"$PY" -c 'import yaml' 2>/dev/null || need+=(pyyaml PyYAML)
wheels=()
for name in "${need[@]}"; do
  for w in .whl/"$name"-*.whl; do [ -e "$w" ] && wheels+=("$w"); done
done
if [ "${#wheels[@]}" -gt 0 ]; then
  "$PY" -m pip install -q --no-index --no-deps --target "$WORK/site" "${wheels[@]}" 2>"$WORK/pip.err" \
    && export PYTHONPATH="$PYTHONPATH:$WORK/site" \
    || echo "gpu-check: wheels from .whl/ not installed: $(tail -n 1 "$WORK/pip.err")"
fi
[ "${#need[@]}" -eq "${#wheels[@]}" ] || echo "gpu-check: missing here and not in .whl/: ${need[*]}"
export PYTHONDONTWRITEBYTECODE=1
FAILED=0

# step NAME TIMEOUT CMD...: run CMD with a hard timeout; its last stdout line (a JSON object) is
# the step's data. Prints the summary line and records it.
step() {
  local name=$1 limit=$2 start rc status detail data
  shift 2
  start=$(date +%s.%N)
  timeout --kill-after=10 "$limit" bash -c '"$@"' gpu-check-step "$@" >"$WORK/$name.out" 2>"$WORK/$name.err"
  rc=$?
  data=$(tail -n 1 "$WORK/$name.out")
  case "$data" in \{*) ;; *) data="" ;; esac
  if [ "$rc" -eq 0 ]; then status=ok; detail=$(printf '%s' "$data" | head -c 300)
  elif [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then status=fail; detail="timed out after ${limit}s"
  else status=fail; detail="exit $rc: $(grep -v '^\s*$' "$WORK/$name.err" | tail -n 2 | tr '\n' ' ' | head -c 300)"
  fi
  [ "$status" = ok ] || FAILED=$((FAILED + 1))
  finish "$name" "$status" "$start" "$detail" "$data"
}

skip() {  # NAME WHY
  finish "$1" skipped "$(date +%s.%N)" "$2" ""
}

finish() {  # NAME STATUS START DETAIL DATA
  local seconds
  seconds=$(awk -v s="$3" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }')
  echo "gpu-check: $1 $2 (${seconds} s): $4"
  "$PY" infra/gpu_check.py record "$RESULTS" "$1" "$2" "$seconds" "$4" "$5" >/dev/null 2>&1 \
    || echo "gpu-check: could not record $1 in $RESULTS"
}

# smoke LOG NPROC WANT ARGS...: the smoke recipe under torchrun, its MLLOG output in LOG; passes
# when the log's run_stop status is one of WANT ("success", or "success|aborted" where the run is
# cut by --max-seconds on purpose; torchrun then exits 1 for the recipe's exit 3).
smoke() {
  local log=$1 nproc=$2 want=$3
  shift 3
  "$PY" -m torch.distributed.run --standalone --nnodes=1 --nproc-per-node="$nproc" \
    recipes/smoke/train.py --ckpt-dir "$WORK/ckpt-$nproc" --ckpt-every 0 "$@" >"$log" 2>&1
  local rc=$?
  grep -v MLLOG "$log" | tail -n 3 >&2
  "$PY" -c 'import json,re,sys; from orchestrator.results.mllog import parse_file
s = parse_file(__import__("pathlib").Path(sys.argv[1]))
print(json.dumps({"status": s.status, "minutes": s.minutes, "steps": len(s.step_times), "rc": int(sys.argv[3]),
                  "gbs": s.global_batch_size, "eval": s.eval_points[-1].value if s.eval_points else None}))
sys.exit(0 if s.status and re.fullmatch(sys.argv[2], s.status) and s.step_times else 1)' "$log" "$want" "$rc"
}

export -f smoke
export PY WORK
echo "gpu-check: $(date -u +%FT%TZ) on $(hostname), $([ "$DRY" = 1 ] && echo 'CPU dry run' || echo 'GPU run'); results in $RESULTS"
step env 60 "$PY" infra/gpu_check.py env
if [ "$DRY" = 1 ]; then
  step health 90 env MASTER_ADDR=127.0.0.1 MASTER_PORT=29611 "$PY" infra/gpu_check.py health --dir "$WORK" --gpus 0
  skip gemm "CPU dry run: no GPU"
  step smoke-1 150 smoke "$WORK/smoke-1.log" 1 success --device cpu --target 0.5 --eval-every 10
  skip smoke-2 "CPU dry run: two processes sharing one GPU need a GPU"
  step smoke-mfu 120 "$PY" infra/gpu_check.py mfu "$WORK/smoke-1.log"
else
  step health 90 env MASTER_ADDR=127.0.0.1 MASTER_PORT=29611 "$PY" infra/gpu_check.py health --dir "$WORK" --gpus 1 --size-mb 256 --iters 10
  step gemm 120 "$PY" infra/gpu_check.py gemm --seconds 8
  step smoke-1 150 smoke "$WORK/smoke-1.log" 1 success --device cuda --max-seconds 90
  step smoke-2 90 smoke "$WORK/smoke-2.log" 2 success --device cuda --max-seconds 45
  # A model big enough to load the GPU: 60 s of steps, then its MFU (the target is not the point).
  BIG=(--d-model 2048 --layers 8 --heads 16 --seq-len 512 --vocab 512 --batch-size 16)
  step smoke-big 150 smoke "$WORK/smoke-big.log" 1 'success|aborted' --device cuda --max-seconds 60 --eval-every 100 "${BIG[@]}"
  step smoke-mfu 60 "$PY" infra/gpu_check.py mfu "$WORK/smoke-big.log" --d-model 2048 --layers 8 --heads 16 --seq-len 512 --vocab 512
fi
if [ -n "${OUT:-}" ]; then cp "$RESULTS" "$OUT/gpu_check.jsonl" && cp "$WORK"/*.log "$WORK"/*.err "$OUT/" 2>/dev/null; fi
echo "gpu-check: done, $FAILED step(s) failed"
exit 0
