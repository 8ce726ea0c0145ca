"""The training command's LightningCLI (:class:`LitRNNCellsCLI`) and what it uses: the config callback, the parser, the
checks of ``--ckpt_path`` against the config, the metric table and the fit's summary. The entry point
(``main`` / ``run`` / ``console_main``) is :mod:`lit_rnncells.cli`."""
from __future__ import annotations

import inspect
import os
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Union

import torch
from lightning.fabric.utilities.exceptions import MisconfigurationException
from lightning.pytorch import LightningModule, Trainer
from lightning.pytorch.accelerators import CPUAccelerator
from lightning.pytorch.callbacks import ModelCheckpoint, ProgressBar
from lightning.pytorch.cli import LightningArgumentParser, LightningCLI, SaveConfigCallback
from lightning.pytorch.utilities import rank_zero_warn

from .. import cells as _cells  # noqa: F401  (registers cells so short class names resolve)
from .. import data as _data  # noqa: F401
from .. import tasks as _tasks  # noqa: F401
from .cpu_defaults import threads_for
from .callbacks import (DIVERGENCE_PATIENCE, DIVERGENCE_THRESHOLD, FiniteGuard, InterruptCheckpoint,
                        LastCheckpointKeptCurrent, PredictionWriter, QuietInSpawnedProcesses, run_checkpoint)
from ..data.checkpoint_state import ignored_options_warning, read_checkpoint
from ..utils.progress import LineProgress, wants_line_progress
from ..utils.quiet import quiet_evaluation_warnings, quiet_mid_epoch_resume_warning
from .checkpoint_options import DATA_TO_MODEL_LINKS, compare_with_checkpoint
from .config_dump import repair_unserialized
from .deprecated_names import regroup_init_args
from .errors import raised_by_lightning
from .monitor_check import MonitoredMetricsCheck
from .start_checks import (check_accelerator, check_learning_rate_finder, check_not_barebones, check_optimizer,
                           check_output_paths, check_predict_output, check_task_steps, check_trainer_numbers,
                           check_validation_for_scheduler, check_validation_interval, report_start)
from . import run_folder as _run_folder
from .slurm_tasks import agree_with_srun, global_rank
from ..utils.imports import import_object

PROG = "python -m lit_rnncells"
"""How usage lines name the command line."""


def unused_path(path: Path) -> Path:
    """``path``, or ``stem-v1.suffix``, ``-v2``, ... if it exists (never overwrite an earlier run's file)."""
    version = 0
    candidate = path
    while candidate.exists():
        version += 1
        candidate = path.with_name(f"{path.stem}-v{version}{path.suffix}")
    return candidate


def run_directory(trainer: Trainer) -> Path:
    """The folder of this run: where its checkpoints go (``<logger dir>/<version>/checkpoints``) or, without
    checkpointing, the logger's folder or ``default_root_dir``."""
    checkpoint = run_checkpoint(trainer)
    if checkpoint is not None and getattr(checkpoint, "dirpath", None):
        return Path(checkpoint.dirpath)
    return Path(trainer.log_dir or trainer.default_root_dir)


class LoggerConfigCallback(SaveConfigCallback):
    """Saves the full config of a fit into its run folder (``config.yaml``; ``config-resume-N.yaml`` for the N-th
    resume into the same folder: nothing of an earlier fit is overwritten), and into the logger (the W&B run
    config). ``test`` / ``validate`` / ``predict`` write no files. ``folder`` and ``filename`` are set by the
    command line (:mod:`lit_rnncells.command.run_folder`); without them the config goes beside the checkpoints."""

    saved_to: Optional[Path] = None
    folder: Optional[Path] = None
    filename: Optional[str] = None

    def setup(self, trainer: Trainer, pl_module: LightningModule, stage: str) -> None:
        if stage == "fit" and trainer.is_global_zero:
            self.save_config(trainer, pl_module, stage)

    def save_config(self, trainer: Trainer, pl_module: LightningModule, stage: str) -> None:
        for logger in trainer.loggers:
            logger.log_hyperparams({"config": self.parser.dump(self.config, skip_none=False, format="json")})

    @property
    def name(self) -> str:
        """The config's file name in the run folder: ``config.yaml``, ``config-resume-N.yaml`` for a resume."""
        return self.filename or self.config_filename

    def on_fit_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        """Checkpoint folders are resolved by now (ModelCheckpoint.setup ran)."""
        if self.saved_to is not None:
            return
        folder = self.folder or run_directory(trainer)  # on every rank: trainer.log_dir may broadcast
        if trainer.is_global_zero:
            folder.mkdir(parents=True, exist_ok=True)
            self.saved_to = unused_path(folder / self.name)
            self.parser.save(self.config, str(self.saved_to), skip_none=False, multifile=False)


_SAID_LOST: set = set()  # options the saved config cannot hold, each said once per process


class ProgArgumentParser(LightningArgumentParser):
    """Usage lines say ``python -m lit_rnncells`` (not ``__main__.py``), in ``--help`` and in the parsers
    jsonargparse builds for ``--model.help`` and the like."""

    def __init__(self, *args: Any, prog: Optional[str] = None, **kwargs: Any) -> None:
        super().__init__(*args, prog=prog or PROG, **kwargs)

    def dump(self, cfg: Any, *args: Any, **kwargs: Any) -> str:
        """jsonargparse's dump, with the values it writes as ``Unable to serialize instance ...`` put back where
        they are plain (:mod:`.config_dump`); one line names an option the saved config still cannot hold."""
        text = super().dump(cfg, *args, **kwargs)
        dump_format = kwargs.get("format", args[0] if args else "parser_mode")
        if dump_format == "parser_mode":
            dump_format = self.parser_mode if self.parser_mode in ("yaml", "json", "json_indented") else "yaml"
        text, lost = repair_unserialized(text, cfg.clone().as_dict(), dump_format)
        for path in lost:
            if path not in _SAID_LOST:
                _SAID_LOST.add(path)
                print(f"lit_rnncells: the saved config cannot hold {path} (jsonargparse cannot write its value); "
                      "give that option again to test or resume this run.", file=sys.stderr, flush=True)
        return text


BATCH_LIMITS = ("limit_train_batches", "limit_val_batches", "limit_test_batches", "limit_predict_batches")


def read_batch_limits_as_counts_first(parser: LightningArgumentParser) -> None:
    """``--trainer.limit_val_batches 1`` means one batch, as Lightning documents (an int is a count, a float a
    fraction). The Trainer annotates these options ``Union[float, int, None]``, so the parser read ``1`` as
    ``1.0``, i.e. all batches; with the int tried first, ``1`` is one batch and ``1.0`` / ``0.5`` stay fractions."""
    for action in parser._actions:
        hint = getattr(action, "_typehint", None)  # jsonargparse's ActionTypeHint keeps the type here
        if hint is not None and action.dest.rsplit(".", 1)[-1] in BATCH_LIMITS and action.dest.startswith("trainer."):
            action._typehint = Optional[Union[int, float]]


class LitRNNCellsCLI(LightningCLI):
    """LightningCLI with subclass modes, data→model links and the W&B default logger.

    Adds ``--test_after_fit`` (run ``test`` on the fitted model at the end of ``fit``).
    """

    def add_arguments_to_parser(self, parser: LightningArgumentParser) -> None:
        parser.add_argument("--test_after_fit", type=bool, default=False,
                            help="After fit, evaluate the final model on the test split.")
        parser.add_argument("--predict_output", type=Optional[str], default=None,
                            help="predict: write one line per input line, in input order, to this file "
                                 "(default: standard output).")
        parser.add_argument("--untrained", type=bool, default=False,
                            help="predict: allow predicting with an untrained model (no --ckpt_path).")
        parser.add_argument("--run_dir", type=Optional[str], default=None,
                            help="fit: the run's folder (config, checkpoints, logs). Default: a new "
                                 "<trainer.default_root_dir or runs>/<YYYYmmdd-HHMMSS>; resuming from a checkpoint "
                                 "in a run folder writes into that folder. See docs/runs.md.")
        parser.add_argument("--divergence_threshold", type=float, default=DIVERGENCE_THRESHOLD,
                            help="fit: stop with an error when the training loss stays above this many times its "
                                 f"running minimum (and above its first value) for {DIVERGENCE_PATIENCE} "
                                 "consecutive steps; 0 turns the check off.")
        for name in DATA_TO_MODEL_LINKS:
            parser.link_arguments(f"data.{name}", f"model.init_args.{name}", apply_on="instantiate")
        read_batch_limits_as_counts_first(parser)

    def setup_parser(self, add_subcommands: bool, main_kwargs: Dict[str, Any],
                     subparser_kwargs: Dict[str, Any]) -> None:
        """Without subcommands (``run=False``: a caller fits, as compare's runs do) the parser also takes
        ``--ckpt_path``, the checkpoint the caller resumes from: the run folder of ``--run_dir`` then accepts it."""
        super().setup_parser(add_subcommands, main_kwargs, subparser_kwargs)
        if not add_subcommands:
            self.parser.add_argument("--ckpt_path", type=Optional[str], default=None,
                                     help="the checkpoint the caller's fit resumes from (inside --run_dir).")

    _read: Optional[tuple] = None
    """(path, checkpoint) of ``--ckpt_path``, read once for the checks before training; dropped after them."""

    def _read_checkpoint(self, ckpt_path: str) -> Dict[str, Any]:
        """:func:`read_checkpoint`, once per path for the checks of this command line (each loads the whole file)."""
        if self._read is None or self._read[0] != ckpt_path:
            self._read = (ckpt_path, read_checkpoint(ckpt_path))
        return self._read[1]

    def _parse_ckpt_path(self) -> None:
        """Check ``--ckpt_path`` before Lightning applies the checkpoint's hyperparameters over the config:
        a readable checkpoint of the task the config builds; flags that change the weights' shapes are refused,
        other flags that differ from the checkpoint are listed with the value in force (the checkpoint's)."""
        subcommand = self.config.get("subcommand")
        ckpt_path = self.config[subcommand].get("ckpt_path") if subcommand else None
        if ckpt_path:
            checkpoint = self._read_checkpoint(ckpt_path)
            model = self.config[subcommand].get("model")
            saved_task = checkpoint.get(TASK_KEY)
            class_path = model.get("class_path") if model is not None else None
            if saved_task and class_path and saved_task.rsplit(".", 1)[-1] != class_path.rsplit(".", 1)[-1]:
                raise ValueError(f"The checkpoint {ckpt_path} is a {saved_task.rsplit('.', 1)[-1]}, the config builds "
                                 f"a {class_path.rsplit('.', 1)[-1]}; use the config it was trained with.")
            hparams = regroup_init_args(class_path, checkpoint.get("hyper_parameters") or {})  # old flat names
            if model is not None and model.get("init_args") is not None:
                compare_with_checkpoint(model["init_args"], hparams, ckpt_path)
            self._apply_checkpoint_hparams(subcommand, hparams)

    def _apply_checkpoint_hparams(self, subcommand: str, hparams: Dict[str, Any]) -> None:
        """Lightning's own ``_parse_ckpt_path`` step (the checkpoint's hyperparameters over the config), on the
        hyperparameters as regrouped above: a checkpoint saved before a task's option groups still loads."""
        hparams = dict(hparams)
        hparams.pop("_instantiator", None)
        if not hparams:
            return
        if "_class_path" in hparams:
            hparams = {"class_path": hparams.pop("_class_path"), "dict_kwargs": hparams}
        try:
            self.config = self.parser.parse_object({subcommand: {"model": hparams}}, self.config)
        except SystemExit:
            sys.stderr.write("Parsing of ckpt_path hyperparameters failed!\n")
            raise

    def before_instantiate_classes(self) -> None:
        """In test / validate / predict with ``--ckpt_path``, a DataModule that accepts ``checkpoint_path``
        takes its tokenizers and vocabulary from that checkpoint (so predict needs no training files)."""
        config = self.config.get(self.subcommand, {}) if self.subcommand else self.config
        ckpt_path = config.get("ckpt_path")
        data = config.get("data")
        trainer = config.get("trainer")
        check_accelerator(trainer)
        agree_with_srun(trainer)
        check_output_paths(trainer)
        check_not_barebones(trainer)
        if self.subcommand in ("fit", None):  # None: a caller fits (compare's runs)
            check_validation_interval(trainer, data)
            check_trainer_numbers(trainer, tests_after=bool(config.get("test_after_fit")))
            check_validation_for_scheduler(trainer, config.get("model"))
        logger = trainer.get("logger") if trainer is not None else None
        if self.subcommand in ("test", "validate", "predict") and getattr(logger, "get", None) is not None \
                and logger.get("class_path") == DEFAULT_LOGGER:
            trainer["logger"] = False  # evaluating a checkpoint opens no new W&B run (pass a logger to log one)
        if self.subcommand in ("test", "validate", "predict"):
            quiet_evaluation_warnings()
        if self.subcommand in ("test", "validate") and "verbose" in config:
            config["verbose"] = False  # we print the metrics ourselves, rounded (after_test / after_validate)
        if self.subcommand == "predict" and not config.get("predict_output") and trainer is not None:
            trainer["enable_progress_bar"] = False  # predictions go to stdout: keep it clean for pipes
        if self.subcommand == "predict":
            check_predict_output(config)
        if self.subcommand == "predict" and not ckpt_path and not config.get("untrained"):
            raise ValueError("predict needs a trained model: pass --ckpt_path <checkpoint.ckpt> (fit prints where it "
                             "saved its checkpoints), or --untrained true to predict with random weights.")
        if self.subcommand == "fit" and ckpt_path:
            self._stop_if_finished(ckpt_path, trainer)
        if self.subcommand == "fit" or (self.subcommand is None and config.get("run_dir")):
            self._prepare_run_folder(config)
        if self.subcommand in ("test", "validate", "predict") and ckpt_path and data is not None:
            init_args = data.get("init_args")
            if init_args is not None and "checkpoint_path" in _init_parameters(data.get("class_path")) \
                    and init_args.get("checkpoint_path") is None:
                init_args["checkpoint_path"] = ckpt_path

    run_folder: Optional[Path] = None
    """The fit's run folder (:mod:`lit_rnncells.command.run_folder`), once chosen."""
    run_index: int = 0
    """0 for a new run, N for the N-th resume into the same run folder."""

    def _stop_if_finished(self, ckpt_path: str, trainer: Any) -> None:
        """Resuming a run that had reached its epoch, step or time limit trains, tests and logs nothing: say so,
        and how to train further, and stop (exit 0)."""
        trainer = trainer if trainer is not None else {}
        why = _run_folder.finished(self._read_checkpoint(ckpt_path), trainer.get("max_epochs"),
                                   trainer.get("max_steps"), trainer.get("max_time"))
        if why is not None:
            print(f"Nothing to resume: the run of {ckpt_path} had finished: {why}, and resume with the same "
                  "command. Nothing was trained, tested or logged.", flush=True)
            raise SystemExit(0)

    def _prepare_run_folder(self, config: Any) -> None:
        """Choose (and lock) the fit's run folder and point the Trainer's root and every logger into it. The
        config saved in the folder is the one the user gave (a copy taken here), not these edits."""
        import copy

        trainer = config.get("trainer")
        logger = trainer.get("logger") if trainer is not None else None
        root = (trainer.get("default_root_dir") if trainer is not None else None) or _run_folder.given_save_dir(logger)
        folder, _ = _run_folder.choose(config.get("run_dir"), config.get("ckpt_path"), root)
        if global_rank() == 0:
            _run_folder.lock(folder)  # the launching process (rank 0) holds it; its DDP ranks inherit the folder
            os.environ[_run_folder.ENV] = str(folder)
        self.run_folder = folder
        self.run_index = _run_folder.resume_index(folder)
        self._user_config = copy.deepcopy(config)
        self._user_config["run_dir"] = None  # a new fit from the saved config gets a new folder; resumes find it
        if trainer is not None:
            trainer["default_root_dir"] = str(folder)
            _run_folder.point_loggers(logger, folder, self.run_index)

    def _apply_run_folder(self) -> None:
        """Checkpoints without a folder of their own go to ``<run>/checkpoints``; the config callback saves the
        user's config as ``config.yaml`` (``config-resume-N.yaml``) in the run folder."""
        if self.run_folder is None:
            return
        for callback in self.trainer.checkpoint_callbacks:
            if getattr(callback, "dirpath", "unset") is None:
                callback.dirpath = str(self.run_folder / _run_folder.CHECKPOINTS)
        config_callback = self.save_config_callback_instance()
        if config_callback is not None:
            config_callback.folder = self.run_folder
            config_callback.filename = _run_folder.suffixed(_run_folder.CONFIG_NAME, self.run_index)
            config_callback.config = self._user_config

    def _set_seed(self) -> None:
        """A seed numpy cannot take is one sentence (Lightning's ``seed_everything`` raised it in a traceback)."""
        seed = self._get(self.config, "seed_everything")
        if isinstance(seed, int) and not isinstance(seed, bool) and not 0 <= seed <= 2 ** 32 - 1:
            raise ValueError(f"--seed_everything {seed} is not a seed numpy takes; give one from 0 to {2 ** 32 - 1}, "
                             "true for a random one, or false for none.")
        super()._set_seed()

    def _instantiate_trainer(self, config: Dict[str, Any], callbacks: List[Any]) -> Trainer:
        """When standard output is not a terminal (a log file, a pipe), progress is a few plain lines
        (:mod:`lit_rnncells.utils.progress`) instead of tqdm's line per batch."""
        given = config.get("callbacks") or []
        given = given if isinstance(given, list) else [given]
        if config.get("enable_progress_bar") is not False and wants_line_progress() \
                and not any(isinstance(c, ProgressBar) for c in [*given, *callbacks]):
            callbacks = [*callbacks, LineProgress()]
        try:
            return super()._instantiate_trainer(config, callbacks)
        except (MisconfigurationException, ValueError, TypeError, ImportError) as error:
            if not isinstance(error, MisconfigurationException) and not raised_by_lightning(error):
                raise
            # options Lightning refuses or that do not fit together (`num_nodes` 0, an unknown strategy name,
            # `devices` -2, an accelerator whose package is missing), before any work
            raise ValueError(f"Lightning's Trainer refuses these trainer options: {str(error).strip().rstrip('.')}; "
                             "change the --trainer options (or the config's trainer section) it names.") from error

    def instantiate_classes(self) -> None:
        super().instantiate_classes()
        if self.subcommand:
            check_task_steps(self.model, self.subcommand,
                             bool(self.config.get(self.subcommand, {}).get("test_after_fit")))
        if self.subcommand == "fit" or self.run_folder is not None:  # before the run folder is made
            check_optimizer(self.model)
            check_learning_rate_finder(self.model, self.trainer)
        self._apply_run_folder()
        self._check_data_against_checkpoint()
        self._read = None  # the checks are done: training does not keep a second copy of the checkpoint
        quiet_mid_epoch_resume_warning(self.datamodule)
        threads = threads_for(self.model)
        if threads is not None and isinstance(self.trainer.accelerator, CPUAccelerator):
            torch.set_num_threads(threads)  # small models: see cpu_defaults.py
        if self.subcommand:  # after the thread count is set: the line names the threads the run uses
            report_start(self.model, self.trainer, self.subcommand, self.datamodule)
        self.trainer.callbacks.append(QuietInSpawnedProcesses())  # ddp_spawn's workers drop the same noise
        if self.subcommand == "fit" or self.run_folder is not None:  # run_folder: a caller fits (compare's runs)
            fit_config = self.config.get("fit", self.config) if self.subcommand else self.config
            threshold = fit_config.get("divergence_threshold", DIVERGENCE_THRESHOLD)
            self.trainer.callbacks.extend([FiniteGuard(threshold), InterruptCheckpoint(), MonitoredMetricsCheck()])
            own = run_checkpoint(self.trainer)
            if isinstance(own, ModelCheckpoint):  # last in the list, as Lightning keeps checkpoints
                self.trainer.callbacks.append(LastCheckpointKeptCurrent(own))
        elif self.subcommand in ("test", "validate"):
            self.trainer.callbacks.append(InterruptCheckpoint())  # SIGTERM stops the evaluation
        if self.subcommand == "predict":
            output = self.config.get("predict", {}).get("predict_output")
            self.trainer.callbacks.append(PredictionWriter(output))

    def _check_data_against_checkpoint(self) -> None:
        """Give the DataModule the checkpoint's saved state before any weights load, so a vocabulary or
        tokenizer that differs from the checkpoint's is named in one sentence (not a size-mismatch dump)."""
        config = self.config.get(self.subcommand, {}) if self.subcommand else {}
        ckpt_path = config.get("ckpt_path")
        if not ckpt_path or self.datamodule is None:
            return
        checkpoint = self._read_checkpoint(ckpt_path)
        ignored = ignored_options_warning(self.datamodule, checkpoint, self.subcommand or "fit")
        if ignored and self.subcommand in ("test", "validate", "predict"):
            rank_zero_warn(ignored)  # not fatal: the checkpoint's tokenizers are the right ones to use
        state = checkpoint.get(type(self.datamodule).__qualname__)
        if state:
            self.datamodule.load_state_dict(state)  # raises the DataModule's own mismatch error

    def after_test(self) -> None:
        self._print_metrics("test")

    def after_validate(self) -> None:
        self._print_metrics("val")

    def _print_metrics(self, stage: str) -> None:
        if self.trainer.is_global_zero:
            signatures = getattr(self.model, "metric_signatures", None) or {}
            print(metrics_table(self.trainer.callback_metrics, stage, signatures), flush=True)

    def after_fit(self) -> None:
        if self.config.get(self.subcommand, {}).get("test_after_fit"):
            self.trainer.test(self.model, datamodule=self.datamodule, verbose=False)
            self._print_metrics("test")
        summary = fit_summary(self.trainer, self.save_config_callback_instance())  # every rank: may broadcast
        if self.trainer.is_global_zero:
            print(summary, flush=True)

    def save_config_callback_instance(self) -> Optional[LoggerConfigCallback]:
        return next((c for c in self.trainer.callbacks if isinstance(c, LoggerConfigCallback)), None)


def metrics_table(metrics: Dict[str, Any], stage: str, signatures: Optional[Dict[str, str]] = None) -> str:
    """``stage/...`` metrics, one per line, with 4 significant digits (not float32's 0.9800000190734863), then
    one ``signature`` line per scored metric naming how it was computed (references, tokenisation, ...)."""
    rows = {k: float(v) for k, v in sorted(metrics.items()) if k.startswith(f"{stage}/")}
    width = max((len(k) for k in rows), default=0)
    lines = [""] + [f"{k:<{width}}  {v:.4g}" for k, v in rows.items()]
    return "\n".join(lines + [f"signature {name}: {sig}" for name, sig in (signatures or {}).items()])


def fit_summary(trainer: Trainer, config_callback: Optional[LoggerConfigCallback]) -> str:
    """Where the run, its config and its checkpoints are, and the commands that test or resume from them; under
    ``fast_dev_run`` (which Lightning runs without a config, checkpoints or logs), that nothing was kept."""
    if trainer.fast_dev_run:  # the checkpoint folder Lightning planned is never made: naming it would mislead
        return ("\nNothing kept: fast_dev_run tries a batch or a few and writes no config, checkpoint or log; "
                "drop --trainer.fast_dev_run for a run you can test and resume.")
    config = config_callback.saved_to if config_callback is not None else None
    folder = config_callback.folder if config_callback is not None and config_callback.folder else None
    if config is None and folder is not None:  # saved by a process Lightning spawned (ddp_spawn), not this one
        written = folder / config_callback.name
        config = written if written.is_file() else None
    checkpoint = run_checkpoint(trainer)
    best = getattr(checkpoint, "best_model_path", "") or ""
    last = getattr(checkpoint, "last_model_path", "") or best
    score = getattr(checkpoint, "best_model_score", None)
    monitor = getattr(checkpoint, "monitor", None)
    lines = ["", f"Run folder: {folder or run_directory(trainer)}"]
    if config is not None:
        lines.append(f"  config:          {config}")
    if best:
        shown = f" ({monitor} {float(score):.4f})" if monitor and score is not None else ""
        lines.append(f"  best checkpoint: {best}{shown}")
    if last and last != best:
        lines.append(f"  last checkpoint: {last}")
    if config is not None and (best or last):  # no best (no validation ran yet): the last checkpoint
        lines.append(f"Test it:   python -m lit_rnncells test --config {config} --ckpt_path {best or last}")
    if config is not None and last:
        lines.append(f"Resume it: python -m lit_rnncells fit --config {config} --ckpt_path {last}")
    return "\n".join(lines)


TASK_KEY = "lit_rnncells_task"
"""Where a task's checkpoint records its class (``RecurrentTask.on_save_checkpoint``)."""
def _init_parameters(class_path: Optional[str]) -> List[str]:
    """The constructor parameter names of a class given by its import path (empty if it cannot be imported)."""
    if not class_path or "." not in class_path:
        return []
    cls = import_object(class_path)
    return [] if cls is None else list(inspect.signature(cls.__init__).parameters)


DEFAULT_LOGGER = "lit_rnncells.utils.loggers.DefaultWandbLogger"


def default_trainer() -> dict:
    """W&B logging; no model summary table (the start line gives the parameter count; turn the table on with
    ``--trainer.enable_model_summary true``)."""
    return {"logger": {"class_path": DEFAULT_LOGGER}, "enable_model_summary": False}
