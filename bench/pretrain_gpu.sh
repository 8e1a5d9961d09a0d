#!/usr/bin/env bash
# bench/ablate.py's data-format comparison at a size a GPU makes meaningful: `tracegen ablate --size gpu` (~99 M
# parameters, bf16, torch.compile; 1 B tokens per variant unless --tokens says less) on this machine's GPUs; the
# table gives each variant's tokens/s and model FLOPs utilisation (for bench/RESULTS.md).
#
#   bench/pretrain_gpu.sh TRACES [tracegen ablate options, e.g. --tokens 50000000 --workers 8]
#
# TRACES is a corpus traced elsewhere (bench/ablate.py's SCRATCH/traces): nothing is traced here, so the GPU machine
# needs no sandbox and never runs the corpus's code. PYTHON (default .venv/bin/python) must have the train extra.
# Everything lands under ${OUT:-/tmp/tracegen-gpu}; nothing else on the machine is touched.
set -euo pipefail
cd "$(dirname "$0")/.."
traces=${1:?usage: bench/pretrain_gpu.sh TRACES [tracegen ablate options]}
shift
python=${PYTHON:-.venv/bin/python}
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
"$python" -c "import torch; assert torch.cuda.is_available(), 'no CUDA device'; print('torch', torch.__version__)"
"$python" bench/ablate.py --scratch "${OUT:-/tmp/tracegen-gpu}" --traces "$traces" -- --size gpu "$@"
