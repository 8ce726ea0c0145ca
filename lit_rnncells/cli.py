"""``python -m lit_rnncells {fit,validate,test,predict} --config ...``: the training command's entry point.

:func:`main` is the library API (errors propagate), :func:`run` the command line as a user meets it (one
``error:`` line), :func:`console_main` the ``lit-rnncells`` script. The LightningCLI itself and everything only it
uses live in :mod:`lit_rnncells.command`."""
from __future__ import annotations

import os
import sys
import warnings
from typing import Any, Dict, List, Optional

import torch
from lightning.pytorch import LightningDataModule

from .command import callbacks as _callbacks
from .command import run_folder as _run_folder
from .command.callbacks import TrainingDiverged
from .command.cpu_defaults import keep_freed_memory
from .command.deprecated_names import PARSER_MODE, rewrite_argv
from .command.errors import user_message
from .command.lightning_cli import (PROG, LitRNNCellsCLI, LoggerConfigCallback, ProgArgumentParser,  # noqa: F401
                                   default_trainer)
from .command.slurm_tasks import global_rank
from .utils.quiet import quiet_known_noise
from .tasks.base import RecurrentTask

TRACEBACK_ENV = "LIT_RNNCELLS_TRACEBACK"


def main(args: Optional[List[str]] = None, run: bool = True,
         parser_kwargs: Optional[Dict[str, Any]] = None) -> LitRNNCellsCLI:
    """Build (and by default run) the command line; errors propagate as exceptions (the library API)."""
    quiet_known_noise()
    # --trainer.max_step is not max_steps; old flat option names become their groups' keys (deprecated_names)
    parser_kwargs = {"allow_abbrev": False, "parser_mode": PARSER_MODE, **(parser_kwargs or {})}
    if args is None:  # the console: Lightning warns when given args while sys.argv holds some too
        sys.argv[1:] = rewrite_argv(sys.argv[1:])
    else:
        args = rewrite_argv(list(args))
    refused = False
    threads = torch.get_num_threads()  # a small model's one-thread default (cpu_defaults) must not outlive its run
    try:
        return _build_cli(args, run, parser_kwargs)
    except Exception as error:  # a run that trained and diverged keeps its config; a refused start leaves no folder
        refused = not isinstance(error, TrainingDiverged)
        raise
    finally:
        if run:  # the run is over: release its run folder and give back the thread count (run=False: the caller
            _run_folder.unlock(refused=refused)  # fits, holding both)
            if torch.get_num_threads() != threads:
                torch.set_num_threads(threads)


def _build_cli(args: Optional[List[str]], run: bool, parser_kwargs: Optional[Dict[str, Any]]) -> LitRNNCellsCLI:
    return LitRNNCellsCLI(
        RecurrentTask,
        LightningDataModule,
        subclass_mode_model=True,
        subclass_mode_data=True,
        auto_configure_optimizers=False,
        save_config_callback=LoggerConfigCallback,
        save_config_kwargs={"overwrite": True, "save_to_log_dir": False},
        trainer_defaults=default_trainer(),
        args=args,
        run=run,
        parser_kwargs=parser_kwargs,
        parser_class=ProgArgumentParser,
    )


def run(args: Optional[List[str]] = None) -> int:
    """The command line as a user meets it: a failure the user can fix prints one sentence naming the
    problem and the fix (``error: ...``) and returns a non-zero exit code; ``LIT_RNNCELLS_TRACEBACK=1``
    shows the full traceback instead. Internal errors always show their traceback."""
    debug = os.environ.get(TRACEBACK_ENV, "") not in ("", "0")
    _callbacks.INTERRUPTED_EXIT_CODE = None
    try:
        with warnings.catch_warnings():  # filters a run adds for its own data end with it
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
    finally:
        _run_folder.unlock()  # and remove a run folder this call created but never wrote to
        if global_rank() == 0:
            os.environ.pop(_run_folder.ENV, None)  # the next fit in this process chooses its own folder
    return 0


def console_main() -> None:
    """Entry point of ``python -m lit_rnncells`` and the ``lit-rnncells`` script (with the CPU defaults of
    :mod:`lit_rnncells.command.cpu_defaults`)."""
    keep_freed_memory()
    sys.exit(run())


if __name__ == "__main__":
    console_main()
