#!/usr/bin/env bash
# GPU checks for a lent machine (written for an H200: Python 3.12, torch 2.11, triton; nothing
# can be installed there). Runs from the repository root whatever the working directory.
#
#   OUT=/some/dir bash scripts/gpu_check.sh         # every step, most valuable first
#   bash scripts/gpu_check.sh --dry-run             # the planned steps and budgets; runs nothing
#   STEPS=profile-decode,spec-measure bash scripts/gpu_check.sh   # a rerun of some steps only
#   bash scripts/gpu_check.sh --build-deps          # HERE, not there: wheels for the test step
#
# Budget. A session has 15 minutes of device time in all (the machine's start, every command,
# idle time); one command may run 10. The whole script stops starting steps after
# TOTAL_BUDGET_S (default 420 s), so a first run costs about 9 minutes with the start and
# leaves room for one rerun of what failed (STEPS=...). Each step runs under `timeout`
# (capped by what is left), carries on past failures, and steps run in order of value, so a
# budget that runs out skips the repeats, not the first bf16 results.
#
# Steps whose command another change adds (calibrate, validate, comm, speculative run) run
# only when `python -m infer_opt <command> --help` works here (`step_if`).
#
# Test dependencies. The GPU-marked tests need pytest (hypothesis for some modules). The image
# has been seen with both; if it lacks them, `--build-deps` (run here) downloads pure-Python
# wheels into .gpu_deps/ (carry it: carry [".gpu_deps"]); there they are unpacked to a
# temporary directory APPENDED to sys.path, so the device's own packages always win.
#
# Everything is logged to $OUT/log.txt; results go to $OUT/gpu_check/ and are packed into
# $OUT/gpu_check.tar.gz at the end (the roofline PNGs are also copied to $OUT).
set -uo pipefail

cd "$(dirname "$0")/.."
export PYTHONPATH=".${PYTHONPATH:+:$PYTHONPATH}"
TOTAL_BUDGET_S="${TOTAL_BUDGET_S:-420}"
STEPS="${STEPS:-}"
DRY_RUN=0
DEPS_WHEELS=(pytest pluggy iniconfig packaging hypothesis attrs sortedcontainers)

case "${1:-}" in
  --dry-run) DRY_RUN=1 ;;
  --build-deps)
    rm -rf .gpu_deps && mkdir -p .gpu_deps
    exec python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
      --implementation cp --platform manylinux2014_x86_64 -d .gpu_deps "${DEPS_WHEELS[@]}"
    ;;
  "") ;;
  *)
    echo "usage: bash scripts/gpu_check.sh [--dry-run | --build-deps]" >&2
    exit 2
    ;;
esac

OUT="${OUT:-$PWD/gpu_out}"
W="$OUT/gpu_check"
LOG="$OUT/log.txt"
IO=(python -m infer_opt)
START=$(date +%s)
PLANNED_S=0
FAILED=()

if ((!DRY_RUN)); then
  mkdir -p "$W"
  : >"$LOG"
  export INFER_OPT_CACHE="$W/cache"
  export COLUMNS=160
fi

log() { echo "[$(date -u +%H:%M:%S) +$(($(date +%s) - START))s] $*" | tee -a "${LOG:-/dev/null}"; }

wanted() { [[ -z "$STEPS" || ",$STEPS," == *",$1,"* ]]; }

# step NAME TIMEOUT_S COMMAND...: run under timeout (capped by what is left of the budget),
# append its output to the log, record a failure and carry on. --dry-run prints the plan.
step() {
  local name="$1" limit="$2"
  shift 2
  wanted "$name" || return 0
  if ((DRY_RUN)); then
    PLANNED_S=$((PLANNED_S + limit))
    local note=""
    ((PLANNED_S > TOTAL_BUDGET_S)) && note="  [past the ${TOTAL_BUDGET_S}s budget if earlier steps use their limits]"
    printf '%-22s %4ss  (cumulative %4ss)  %s%s\n' "$name" "$limit" "$PLANNED_S" "$*" "$note"
    return 0
  fi
  local left=$((TOTAL_BUDGET_S - ($(date +%s) - START)))
  if ((left < 15)); then
    log "SKIP $name (total budget of ${TOTAL_BUDGET_S}s used up)"
    FAILED+=("$name(skipped)")
    return 0
  fi
  ((limit > left)) && limit=$left
  log "START $name (timeout ${limit}s): $*"
  timeout --signal=INT --kill-after=10 "$limit" "$@" >>"$LOG" 2>&1
  local rc=$?
  if ((rc == 0)); then
    log "OK $name"
  else
    log "FAIL $name (exit $rc$( ((rc == 124 || rc == 130)) && echo ', timed out'))"
    FAILED+=("$name")
  fi
  return 0
}

# step_if "SUBCOMMAND" NAME TIMEOUT_S COMMAND...: a step whose infer-opt subcommand may not
# exist yet in this tree; skipped (not failed) when `infer-opt SUBCOMMAND --help` fails.
step_if() {
  local sub="$1" name="$2"
  shift
  wanted "$name" || return 0
  # shellcheck disable=SC2086
  if ! "${IO[@]}" $sub --help >/dev/null 2>&1; then
    if ((DRY_RUN)); then
      printf '%-22s        (not in this tree: infer-opt %s)\n' "$name" "$sub"
    else
      log "SKIP $name (infer-opt $sub is not in this tree)"
    fi
    return 0
  fi
  step "$@"
}

# The test dependencies, checked before the test step: the device's own, else .gpu_deps
# appended after them. PYTEST is the command the test step runs, or empty.
PYTEST=()
test_deps() {
  if python -c "import pytest, hypothesis" 2>/dev/null; then
    PYTEST=(python -m pytest)
    return
  fi
  if compgen -G ".gpu_deps/*.whl" >/dev/null; then
    local target="${TMPDIR:-/tmp}/infer_opt_gpu_deps"
    rm -rf "$target"
    if python -m pip install -q --no-index --no-deps --target "$target" .gpu_deps/*.whl >>"$LOG" 2>&1; then
      PYTEST=(python -c "import sys; sys.path.append('$target'); import pytest; sys.exit(pytest.main(sys.argv[1:]))")
      return
    fi
  fi
  if python -c "import pytest" 2>/dev/null; then
    log "NOTE hypothesis is missing: test modules that import it are not collected (carry .gpu_deps)"
    PYTEST=(python -m pytest)
    return
  fi
  log "SKIP pytest-gpu: pytest is not installed here and no .gpu_deps/ was carried (bash scripts/gpu_check.sh --build-deps, then carry [\".gpu_deps\"])"
  FAILED+=("pytest-gpu(no pytest)")
}

# 1. environment
step env 15 bash -c 'nvidia-smi; python -c "import torch, sys; print(sys.version); print(\"torch\", torch.__version__, \"cuda\", torch.version.cuda, torch.cuda.get_device_name()); print(torch.cuda.get_device_properties(0))"; python -c "import triton; print(\"triton\", triton.__version__)"'

# 2. GPU-marked tests (capture paths, events, graphs on the real device)
if ((DRY_RUN)); then
  step pytest-gpu 80 python -m pytest -q -m gpu -p no:cacheprovider --continue-on-collection-errors
elif wanted pytest-gpu; then
  test_deps
  ((${#PYTEST[@]})) && step pytest-gpu 80 "${PYTEST[@]}" -q -m gpu -p no:cacheprovider --continue-on-collection-errors
fi

# 3. the bf16 kernel suite with L2 flush (saved after every case, so a timeout keeps rows;
#    the compiled bias_gelu is left to amortize-measure), and its roofline fit (H200 SXM
#    datasheet figures beside it, labelled as not measured). The fit is cached for step 4.
step kernels-bf16-flush 60 "${IO[@]}" kernels --device cuda --dtype bfloat16 --l2-flush \
  --only matmul,elementwise,launch,softmax,layer_norm,attention,bias_gelu_eager \
  --out "$W/kernels-cuda-bf16-flush.json"
step roofline-bf16 20 "${IO[@]}" roofline "$W/kernels-cuda-bf16-flush.json" --peak-flops 989TFLOP/s \
  --peak-bandwidth 4.8TB/s --plot "$W/roofline-cuda-bf16.png" --out "$W/roofline-cuda-bf16.json"

# 4. model profiles: gpt2-small in bfloat16, prefill and decode, against the step-3 fit (its
#    timing, flushed events, is one profile accepts on CUDA). gpt2-small has 1024 positions
#    and decode adds one token, so the longest cache is 1023.
step profile-prefill 50 "${IO[@]}" profile gpt2-small --device cuda --dtype bfloat16 --batch 8 --seq-len 512 \
  --mode prefill --out "$W/profile-gpt2-bf16-prefill.json" --plot "$W/profile-gpt2-bf16-prefill.png"
step profile-decode 50 "${IO[@]}" profile gpt2-small --device cuda --dtype bfloat16 --batch 8 --mode decode \
  --context 1023 --out "$W/profile-gpt2-bf16-decode.json"

# 5. compile amortization per bucket: cold inductor compiles and a CUDA-graph capture (the only
#    torch.compile + CUDA graph step)
step amortize-measure 120 "${IO[@]}" amortize measure --device cuda --dtype bfloat16 --bounds 64,256 \
  --calls-per-bucket 20000,5000 --out "$W/amortize-measure-cuda-bf16.json"

# 6. speculative decoding: measured costs (gpt2-small target, tiny draft), then a real run
step spec-measure 50 "${IO[@]}" speculative measure --target gpt2-small --draft tiny --device cuda \
  --dtype bfloat16 --k-max 8 --context 512 --out "$W/spec-measure-cuda-bf16.json" --plot "$W/spec-measure-cuda-bf16.png"
#    (float32: in bfloat16 near-tied logits round differently in the two paths, and the run's
#    own greedy-equality check fails for that reason alone — seen on an H200, 2026-12-04)
step_if "speculative run" spec-run 60 "${IO[@]}" speculative run --target gpt2-small --draft self:6 --device cuda \
  --dtype float32 --out "$W/spec-run-cuda-fp32.json"

# 7. the operator-level calibration (bf16) and its validation on gpt2-small
step_if calibrate calibrate-bf16 130 "${IO[@]}" calibrate --device cuda --dtype bfloat16 --out "$W/calibration-cuda-bf16.json"
#    (shapes off the calibration's powers of two; two passes for the noise floor beside the errors)
step_if validate validate-prefill 55 "${IO[@]}" validate gpt2-small --device cuda --dtype bfloat16 --mode prefill \
  --batch 4 --seq-len 200 --passes 2 --out "$W/validate-gpt2-bf16-prefill.json"
step_if validate validate-decode 55 "${IO[@]}" validate gpt2-small --device cuda --dtype bfloat16 --mode decode \
  --batch 4 --context 700 --passes 2 --out "$W/validate-gpt2-bf16-decode.json"

# 7b. the operator model from traces (issue 31): eager bf16 torch.profiler traces (record_shapes)
#     of gpt2-small and llama-small prefill and decode over a grid of batch x length, the
#     calibration built from them, validated against three shapes between them
step record-traces 90 python scripts/record_traces.py --out "$W" --device cuda --dtype bfloat16 --steps 3
step_if calibrate calibrate-from-trace 30 "${IO[@]}" calibrate \
  --from-trace "$W/gpt2-small-prefill-b1-s64.json.gz" \
  --from-trace "$W/gpt2-small-prefill-b1-s512.json.gz" \
  --from-trace "$W/gpt2-small-prefill-b8-s64.json.gz" \
  --from-trace "$W/gpt2-small-prefill-b8-s512.json.gz" \
  --from-trace "$W/gpt2-small-decode-b1-c128.json.gz" \
  --from-trace "$W/gpt2-small-decode-b1-c1023.json.gz" \
  --from-trace "$W/gpt2-small-decode-b16-c128.json.gz" \
  --from-trace "$W/gpt2-small-decode-b16-c1023.json.gz" \
  --from-trace "$W/llama-small-prefill-b1-s64.json.gz" \
  --from-trace "$W/llama-small-prefill-b1-s256.json.gz" \
  --from-trace "$W/llama-small-prefill-b8-s64.json.gz" \
  --from-trace "$W/llama-small-prefill-b8-s256.json.gz" \
  --out "$W/calibration-from-traces-bf16.json"
step_if validate validate-trace-prefill 20 "${IO[@]}" validate --against "$W/gpt2-small-prefill-b4-s200.json.gz" \
  --calibration "$W/calibration-from-traces-bf16.json" --out "$W/validate-trace-prefill.json"
step_if validate validate-trace-decode 20 "${IO[@]}" validate --against "$W/gpt2-small-decode-b4-c700.json.gz" \
  --calibration "$W/calibration-from-traces-bf16.json" --out "$W/validate-trace-decode.json"
step_if validate validate-trace-llama 20 "${IO[@]}" validate --against "$W/llama-small-prefill-b4-s128.json.gz" \
  --calibration "$W/calibration-from-traces-bf16.json" --out "$W/validate-trace-llama.json"

# 8. communication on one GPU (a collective needs two devices; comm says what one can measure)
step_if comm comm 30 "${IO[@]}" comm --device cuda --out "$W/comm-cuda.json"

# 9. timer agreement, like with like: block timing vs Timer, per-call flushed events vs
#    do_bench, graph replay vs do_bench_cudagraph
step agreement 60 python benchmarks/bench_timer_agreement.py --device cuda --rounds 3

# 10. repeats, shrunk with --only: launch overhead (CUDA graphs), float32 (67 TFLOP/s is the
#     plain-fp32 peak; a TF32 run would be labelled tf32 and warned against it), L2-warm
step kernels-bf16-graphs 45 "${IO[@]}" kernels --device cuda --dtype bfloat16 --cuda-graphs \
  --only matmul,elementwise,launch --out "$W/kernels-cuda-bf16-graphs.json"
step kernels-fp32-flush 45 "${IO[@]}" kernels --device cuda --dtype float32 --l2-flush \
  --only matmul,elementwise,launch --out "$W/kernels-cuda-fp32-flush.json"
step roofline-fp32 20 "${IO[@]}" roofline "$W/kernels-cuda-fp32-flush.json" --peak-flops 67TFLOP/s \
  --peak-bandwidth 4.8TB/s --plot "$W/roofline-cuda-fp32.png" --out "$W/roofline-cuda-fp32.json"
step kernels-bf16-noflush 40 "${IO[@]}" kernels --device cuda --dtype bfloat16 --no-l2-flush \
  --only elementwise,launch --out "$W/kernels-cuda-bf16.json"

if ((DRY_RUN)); then
  echo "worst case ${PLANNED_S}s of steps; the script stops starting steps after ${TOTAL_BUDGET_S}s (TOTAL_BUDGET_S)"
  if python -c "import pytest, hypothesis" 2>/dev/null; then
    echo "test dependencies: pytest and hypothesis import here"
  else
    echo "test dependencies: pytest/hypothesis missing here; .gpu_deps/ holds $(compgen -G '.gpu_deps/*.whl' | wc -l) wheel(s)"
  fi
  exit 0
fi
cp "$W"/roofline-cuda-*.png "$OUT"/ 2>/dev/null
tar czf "$OUT/gpu_check.tar.gz" -C "$OUT" gpu_check && rm -rf "$W"
if ((${#FAILED[@]})); then
  log "done in $(($(date +%s) - START))s; failed or skipped: ${FAILED[*]}"
else
  log "done in $(($(date +%s) - START))s; every step passed"
fi
exit 0
