#!/usr/bin/env bash
# GPU checks for a lent machine (written for an H200, torch 2.11; nothing is installed).
#
#   OUT=/some/dir bash scripts/gpu_check.sh        # from anywhere; runs from the repo root
#
# Runs, each step under `timeout`, carrying on past failures, within a total budget
# (TOTAL_BUDGET_S, default 510 s) so the whole script ends well under 9 minutes, most
# valuable first: environment; GPU tests; bf16 kernel suite with L2 flush and its roofline
# fit; gpt2-small bf16 profiles (prefill, decode); speculative measure; timer agreement
# against do_bench; CUDA graphs, float32 and unflushed repeats; amortize measure.
# The device image has torch, numpy, scipy, pandas, matplotlib, typer, rich and triton but
# maybe not pytest or hypothesis; prepare them here and carry them along:
#   pip install --target .gpu_deps pytest hypothesis     # then run with carry [".gpu_deps"]
# Everything is logged to $OUT/log.txt. Results go to $OUT/gpu_check/ and are packed into
# $OUT/gpu_check.tar.gz at the end; the roofline PNGs are also copied to $OUT itself.
set -uo pipefail

cd "$(dirname "$0")/.."
export PYTHONPATH=.
[[ -d .gpu_deps ]] && export PYTHONPATH=".:$PWD/.gpu_deps"
OUT="${OUT:-$PWD/gpu_out}"
W="$OUT/gpu_check"
mkdir -p "$W"
export INFER_OPT_CACHE="$W/cache"
export COLUMNS=160
LOG="$OUT/log.txt"
: >"$LOG"
TOTAL_BUDGET_S="${TOTAL_BUDGET_S:-510}"
START=$(date +%s)
FAILED=()

log() { echo "[$(date -u +%H:%M:%S) +$(($(date +%s) - START))s] $*" | tee -a "$LOG"; }

# step NAME TIMEOUT_S COMMAND...: run under timeout (capped by what is left of the budget),
# append its output to the log, record a failure and carry on.
step() {
  local name="$1" limit="$2"
  shift 2
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

IO=(python -m infer_opt)

# 1. environment
step env 30 bash -c 'nvidia-smi; python -c "import torch, sys; print(sys.version); print(\"torch\", torch.__version__, \"cuda\", torch.version.cuda, torch.cuda.get_device_name()); print(torch.cuda.get_device_properties(0))"; python -c "import triton; print(\"triton\", triton.__version__)"'

# 2. GPU-marked tests (other test files may need hypothesis; keep going past collection errors)
step pytest-gpu 150 python -m pytest -q -m gpu -p no:cacheprovider --continue-on-collection-errors

# The steps run in order of value, so if the time budget runs out it is the repeats
# (fp32, no flush) that get skipped, not the first bf16 results.

# 3. quick kernel suite on CUDA in bfloat16 with L2 flush (saved after every case, so a
#    timeout keeps rows), and its roofline fit (H200 SXM datasheet figures beside it,
#    labelled as not measured)
step kernels-bf16-flush 100 "${IO[@]}" kernels --device cuda --dtype bfloat16 --l2-flush --out "$W/kernels-cuda-bf16-flush.json"
step roofline-bf16 40 "${IO[@]}" roofline "$W/kernels-cuda-bf16-flush.json" --peak-flops 989TFLOP/s \
  --peak-bandwidth 4.8TB/s --plot "$W/roofline-cuda-bf16.png" --out "$W/roofline-cuda-bf16.json"

# 4. model profiles: the GPT-2-small-shaped model in bfloat16, prefill and decode, reusing
#    the bf16 fit from step 3 (the cache dir is $W/cache). gpt2-small has 1024 positions
#    and decode adds one token, so the longest cache is 1023.
step profile-prefill 90 "${IO[@]}" profile gpt2-small --device cuda --dtype bfloat16 --batch 8 --seq-len 512 \
  --mode prefill --out "$W/profile-gpt2-bf16-prefill.json" --plot "$W/profile-gpt2-bf16-prefill.png"
step profile-decode 90 "${IO[@]}" profile gpt2-small --device cuda --dtype bfloat16 --batch 8 --mode decode \
  --context 1023 --out "$W/profile-gpt2-bf16-decode.json"

# 5. measured speculative-decoding costs (gpt2-small target, tiny draft)
step spec-measure 90 "${IO[@]}" speculative measure --target gpt2-small --draft tiny --device cuda \
  --dtype bfloat16 --k-max 8 --context 512 --out "$W/spec-measure-cuda-bf16.json" --plot "$W/spec-measure-cuda-bf16.png"

# 6. timer agreement: measure vs torch.utils.benchmark.Timer vs triton do_bench
step agreement 90 python benchmarks/bench_timer_agreement.py --device cuda --rounds 3

# 6b. communication on one GPU: a collective needs two devices, so comm measures the
#     device-local copy (4 B .. 64 MiB, CUDA events); the 2-GPU NCCL tests skip themselves
step comm-1gpu 40 "${IO[@]}" comm --device cuda --no-save --out "$W/comm-cuda-1gpu.json" --plot "$W/comm-cuda-1gpu.png"

# 7. launch overhead (CUDA graphs), float32, and the unflushed (L2-warm) runs
step kernels-bf16-graphs 80 "${IO[@]}" kernels --device cuda --dtype bfloat16 --cuda-graphs --out "$W/kernels-cuda-bf16-graphs.json"
step kernels-fp32-flush 100 "${IO[@]}" kernels --device cuda --dtype float32 --l2-flush --out "$W/kernels-cuda-fp32-flush.json"
step roofline-fp32 40 "${IO[@]}" roofline "$W/kernels-cuda-fp32-flush.json" --peak-flops 67TFLOP/s \
  --peak-bandwidth 4.8TB/s --plot "$W/roofline-cuda-fp32.png" --out "$W/roofline-cuda-fp32.json"
step kernels-bf16-noflush 80 "${IO[@]}" kernels --device cuda --dtype bfloat16 --no-l2-flush --out "$W/kernels-cuda-bf16.json"

# 8. compile amortization per bucket (cold inductor compiles + CUDA-graph capture: slowest)
step amortize-measure 150 "${IO[@]}" amortize measure --device cuda --dtype bfloat16 --bounds 64,256 \
  --calls 20000,5000 --out "$W/amortize-measure-cuda-bf16.json"
step kernels-fp32-noflush 80 "${IO[@]}" kernels --device cuda --dtype float32 --no-l2-flush --out "$W/kernels-cuda-fp32.json"

cp "$W"/roofline-cuda-*.png "$OUT"/ 2>/dev/null
tar czf "$OUT/gpu_check.tar.gz" -C "$OUT" gpu_check && rm -rf "$W"
if ((${#FAILED[@]})); then
  log "done in $(($(date +%s) - START))s; failed or skipped: ${FAILED[*]}"
else
  log "done in $(($(date +%s) - START))s; every step passed"
fi
exit 0
