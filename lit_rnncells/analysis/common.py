"""What every analysis figure shares: the figure registry, loading a task from a checkpoint, saving a PNG."""
from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from lightning.pytorch import LightningModule

from ..data.checkpoint_state import read_checkpoint, rebuilt_datamodule
from ..utils.imports import import_object, import_problem
from ..utils.paths import check_output_file


@dataclass(frozen=True)
class Figure:
    """A registered analysis command: ``add_arguments`` fills its parser, ``run`` draws from the parsed args."""

    name: str
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], Any]


FIGURES: Dict[str, Figure] = {}


def figure(name: str, help: str, add_arguments: Callable[[argparse.ArgumentParser], None]
           ) -> Callable[[Callable[[argparse.Namespace], Any]], Callable[[argparse.Namespace], Any]]:
    """Register ``run(args)`` as ``python -m lit_rnncells.analysis <name>``."""

    def register(run: Callable[[argparse.Namespace], Any]) -> Callable[[argparse.Namespace], Any]:
        if name in FIGURES:
            raise ValueError(f"An analysis figure named {name!r} is already registered.")
        FIGURES[name] = Figure(name, help, add_arguments, run)
        return run

    return register


def task_class(checkpoint: Dict[str, Any], path: str) -> type:
    """The task class that wrote ``checkpoint`` (``RecurrentTask.on_save_checkpoint`` records it)."""
    qualified = checkpoint.get("lit_rnncells_task")
    if not qualified:
        raise ValueError(f"{path!r} was not written by a lit_rnncells task; pass a checkpoint that "
                         "`python -m lit_rnncells fit` saved.")
    cls = import_object(qualified)
    if cls is None:
        raise ValueError(f"{path!r} was written by {qualified}, which cannot be imported here: "
                         f"{import_problem(qualified) or 'it is no package.module.Class path'}.")
    return cls


def load_task(path: str, expected: Optional[type] = None) -> Tuple[LightningModule, Dict[str, Any]]:
    """The task a checkpoint holds, on CPU in eval mode, and the raw checkpoint (its DataModule state too).

    ``expected`` (a task class) gives one clear error when the checkpoint is of another task."""
    checkpoint = read_checkpoint(path)
    cls = task_class(checkpoint, path)
    if expected is not None and not issubclass(cls, expected):
        raise ValueError(f"{path!r} holds a {cls.__name__}; this figure needs a {expected.__name__} checkpoint.")
    # a class of the user's the checkpoint names that does not import here: one ValueError (RecurrentTask's)
    model = cls.load_from_checkpoint(path, map_location="cpu", weights_only=True)
    model.eval()
    return model, checkpoint


def datamodule_state(checkpoint: Dict[str, Any], name: str) -> Dict[str, Any]:
    """The state a DataModule class named ``name`` saved in the checkpoint (vocabulary, tokenizers, ...)."""
    if name not in checkpoint:
        saved = sorted(k for k in checkpoint if isinstance(k, str) and k.endswith("DataModule"))
        raise ValueError(f"The checkpoint holds no {name} state (it has: {', '.join(saved) or 'none'}); pass a "
                         "checkpoint trained with that DataModule.")
    return checkpoint[name]


def checkpoint_datamodule(path: str, checkpoint: Dict[str, Any], data_dir: Optional[str] = None, *,
                          expected: Optional[type] = None, fix: str = "", **overrides: Any) -> Any:
    """The DataModule a checkpoint was trained with, rebuilt from its saved hyperparameters with the checkpoint's
    vocabulary or tokenizers (``checkpoint_path``); ``data_dir`` overrides where the data are, ``overrides`` other
    options. ``expected``: the DataModule class a figure needs (a checkpoint of another is one error line ending
    in ``fix``; a checkpoint saved without its class name is taken to be of this class)."""
    saved = dict(checkpoint.get("datamodule_hyper_parameters") or {})
    class_path = saved.get("_class_path") or (f"{expected.__module__}.{expected.__qualname__}" if expected else None)
    if not class_path:
        raise ValueError(f"{path!r} holds no DataModule settings; pass a checkpoint that `python -m lit_rnncells "
                         "fit` saved with one of lit_rnncells.data's DataModules.")
    name = str(class_path).rpartition(".")[2]
    cls = import_object(str(class_path))
    if cls is None:
        raise ValueError(f"{path!r} was trained with {class_path}, which cannot be imported here: "
                         f"{import_problem(str(class_path)) or 'it is no package.module.Class path'}.")
    if expected is not None and not (isinstance(cls, type) and issubclass(cls, expected)):
        fix = fix or f"pass a checkpoint of a task that reads {expected.__name__}."
        raise ValueError(f"{path!r} was trained with {name}, not {expected.__name__}; {fix}")
    if data_dir is not None:
        overrides = {"data_dir": data_dir, **overrides}
    return rebuilt_datamodule(cls, path, checkpoint, **overrides)


def figure_output(output: str | Path, option: str = "--output") -> Path:
    """``output`` checked as a figure file before any checkpoint is read: its folders may be made and its extension
    must be a format matplotlib writes (a ``.ckpt`` or ``.txt`` was refused only by ``savefig``, after the whole
    evaluation). Without an extension it is ``<output>.png``, the file matplotlib writes for such a name."""
    from matplotlib.figure import Figure as MatplotlibFigure

    path = Path(output)
    if not path.suffix:
        path = path.with_name(path.name + ".png")
    formats = sorted(MatplotlibFigure().canvas.get_supported_filetypes())
    if path.suffix[1:].lower() not in formats:
        raise ValueError(f"{option} {str(output)!r} ends in {path.suffix!r}, which is no image format matplotlib "
                         f"writes; give a file ending in .png (or one of {', '.join('.' + f for f in formats)}).")
    return check_output_file(path, option)


WRITTEN: List[Path] = []
"""Every file :func:`save_figure` wrote in this process, in order (the command line names them)."""


def save_figure(fig: Any, output: str | Path, *, wandb_key: Optional[str] = None) -> Path:
    """Write ``fig`` as a PNG at ``output`` (folders made), close it, and log it to W&B when a run is active."""
    import matplotlib.pyplot as plt

    path = Path(output)
    path.parent.mkdir(parents=True, exist_ok=True)
    title = fig.get_suptitle()
    if title:  # leave room above the panels for the figure's own title
        lines = title.count("\n") + 1
        fig.tight_layout(rect=(0, 0, 1, 1 - min(0.25, 0.35 * lines / fig.get_size_inches()[1])))
    else:
        fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    WRITTEN.append(path)
    try:
        import wandb

        if wandb.run is not None:
            wandb.log({wandb_key or f"analysis/{path.stem}": wandb.Image(str(path))})
    except ImportError:  # wandb is a dependency, but a figure never fails for want of it
        pass
    return path


def checkpoint_label(path: str | Path) -> str:
    """A short name for a checkpoint in titles and legends: ``<run folder>/<file>`` (the run folder above a
    ``checkpoints/`` or the comparison runner's ``best/`` folder)."""
    p = Path(path)
    return f"{p.parent.parent.name}/{p.name}" if p.parent.name in ("checkpoints", "best") else f"{p.parent.name}/{p.name}"


def checkpoint_labels(paths: Sequence[str | Path]) -> List[str]:
    """:func:`checkpoint_label` of each checkpoint, with as many further folders above it as make the labels of
    ``paths`` differ: ``caru/CARU-h128-s1/best.ckpt`` and ``ablation/CARU-h128-s1/best.ckpt`` for the same run of
    two sweeps, which one label would not tell apart. The same file given twice keeps one label."""
    resolved = [Path(path).expanduser().resolve() for path in paths]
    labels = [checkpoint_label(path) for path in paths]
    while True:
        clashing = {label for label in labels if len({r for r, other in zip(resolved, labels) if other == label}) > 1}
        if not clashing:
            return labels
        grew = False
        for i, label in enumerate(labels):
            above = _folder_above(resolved[i], label) if label in clashing else None
            if above:
                labels[i], grew = f"{above}/{label}", True
        if not grew:  # the same label up to the root: the whole paths tell them apart
            return [str(r) for r in resolved]


def _folder_above(path: Path, label: str) -> Optional[str]:
    """The folder of ``path`` just above the part that ``label`` names (``None`` at the root)."""
    named = len(Path(label).parts) + (1 if path.parent.name in ("checkpoints", "best") else 0)
    parents = path.parts[:-named]
    return parents[-1] if parents and parents[-1] != path.anchor else None
