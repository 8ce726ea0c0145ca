"""Start-up of one ``reproduce --scale paper`` run: what its process spends before the first training step.

Each measured run is a fresh process started the way the runner starts a child (``python -m ...``), building the
paper-size run of one cell through the command line (``--config`` of the experiment, the cell, hidden size) and
fitting it on this machine's CPU; a callback stops the process at ``on_train_start``, i.e. after the imports, the
model build, the data loading (the DataModule's ``setup``) and the sanity validation (2 batches, Lightning's
default), before the first step. The parent prints the seconds from starting the process to each mark
(``imported``: lit_rnncells.cli and Lightning; ``built``: the model and trainer; ``data_loaded``: the data set up,
just before the sanity validation; ``train_start``: before the first training step):

    LIT_RNNCELLS_DATA=<data folder> python scripts/measure_startup.py --repeats 2
    LIT_RNNCELLS_DATA=<data folder> python scripts/measure_startup.py --cells GRU --repeats 1

Not measured here: the CUDA context and the first kernels on a GPU, and the test at the end of each run.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List

ROOT = Path(__file__).resolve().parents[1]
MARKS = ("imported", "built", "data_loaded", "train_start")


def child(args: List[str]) -> None:
    """In the measured process: time each mark (seconds since the epoch) and print them as JSON on one line."""
    marks: Dict[str, float] = {}
    from lightning.pytorch import Callback

    from lit_rnncells.cli import main

    marks["imported"] = time.time()

    class Stop(Callback):
        def on_sanity_check_start(self, trainer, pl_module) -> None:  # type: ignore[no-untyped-def]
            marks["data_loaded"] = time.time()  # after the DataModule's setup, before the sanity validation

        def on_train_start(self, trainer, pl_module) -> None:  # type: ignore[no-untyped-def]
            marks["train_start"] = time.time()
            print("MARKS " + json.dumps(marks), flush=True)
            os._exit(0)

    cli = main(args, run=False)
    marks["built"] = time.time()
    cli.trainer.callbacks.append(Stop())
    cli.trainer.fit(cli.model, datamodule=cli.datamodule)


def measure(cell: str, config: str, hidden: int, run_dir: Path) -> Dict[str, float]:
    """Seconds from starting one measured process to each of :data:`MARKS`."""
    args = ["--config", str(ROOT / config), "--model.init_args.cell", cell, "--model.init_args.hidden_size",
            str(hidden), "--run_dir", str(run_dir), "--trainer.logger", "false", "--trainer.accelerator", "cpu",
            "--trainer.enable_progress_bar", "false"]
    start = time.time()
    proc = subprocess.run([sys.executable, __file__, "--child", json.dumps(args)], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("MARKS ")), None)
    if line is None:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise SystemExit(f"error: the measured {cell} run stopped before training: {last}")
    return {k: v - start for k, v in json.loads(line[len("MARKS "):]).items()}


def main() -> None:
    from lit_rnncells.experiments import paper_scale
    from lit_rnncells.experiments.reproduce import PAPERS

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--paper", default="mzu")
    ap.add_argument("--experiment", default="ptb_char")
    ap.add_argument("--cells", nargs="+", help="the paper's names of the cells to measure (default: all)")
    ap.add_argument("--repeats", type=int, default=1)
    args = ap.parse_args()
    if args.child:
        child(json.loads(args.child))
        return
    if not os.environ.get("LIT_RNNCELLS_DATA"):
        raise SystemExit("error: LIT_RNNCELLS_DATA is not set; point it at the data folder (the paper's corpus is "
                         "read from it, as a paper-scale run reads it).")
    exp = next(e for e in paper_scale.experiments(args.paper, PAPERS[args.paper][1])
               if e.name == args.experiment)
    from lit_rnncells.experiments.compare import check_cell

    parsed = {name: check_cell(spec) for spec, name in exp.cells.items() if not args.cells or name in args.cells}
    cells = {name: c if isinstance(c, str) else json.dumps(c) for name, c in parsed.items()}
    print(f"{exp.config}, hidden {exp.hidden_size}, CPU; seconds from process start (median of {args.repeats}):")
    print("| cell | " + " | ".join(MARKS) + " |\n|---|" + "---|" * len(MARKS))
    with tempfile.TemporaryDirectory() as tmp:
        for name, spec in cells.items():
            runs = [measure(spec, exp.config, exp.hidden_size, Path(tmp) / f"{name}-{i}") for i in range(args.repeats)]
            print(f"| {name} | " + " | ".join(f"{statistics.median(r[m] for r in runs):.1f}" for m in MARKS) + " |",
                  flush=True)


if __name__ == "__main__":
    main()
