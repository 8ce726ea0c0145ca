"""``python -m lit_rnncells {fit,validate,test,predict} --config ...``: LightningCLI for every task."""
from __future__ import annotations

import importlib
import inspect
import os
import sys
from typing import Any, Dict, List, Optional

from lightning.pytorch import LightningDataModule, LightningModule, Trainer
from lightning.pytorch.cli import LightningArgumentParser, LightningCLI, SaveConfigCallback

from . import cells as _cells  # noqa: F401  (registers cells so short class names resolve)
from . import data as _data  # noqa: F401
from . import tasks as _tasks  # noqa: F401
from . import callbacks as _callbacks
from .callbacks import FiniteGuard, InterruptCheckpoint, PredictionWriter, TrainingDiverged
from .errors import user_message
from .tasks.base import RecurrentTask

# Sizes that come from the data flow into the model when the model has a parameter of that name.
DATA_TO_MODEL_LINKS = ("vocab_size", "num_classes", "pad_id", "source_vocab_size", "target_vocab_size",
                       "bos_id", "eos_id")


class LoggerConfigCallback(SaveConfigCallback):
    """Saves the full config beside the run and into the logger (W&B run config)."""

    def save_config(self, trainer: Trainer, pl_module: LightningModule, stage: str) -> None:
        for logger in trainer.loggers:
            logger.log_hyperparams({"config": self.parser.dump(self.config, skip_none=False, format="json")})


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
        for name in DATA_TO_MODEL_LINKS:
            parser.link_arguments(f"data.{name}", f"model.init_args.{name}", apply_on="instantiate")

    def before_instantiate_classes(self) -> None:
        """In test / validate / predict with ``--ckpt_path``, a DataModule that accepts ``checkpoint_path``
        takes its tokenizers and vocabulary from that checkpoint (so predict needs no training files)."""
        config = self.config.get(self.subcommand, {}) if self.subcommand else self.config
        ckpt_path = config.get("ckpt_path")
        data = config.get("data")
        if self.subcommand in ("test", "validate", "predict") and ckpt_path and data is not None:
            init_args = data.get("init_args")
            if init_args is not None and "checkpoint_path" in _init_parameters(data.get("class_path")) \
                    and init_args.get("checkpoint_path") is None:
                init_args["checkpoint_path"] = ckpt_path

    def instantiate_classes(self) -> None:
        super().instantiate_classes()
        if self.subcommand == "fit":
            self.trainer.callbacks.extend([FiniteGuard(), InterruptCheckpoint()])
        if self.subcommand == "predict":
            output = self.config.get("predict", {}).get("predict_output")
            self.trainer.callbacks.append(PredictionWriter(output))

    def after_fit(self) -> None:
        if self.config.get(self.subcommand, {}).get("test_after_fit"):
            self.trainer.test(self.model, datamodule=self.datamodule)


def _init_parameters(class_path: Optional[str]) -> List[str]:
    """The constructor parameter names of a class given by its import path (empty if it cannot be imported)."""
    if not class_path or "." not in class_path:
        return []
    module, _, name = class_path.rpartition(".")
    try:
        cls = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        return []
    return list(inspect.signature(cls.__init__).parameters)


def default_trainer() -> dict:
    return {"logger": {"class_path": "lit_rnncells.loggers.DefaultWandbLogger"}}


TRACEBACK_ENV = "LIT_RNNCELLS_TRACEBACK"


def main(args: Optional[List[str]] = None, run: bool = True,
         parser_kwargs: Optional[Dict[str, Any]] = None) -> LitRNNCellsCLI:
    """Build (and by default run) the command line; errors propagate as exceptions (the library API)."""
    return LitRNNCellsCLI(
        RecurrentTask,
        LightningDataModule,
        subclass_mode_model=True,
        subclass_mode_data=True,
        auto_configure_optimizers=False,
        save_config_callback=LoggerConfigCallback,
        save_config_kwargs={"overwrite": True, "save_to_log_dir": True},
        trainer_defaults=default_trainer(),
        args=args,
        run=run,
        parser_kwargs=parser_kwargs,
    )


def run(args: Optional[List[str]] = None) -> int:
    """The command line as a user meets it: a failure the user can fix prints one sentence naming the
    problem and the fix (``error: ...``) and returns a non-zero exit code; ``LIT_RNNCELLS_TRACEBACK=1``
    shows the full traceback instead. Internal errors always show their traceback."""
    debug = os.environ.get(TRACEBACK_ENV, "") not in ("", "0")
    _callbacks.INTERRUPTED_EXIT_CODE = None
    try:
        main(args, parser_kwargs=None if debug else {"exit_on_error": False})
    except SystemExit as stop:  # --help, --print_config, SIGTERM (Lightning's SIGTERMException), Ctrl-C
        if _callbacks.INTERRUPTED_EXIT_CODE is not None:
            return _callbacks.INTERRUPTED_EXIT_CODE
        return stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
    except Exception as error:  # noqa: BLE001 - the one place that turns failures into a message
        message = None if debug else user_message(error)
        if message is None:
            raise
        print(f"error: {message}\n(set {TRACEBACK_ENV}=1 to see the full traceback)", file=sys.stderr)
        return 1 if isinstance(error, TrainingDiverged) else 2
    return 0


def console_main() -> None:
    """Entry point of ``python -m lit_rnncells`` and the ``lit-rnncells`` script."""
    sys.exit(run())


if __name__ == "__main__":
    console_main()
