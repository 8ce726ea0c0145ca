"""Fair comparisons of cells on any task config: matched budgets and parameters, seeds, a grid, resumable.

    python -m lit_rnncells.compare --config configs/logic/gru.yaml --cells GRU MuFuRU --seeds 3 \\
        --budget epochs=20 --match-params GRU@8 --out runs/compare/logic -- --trainer.limit_val_batches 2

Every grid point (``--vary KEY=V1,V2``) x cell x seed is one run: a fresh process through the CLI that fits
with a ModelCheckpoint on the best ``--monitor`` value, tests that checkpoint, records its learning curves
(:mod:`lit_rnncells.experiments.curves`) and writes ``<out>/<run id>/result.json`` last. A rerun skips runs that have a
``result.json``, resumes an unfinished run from its checkpoint (``interrupted.ckpt``, else ``last.ckpt``) and
restarts a run with no usable checkpoint from scratch. ``<out>`` then holds ``runs.csv`` (one row per run),
``summary.md`` (mean ± sample std over seeds) and ``curves_steps.png`` / ``curves_seconds.png``.
See docs/compare.md. :func:`compare` is the Python API (it returns the rows of ``runs.csv``); what it writes is
:mod:`lit_rnncells.experiments.report`.

The package, by concern:

- :mod:`.planning`: the input (:class:`Budget`, ``--vary``, cells) and the plan, one :class:`RunSpec` per run;
- :mod:`.folders`: run folders across reruns (finished, resumable, refused);
- :mod:`.runner`: :func:`run_specs` and the :class:`Launcher` interface with its :class:`LocalLauncher`
  (its docstring says how to add a launcher, e.g. one that submits each run to Slurm);
- :mod:`.child`: the child process of one run (:func:`run_child`);
- :mod:`.options`: :func:`compare`'s option groups (matching, selection, runs, launch);
- :mod:`.sweep`: :func:`compare`, which plans, runs and writes the outputs;
- :mod:`.cli`: the command line (:func:`main`).
"""
from ..report import CURVES_FILE, RESULT_FILE
from .child import child_main, run_child, validate_within_budget
from .cli import OneLineParser, build_parser, error_exit, main
from .options import DEPRECATED_NAMES, GROUPS, Launch, Matching, RunOptions, Selection
from .folders import (RESUME_FILES, check_resumable, prepare_folder, refuse_other_settings, resume_checkpoint,
                      spec_differences)
from .planning import (BUDGET_KINDS, LOWER_IS_BETTER, Budget, CompareError, RunSpec, cell_label, check_arguments,
                       check_cell, default_monitor, label_parts, mode_of, parse_vary, plan, slug)
from .runner import Interrupted, Job, Launcher, LocalLauncher, forwarding_signals, launch, run_specs
from .sweep import compare

__all__ = ["BUDGET_KINDS", "CURVES_FILE", "DEPRECATED_NAMES", "GROUPS", "Launch", "Matching", "RunOptions",
           "Selection", "LOWER_IS_BETTER", "RESULT_FILE", "RESUME_FILES", "Budget", "CompareError",
           "Interrupted", "Job", "Launcher", "LocalLauncher", "OneLineParser", "RunSpec", "build_parser",
           "cell_label", "check_arguments", "check_cell", "check_resumable", "child_main", "compare",
           "default_monitor", "error_exit", "forwarding_signals", "label_parts", "launch", "main", "mode_of",
           "parse_vary", "plan", "prepare_folder", "refuse_other_settings", "resume_checkpoint", "run_child",
           "run_specs", "slug", "spec_differences", "validate_within_budget"]
