#!/usr/bin/env bash
# The GPU checks of the compiled recurrence in one run, on a machine with a CUDA device:
# the `cuda` tests (every cell on CUDA equals CPU, eager, compiled and compiled as CUDA graphs; LSTM, GRU and
# Elman through cuDNN; bf16 and fp16 autocast; two-GPU DDP when two are visible) and scripts/bench_gpu.py
# (every cell at its paper's size, eager and compiled, beside cuDNN's GRU, with peak memory), in torch's
# default compile mode and as CUDA graphs (LIT_RNNCELLS_COMPILE_MODE=reduce-overhead); and scripts/bench_scan.py
# (the whole time loop compiled with torch's scan, beside the eager loop and the compiled step). Each output is
# kept in OUT_DIR, which must be new.
#
#   bash scripts/gpu_check.sh [OUT_DIR]          # default: gpu_check-<date>-<time>
#
# With LIT_RNNCELLS_DATA set, the end-to-end fits (scripts/bench_compile_tasks.py) and the decoding benchmark
# (scripts/bench_compile_decode.py) run on the GPU too, in both modes. docs/measured.md, "On a GPU", holds the
# last run's tables.
set -u -o pipefail
out=$(realpath -m "${1:-gpu_check-$(date +%Y%m%d-%H%M%S)}")
if [ -e "$out" ] && [ -n "$(ls -A "$out" 2>/dev/null)" ]; then
  echo "error: $out already holds files; name a new folder (bash scripts/gpu_check.sh <new folder>)." >&2
  exit 2
fi
python -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" || {
  echo "error: torch sees no CUDA device here (torch.cuda.is_available() is False); run this on a GPU machine with a CUDA build of torch." >&2
  exit 2
}
cd "$(dirname "$0")/.." || exit 2
mkdir -p "$out"
status=0
{ nvidia-smi; python -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name(0), torch.cuda.device_count(), 'device(s)')"; } \
  > "$out/device.txt" 2>&1
python -m pytest tests/test_cuda.py -m cuda -rs -q -p no:cacheprovider 2>&1 | tee "$out/cuda_tests.txt" || status=1
python scripts/bench_gpu.py 2>&1 | tee "$out/bench_gpu.txt" || status=1
LIT_RNNCELLS_COMPILE_MODE=reduce-overhead python scripts/bench_gpu.py 2>&1 | tee "$out/bench_gpu_cuda_graphs.txt" \
  || status=1
python scripts/bench_scan.py --device cuda --cells CARU MuFuRU GRUDT SatMZU 2>&1 | tee "$out/bench_scan.txt" || status=1
if [ -n "${LIT_RNNCELLS_DATA:-}" ]; then
  python scripts/bench_compile_tasks.py --accelerator gpu 2>&1 | tee "$out/bench_compile_tasks.txt" || status=1
  LIT_RNNCELLS_COMPILE_MODE=reduce-overhead python scripts/bench_compile_tasks.py --accelerator gpu 2>&1 \
    | tee "$out/bench_compile_tasks_cuda_graphs.txt" || status=1
  python scripts/bench_compile_decode.py --device cuda 2>&1 | tee "$out/bench_compile_decode.txt" || status=1
  LIT_RNNCELLS_COMPILE_MODE=reduce-overhead python scripts/bench_compile_decode.py --device cuda 2>&1 \
    | tee "$out/bench_compile_decode_cuda_graphs.txt" || status=1
fi
echo "gpu_check: outputs in $out (exit $status)"
exit $status
