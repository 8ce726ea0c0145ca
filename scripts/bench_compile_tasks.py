"""End to end: training steps per second with ``--model.init_args.backend compiled`` (or ``--backend graphs``) ÷
the eager baseline (``EAGER``), same run.

Each job is a real ``fit`` through the command line (data, model, optimiser) on a shipped config,
at reduced sizes unless ``--full``, for ``--steps`` training batches without validation. The eager
and compiled fits alternate for ``--rounds`` rounds over the same batches (same seed), so their
tokens/s ratio is the inverse ratio of their median step times after ``--warmup`` steps. The compile
time (the compiled fit's first steps beyond its steady step time, counted once per process: later
rounds reuse the compiled graphs) is printed apart. Needs ``$LIT_RNNCELLS_DATA``.

    python scripts/bench_compile_tasks.py                       # the four jobs, reduced sizes
    python scripts/bench_compile_tasks.py --jobs ptb_gru --steps 20 --rounds 3
    python scripts/bench_compile_tasks.py --quick               # tiny sizes, checks the script runs
    LIT_RNNCELLS_COMPILE_MODE=reduce-overhead python scripts/bench_compile_tasks.py --accelerator gpu
    python scripts/bench_compile_tasks.py --accelerator gpu --backend graphs --length-buckets 4
    python scripts/bench_compile_tasks.py --accelerator gpu --backend graphs-compiled --length-buckets 4

Jobs: PTB char LM with satMZU+DT and with GRU, Multi30k De-En GRU and CARU seq2seq (teacher-forced training),
IMDB CARU document classifier.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Sequence

import torch
from lightning.pytorch import Callback

from lit_rnncells.nn.benchmark import compile_mode_header

ROOT = Path(__file__).resolve().parents[1]
TIMES: Dict[str, List[float]] = {}


class StepTimer(Callback):
    """Appends the wall time of every training batch (forward, backward, optimiser) to ``TIMES[key]``."""

    def __init__(self, key: str) -> None:
        self.key = key
        self._start = 0.0

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        self._start = time.perf_counter()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if pl_module.device.type == "cuda":
            torch.cuda.synchronize(pl_module.device)  # the step's kernels are done, so its time is measured
        TIMES.setdefault(self.key, []).append(time.perf_counter() - self._start)


REDUCED = {
    "ptb_satmzu_dt": ["--config", "configs/lm/ptb_char_satmzu_dt.yaml", "--model.init_args.hidden_size", "256",
                      "--model.init_args.embedding_size", "128", "--data.init_args.batch_size", "32",
                      "--data.init_args.bptt", "100"],
    "ptb_gru": ["--config", "configs/lm/ptb_char_gru.yaml", "--model.init_args.hidden_size", "256",
                "--model.init_args.embedding_size", "128", "--data.init_args.batch_size", "32",
                "--data.init_args.bptt", "100"],
    "multi30k_gru": ["--config", "configs/seq2seq/multi30k_de_en_gru.yaml", "--model.init_args.hidden_size", "256",
                     "--model.init_args.embedding_size", "128", "--model.init_args.decoding.eval_metrics", "[]",
                     "--data.init_args.batch_size", "32", "--data.init_args.limit", "4000"],
    "multi30k_caru": ["--config", "configs/seq2seq/multi30k_de_en_caru.yaml", "--model.init_args.hidden_size", "256",
                      "--model.init_args.embedding_size", "128", "--model.init_args.decoding.eval_metrics", "[]",
                      "--data.init_args.batch_size", "32", "--data.init_args.limit", "4000"],
    "imdb_caru": ["--config", "configs/classification/imdb_caru.yaml", "--data.init_args.batch_size", "32",
                  "--model.init_args.pretrained_embeddings", "null"],
}
EAGER = {"ptb_satmzu_dt": "loop", "ptb_gru": "auto", "multi30k_gru": "auto", "multi30k_caru": "loop",
         "imdb_caru": "loop"}
"""The baseline's backend per job: what ran without ``compile`` before the backend option (the fused kernel for
GRU, which ``auto`` keeps; the eager loop for the others, where ``auto`` may compile on a GPU)."""
PADDED = ("multi30k_gru", "multi30k_caru", "imdb_caru")
TRANSLATION = ("multi30k_gru", "multi30k_caru")
QUICK_SIZES = ["--model.init_args.hidden_size", "16", "--model.init_args.embedding_size", "16",
               "--data.init_args.batch_size", "4"]


def fit_args(job: str, full: bool, quick: bool, steps: int, root: Path, compiled: bool, key: str,
             accelerator: str = "cpu", backend: str = "compiled", buckets: int = 0) -> List[str]:
    args = ["fit", *REDUCED[job]]
    if full:
        args = ["fit", *REDUCED[job][:2]]
    if quick:
        args += QUICK_SIZES
    if job in PADDED:
        args += ["--data.init_args.cache_dir", str(root / "cache")]
    if compiled and buckets and job in PADDED:
        group = "batching." if job in TRANSLATION else ""  # TranslationDataModule's batching group
        args += [f"--data.init_args.{group}length_buckets", str(buckets)]
    layer_backend = "graphs" if backend == "graphs-compiled" else backend  # the table's capture_compiled does the rest
    args += ["--model.init_args.backend", layer_backend if compiled else EAGER[job],
             "--model.init_args.lr_scheduler", "null",  # no validation here, so nothing for a plateau scheduler
             "--trainer.max_steps", str(steps), "--trainer.limit_train_batches", str(steps),
             "--trainer.limit_val_batches", "0", "--trainer.num_sanity_val_steps", "0",
             "--trainer.logger", "false", "--trainer.enable_checkpointing", "false",
             "--trainer.enable_progress_bar", "false", "--trainer.enable_model_summary", "false",
             "--trainer.callbacks", "null", "--trainer.accelerator", accelerator, "--trainer.devices", "1",
             "--trainer.default_root_dir", str(root / key), "--seed_everything", "0", "--test_after_fit", "false",
             "--trainer.callbacks+=" + json.dumps({"class_path": f"{__name__}.StepTimer", "init_args": {"key": key}})]
    return args


def run_job(job: str, args: argparse.Namespace, root: Path) -> dict:
    from lit_rnncells.cli import run

    for r in range(args.rounds):
        for compiled in (False, True):
            key = f"{job}/{'compiled' if compiled else 'eager'}/{r}"
            code = run(fit_args(job, args.full, args.quick, args.steps, root, compiled, key, args.accelerator,
                                args.backend, args.length_buckets))
            if code != 0:
                raise SystemExit(f"error: the {key} fit exited with {code}; see its message above")
    steady = {mode: [t for r in range(args.rounds) for t in TIMES[f"{job}/{mode}/{r}"][args.warmup:]]
              for mode in ("eager", "compiled")}
    eager_s, compiled_s = statistics.median(steady["eager"]), statistics.median(steady["compiled"])
    first = TIMES[f"{job}/compiled/0"][: args.warmup]
    return {"job": job, "eager_s": eager_s, "compiled_s": compiled_s, "speedup": eager_s / compiled_s,
            "compile_s": sum(first) - len(first) * compiled_s}


def format_rows(rows: Sequence[dict]) -> str:
    out = ["| job | eager s/step | compiled s/step | tokens/s compiled ÷ eager | compile time s (apart) |",
           "|---|---:|---:|---:|---:|"]
    for r in rows:
        out.append(f"| {r['job']} | {r['eager_s']:.3f} | {r['compiled_s']:.3f} | {r['speedup']:.2f} | "
                   f"{r['compile_s']:.1f} |")
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", nargs="+", default=list(REDUCED), choices=list(REDUCED))
    parser.add_argument("--steps", type=int, default=12, help="training batches per fit")
    parser.add_argument("--warmup", type=int, default=3, help="first steps of each fit left out of the timing")
    parser.add_argument("--rounds", type=int, default=2, help="eager/compiled fits, alternating")
    parser.add_argument("--full", action="store_true", help="the configs' own sizes")
    parser.add_argument("--backend", default="compiled", choices=["compiled", "graphs", "graphs-compiled"],
                        help="the compared fits' backend (the baseline's: EAGER); graphs needs --accelerator gpu; "
                             "graphs-compiled: graphs capturing the compiled step (every cell's row set to "
                             "capture_compiled for this run)")
    parser.add_argument("--length-buckets", type=int, default=0,
                        help="with it, the compared fits of the padded jobs pad to this many length buckets")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, 4 steps, 1 round")
    parser.add_argument("--accelerator", default="cpu", choices=["cpu", "gpu"],
                        help="where the fits run (gpu: one CUDA device); the compile mode is "
                             "$LIT_RNNCELLS_COMPILE_MODE")
    args = parser.parse_args(argv)
    if args.accelerator == "gpu" and not torch.cuda.is_available():
        print("error: --accelerator gpu needs a CUDA device, and torch sees none here; leave it out to run on the CPU",
              file=sys.stderr)
        return 2
    mode = compile_mode_header()  # or one error line and exit 2
    if args.backend == "graphs-compiled":
        from lit_rnncells.cells import available_cells, get_cell
        from lit_rnncells.nn import backend

        for name in available_cells():
            backend.let_capture(get_cell(name), "cuda")
    if args.quick:
        args.steps, args.warmup, args.rounds = 4, 2, 1
    where = torch.cuda.get_device_name(0) if args.accelerator == "gpu" else f"{torch.get_num_threads()} threads"
    print(f"torch {torch.__version__}, {where}; {args.steps} steps per fit, first "
          f"{args.warmup} left out, {args.rounds} round(s) eager/compiled alternating; {mode}\n", flush=True)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for job in args.jobs:
            rows.append(run_job(job, args, Path(tmp)))
            print(format_rows(rows[-1:]).split("\n", 2)[2], flush=True)
    print("\n" + format_rows(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
