#!/usr/bin/env bash
# The GPU checks of the compiled recurrence in one run, on a machine with a CUDA device. Stages, in order:
#   tests         the `cuda` tests (every cell on CUDA equals CPU, eager, compiled and compiled as CUDA graphs;
#                 LSTM, GRU and Elman through cuDNN; bf16 and fp16 autocast; two-GPU DDP when two are visible)
#   cells         scripts/bench_gpu.py: every cell at its paper's size, eager and compiled, beside cuDNN's GRU,
#                 with peak memory, in torch's default compile mode
#   cells-graphs  the same as CUDA graphs (LIT_RNNCELLS_COMPILE_MODE=reduce-overhead)
#   scan          scripts/bench_scan.py: the whole time loop compiled with torch's scan, beside the eager loop
#                 and the compiled step
#   padded        scripts/bench_cells.py --padded: our layer on padded batches (GRU, LSTM, Elman: cuDNN's packed
#                 kernels; CARU: the masked step loop) beside torch.nn.GRU / LSTM given them packed
#   fits, fits-graphs      scripts/bench_compile_tasks.py (end-to-end fits), both modes   } with
#   decode, decode-graphs  scripts/bench_compile_decode.py (greedy and beam 5), both modes } LIT_RNNCELLS_DATA set
#                 (fits-graphs runs the fixed-length PTB job only: CUDA graphs on the padded tasks measured 0.16x
#                 eager and a time-out, docs/measured.md "On a GPU")
#   reproduce-paper  `reproduce mzu --scale paper --experiments ptb_char --total-minutes 8`: MZU Table 1 (PTB char,
#                 GRU, GRU+DT, satMZU+DT, gcnMZU+DT, capMZU+DT) at the paper's sizes, the five runs at once on the
#                 GPU, the whole command within 8 minutes (with LIT_RNNCELLS_DATA set); the report, runs.csv and
#                 curves go to OUT_DIR/reproduce-paper, the checkpoints stay in runs/reproduce-paper (running the
#                 stage again goes on from them)
#   reproduce-caru, reproduce-mcrnn, reproduce-mufuru  the same for CARU Table 2 (Multi30k De-En, GRU / MGU / CARU at
#                 hidden 2048), MC-RNN Table 4 (PTB word, AWD-LSTM and MC-RNN-3 at AWD-LSTM's sizes) and MuFuRU Fig. 1a
#                 (propositional logic, hidden 2 to 128, 3 seeds; it also runs on a CPU, and has: docs/reproduction/
#                 mufuru.md), 8 minutes each; results in OUT_DIR/reproduce-<paper>
#   whole-tests   tests/test_cuda_graphs.py: backend graphs (the whole time loop as one CUDA graph) equals the step
#                 loop for every cell and a user's cell: outputs, state, aux, gradients; padded or not; 1 and 2
#                 directions; two layers; no gradients; bf16 autocast; the capped cache of graphs; with the compiled
#                 step's kernels inside the capture (8 cells; pytest -n 4)
#   whole-fits    scripts/bench_compile_tasks.py --backend graphs --length-buckets 4 (LIT_RNNCELLS_DATA set):
#                 tokens/s of PTB char satMZU+DT and GRU, Multi30k GRU and CARU, IMDB CARU, whole-loop graphs ÷ eager
#   whole-fits-compiled  the same with the compiled step inside the graphs (--backend graphs-compiled)
#   whole-cells   scripts/bench_gpu.py --backends eager graphs graphs-compiled graphs-deferred: each novel cell's
#                 time and time per multiply-add ÷ cuDNN GRU's (the issue-30 bar's cells first), eager, as
#                 whole-loop graphs of the eager step, of the compiled step, and with the recurrent maps' weight
#                 gradients as one product after the loop; capture (and compile) time apart, peak memory after it
#   whole-decode  scripts/bench_compile_decode.py --backend graphs (LIT_RNNCELLS_DATA set): greedy and beam 5 on
#                 Multi30k test sources, each decoding step a replayed CUDA graph ÷ eager, same tokens, capture apart
# Each stage is sized to fit one command of 8 minutes on a bare GPU machine.
# Each output is kept in OUT_DIR, which must be new, and all of them in OUT_DIR.tgz at the end (one file to copy off
# a lent machine, which hands back few). Stages joined by + run at once, each to its own file: e.g. the paper-size
# runs beside the exactness tests; never two timing stages, which would slow each other.
#
#   bash scripts/gpu_check.sh [OUT_DIR [STAGE ...]]    # default: gpu_check-<date>-<time>, every stage
#   bash scripts/gpu_check.sh run1 tests cells scan    # some stages (e.g. to fit a time limit per command)
#   bash scripts/gpu_check.sh run3 reproduce-caru+reproduce-mcrnn+whole-tests   # three stages at once
#   GPU_CHECK_STAGE_SECONDS=120 bash scripts/gpu_check.sh run2   # stop each stage after 120 s (its output so far
#                                                                # is kept; a lent machine's time is short)
#   GPU_CHECK_REPRODUCE_MINUTES=6 bash scripts/gpu_check.sh run4 reproduce-caru   # --total-minutes of the
#                                                                # reproduce-* stages (default 8)
#
# docs/measured.md, "On a GPU", holds the last run's tables.
set -u -o pipefail
STAGES="tests cells cells-graphs scan padded fits fits-graphs decode decode-graphs whole-tests whole-cells whole-fits whole-fits-compiled whole-decode reproduce-paper reproduce-caru reproduce-mcrnn reproduce-mufuru"
out=$(realpath -m "${1:-gpu_check-$(date +%Y%m%d-%H%M%S)}")
shift $(( $# > 0 ? 1 : 0 ))
wanted="${*:-$STAGES}"
for item in $wanted; do
  for stage in ${item//+/ }; do
    case " $STAGES " in
      *" $stage "*) ;;
      *) echo "error: unknown stage '$stage'; pick from: $STAGES." >&2; exit 2 ;;
    esac
  done
done
limit="${GPU_CHECK_STAGE_SECONDS:-}"
minutes="${GPU_CHECK_REPRODUCE_MINUTES:-8}"
if ! [[ "$minutes" =~ ^[0-9]+(\.[0-9]+)?$ ]]; then
  echo "error: GPU_CHECK_REPRODUCE_MINUTES='$minutes' is not a number of minutes; set it to e.g. 6, or unset it for 8." >&2
  exit 2
fi
if [ -n "$limit" ] && ! [[ "$limit" =~ ^[1-9][0-9]*$ ]]; then
  echo "error: GPU_CHECK_STAGE_SECONDS='$limit' is not a whole number of seconds; set it to e.g. 120, or unset it for no limit." >&2
  exit 2
fi
if [ -e "$out" ] && [ -n "$(ls -A "$out" 2>/dev/null)" ]; then
  echo "error: $out already holds files; name a new folder (bash scripts/gpu_check.sh <new folder>)." >&2
  exit 2
fi
python -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" || {
  echo "error: torch sees no CUDA device here (torch.cuda.is_available() is False); run this on a GPU machine with a CUDA build of torch." >&2
  exit 2
}
cd "$(dirname "$0")/.." || exit 2
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"  # scripts/ import the package from this tree, installed or not
mkdir -p "$out"
status=0
{ nvidia-smi; python -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name(0), torch.cuda.device_count(), 'device(s)')"; } \
  > "$out/device.txt" 2>&1
graphs="LIT_RNNCELLS_COMPILE_MODE=reduce-overhead"
run_stage() {  # run_stage STAGE [quiet]: its output to $out/STAGE.txt (and the terminal unless quiet); its status
  local stage=$1 cmd=""
  case "$stage" in
    tests) cmd="python -m pytest tests/test_cuda.py -m cuda -rs -q -p no:cacheprovider" ;;
    cells) cmd="python scripts/bench_gpu.py" ;;
    cells-graphs) cmd="env $graphs python scripts/bench_gpu.py" ;;
    scan) cmd="python scripts/bench_scan.py --device cuda --cells CARU MuFuRU GRUDT SatMZU" ;;
    padded) cmd="python scripts/bench_cells.py --padded --device cuda --cells GRU LSTM Elman CARU" ;;
    fits) cmd="python scripts/bench_compile_tasks.py --accelerator gpu" ;;
    fits-graphs) cmd="env $graphs python scripts/bench_compile_tasks.py --accelerator gpu --jobs ptb_satmzu_dt" ;;
    decode) cmd="python scripts/bench_compile_decode.py --device cuda" ;;
    decode-graphs) cmd="env $graphs python scripts/bench_compile_decode.py --device cuda" ;;
    reproduce-paper) cmd="python -m lit_rnncells.reproduce mzu --scale paper --experiments ptb_char --total-minutes $minutes --out runs/reproduce-paper --results $out/reproduce-paper" ;;
    whole-tests) cmd="python -m pytest tests/test_cuda_graphs.py -m cuda -rs -q -p no:cacheprovider -n 4" ;;
    whole-cells) cmd="python scripts/bench_gpu.py --backends eager graphs graphs-compiled graphs-deferred --repeats 5 --cells SatMZU CapMZU GcnMZU GRUDT MuFuRU CARU MGU MultiChannel(LSTM)" ;;
    reproduce-caru|reproduce-mcrnn|reproduce-mufuru) cmd="python -m lit_rnncells.reproduce ${stage#reproduce-} --scale paper --total-minutes $minutes --out runs/reproduce-paper --results $out/$stage" ;;
    whole-decode) cmd="python scripts/bench_compile_decode.py --device cuda --backend graphs --cells SatMZU GRU CARU --rounds 3" ;;
    whole-fits) cmd="python scripts/bench_compile_tasks.py --accelerator gpu --backend graphs --length-buckets 4 --steps 12 --warmup 4 --rounds 1" ;;
    whole-fits-compiled) cmd="python scripts/bench_compile_tasks.py --accelerator gpu --backend graphs-compiled --length-buckets 4 --steps 12 --warmup 4 --rounds 1" ;;
  esac
  case "$stage" in
    fits*|decode*|whole-fits*|whole-decode|reproduce-*)
      if [ -z "${LIT_RNNCELLS_DATA:-}" ]; then
        echo "gpu_check: $stage skipped: set LIT_RNNCELLS_DATA to the data folder" | tee "$out/$stage.txt"
        return 0
      fi ;;
  esac
  echo "gpu_check: $stage: $cmd"
  if [ -n "$limit" ]; then cmd="timeout $limit $cmd"; fi
  if [ "${2:-}" = quiet ]; then
    $cmd > "$out/$stage.txt" 2>&1
  else
    $cmd 2>&1 | tee "$out/$stage.txt"
  fi
}
for item in $wanted; do
  if [[ "$item" != *+* ]]; then
    run_stage "$item" || status=1
    continue
  fi
  # a+b+c: those stages at once (e.g. paper-size runs beside the exactness tests; never timings beside each other)
  pids=()
  for stage in ${item//+/ }; do
    run_stage "$stage" quiet &
    pids+=("$!")
  done
  for pid in "${pids[@]}"; do wait "$pid" || status=1; done
  for stage in ${item//+/ }; do
    echo "gpu_check: $stage (run beside the others of $item) ended; its last lines:"
    tail -n 5 "$out/$stage.txt" 2>/dev/null
  done
done
tar -czf "$out.tgz" -C "$(dirname "$out")" "$(basename "$out")" 2>/dev/null || status=1
echo "gpu_check: outputs in $out, and all of them in $out.tgz (exit $status)"
exit $status
