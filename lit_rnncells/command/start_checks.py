"""Checks and facts the command line gives before any work starts: a GPU trainer config on a machine
without a GPU is one error line (not Lightning's 40-line traceback), and every run says how many
parameters its model has and where it runs, warning when a GPU-sized model is about to train on a CPU."""
from __future__ import annotations

import inspect
import sys
from pathlib import Path
from typing import Any, List, Optional, TextIO

import torch
from lightning.pytorch import LightningModule, Trainer

from ..nn.parameters import count_parameters
from ..utils.paths import check_not_an_input, check_output_folder
from ..utils.imports import import_object
from .monitor_check import VALIDATION_PREFIXES

GPU_SIZED_PARAMETERS = 20_000_000
"""Above this many parameters a model is "GPU-sized": on a CPU one training step takes seconds to minutes."""
CPU_FIX = "--trainer.accelerator cpu --trainer.devices 1 --trainer.strategy auto"


def _accelerator_name(trainer_config: Any) -> Optional[str]:
    value = trainer_config.get("accelerator") if trainer_config is not None else None
    if isinstance(value, str):
        return value.lower()
    return None  # "auto", an Accelerator instance or a class_path: Lightning decides


def gpu_missing(name: Optional[str]) -> bool:
    """Whether ``name`` asks for a GPU kind this machine does not have."""
    if name in ("gpu", "cuda"):
        return not (torch.cuda.is_available() or (name == "gpu" and _mps_available()))
    if name == "mps":
        return not _mps_available()
    return False


def _mps_available() -> bool:
    backend = getattr(torch.backends, "mps", None)
    return bool(backend is not None and backend.is_available())


def check_accelerator(trainer_config: Any) -> None:
    """Refuse, in one sentence with the fix, a trainer config that needs a GPU this machine lacks."""
    name = _accelerator_name(trainer_config)
    if gpu_missing(name):
        raise ValueError(f"The trainer config asks for accelerator '{name}' (e.g. configs/trainer/gpu.yaml or "
                         f"multi_gpu.yaml), but torch finds no GPU on this machine; run on the CPU by dropping that "
                         f"config or adding {CPU_FIX}.")


def check_optimizer(model: LightningModule) -> None:
    """A task's optimiser, and its learning-rate scheduler, built once on its parameters before the run starts, so
    settings torch refuses (``lr: -1``) are one sentence naming the option, not a traceback from inside Lightning's
    fit after the logger has started. A task without ``optimizer_factory`` (its own ``configure_optimizers``) and
    failures other than torch's refusals (an optimiser that needs the parameters on the GPU) are left to the fit."""
    factory = getattr(model, "optimizer_factory", None)
    optimizer = _built(lambda: factory(model.parameters()), "optimizer", "optimizer",
                       " (e.g. --model.init_args.optimizer.init_args.lr 0.001)") if callable(factory) else None
    scheduler = getattr(model, "lr_scheduler_factory", None)
    if optimizer is not None and callable(scheduler):
        _built(lambda: scheduler(optimizer), "learning-rate scheduler", "lr_scheduler", "")


def check_learning_rate_finder(model: LightningModule, trainer: Trainer) -> None:
    """Lightning's ``LearningRateFinder`` sets ``model.lr`` or ``model.hparams.lr``; a task takes its learning rate
    as its optimiser's option instead, so the finder failed at the fit's start (an AttributeError traceback). Say
    so, and how to compare learning rates here."""
    from lightning.pytorch.callbacks import LearningRateFinder

    finders = [c for c in trainer.callbacks if isinstance(c, LearningRateFinder)]
    names = {getattr(f, "_attr_name", "") or "lr" for f in finders}
    if finders and not any(hasattr(model, n) or n in getattr(model, "hparams", {}) for n in names | {"learning_rate"}):
        raise ValueError("LearningRateFinder needs a learning rate on the model (model.lr), but "
                         f"{type(model).__name__} takes it as its optimizer's option; drop the callback and give "
                         "--model.init_args.optimizer.init_args.lr, or compare rates with python -m "
                         "lit_rnncells.compare --vary model.init_args.optimizer.init_args.lr=0.001,0.003.")


_STEPS = {"fit": "training_step", "validate": "validation_step", "test": "test_step"}


def check_task_steps(model: LightningModule, subcommand: Optional[str], tests_after: bool = False) -> None:
    """The task defines the step its subcommand runs: a task of the user's own without ``test_step`` trained a
    whole fit with ``--test_after_fit`` (which the task configs set) and then failed, and ``test`` said
    "Lightning refuses this run's settings: No `test_step()` method defined ...; change the options it names"."""
    wanted = [(_STEPS[subcommand], subcommand)] if subcommand in _STEPS else []
    if subcommand == "fit" and tests_after:
        wanted.append(("test_step", "--test_after_fit"))
    for step, runs in wanted:
        if getattr(type(model), step) is getattr(LightningModule, step):
            instead = " or drop --test_after_fit (the task configs set it true)" if runs == "--test_after_fit" else ""
            raise ValueError(f"{type(model).__name__} has no {step}(self, batch, batch_idx), which {runs} runs; "
                             f"define it in the task{instead}.")


def _built(build: Any, what: str, option: str, example: str) -> Any:
    """``build()``; torch's refusal of the settings (ValueError, TypeError) as one sentence naming
    ``model.init_args.<option>``, any other failure ``None`` (left to the fit)."""
    try:
        return build()
    except (ValueError, TypeError) as error:
        raise ValueError(f"The {what} refuses its settings: {error}; fix model.init_args.{option} in the config or "
                         f"on the command line{example}.") from None
    except Exception:  # noqa: BLE001 - not a refusal of the settings: the fit builds it where it trains
        return None


def check_output_paths(trainer_config: Any) -> None:
    """The folders a run will write to (``trainer.default_root_dir``, the logger's ``save_dir``) are not under
    a file: one sentence naming the option, before anything is built."""
    if trainer_config is None:
        return
    root = trainer_config.get("default_root_dir")
    if isinstance(root, (str, Path)):
        check_output_folder(root, "--trainer.default_root_dir")
    loggers = trainer_config.get("logger")
    for logger in loggers if isinstance(loggers, list) else [loggers]:
        init_args = logger.get("init_args") if getattr(logger, "get", None) is not None else None
        save_dir = init_args.get("save_dir") if getattr(init_args, "get", None) is not None else None
        if isinstance(save_dir, (str, Path)):
            check_output_folder(save_dir, "--trainer.logger.save_dir")


def check_predict_output(config: Any) -> None:
    """``predict --predict_output`` is not the file predict reads (the DataModule's ``predict_file``): one
    sentence before anything is built, instead of the input overwritten by its own predictions."""
    output = config.get("predict_output") if config is not None else None
    data = config.get("data")
    init_args = data.get("init_args") if getattr(data, "get", None) is not None else None
    if not isinstance(output, (str, Path)) or getattr(init_args, "get", None) is None:
        return
    source = init_args.get("predict_file")
    if isinstance(source, (str, Path)):
        check_not_an_input(output, "--predict_output", {"--data.init_args.predict_file": source})


def check_validation_interval(trainer_config: Any, data_config: Any) -> None:
    """``variable_bptt`` windows have random lengths, so Lightning cannot know an epoch's number of batches and
    refuses a fractional ``val_check_interval`` or ``limit_train_batches`` only once training starts (a 60-line
    traceback): refuse them here, and an interval of 0 or less (Lightning divided by it at the first step:
    ``ZeroDivisionError``)."""
    init_args = data_config.get("init_args") if getattr(data_config, "get", None) is not None else None
    variable = init_args.get("variable_bptt") if getattr(init_args, "get", None) is not None else None
    interval = trainer_config.get("val_check_interval") if trainer_config is not None else None
    if isinstance(interval, (int, float)) and not isinstance(interval, bool) and interval <= 0:
        raise ValueError(f"--trainer.val_check_interval {interval} is not a positive number; give a number of "
                         "training batches between validations (an int, e.g. 500) or a fraction of an epoch in "
                         "(0, 1], e.g. 0.25.")
    limit = trainer_config.get("limit_train_batches") if trainer_config is not None else None
    for option, value in (("val_check_interval", interval), ("limit_train_batches", limit)):
        if variable is True and isinstance(value, float) and value != 1.0:
            raise ValueError(f"--trainer.{option} {value} is a fraction of an epoch, but with "
                             "--data.init_args.variable_bptt true the windows have random lengths, so an epoch's "
                             f"number of batches is not known in advance; give {option} as a number of training "
                             "batches (an int, e.g. 500) or 1.0, or set variable_bptt false.")


def check_not_barebones(trainer_config: Any) -> None:
    """``barebones``: Lightning drops every metric a task logs (``self.log`` warns and returns), so a fit keeps no
    best checkpoint and a test reports nothing; it also refuses the configs' checkpointing, logger and logging
    interval (a ValueError traceback while the Trainer was built)."""
    if trainer_config is not None and trainer_config.get("barebones") is True:
        raise ValueError("--trainer.barebones true turns off what a task's run is made of: Lightning drops every "
                         "self.log() (so no metric, no best checkpoint, no test result) and refuses the configs' "
                         "checkpointing and logger; for raw speed drop it and add --trainer.logger false "
                         "--trainer.enable_progress_bar false, or time the layer alone with scripts/bench_cells.py.")


def check_trainer_numbers(trainer_config: Any, tests_after: bool = False) -> None:
    """Trainer numbers Lightning takes without checking: ``accumulate_grad_batches`` 0 (it divided by it at the
    first step: ``ZeroDivisionError``), ``check_val_every_n_epoch`` 0 (the same at the first epoch's end), a
    negative ``gradient_clip_val``, which torch's norm clipping turns into a negative scale: every gradient
    reversed, so the run climbs its loss, and, when the fit then tests (``tests_after``: ``--test_after_fit``),
    ``max_epochs``, ``max_steps`` or ``limit_train_batches`` 0, with which it trained nothing and reported the
    untrained model's test metrics as the run's result (without the test, a fit of 0 steps is a setup-only
    baseline: scripts/bench_memory.py measures one)."""
    if trainer_config is None:
        return
    accumulate = trainer_config.get("accumulate_grad_batches")
    if isinstance(accumulate, int) and not isinstance(accumulate, bool) and accumulate < 1:
        raise ValueError(f"--trainer.accumulate_grad_batches {accumulate} is not a positive number of batches; use 1 "
                         "(an optimiser step every batch) or more.")
    every = trainer_config.get("check_val_every_n_epoch")
    if isinstance(every, int) and not isinstance(every, bool) and every < 1:
        raise ValueError(f"--trainer.check_val_every_n_epoch {every} is not a positive number of epochs; use 1 or "
                         "more, or null to validate by --trainer.val_check_interval batches alone.")
    zero_checked = (("max_epochs", "epochs"), ("max_steps", "steps"), ("limit_train_batches", "batches"))
    for option, unit in zero_checked if tests_after else ():
        value = trainer_config.get(option)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value == 0:
            raise ValueError(f"--trainer.{option} {value} trains nothing (fit would test the untrained model); give "
                             f"1 or more {unit}" + (" or -1 for no limit" if option != "limit_train_batches" else
                                                    " or a fraction of an epoch in (0, 1]")
                             + ", or run `test --ckpt_path <checkpoint>` to evaluate a trained model.")
    clip = trainer_config.get("gradient_clip_val")
    if isinstance(clip, (int, float)) and not isinstance(clip, bool) and clip < 0:
        raise ValueError(f"--trainer.gradient_clip_val {clip} is negative; give the largest gradient norm (e.g. 5.0, "
                         "as the configs do) or 0 for no clipping.")


def _plateau_scheduler(model_config: Any) -> bool:
    """Whether the model config builds a ``ReduceLROnPlateau`` (or a subclass): the one scheduler Lightning steps on
    a monitored metric."""
    init_args = model_config.get("init_args") if getattr(model_config, "get", None) is not None else None
    scheduler = init_args.get("lr_scheduler") if getattr(init_args, "get", None) is not None else None
    class_path = scheduler.get("class_path") if getattr(scheduler, "get", None) is not None else None
    if not isinstance(class_path, str):
        return False
    cls = import_object(class_path)
    if cls is None:
        return class_path.rpartition(".")[2] == "ReduceLROnPlateau"
    return isinstance(cls, type) and issubclass(cls, torch.optim.lr_scheduler.ReduceLROnPlateau)


def check_validation_for_scheduler(trainer_config: Any, model_config: Any) -> None:
    """A ``ReduceLROnPlateau`` watching a validation metric needs a validation before each epoch's end: with
    ``limit_val_batches 0`` or ``check_val_every_n_epoch`` above 1 Lightning stops at the end of the first
    epoch in a traceback (the metric is "not available"). Refuse it here, before training."""
    if trainer_config is None or not _plateau_scheduler(model_config):
        return
    init_args = model_config.get("init_args")
    monitor = init_args.get("scheduler_monitor", "val/loss") if getattr(init_args, "get", None) is not None \
        else "val/loss"
    if not (isinstance(monitor, str) and monitor.startswith(VALIDATION_PREFIXES)):
        return
    limit = trainer_config.get("limit_val_batches")
    every = trainer_config.get("check_val_every_n_epoch")
    if isinstance(limit, (int, float)) and not isinstance(limit, bool) and limit == 0:
        problem, fix = ("--trainer.limit_val_batches 0 turns validation off",
                        "keep some validation batches (e.g. --trainer.limit_val_batches 2)")
    elif isinstance(every, int) and not isinstance(every, bool) and every > 1:
        problem, fix = (f"--trainer.check_val_every_n_epoch {every} leaves epochs without validation",
                        "validate every epoch (--trainer.check_val_every_n_epoch 1)")
    else:
        return
    raise ValueError(f"{problem}, but the ReduceLROnPlateau scheduler steps on {monitor} at each epoch's end "
                     f"(--model.init_args.scheduler_monitor); {fix}, or train without it "
                     "(--model.init_args.lr_scheduler null).")


def _size_options(model: LightningModule) -> List[str]:
    """The size options of this task that shrink it (those its constructor has)."""
    try:
        names = inspect.signature(type(model).__init__).parameters
    except (TypeError, ValueError):
        return []
    return [f"--model.init_args.{n} {v}" for n, v in (("hidden_size", 256), ("embedding_size", 128))
            if n in names]


def describe_start(model: LightningModule, trainer: Trainer, stage: str) -> List[str]:
    """The lines printed at start: the model's size and device, and the GPU-sized-on-CPU warning."""
    count = count_parameters(model)
    try:
        device = trainer.strategy.root_device
    except (AttributeError, IndexError, TypeError, RuntimeError):
        device = torch.device(trainer.accelerator.__class__.__name__.replace("Accelerator", "").lower() or "cpu")
    threads = torch.get_num_threads()
    where = device.type + (f" ({threads} thread{'s' if threads > 1 else ''})" if device.type == "cpu" else "")
    devices = f" x {trainer.num_devices} devices" if trainer.num_devices > 1 else ""
    lines = [f"{type(model).__name__}: {count:,} parameters; {stage} on {where}{devices}."]
    if device.type == "cpu" and count > GPU_SIZED_PARAMETERS:
        shrink = " ".join(_size_options(model)) or "smaller size options"
        lines.append(f"warning: this config is GPU-sized ({count / 1e6:.1f}M parameters, over "
                     f"{GPU_SIZED_PARAMETERS // 1_000_000}M) and runs on the CPU, where a step can take a minute; "
                     f"shrink it for a CPU run ({shrink}; for a smoke run also --trainer.limit_val_batches 2 "
                     f"--trainer.limit_test_batches 2), or train on a GPU with --config configs/trainer/gpu.yaml.")
    return lines


def describe_classes(datamodule: Any) -> List[str]:
    """``classes: train negative 12,500, positive 12,500; test ...`` for a DataModule with ``class_counts()``."""
    counts = datamodule.class_counts() if callable(getattr(datamodule, "class_counts", None)) else {}
    if not counts:
        return []
    splits = "; ".join(f"{split} " + ", ".join(f"{name} {n:,}" for name, n in by_class.items())
                       for split, by_class in counts.items())
    return [f"classes: {splits}."]


def report_start(model: LightningModule, trainer: Trainer, stage: str, datamodule: Any = None,
                 stream: Optional[TextIO] = None) -> None:
    """Print :func:`describe_start`'s lines (and the class counts of a classification DataModule) on rank 0,
    to standard error: predictions keep standard output."""
    if trainer.is_global_zero:
        for line in describe_start(model, trainer, stage) + (describe_classes(datamodule) if stage != "predict"
                                                             else []):
            print(line, file=stream or sys.stderr, flush=True)
