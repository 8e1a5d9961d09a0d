#!/usr/bin/env bash
# The pretraining stage on one CUDA GPU: trace the bundled examples, pack them, train the default model for a few
# minutes, evaluate, and print tokens/s, the loss curve's ends and the evaluation table (for bench/RESULTS.md).
#
#   bench/pretrain_gpu.sh [STEPS]          (from the repository root, after `make test` built .venv)
#
# Everything lands under ${OUT:-/tmp/tracegen-gpu}; nothing else on the machine is touched.
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-2000}
out=${OUT:-/tmp/tracegen-gpu}
tg=.venv/bin/tracegen
rm -rf "$out" && mkdir -p "$out"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
.venv/bin/python -c "import torch; assert torch.cuda.is_available(), 'no CUDA device'; print('torch', torch.__version__)"
"$tg" trace-functions --input examples/functions.jsonl --out "$out/data" --sandbox process --per-trace 8 >/dev/null
"$tg" pack --data "$out/data" --out "$out/packed" --seq-len 2048 --holdout 0.1 >/dev/null
start=$(date +%s)
"$tg" pretrain --data "$out/packed" --out "$out/run" --steps "$steps" --global-batch-size 32 --gpu --workers 1 \
    --layers 8 --width 512 --heads 8 --lr 1e-3 --warmup-steps 100 --checkpoint-every 500 --log-every 50 --compile
echo "trained in $(( $(date +%s) - start )) s"
.venv/bin/python - "$out/run/metrics.jsonl" <<'PY'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
print(f"steps {rows[-1]['step']}: loss {rows[0]['loss']:.3f} -> {rows[-1]['loss']:.3f}; "
      f"tokens/s (last logged) {rows[-1]['tokens_per_s']:.0f}")
PY
"$tg" evaluate --run "$out/run" --data "$out/data" --out "$out/results.json" --max-cuts 2000
"$tg" evaluate --run "$out/run" --data "$out/data" --out "$out/results_all.json" --split all --max-cuts 500
